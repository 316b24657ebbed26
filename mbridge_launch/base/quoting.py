"""The one quoting choke point: every value that reaches a shell line passes through `sh()`.

A deliberate shell expansion (`$SLURM_JOB_ID`, `${RESTART}`) is written as `ShellExpr`, a
distinct class (not a type alias), so that nothing else can skip quoting by accident.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Union

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class ShellExpr:
    """Shell text that is meant to be expanded by the shell. Only code constants may build one."""

    text: str


ShellValue = Union[str, int, float, ShellExpr]


def sh(value: ShellValue) -> str:
    """Quote one value for a shell line. ShellExpr passes through; everything else is
    single-quoted by shlex when it has any character the shell would interpret. A value holding
    control characters (an ESC, a CR, U+202E) has them in bash's ANSI-C form, $'\\x1b', between
    its shlex-quoted parts: the script means the exact value, and printing it puts no raw control
    character on a terminal (every script we write runs under #!/bin/bash). Line breaks and tabs
    stay inside the single quotes, as before: a multi-line value (a setup script) reads as it is."""
    if isinstance(value, ShellExpr):
        return value.text
    if isinstance(value, bool):
        value = "true" if value else "false"
    text = str(value)
    if text.isprintable() or _shows_as_is(text):
        return shlex.quote(text)
    return _ansi_c_quote(text)


def _shows_as_is(text: str) -> bool:
    from mbridge_launch.base.escape import escape_controls

    return escape_controls(text, one_line=False) == text


def _ansi_c_quote(text: str) -> str:
    """Runs that show as they are quoted by shlex, the runs between them as $'...' of their bytes
    (UTF-8, or the original byte of an undecodable file name's surrogate escape): exact in any
    locale, where bash's \\u form depends on the job's locale."""
    from itertools import groupby

    parts = []
    for printable, chars in groupby(text, _shows_as_is):
        run = "".join(chars)
        if printable:
            parts.append(shlex.quote(run))
        else:
            data = run.encode("utf-8", "surrogateescape" if _undecodable(run) else "surrogatepass")
            parts.append("$'" + "".join(_ANSI_C.get(b) or f"\\x{b:02x}" for b in data) + "'")
    return "".join(parts)


_ANSI_C = {0x0D: "\\r"}


def _undecodable(run: str) -> bool:
    """Every surrogate in `run` is one of the escapes (U+DC80..U+DCFF) an undecodable byte became."""
    return all(0xDC80 <= ord(ch) <= 0xDCFF for ch in run if 0xD800 <= ord(ch) <= 0xDFFF)


def sh_join(values: Iterable[ShellValue]) -> str:
    return " ".join(sh(v) for v in values)


def is_safe_name(value: str) -> bool:
    """Names that nemo-run and file paths use unquoted: the run-name rule of base/names.py
    (letters, digits, '.', '_', '-'; not '.' or '..', no leading '-', bounded length)."""
    from mbridge_launch.base.names import is_run_name

    return is_run_name(value)


def is_env_name(value: str) -> bool:
    return bool(_ENV_NAME.fullmatch(value))  # not match: its `$` lets a trailing newline through
