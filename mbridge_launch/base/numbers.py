"""One integer parser for every number a user or a file gives (CLI flags, Plan values, trackers,
config files): ASCII digits only, within bounds given per field.

Python's int() and str.isdigit() accept '²' or Arabic-Indic digits (and then fail, or mean
something Megatron would not read), int() refuses more than 4,300 digits with a ValueError, and
SQLite overflows past 2**63: each was an internal error. Here every such value is one clear
BadNumber naming the valid range; the callers turn it into their own one-line error.
"""

from __future__ import annotations

import re
from typing import Any

_DIGITS = re.compile(r"[0-9]+")  # not \d: that matches every Unicode decimal digit
MAX_DIGITS = 40  # beyond every bound below; int() never sees a 4,300-digit string
MAX_INT64 = 2**63 - 1
# no range of the field's own (a later check gives it): any number of at most MAX_DIGITS digits
ANY_INT = (-(10**MAX_DIGITS - 1), 10**MAX_DIGITS - 1)

MAX_ITERATION = 10**15  # a training iteration, a tracker's number
MAX_SEED = 2**32 - 1  # numpy's seed range, which Megatron's rng.seed feeds


class BadNumber(ValueError):
    """`value` is not a whole number in ASCII digits (`out_of_range` False) or is outside
    [low, high]; `shown` is the value as it may be echoed (bounded, escaped)."""

    def __init__(self, value: object, low: int, high: int, out_of_range: bool) -> None:
        self.shown, self.low, self.high, self.out_of_range = shown(value), low, high, out_of_range
        super().__init__(f"{self.shown} is not a whole number from {low} to {high}")

    @property
    def key(self) -> str:
        unbounded = (self.low, self.high) == ANY_INT
        if self.out_of_range:
            return "number.too_long" if unbounded else "number.out_of_range"
        return "number.not_digits" if unbounded else "number.not_whole"

    def params(self) -> dict[str, Any]:
        return {"value": self.shown, "low": f"{self.low:,}", "high": f"{self.high:,}", "digits": MAX_DIGITS}

    def reason(self) -> str:
        """The problem in the user's language ('... is not a whole number from 1 to 64')."""
        from mbridge_launch.base.i18n import t

        return t(self.key, **self.params())


def shown(value: object) -> str:
    """The value quoted as Python writes it (control characters and line breaks escaped, so an
    error stays one line), cut to 40 characters."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > 40:
        return repr(text[:32]) + f"... ({len(text):,} characters)"
    return repr(text)


def whole(value: object, low: int = 0, high: int = MAX_INT64) -> int:
    """`value` (a str in ASCII digits, optionally with '-' when low < 0, or an int that is not a
    bool) as an int within [low, high]; else BadNumber."""
    if isinstance(value, bool):
        raise BadNumber(value, low, high, out_of_range=False)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        number = _digits_value(value.strip(), value, low, high)
    else:
        raise BadNumber(value, low, high, out_of_range=False)
    if not low <= number <= high:
        raise BadNumber(value, low, high, out_of_range=True)
    return number


def _digits_value(text: str, value: object, low: int, high: int) -> int:
    sign = -1 if text.startswith("-") and low < 0 else 1
    digits = text[1:] if sign < 0 else text
    if not _DIGITS.fullmatch(digits):
        raise BadNumber(value, low, high, out_of_range=False)
    digits = digits.lstrip("0") or "0"
    if len(digits) > MAX_DIGITS:
        raise BadNumber(value, low, high, out_of_range=True)
    return sign * int(digits)


def whole_or_none(value: object, high: int = MAX_INT64) -> int | None:
    """`value` as a non-negative int when it is written as one within [0, high], else None."""
    try:
        return whole(value, 0, high)
    except BadNumber:
        return None


def field_whole(field: str, value: object, low: int = 0, high: int = MAX_INT64) -> int:
    """whole(), or a UserError naming `field` (a file key, a flag) and the valid range."""
    from mbridge_launch.base.errors import UserError

    try:
        return whole(value, low, high)
    except BadNumber as exc:
        raise UserError("number.field_invalid", field=field, reason=exc.reason()) from None


def is_number(text: str) -> bool:
    """Whether float() reads `text` (a blend weight of Megatron's flat [W, P, W, P] data-path form)."""
    try:
        float(text)
    except ValueError:
        return False
    return True
