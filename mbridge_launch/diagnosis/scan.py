"""Read log files of any size in bounded memory and turn their failure lines into events.

A file is read in 1 MiB blocks; a fast bytes regex (patterns.HOT) finds the few lines worth
parsing, so gigabytes of warnings and NCCL INFO lines cost one regex pass and a newline count.
Lines are parsed one by one only where needed: a Python traceback (the `Traceback` line through
the final exception line is ONE event, per rank, so interleaved ranks stay apart), a torchrun
`Failures:` block. A line longer than MAX_LINE is cut; only the earliest few events of each tier
are kept (Collector), so memory does not grow with the file.

Per event: the file, the line number (from 1), the time (Megatron's `[YYYY-MM-DD HH:MM:SS]`,
torchrun's and slurmstepd's ISO times, glog `E1201 12:00:00.123`, syslog `Dec  1 12:00:00 host`;
a line without one takes the file's last time before it), the rank and the node.
"""

from __future__ import annotations

import bisect
import calendar
import heapq
import math
import re
import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Optional

from mbridge_launch.diagnosis import noise
from mbridge_launch.diagnosis.patterns import (
    ERROR_LINE,
    EXCEPTION,
    EXCEPTION_LINE,
    FAST_NOISE,
    GENERIC_ERROR,
    HARDWARE_XIDS,
    MEGATRON_RERUN_EXITS,
    ROOT,
    SOFT,
    SYMPTOM,
    XID,
    hot_line_starts,
    match_line,
)

BLOCK = 1 << 20
MAX_LINE = 64 * 1024  # bytes of one line that are read; the rest of a longer line is skipped
MAX_TEXT = 2000  # characters of a line kept as evidence
KEEP_PER_TIER = 64  # earliest events kept per tier
MAX_NODES = 65536  # rank -> node entries kept
TRACEBACK_MAX_LINES = 2000  # a traceback that never ends is closed after this many lines

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T _](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?")
_GLOG = re.compile(r"(?:^|[\[\s:])[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{1,6})")
_ISO_BYTES = re.compile(rb"\d{4}-\d{2}-\d{2}[T _]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?")
LOOKBACK = 8192
_DMESG = re.compile(r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\]")
_SYSLOG = re.compile(r"^([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\S+) ")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                      "Dec"), 1)}

_RANK_IN_TEXT = (
    re.compile(r"\[Rank (\d+)\]"), re.compile(r"\bRank (\d+), node "), re.compile(r"\bon rank (\d+)\b"),
    re.compile(r"\bglobal rank (\d+)\b"), re.compile(r"\bRANK[ =](\d+)\b"),
)
_NODE_IN_TEXT = (
    re.compile(r"\bON (\S+) CANCELLED AT\b"), re.compile(r"^srun: error: ([^\s:]+): tasks? [\d,\-]+: "),
    re.compile(r"Node failure on ([^\s,.;:]+(?:\.[^\s,;:]+)*)"), re.compile(r"\bRank \d+, node ([^\s,]+),"),
    re.compile(r"\bon node ([^\s,;:]+)"), re.compile(r"^([A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] NCCL"),
    # slurmstepd names its node in its log prefix on some sites: `slurmstepd-node002: error: Detected 1 oom_kill ...`
    re.compile(r"^slurmstepd-([^\s:]+): "),
)
_LABEL = re.compile(r"^\d{1,6}: ")
_SRUN_TASKS = re.compile(r"^srun: error: ([^\s:]+): tasks? ([\d,\-]+): ")
MAX_TASKS = 4096  # task ids read from one srun line
_FILE_RANK = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_BLOCK_ENTRY = re.compile(r"^\s*\[(\d+)\]:\s*$")
_BLOCK_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*)$")
_BLOCK_END = re.compile(r"^\s*(?:-{8,}|={8,})\s*$")
_CHAIN = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_ITERATION = re.compile(r"\biteration\s+\d+\s*/\s*\d+\s*\|")


@dataclass
class Event:
    cause: str
    tier: int
    file: str
    file_index: int
    line: int
    text: str
    time: Optional[float] = None
    rank: Optional[int] = None
    node: Optional[str] = None
    detail: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple[float, int, int]:
        """Time order, then the order of the files given, then the line."""
        return (self.time if self.time is not None else math.inf, self.file_index, self.line)


class Collector:
    """The earliest KEEP_PER_TIER events of each tier, the rank -> node map, torchrun's root-cause
    entry: everything classify needs, in bounded memory."""

    def __init__(self) -> None:
        self._heaps: dict[int, list[tuple[tuple[float, int, int], int, Event]]] = {}
        self._seq = 0
        self.nodes: dict[int, str] = {}
        self.torchrun_root: Optional[Event] = None
        self.year: Optional[int] = None  # of the first full timestamp: glog and syslog times have none
        self.lines = 0
        self.bytes = 0

    def add(self, event: Event) -> None:
        heap = self._heaps.setdefault(event.tier, [])
        self._seq += 1
        # a max-heap on the key (negated): the latest kept event is dropped first
        item = (tuple(-k for k in event.key), -self._seq, event)
        if len(heap) < KEEP_PER_TIER:
            heapq.heappush(heap, item)  # type: ignore[misc]  # -seq is unique: Events are never compared
        elif item > heap[0]:  # earlier than the latest one kept
            heapq.heapreplace(heap, item)  # type: ignore[misc]

    def events(self, tier: Optional[int] = None) -> list[Event]:
        tiers = [tier] if tier is not None else sorted(self._heaps, reverse=True)
        found = [item[2] for t in tiers for item in self._heaps.get(t, [])]
        return sorted(found, key=lambda e: e.key)

    def note_node(self, rank: int, node: str) -> None:
        if rank in self.nodes or len(self.nodes) < MAX_NODES:
            self.nodes[rank] = node


@dataclass
class _Traceback:
    line: int
    time: Optional[float]
    node: Optional[str]
    exceptions: list[tuple[int, str]] = field(default_factory=list)
    after_exception: int = 0  # lines seen since the last exception line (0: none yet)
    length: int = 0


@dataclass
class _Entry:  # one entry of torchrun's Failures / Root Cause block
    root: bool
    line: int
    fields: dict = field(default_factory=dict)
    field_lines: dict = field(default_factory=dict)


class FileScanner:
    def __init__(self, path: str | Path, label: str, index: int, sink: Collector, max_bytes: Optional[int] = None,
                 loss_watcher: object = None) -> None:
        self.path, self.label, self.index, self.sink = path, label, index, sink
        self.max_bytes = max_bytes
        self.watcher = loss_watcher
        m = _FILE_RANK.search(Path(str(path)).name)
        self.file_rank = int(m.group(1)) if m else None
        self.last_time: Optional[float] = None
        self.tracebacks: dict[Optional[int], _Traceback] = {}
        self.block: Optional[str] = None  # "failures" or "root" while inside torchrun's summary
        self.entry: Optional[_Entry] = None
        self.block_lines = 0
        self.skip_line = -1  # the source line under a Python warning
        self.loss_fired = False
        self.srun_labels = False
        self._here: tuple[bytes, int] = (b"", 0)  # the block and offset of the line being handled

    # ------------------------------------------------------------------ reading
    def line_mode(self) -> bool:
        return bool(self.tracebacks) or self.block is not None

    def run(self, handle: IO[bytes]) -> None:
        carry = b""
        lineno = 0  # lines before the block being processed
        total = 0
        skipping = False  # inside an overlong line, discarding up to its newline
        while True:
            want = BLOCK
            if self.max_bytes is not None:
                want = min(want, self.max_bytes - total)
                if want <= 0:
                    break
            data = handle.read(want)
            if not data:
                break
            total += len(data)
            if skipping:
                cut = data.find(b"\n")
                if cut < 0:
                    continue
                data = data[cut:]  # keep the newline: it ends the (already counted) cut line
                skipping = False
            buf = carry + data if carry else data
            end = buf.rfind(b"\n")
            if end < 0:
                if len(buf) > MAX_LINE:  # a line with no end in sight: parse its start, skip the rest
                    lineno = self._block(buf[:MAX_LINE] + b"\n", lineno)
                    carry, skipping = b"", True
                    lineno -= 1  # its newline, when it comes, ends this same line
                else:
                    carry = buf
                continue
            carry = buf[end + 1:]
            lineno = self._block(buf[:end + 1], lineno)
            if len(carry) > MAX_LINE:
                lineno = self._block(carry[:MAX_LINE] + b"\n", lineno) - 1
                carry, skipping = b"", True
        if carry:
            lineno = self._block(carry + b"\n", lineno)
        self.finish(lineno)
        self.sink.bytes += total
        self.sink.lines += lineno

    def _block(self, block: bytes, lineno: int) -> int:
        """Parse the interesting lines of `block` (whole lines); returns the line count after it."""
        hot = hot_line_starts(block.lower())
        pos, counted, n, k = 0, 0, len(block), 0
        while pos < n:
            if self.line_mode():
                start = pos
            else:
                k = bisect.bisect_left(hot, pos, k)
                if k >= len(hot):
                    break
                start = hot[k]
            end = block.find(b"\n", start)
            if end < 0:
                end = n
            pos = end + 1
            raw = block[start:min(end, start + MAX_LINE)]
            if any(noise_bytes in raw for noise_bytes in FAST_NOISE) and not self.tracebacks:
                continue  # the commonest noise, dropped before it is decoded (inside a traceback the
                # line still goes through handle(), which skips it the same way but keeps the count)
            lineno += block.count(b"\n", counted, start)
            counted = start
            self._here = (block, start)
            self.handle(raw.decode("utf-8", "replace").rstrip("\r"), lineno + 1)
        return lineno + block.count(b"\n", counted, n)

    # ------------------------------------------------------------------ one line
    def _time_of(self, text: str) -> Optional[float]:
        m = _ISO.search(text)
        if m:
            y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
            if self.sink.year is None:
                self.sink.year = y
            return _stamp(y, mo, d, h, mi, s, m.group(7))
        year = self.sink.year or _time.gmtime().tm_year
        m = _GLOG.search(text)
        if m:
            mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
            return _stamp(year, mo, d, h, mi, s, m.group(6))
        m = _DMESG.search(text)
        if m and m.group(1) in _MONTHS:
            return _stamp(int(m.group(6)), _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
                          int(m.group(5)), None)
        m = _SYSLOG.match(text)
        if m and m.group(1) in _MONTHS:
            return _stamp(year, _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
                          int(m.group(5)), None)
        return None

    def handle(self, raw: str, lineno: int) -> None:
        text, rank = noise.strip_prefixes(raw)
        if rank is not None and not self.srun_labels and _LABEL.match(raw):
            self.srun_labels = True  # srun --label: a task number is the global rank
        if lineno == self.skip_line:
            return
        if rank is None:
            rank = self.file_rank
        if (self.watcher is not None and not self.tracebacks and self.block is None and "iteration" in text
                and _ITERATION.search(text)):
            stamp = self._time_of(text)  # Megatron's training_log line: its time and the loss, nothing else
            if stamp is not None:
                self.last_time = stamp
            self._loss(text, lineno, rank)
            return
        if noise.is_warning(text):
            self.skip_line = lineno + 1
            return
        if noise.is_noise(text):
            return
        stamp = self._time_of(text)
        if stamp is not None:
            self.last_time = stamp
        if self.block is not None and self._block_line(text, lineno):
            return
        for other in [r for r, t in self.tracebacks.items() if lineno - t.line > 20 * TRACEBACK_MAX_LINES]:
            self._close_traceback(other)  # its rank stopped printing before its exception line
        tb = self.tracebacks.get(rank)
        if tb is not None and self._traceback_line(tb, rank, text, lineno):
            return
        if text.startswith("Traceback (most recent call last)"):
            self.tracebacks[rank] = _Traceback(lineno, self._time_of(text) or self._time_before() or self.last_time,
                                               _node_of(text))
            return
        stripped = text.strip()
        if stripped.startswith(("Failures:", "Root Cause (first observed failure)")):
            self._close_entry()
            self.block = "root" if stripped.startswith("Root") else "failures"
            self.block_lines = 0
            return
        self._plain(text, lineno, rank, None)

    def _plain(self, text: str, lineno: int, rank: Optional[int], node: Optional[str]) -> None:
        """A line outside a traceback: a pattern of the table, a driver Xid, a Megatron log line."""
        if rank is None:
            rank = _rank_of(text)
        tasks = _SRUN_TASKS.match(text)
        if tasks and self.srun_labels:
            for task in _task_ids(tasks.group(2)):  # `srun: error: a100-02: tasks 4-5,7: Exited ...`
                self.sink.note_node(task, tasks.group(1))
        xid = XID.search(text)
        if xid:
            hardware = int(xid.group(1)) in HARDWARE_XIDS
            self.emit("gpu_hardware" if hardware else "unknown", ROOT if hardware else ERROR_LINE, text, lineno,
                      rank, node, xid=int(xid.group(1)))
            return
        if self.watcher is not None and _ITERATION.search(text):
            self._loss(text, lineno, rank)  # Megatron's training_log line: the loss, nothing else
            return
        pattern = match_line(text)
        if pattern is not None:
            if tasks:  # srun names the task(s) that failed: their ids, for classify to turn into ranks
                self.emit(pattern.cause, pattern.tier, text, lineno, rank, node, tasks=_task_ids(tasks.group(2)),
                          labelled=self.srun_labels)
            else:
                self.emit(pattern.cause, pattern.tier, text, lineno, rank, node)
            return
        if GENERIC_ERROR.search(text):
            self.emit("unknown", ERROR_LINE, text, lineno, rank, node)

    def _loss(self, text: str, lineno: int, rank: Optional[int]) -> None:
        from mbridge_launch.rollback.lossmon import parse_line

        trigger = self.watcher.feed(parse_line(text))  # type: ignore[attr-defined]
        if trigger is not None and not self.loss_fired:
            self.loss_fired = True  # the first bad point of a file is the evidence
            cause, tier = ("loss_spike", SOFT) if trigger.kind == "spike" else ("nan_loss", ROOT)
            self.emit(cause, tier, text, lineno, rank, None, trigger=trigger.as_dict())

    # ------------------------------------------------------------------ tracebacks
    def _traceback_line(self, tb: _Traceback, rank: Optional[int], text: str, lineno: int) -> bool:
        """Feed one line to an open traceback; False when the line is not part of it (the
        traceback is closed first when it has ended)."""
        tb.length += 1
        indented = text[:1] in (" ", "\t")
        if tb.length > TRACEBACK_MAX_LINES:
            self._close_traceback(rank)
            return False
        if not text.strip() or _CHAIN.match(text) or text.startswith("Traceback (most recent call last)"):
            tb.after_exception = 0 if tb.exceptions else tb.after_exception
            return True
        if tb.exceptions and tb.after_exception:
            tb.after_exception += 1
            if indented and tb.after_exception < 6:
                return True  # an exception message continued on indented lines
            self._close_traceback(rank)
            return False
        if indented:
            return True
        if EXCEPTION_LINE.match(text):
            tb.exceptions.append((lineno, text))
            tb.after_exception = 1
            return True
        return False  # output of something else, interleaved: the traceback stays open

    def _close_traceback(self, rank: Optional[int]) -> None:
        tb = self.tracebacks.pop(rank, None)
        if tb is None or not tb.exceptions:
            return
        best: Optional[tuple[int, int, str, str]] = None  # tier, line, text, cause
        unmatched: Optional[tuple[int, str]] = None
        symptom: Optional[tuple[int, int, str, str]] = None
        for lineno, text in tb.exceptions:
            pattern = match_line(text)
            if pattern is None:
                unmatched = unmatched or (lineno, text)
            elif pattern.tier >= SOFT:
                if best is None or pattern.tier > best[0]:
                    best = (pattern.tier, lineno, text, pattern.cause)
            elif symptom is None:
                symptom = (pattern.tier, lineno, text, pattern.cause)
        # a root cause anywhere in the chain; else an exception nothing explains (it still beats
        # the symptoms); else the symptom itself
        if best is None and unmatched is not None:
            best = (EXCEPTION, unmatched[0], unmatched[1], "unknown")
        chosen = best or symptom
        assert chosen is not None
        tier, lineno, text, cause = chosen
        node = _node_of(text) or tb.node
        self.emit(cause, tier, text, lineno, rank if rank is not None else _rank_of(text), node, time=tb.time,
                  traceback_line=tb.line)

    # ------------------------------------------------------------------ torchrun's summary
    def _block_line(self, text: str, lineno: int) -> bool:
        self.block_lines += 1
        if self.block_lines > 400:
            self._close_entry()
            self.block = None
            return False
        m = _BLOCK_ENTRY.match(text)
        if m:
            self._close_entry()
            self.entry = _Entry(self.block == "root", lineno)
            return True
        m = _BLOCK_FIELD.match(text)
        if m and self.entry is not None:
            self.entry.fields[m.group(1)] = m.group(2).strip()
            self.entry.field_lines[m.group(1)] = (lineno, text)
            return True
        if _BLOCK_END.match(text):
            self._close_entry()
            if text.strip().startswith("="):
                self.block = None
            return True
        if self.entry is not None and text[:1] in (" ", "\t"):
            return False  # an error_file traceback printed in the entry: read as plain lines
        self._close_entry()
        self.block = None
        return False

    def _close_entry(self) -> None:
        entry, self.entry = self.entry, None
        if entry is None:
            return
        fields = entry.fields
        rank_m = re.match(r"(\d+)", fields.get("rank", ""))
        rank = int(rank_m.group(1)) if rank_m else None
        host = fields.get("host") or None
        if rank is not None and host:
            self.sink.note_node(rank, host)
        stamp = self._time_of(fields.get("time", "")) if fields.get("time") else None
        code_m = re.match(r"(-?\d+)", fields.get("exitcode", ""))
        code = int(code_m.group(1)) if code_m else None
        lineno, text = entry.field_lines.get("exitcode") or entry.field_lines.get("rank") or (entry.line, "")
        if code in MEGATRON_RERUN_EXITS:
            self.emit(MEGATRON_RERUN_EXITS[code], ROOT, text.strip(), lineno, rank, host, time=stamp, exit_code=code)
            return
        event = self._event("cascade", SYMPTOM, text.strip(), lineno, rank, host, time=stamp, exit_code=code)
        self.sink.add(event)
        if entry.root and self.sink.torchrun_root is None:
            self.sink.torchrun_root = event

    # ------------------------------------------------------------------ events
    def _event(self, cause: str, tier: int, text: str, lineno: int, rank: Optional[int], node: Optional[str],
               time: Optional[float] = None, **detail: object) -> Event:
        if time is None:
            time = self._time_of(text)
        if time is None and tier > ERROR_LINE:
            time = self._time_before()
        return Event(cause, tier, self.label, self.index, lineno, text.strip()[:MAX_TEXT],
                     time if time is not None else self.last_time, rank, node, dict(detail))

    def _time_before(self) -> Optional[float]:
        """The time of the nearest line before this one that has one, looked up in the few KB
        before it (the fast scan does not read lines without an anchor; only events pay this)."""
        block, start = self._here
        window = block[max(0, start - LOOKBACK):start]
        found = _ISO_BYTES.findall(window)
        if not found:
            return None
        stamp = self._time_of(found[-1].decode("ascii", "replace"))
        if stamp is not None and (self.last_time is None or stamp >= self.last_time):
            return stamp
        return None

    def emit(self, cause: str, tier: int, text: str, lineno: int, rank: Optional[int], node: Optional[str],
             time: Optional[float] = None, **detail: object) -> None:
        if self.entry is not None:  # inside a torchrun entry: its rank and host
            rank_m = re.match(r"(\d+)", self.entry.fields.get("rank", ""))
            rank = rank if rank is not None else (int(rank_m.group(1)) if rank_m else None)
            node = node or self.entry.fields.get("host") or None
        self.sink.add(self._event(cause, tier, text, lineno, rank, node or _node_of(text), time, **detail))

    def finish(self, lineno: int) -> None:
        for rank in list(self.tracebacks):
            self._close_traceback(rank)
        self._close_entry()
        self.block = None


def _stamp(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: Optional[str]) -> Optional[float]:
    try:
        base = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    return base + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _task_ids(spec: str) -> list[int]:
    """`4-5,7` -> [4, 5, 7] (at most MAX_TASKS)."""
    out: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            out.extend(range(int(low), min(int(high or low), int(low) + MAX_TASKS) + 1))
        if len(out) >= MAX_TASKS:
            break
    return out[:MAX_TASKS]


def _rank_of(text: str) -> Optional[int]:
    for regex in _RANK_IN_TEXT:
        m = regex.search(text)
        if m:
            return int(m.group(1))
    return None


def _node_of(text: str) -> Optional[str]:
    m = _SYSLOG.match(text)
    if m and m.group(1) in _MONTHS:
        return m.group(6)
    for regex in _NODE_IN_TEXT:
        if regex is _NODE_IN_TEXT[0] and "NODE FAILURE" in text:
            continue  # `JOB 1 ON a CANCELLED ... DUE TO NODE FAILURE`: a is the node that survived
        m = regex.search(text)
        if m:
            return m.group(1).rstrip(".")
    return None


def scan_file(path: str | Path, label: str, index: int, sink: Collector, *, max_bytes: Optional[int] = None,
              loss_watcher: object = None) -> None:
    """Scan one log file into `sink` (a FIFO, device or directory is refused, never read)."""
    from mbridge_launch.base.files import open_regular_binary

    with open_regular_binary(path, "log") as handle:
        FileScanner(path, label, index, sink, max_bytes, loss_watcher).run(handle)
