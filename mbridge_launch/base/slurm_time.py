"""Slurm time strings <-> seconds (sbatch --time and partition MaxTime use the same grammar)."""

from __future__ import annotations

import re

_PATTERN = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
UNLIMITED = ("UNLIMITED", "INFINITE", "infinite", "unlimited")


def parse_seconds(text: str) -> int | None:
    """Seconds in a Slurm time, None for UNLIMITED/INFINITE. Raises ValueError when malformed.

    Forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (Slurm's sbatch(1) --time grammar)."""
    text = text.strip()
    if text in UNLIMITED:
        return None
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(f"'{text}' is not a Slurm time (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S)")
    days, a, b, c = match.groups()
    a_i, b_i, c_i = int(a), int(b) if b else None, int(c) if c else None
    if days is not None:
        hours, minutes, seconds = a_i, b_i or 0, c_i or 0
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if c_i is not None:
        return (a_i * 60 + (b_i or 0)) * 60 + c_i
    if b_i is not None:
        return a_i * 60 + b_i  # M:S
    return a_i * 60  # M


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
