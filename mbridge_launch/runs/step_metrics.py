"""Measured step time, throughput and peak memory of a run, read from Megatron's own log lines.

What is read (the formats of Megatron Bridge 0.6.2, training/utils/train_utils.py, and Megatron
Core 0.19's training/utils/common_utils.py):
- `training_log`'s iteration line (parsed by rollback.lossmon.parse_line, shared with the
  loss watcher): `iteration N/M | ... | elapsed time per iteration (ms): X | throughput per GPU
  (TFLOP/s/GPU): Y | ... | global batch size: G | ...` (throughput only with
  logger.log_throughput=true). Each line averages the `logger.log_interval` iterations before it.
- Bridge's `Step Time : 1.23s GPU utilization: 456.7MODEL_TFLOP/s/GPU` (print_rank_0 just before
  the iteration line, whenever the model has heads): the TFLOP/s of the next iteration line when
  that line has none.
- the memory report after the first iterations, printed by every rank of data-parallel rank 0:
  Bridge `[Rank R] (after N iterations) memory (GB) | mem-max-allocated-gigabytes: X | ...`
  (GB = 1e9 bytes), Megatron-LM `[Rank R] (after N iterations) memory (MB) | allocated: X |
  max allocated: Y | reserved: Z | max reserved: W` (MB = 2^20 bytes).

The step time is the median over the iteration lines after `skip` warm-up iterations of each
timeline (a file's start, a resume line, or an iteration number going backwards start one): a
line whose interval holds one of the first `skip` iterations is warm-up, and so is a timeline's
first line. A later line for the same iteration replaces the earlier one, as in
lossmon.loss_by_iteration.
Peak memory is the largest max-allocated over ranks (max-reserved only where no rank printed
max-allocated), in GiB (2^30 bytes), the planner's unit (planner/memory.py).

Reading is bounded: at most `max_bytes` of each file (its first quarter and its last three
quarters when larger: the memory report is near the start, the steady state near the end), at
most MAX_FILES files, lines cut at MAX_LINE bytes, at most MAX_POINTS iterations kept.
"""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Iterable, Iterator, Optional

from mbridge_launch.rollback.lossmon import IterationLog, ResumeLog, parse_line

DEFAULT_MAX_BYTES = 64 << 20  # per file
MAX_FILES = 256
MAX_LINE = 64 * 1024
MAX_POINTS = 200_000
GIB = float(2**30)

ELAPSED_KEY = "elapsed time per iteration (ms)"
THROUGHPUT_KEY = "throughput per GPU (TFLOP/s/GPU)"
GBS_KEY = "global batch size"

_MEMORY_RE = re.compile(r"\[Rank (\d+)\]\s*\(after (\d+) iterations\) memory \((MB|GB)\)(.*)$")
_STEP_TIME_RE = re.compile(r"Step Time : ([0-9.eE+-]+)s GPU utilization:\s*([0-9.eE+-]+)\s*MODEL_TFLOP/s/GPU")
# bytes per unit of the two memory reports
_UNIT = {"GB": 1e9, "MB": float(2**20)}
# the names a peak is read under: Bridge's MEMORY_KEYS (bytes -> gigabytes) and Megatron-LM's
_MAX_ALLOCATED = ("mem-max-allocated-gigabytes", "max allocated")
_MAX_RESERVED = ("mem-max-reserved-gigabytes", "max reserved")
_HOT = (b"iteration", b"memory (", b"Step Time", b"checkpoint")


@dataclass(frozen=True)
class MemoryReport:
    rank: int
    iteration: int
    max_allocated_gib: Optional[float]
    max_reserved_gib: Optional[float]


@dataclass
class StepMetrics:
    """What the logs say about speed and memory. `iterations`: the highest iteration logged;
    `samples`: the iteration lines the median step time is taken over."""

    iterations: int = 0
    step_time_s: Optional[float] = None
    tokens_per_sec_per_gpu: Optional[float] = None
    peak_memory_gb: Optional[float] = None  # GiB, max over ranks
    samples: int = 0
    global_batch_size: Optional[int] = None  # the last one logged
    tflops_per_gpu: Optional[float] = None  # median of Megatron's own figure, when logged
    memory_by_rank: dict[int, float] = field(default_factory=dict)  # rank -> its peak (GiB)
    memory_source: Optional[str] = None  # "max allocated" or "max reserved"
    files_read: int = 0
    truncated: bool = False  # some file was read only in part (larger than max_bytes)

    def with_throughput(self, *, seq_length: int, gpus: int, gbs: Optional[int] = None) -> "StepMetrics":
        """A copy with tokens/s/GPU from the step time (gbs: the logged one unless given)."""
        value = tokens_per_sec_per_gpu(self.step_time_s, gbs or self.global_batch_size, seq_length, gpus)
        return replace(self, tokens_per_sec_per_gpu=value)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["memory_by_rank"] = {str(k): v for k, v in sorted(self.memory_by_rank.items())}
        return data


def tokens_per_sec_per_gpu(step_time_s: Optional[float], gbs: Optional[int], seq_length: Optional[int],
                           gpus: Optional[int]) -> Optional[float]:
    """gbs x seq_length tokens per step over all GPUs; None when any input is missing or not positive."""
    if not step_time_s or not gbs or not seq_length or not gpus:
        return None
    if step_time_s <= 0 or gbs <= 0 or seq_length <= 0 or gpus <= 0:
        return None
    return gbs * seq_length / (step_time_s * gpus)


def parse_memory_line(line: str) -> Optional[MemoryReport]:
    """One memory report line, or None (a line cut short, a value that is not a number)."""
    m = _MEMORY_RE.search(line)
    if not m:
        return None
    scale = _UNIT[m.group(3)] / GIB
    values: dict[str, float] = {}
    for part in m.group(4).split("|"):
        key, sep, value = part.partition(":")
        if not sep:
            continue
        try:
            number = float(value.strip())
        except ValueError:
            continue
        if number == number and number >= 0:  # nan and negatives are not memory
            values[key.strip()] = number

    def first(names: tuple[str, ...]) -> Optional[float]:
        found = next((values[n] for n in names if n in values), None)
        return None if found is None else found * scale

    allocated, reserved = first(_MAX_ALLOCATED), first(_MAX_RESERVED)
    if allocated is None and reserved is None:
        return None
    return MemoryReport(int(m.group(1)), int(m.group(2)), allocated, reserved)


def _step_time_line(line: str) -> Optional[float]:
    m = _STEP_TIME_RE.search(line)
    if not m:
        return None
    try:
        return float(m.group(2))
    except ValueError:
        return None


def _regions(size: int, max_bytes: int) -> list[tuple[int, int]]:
    """(start, length) of the parts of a file of `size` bytes that are read."""
    if size <= max_bytes:
        return [(0, size)]
    head = max_bytes // 4
    return [(0, head), (size - (max_bytes - head), max_bytes - head)]


def _lines(handle: IO[bytes], start: int, length: int) -> Iterator[tuple[bytes, bool]]:
    """(line, whole) for the lines inside [start, start + length): a line cut by the region's
    start is skipped; one cut by its end, by MAX_LINE or by the end of a file still being written
    comes with whole=False."""
    handle.seek(start)
    left = length
    at_line_start = start == 0
    if not at_line_start:
        handle.seek(start - 1)
        at_line_start = handle.read(1) == b"\n"
    while left > 0:
        chunk = handle.readline(min(MAX_LINE, left))
        if not chunk:
            return
        left -= len(chunk)
        whole = chunk.endswith(b"\n")
        if at_line_start:
            yield chunk, whole
        while not whole and left > 0:  # the rest of an overlong line (or the cut one): skipped
            rest = handle.readline(min(MAX_LINE, left))
            if not rest:
                return
            left -= len(rest)
            whole = rest.endswith(b"\n")
        at_line_start = True


@dataclass
class _Point:
    seconds: float
    tflops: Optional[float]
    warm_up: bool


class _Reader:
    """Feeds lines in log order; keeps the latest value of each iteration and the memory peaks."""

    def __init__(self, skip: int) -> None:
        self.skip = max(0, skip)
        self.points: dict[int, _Point] = {}
        self.memory: dict[int, MemoryReport] = {}
        self.gbs: Optional[int] = None
        self.last: Optional[int] = None  # the last iteration logged (or resumed at) in this timeline
        self.start: Optional[int] = None  # the iteration the timeline started after
        self.interval = 1  # the logging interval seen (iterations between two lines)
        self.fresh = True  # no line of this timeline yet
        self.pending_tflops: Optional[float] = None
        self.highest = 0

    def new_file(self) -> None:
        self.last = self.start = None
        self.fresh = True
        self.pending_tflops = None

    def feed(self, raw: bytes, whole: bool = True) -> None:
        if not any(word in raw for word in _HOT):
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not whole:
            # a cut line: only the fields closed by their `|` are sure (a time cut from 123.4 to 12
            # would read as 12); the memory report has no closing bar, so none of it is used
            line = line[: line.rfind("|") + 1]
            if "memory (" in line:
                return
        if "memory (" in line:
            report = parse_memory_line(line)
            if report is not None:
                self._memory(report)
                return
        if "Step Time" in line:
            self.pending_tflops = _step_time_line(line)
            return
        record = parse_line(line)
        if isinstance(record, ResumeLog):
            self.start, self.last, self.fresh = record.iteration, record.iteration, True
        elif isinstance(record, IterationLog):
            self._iteration(record)

    def _memory(self, report: MemoryReport) -> None:
        old = self.memory.get(report.rank)
        if old is None:
            self.memory[report.rank] = report
            return
        self.memory[report.rank] = MemoryReport(
            report.rank, max(old.iteration, report.iteration),
            _max(old.max_allocated_gib, report.max_allocated_gib), _max(old.max_reserved_gib, report.max_reserved_gib))

    def _iteration(self, record: IterationLog) -> None:
        try:
            ms = float(record.values.get(ELAPSED_KEY, ""))
        except ValueError:
            return  # a line cut before its time, or garbled
        if not (ms == ms and 0 <= ms < 1e9):
            return
        it = record.iteration
        if self.last is not None and it <= self.last:  # restarted without a resume line
            self.start = self.last = max(0, it - self.interval)
            self.fresh = True
        if self.start is None:  # a file's first line, no resume line before it: a fresh start
            self.start = 0
        begin = self.last if self.last is not None else self.start  # this line averages begin+1 .. it
        # warm-up: the timeline's first line (it holds its first iteration whatever the interval),
        # and every line whose interval begins within the first `skip` iterations
        warm_up = self.skip > 0 and (self.fresh or begin < self.start + self.skip)
        if self.last is not None and it > self.last and not self.fresh:
            self.interval = it - self.last
        self.last, self.fresh = it, False
        tflops = _number(record.values.get(THROUGHPUT_KEY))
        if tflops is None:
            tflops = self.pending_tflops
        self.pending_tflops = None
        gbs = _number(record.values.get(GBS_KEY))
        if gbs is not None and gbs >= 1:
            self.gbs = int(gbs)
        self.points.pop(it, None)  # re-inserted last: the dict stays in log order
        self.points[it] = _Point(ms / 1000.0, tflops, warm_up)
        self.highest = max(self.highest, it)
        if len(self.points) > MAX_POINTS:  # the oldest half goes: the steady state is the latest
            for key in list(self.points)[: MAX_POINTS // 2]:
                del self.points[key]

    def result(self) -> StepMetrics:
        steady = [p for p in self.points.values() if not p.warm_up]
        flops = [p.tflops for p in steady if p.tflops is not None]
        by_rank_alloc = {r: m.max_allocated_gib for r, m in self.memory.items() if m.max_allocated_gib is not None}
        by_rank_res = {r: m.max_reserved_gib for r, m in self.memory.items() if m.max_reserved_gib is not None}
        by_rank, source = (by_rank_alloc, "max allocated") if by_rank_alloc else (by_rank_res, "max reserved")
        return StepMetrics(
            iterations=self.highest,
            step_time_s=statistics.median(p.seconds for p in steady) if steady else None,
            samples=len(steady), global_batch_size=self.gbs,
            tflops_per_gpu=statistics.median(flops) if flops else None,
            peak_memory_gb=max(by_rank.values()) if by_rank else None,
            memory_by_rank={int(r): float(v) for r, v in by_rank.items()},
            memory_source=source if by_rank else None,
        )


def _max(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else max(a, b)


def _number(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def read_step_metrics(paths: Iterable[Path | str], *, skip: int = 3, max_bytes: int = DEFAULT_MAX_BYTES,
                      seq_length: Optional[int] = None, gpus: Optional[int] = None) -> StepMetrics:
    """The step metrics of the log files `paths`, read in the order given (a run's restarts in
    order). Missing and non-regular files (a FIFO, a directory) are passed over. With
    `seq_length` and `gpus`, tokens/s/GPU is filled in from the logged global batch size."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.files import open_regular_binary

    reader = _Reader(skip)
    files_read, truncated = 0, False
    for path in list(paths)[:MAX_FILES]:
        try:
            handle = open_regular_binary(path, "log")
        except (OSError, UserError):
            continue
        with handle:
            size = os.fstat(handle.fileno()).st_size
            truncated = truncated or size > max_bytes
            reader.new_file()
            for start, length in _regions(size, max(1, max_bytes)):
                for raw, whole in _lines(handle, start, length):
                    reader.feed(raw, whole)
        files_read += 1
    metrics = replace(reader.result(), files_read=files_read, truncated=truncated)
    if seq_length and gpus:
        metrics = metrics.with_throughput(seq_length=seq_length, gpus=gpus)
    return metrics
