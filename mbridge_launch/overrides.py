"""Parse the user's trailing KEY=VALUE overrides (run_recipe.py's Hydra-style syntax)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mbridge_launch.errors import UserError

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
