"""A quiet progress bar: drawn on a terminal only, and only once a task has run for a moment, so
that fast checks print nothing and pipes/CI logs never see carriage returns. Its carriage returns
are the one deliberate control character the tool prints: written with write_control, past the
escaping that every other output goes through (base/escape.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

from mbridge_launch.base.escape import one_line, write_control

DELAY_S = 0.4  # draw nothing for tasks shorter than this
WIDTH = 30


class Progress:
    def __init__(self, stream: Any, label: str, total: int, delay_s: float = DELAY_S) -> None:
        self.stream = stream if stream is not None and _isatty(stream) else None
        self.label = one_line(label)  # written past the escaping stream (write_control)
        self.total = max(1, total)
        self.done = 0
        self.delay_s = delay_s
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._drawn = False
        self._last_draw = 0.0

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done = min(self.total, self.done + n)
            if self.stream is None:
                return
            now = time.monotonic()
            if now - self._start < self.delay_s or (now - self._last_draw < 0.1 and self.done < self.total):
                return
            self._last_draw = now
            filled = int(WIDTH * self.done / self.total)
            bar = "#" * filled + "-" * (WIDTH - filled)
            write_control(self.stream, f"\r{self.label} [{bar}] {self.done}/{self.total}")
            self.stream.flush()
            self._drawn = True

    def close(self) -> None:
        with self._lock:
            if self.stream is not None and self._drawn:
                write_control(self.stream, "\r" + " " * (2 * len(self.label) + WIDTH + 30) + "\r")  # CJK: 2 columns
                self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
