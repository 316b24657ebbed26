"""The one quoting choke point: every value that reaches a shell line passes through `sh()`.

A deliberate shell expansion (`$SLURM_JOB_ID`, `${RESTART}`) is written as `ShellExpr`, a
distinct class (not a type alias), so that nothing else can skip quoting by accident.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Union

_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class ShellExpr:
    """Shell text that is meant to be expanded by the shell. Only code constants may build one."""

    text: str


ShellValue = Union[str, int, float, ShellExpr]


def sh(value: ShellValue) -> str:
    """Quote one value for a POSIX shell line. ShellExpr passes through; everything else is
    single-quoted by shlex when it has any character the shell would interpret."""
    if isinstance(value, ShellExpr):
        return value.text
    if isinstance(value, bool):
        value = "true" if value else "false"
    return shlex.quote(str(value))


def sh_join(values: Iterable[ShellValue]) -> str:
    return " ".join(sh(v) for v in values)


def is_safe_name(value: str) -> bool:
    """Names that nemo-run and file paths use unquoted: letters, digits, '.', '_', '-'."""
    return bool(_SAFE_NAME.match(value))


def is_env_name(value: str) -> bool:
    return bool(_ENV_NAME.match(value))
