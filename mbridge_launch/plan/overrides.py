"""Parse the user's trailing KEY=VALUE overrides (run_recipe.py's Hydra-style syntax)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mbridge_launch.base.errors import UserError

# How run_recipe.py overrides and catalog features spell a switch. Anything else counts as on for
# is_on (a value such as "selective" or "full"); is_true wants an explicit yes.
OFF_WORDS = ("", "0", "false", "no", "off", "none", "null")
TRUE_WORDS = ("1", "true", "yes", "on")


def is_on(value: object) -> bool:
    """A switch as the catalog or an override gives it: None/False/'none'/'false'/'0'/... are off."""
    if value is None or value is False:
        return False
    return str(value).strip().lower() not in OFF_WORDS


def is_true(value: object) -> bool:
    """An explicit yes: True, '1', 'true', 'yes', 'on' (environment flags such as HF_HUB_OFFLINE)."""
    return value is True or str(value or "").strip().lower() in TRUE_WORDS


def whole_number(value: object) -> int | None:
    """The value as a non-negative integer when it is written as one in ASCII digits, else None.
    (str.isdigit also accepts '²', on which int() fails; Megatron reads only ASCII digits; a
    4,300-digit value would be int()'s own ValueError: base/numbers.py bounds it.)"""
    from mbridge_launch.base.numbers import whole_or_none

    return whole_or_none(str(value if value is not None else ""))


_KEY = re.compile(r"^[+~]?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class RawOverride:
    key: str  # with a leading + (add) or ~ (remove) kept
    value: str | None  # None for ~key removals

    @property
    def path(self) -> str:
        return self.key.lstrip("+~")

    def as_arg(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


def parse_overrides(items: list[str]) -> list[RawOverride]:
    parsed: list[RawOverride] = []
    for text in items:
        if text.startswith("~") and "=" not in text:
            key, value = text, None
        elif "=" in text:
            key, value = text.split("=", 1)
        else:
            raise UserError("override.syntax", text=text)
        if not _KEY.match(key):
            raise UserError("override.syntax", text=text)
        parsed.append(RawOverride(key, value))
    return parsed
