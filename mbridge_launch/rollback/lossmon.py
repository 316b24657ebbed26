"""Read Megatron training logs and decide when the loss has gone bad.

Pure parts: `parse_line` (one Megatron `training_log` line, a checkpoint save line or a resume
line), `LossWatcher.feed` (NaN/Inf and spike detection), `pick_rollback_target`. One impure part:
`LogFollower`, which reads a log file as it grows.

Triggers:
- NaN/Inf (`plan.auto_rollback.on_nan`): `lm loss` is nan/inf, or Megatron counted NaN
  iterations in the logging interval (`number of nan iterations` > 0: the step was skipped
  because the gradients were NaN).
- spike (`plan.auto_rollback.spike_factor`, `window`): loss > factor x the median of the last
  `window` finite losses of the current timeline. The check starts once `min_points`
  (default min(window, 5)) losses are known, and only while the median is positive.
A resume (`loading checkpoint ... at iteration N`, or an iteration number going backwards)
starts a new timeline: losses logged after iteration N are forgotten.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

DEFAULT_LOSS_KEY = "lm loss"

_ITER_RE = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_SAVE_RE = re.compile(r"successfully saved checkpoint from iteration\s+(\d+)\s+to\s+(\S+)")
_LOAD_RE = re.compile(r"(?:loading|loaded) checkpoint from\s+(\S+).*?\bat iteration\s+(\d+)")
_TIME_RE = re.compile(r"^\s*\[([^\]]+)\]")


@dataclass(frozen=True)
class IterationLog:
    iteration: int
    train_iters: int
    loss: Optional[float]  # float('nan') / inf when Megatron printed them; None if absent
    nan_iterations: int
    skipped_iterations: int
    timestamp: str = ""
    values: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class CheckpointLog:
    """A checkpoint line: the iteration and the checkpoint folder; the subclass says which way."""

    iteration: int
    path: str


class SaveLog(CheckpointLog):
    """`successfully saved checkpoint from iteration N to PATH`."""


class ResumeLog(CheckpointLog):
    """`loading checkpoint from PATH ... at iteration N`: training resumes from N."""


LogRecord = Union[IterationLog, SaveLog, ResumeLog]


def _to_float(text: str) -> Optional[float]:
    try:
        return float(text.strip())  # float() reads nan, NaN, NAN, inf, -inf, Infinity
    except ValueError:
        return None


def _to_int(text: str | None) -> int:
    try:
        return int(float(text.strip())) if text else 0
    except ValueError:
        return 0


def parse_line(line: str, loss_key: str = DEFAULT_LOSS_KEY) -> Optional[LogRecord]:
    """One log line to a record, or None for anything else (most lines)."""
    match = _ITER_RE.search(line)
    if match:
        values: dict[str, str] = {}
        for part in line[match.end():].split("|"):
            key, sep, value = part.partition(":")
            if sep:
                values[key.strip()] = value.strip()
        stamp = _TIME_RE.match(line)
        return IterationLog(
            iteration=int(match.group(1)), train_iters=int(match.group(2)),
            loss=_to_float(values[loss_key]) if loss_key in values else None,
            nan_iterations=_to_int(values.get("number of nan iterations")),
            skipped_iterations=_to_int(values.get("number of skipped iterations")),
            timestamp=stamp.group(1) if stamp else "", values=values,
        )
    match = _SAVE_RE.search(line)
    if match:
        return SaveLog(int(match.group(1)), match.group(2))
    match = _LOAD_RE.search(line)
    if match:
        return ResumeLog(int(match.group(2)), match.group(1))
    return None


def parse_log(lines: Iterable[str], loss_key: str = DEFAULT_LOSS_KEY) -> list[LogRecord]:
    return [r for r in (parse_line(line, loss_key) for line in lines) if r is not None]


def read_log(path: str | Path, loss_key: str = DEFAULT_LOSS_KEY) -> list[LogRecord]:
    from mbridge_launch.base.files import open_regular_text

    with open_regular_text(path, "log") as handle:  # a FIFO or device: one line, never a hang
        return parse_log(handle, loss_key)


def loss_by_iteration(records: Iterable[LogRecord]) -> dict[int, float]:
    """Iteration -> loss of the latest timeline (a later line for the same iteration, after a
    resume, replaces the earlier one)."""
    losses: dict[int, float] = {}
    for record in records:
        if isinstance(record, IterationLog) and record.loss is not None:
            losses[record.iteration] = record.loss
    return losses


@dataclass(frozen=True)
class Trigger:
    kind: str  # nan, inf, nan_iterations, spike
    iteration: int
    loss: Optional[float]
    median: Optional[float] = None
    factor: Optional[float] = None

    def as_dict(self) -> dict:
        def clean(v):  # JSON has no nan/inf
            return str(v) if isinstance(v, float) and not math.isfinite(v) else v

        return {"kind": self.kind, "iteration": self.iteration, "loss": clean(self.loss),
                "median": self.median, "factor": self.factor}


class LossWatcher:
    """Feed records in log order; `feed` returns a Trigger the first time the loss goes bad."""

    def __init__(self, *, on_nan: bool = True, spike_factor: Optional[float] = 3.0, window: int = 20,
                 min_points: Optional[int] = None) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        if spike_factor is not None and spike_factor <= 1.0:
            raise ValueError("spike_factor must be > 1")
        self.on_nan = on_nan
        self.spike_factor = spike_factor
        self.window = window
        self.min_points = min(window, 5) if min_points is None else max(1, min(min_points, window))
        self._recent: deque[tuple[int, float]] = deque(maxlen=window)
        self.last_iteration: Optional[int] = None

    @classmethod
    def from_auto_rollback(cls, config) -> "LossWatcher":
        """From a Plan's `auto_rollback` section."""
        return cls(on_nan=config.on_nan, spike_factor=config.spike_factor, window=config.window)

    def _rewind(self, iteration: int) -> None:
        """A new timeline from `iteration`: forget losses logged after it."""
        kept = [(i, v) for i, v in self._recent if i <= iteration]
        self._recent.clear()
        self._recent.extend(kept)
        self.last_iteration = iteration

    def feed(self, record: Optional[LogRecord]) -> Optional[Trigger]:
        if isinstance(record, ResumeLog):
            self._rewind(record.iteration)
            return None
        if not isinstance(record, IterationLog):
            return None
        if self.last_iteration is not None and record.iteration <= self.last_iteration:
            self._rewind(record.iteration - 1)  # restarted without a resume line
        self.last_iteration = record.iteration
        loss = record.loss
        if self.on_nan:
            if loss is not None and math.isnan(loss):
                return Trigger("nan", record.iteration, loss)
            if loss is not None and math.isinf(loss):
                return Trigger("inf", record.iteration, loss)
            if record.nan_iterations > 0:
                return Trigger("nan_iterations", record.iteration, loss)
        if loss is None or not math.isfinite(loss):
            return None
        if self.spike_factor is not None and len(self._recent) >= self.min_points:
            median = statistics.median(v for _, v in self._recent)
            if median > 0 and loss > self.spike_factor * median:
                return Trigger("spike", record.iteration, loss, median, self.spike_factor)
        self._recent.append((record.iteration, loss))
        return None

    def feed_lines(self, lines: Iterable[str], loss_key: str = DEFAULT_LOSS_KEY) -> Optional[Trigger]:
        for line in lines:
            trigger = self.feed(parse_line(line, loss_key))
            if trigger:
                return trigger
        return None


def pick_rollback_target(checkpoints: Iterable, trigger_iteration: int) -> Optional[int]:
    """The newest COMPLETE checkpoint strictly before the trigger iteration. `checkpoints` are
    objects with `.iteration` and `.complete` (checkpoints.CheckpointInfo) or (iteration,
    complete) pairs."""
    best = None
    for item in checkpoints:
        iteration, complete = (item.iteration, item.complete) if hasattr(item, "iteration") else item
        if complete and iteration < trigger_iteration and (best is None or iteration > best):
            best = iteration
    return best


class LogFollower:
    """Reads the lines appended to a file since the last call. Waits for the file to appear;
    starts over when it is replaced or truncated; keeps a partial last line until it ends."""

    def __init__(self, path: str | Path, from_start: bool = True) -> None:
        self.path = Path(path)
        self._handle = None
        self._inode: Optional[int] = None
        self._partial = ""
        self._from_start = from_start

    def _open(self) -> bool:
        from mbridge_launch.base.errors import UserError
        from mbridge_launch.base.files import open_regular_text

        try:  # non-blocking open, regular files only: a FIFO log path cannot hang the follower
            handle = open_regular_text(self.path, "log", newline="")
        except (OSError, UserError):
            return False
        self._handle = handle
        self._inode = os.fstat(handle.fileno()).st_ino
        if not self._from_start:
            handle.seek(0, os.SEEK_END)
        self._partial = ""
        return True

    def read_new(self) -> list[str]:
        if self._handle is None and not self._open():
            return []
        try:
            st = os.stat(self.path)
            if st.st_ino != self._inode or st.st_size < self._handle.tell():
                self.close()
                self._from_start = True
                if not self._open():
                    return []
        except OSError:
            pass  # deleted under us: keep reading what we have open
        data = self._partial + self._handle.read()
        lines = data.split("\n")
        self._partial = lines.pop()
        return [line + "\n" for line in lines]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None

    def take_partial(self) -> str:
        """The unfinished last line, given up on (the writer has ended)."""
        partial, self._partial = self._partial, ""
        return partial

    def follow(self, poll_s: float = 1.0, stop: Callable[[], bool] = lambda: False) -> Iterator[str]:
        """Yield lines as they are written, until `stop()` is true (checked when idle); the lines
        written before `stop()` turned true are still yielded."""
        while True:
            lines = self.read_new()
            yield from lines
            if not lines:
                if stop():
                    yield from self.read_new()
                    if self._partial:
                        yield self._partial
                        self._partial = ""
                    return
                time.sleep(poll_s)
