"""Slurm time strings <-> seconds (sbatch --time and partition MaxTime use the same grammar)."""

from __future__ import annotations

import re

# ASCII digits only (\d would take every Unicode digit), at most 10 per field (int() never sees
# thousands of digits).
_PATTERN = re.compile(r"(?:([0-9]{1,10})-)?([0-9]{1,10})(?::([0-9]{1,10}))?(?::([0-9]{1,10}))?")
UNLIMITED = ("UNLIMITED", "INFINITE", "infinite", "unlimited")
# Slurm keeps a time limit as 32-bit minutes, INFINITE being 0xffffffff: every limit it can set
# (or print for a partition) is below; beyond is a typo, never a job.
MAX_SECONDS = (0xFFFFFFFF - 1) * 60
FORMS = "M, M:S, H:M:S, D-H, D-H:M, D-H:M:S"


class TimeOutOfRange(ValueError):
    """A Slurm time in a valid form with a field out of its range (99:99:99, 1-24)."""


def parse_seconds(text: str) -> int | None:
    """Seconds in a Slurm time, None for UNLIMITED/INFINITE. Raises ValueError when malformed.

    Forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (sbatch(1) --time). The first field is any size
    (90 minutes, 48:00:00); the ones after it are clock fields: minutes and seconds 0-59, and
    hours 0-23 after days. Slurm itself folds 99:99:99 into a longer time, which is a typo more
    often than a wish, and prints its own limits in these bounds (sinfo: 30:00, 1-00:00:00)."""
    text = text.strip()
    if text in UNLIMITED:
        return None
    match = _PATTERN.fullmatch(text)
    if not match:
        raise ValueError(f"'{text}' is not a Slurm time ({FORMS})")
    days, b, c = (None if g is None else int(g) for g in match.group(1, 3, 4))
    a = int(match.group(2))  # the one field every form has
    if days is not None:
        clock = [(a, 23), (b, 59), (c, 59)]
        seconds = ((days * 24 + a) * 60 + (b or 0)) * 60 + (c or 0)
    elif c is not None:
        clock = [(b, 59), (c, 59)]
        seconds = (a * 60 + (b or 0)) * 60 + c  # H:M:S
    elif b is not None:
        clock = [(b, 59)]
        seconds = a * 60 + b  # M:S
    else:
        clock, seconds = [], a * 60  # M
    if any(value is not None and value > high for value, high in clock) or seconds > MAX_SECONDS:
        raise TimeOutOfRange(f"'{text}' is out of range: minutes and seconds 0-59, hours 0-23 after days")
    return seconds


def minutes(text: str) -> int | None:
    """Whole minutes of a Slurm time, rounded up and at least 1 (submitit's timeout_min); None for
    UNLIMITED. Raises ValueError when malformed."""
    seconds = parse_seconds(text)
    return None if seconds is None else max(1, -(-seconds // 60))


def hours(text: str) -> float:
    seconds = parse_seconds(text)
    return float("inf") if seconds is None else seconds / 3600


def format_seconds(seconds: int) -> str:
    days, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{days}-{h:02d}:{m:02d}:{s:02d}" if days else f"{h:02d}:{m:02d}:{s:02d}"
