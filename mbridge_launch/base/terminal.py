"""Terminal helpers: how many columns a text takes (CJK characters take two), for aligned tables
in both languages."""

from __future__ import annotations

import unicodedata


def display_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def pad(text: str, width: int) -> str:
    """`text` followed by spaces up to `width` columns."""
    return text + " " * max(0, width - display_width(text))
