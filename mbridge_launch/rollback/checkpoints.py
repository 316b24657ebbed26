"""Inspect a Megatron Bridge checkpoint directory (torch_dist format, Bridge's default).

A checkpoint `iter_NNNNNNN/` is COMPLETE when it holds every file of REQUIRED_FILES and at least
one `*.distcp` shard, none of them empty. That is what loading needs: `.metadata` (the
torch.distributed.checkpoint index), the `.distcp` shards it indexes, `common.pt` (the non-sharded
state), `metadata.json` (Megatron's dist-checkpoint metadata) and `train_state.pt` (the
iteration and counters). `run_config.yaml` is written by Bridge too but loading does not need it:
its absence is reported as a note, not as incompleteness.

Shards are checked against the checkpoint's own index: the real `.metadata` is a pickle of
torch.distributed.checkpoint's `Metadata`, whose `storage_data` maps every tensor chunk to a
`_StorageInfo(relative_path, offset, length)`; the relative paths are the shard files
(`__<rank>_<n>.distcp`, FileSystemWriter's names). It is NEVER unpickled (an untrusted file runs
code when unpickled): `pickletools.genops` walks its opcodes and the string arguments that are
shard names are collected, within METADATA_MAX_BYTES. A directory holding shard files the index
does not name (a second world size wrote there) or lacking ones it names is incomplete ("mixed"),
with the reason; a `.metadata` that is not a pickle or names no shard is incomplete too (torch
could not load it either).

Trackers: `latest_train_state.pt` is identified by comparing its bytes with each iteration's
`train_state.pt` (that is what a rollback or Bridge copies there; no torch needed); the
stand-in trainer's JSON train state is also read directly. `latest_checkpointed_iteration.txt`
holds the iteration as text.

Every file here may have been written by someone else (a shared checkpoint root, a repository):
trackers, train states and journals are read through base/files.py (regular files only, opened
non-blocking, a few hundred bytes for the .txt tracker); a symlink among them, or an `iter_*`
symlink, is followed only when it resolves inside the save directory (`iter_0000500 -> /` would
otherwise walk the whole file system). A tracker that is not an iteration number is described by
its size and kind, never echoed: it may be a link to /proc/self/environ.

`resolve_resume` mimics Bridge's resume order (load pointing at an iter dir; ckpt_step;
latest_train_state.pt; the .txt fallback) and says whether the directory is loadable: whatever it
resolves to must be a complete checkpoint in the save directory.
"""

from __future__ import annotations

import json
import os
import pickletools
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.files import Probe, inside, probe_read

PT_TRACKER = "latest_train_state.pt"
TXT_TRACKER = "latest_checkpointed_iteration.txt"
TRAIN_STATE = "train_state.pt"
REQUIRED_FILES = (".metadata", "common.pt", "metadata.json", TRAIN_STATE)
SHARD_SUFFIX = ".distcp"
EXPECTED_OPTIONAL = ("run_config.yaml",)
ROLLED_BACK_DIR = "rolled_back"
JOURNAL_NAME = "ROLLBACK.json"
ITER_RE = re.compile(r"^iter_(\d{7,})$")
METADATA = ".metadata"
# A real index is a few MB even for large models; beyond this the shard check is not attempted
# (said as a note), so that a huge or hostile file cannot stall every command that lists checkpoints.
METADATA_MAX_BYTES = 256 * 1024 * 1024
SHARD_NAME_RE = re.compile(r"^__\d+_\d+\.distcp$")
TXT_TRACKER_MAX = 256  # an iteration number and a newline
TRAIN_STATE_MAX = 4 * 1024 * 1024  # a torch zip of counters (a few KB) or the stand-in's JSON
JOURNAL_MAX = 4 * 1024 * 1024
DIGITS_RE = re.compile(r"[0-9]{1,19}")  # ASCII only: '²'.isdigit() is True but int('²') fails
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
                         "BINSTRING", "SHORT_BINSTRING", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8"})


def _reason(key: str, **params: Any) -> str:
    """Why a resume would fail, in the user's language (shown by checkpoints, preflight, rollback)."""
    from mbridge_launch.base.i18n import t

    return t(f"ckpt.reason.{key}", **params)


def iter_dirname(iteration: int) -> str:
    return f"iter_{iteration:07d}"


def parse_iter_dirname(name: str) -> Optional[int]:
    match = ITER_RE.match(name)
    return int(match.group(1)) if match else None


@dataclass
class CheckpointInfo:
    iteration: int
    path: str
    complete: bool
    missing: list[str] = field(default_factory=list)  # required files absent or empty
    notes: list[str] = field(default_factory=list)  # expected-but-optional files absent
    size_bytes: int = 0
    mtime: float = 0.0  # newest file in it: when the save finished
    tracked_by: list[str] = field(default_factory=list)  # tracker file names pointing here
    loss: Optional[float] = None  # the loss logged at the last logged iteration <= this one
    loss_iteration: Optional[int] = None
    shards: int = 0  # *.distcp files in the directory
    indexed_shards: Optional[int] = None  # shard files .metadata names; None: not read
    mixed: bool = False  # shard files and the index disagree (two world sizes, a partial save)
    shard_reason: str = ""  # why the shards do not match the index, in the user's language


class MetadataUnreadable(ValueError):
    """The `.metadata` index could not be walked (not a pickle, unreadable)."""


class MetadataTooLarge(MetadataUnreadable):
    """The index is over the size bound: not checked (a note), not counted against the checkpoint."""


def metadata_shard_names(path: Path, max_bytes: int = METADATA_MAX_BYTES) -> set[str]:
    """The shard file names a torch_dist `.metadata` index names, read from its pickle opcodes
    without executing any of them (no unpickling). MetadataUnreadable when it cannot be walked."""
    probe = probe_read(path, max_bytes, nofollow=True)
    if probe.too_large:
        raise MetadataTooLarge(_reason("metadata_too_large", limit=max_bytes))
    if probe.data is None:  # a FIFO or device cannot hang or flood this: only described
        raise MetadataUnreadable(probe.reason or _kind_text(probe.kind))
    data = probe.data
    names: set[str] = set()
    try:
        for opcode, arg, _pos in pickletools.genops(data):
            if opcode.name in _STRING_OPS:
                text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
                if SHARD_NAME_RE.match(text):
                    names.add(text)
    except Exception as exc:  # noqa: BLE001 - any malformed pickle: not readable, never a crash
        raise MetadataUnreadable(_reason("metadata_not_pickle", error=type(exc).__name__)) from None
    return names


def _check_shards(info: CheckpointInfo, path: Path, shard_files: set[str]) -> None:
    """Compare the shard files present with those the index names; sets mixed/shard_reason."""
    info.shards = len(shard_files)
    try:
        named = metadata_shard_names(path / METADATA)
    except MetadataTooLarge as exc:  # said, not counted against the checkpoint
        info.shard_reason = str(exc)
        return
    except MetadataUnreadable as exc:
        info.shard_reason = _reason("metadata_unreadable", reason=str(exc))
        info.complete, info.mixed = False, True
        return
    info.indexed_shards = len(named)
    extra, absent = sorted(shard_files - named, key=_shard_key), sorted(named - shard_files, key=_shard_key)
    if not named:
        info.shard_reason = _reason("metadata_no_shards")
    elif extra:
        info.shard_reason = _reason("shards_unindexed", found=len(shard_files), indexed=len(named),
                                    files=_few(extra))
    elif absent:
        info.shard_reason = _reason("shards_missing", found=len(shard_files), indexed=len(named),
                                    files=_few(absent))
    if info.shard_reason:
        info.complete, info.mixed = False, True


def _shard_key(name: str) -> tuple[int, ...]:
    """__<rank>_<n>.distcp in rank order (10 after 9), other names last."""
    digits = re.findall(r"\d+", name)
    return tuple(int(d) for d in digits) if SHARD_NAME_RE.match(name) else (1 << 62,)


def _few(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... (+{len(names) - limit})" if len(names) > limit else "")


def _link_escapes(path: Path, root: Path) -> bool:
    """An iter_* symlink that leaves `root` (or is `root` itself): never walked."""
    if not os.path.islink(path):
        return False
    return not inside(path, root) or os.path.realpath(path) == os.path.realpath(root)


def inspect_iter_dir(path: Path) -> CheckpointInfo:
    iteration = parse_iter_dirname(path.name)
    if iteration is None:
        raise ValueError(f"{path} is not an iter_NNNNNNN directory")
    if _link_escapes(path, path.parent):
        return CheckpointInfo(iteration, str(path), False, shard_reason=_reason("iter_link_outside"))
    sizes: dict[str, int] = {}
    total, newest = 0, 0.0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue
            total += st.st_size
            newest = max(newest, st.st_mtime)
            if root == str(path):
                sizes[name] = st.st_size
    missing = [name for name in REQUIRED_FILES if sizes.get(name, 0) == 0]
    if not any(name.endswith(SHARD_SUFFIX) and size > 0 for name, size in sizes.items()):
        missing.append("*" + SHARD_SUFFIX)
    notes = [name for name in EXPECTED_OPTIONAL if name not in sizes]
    info = CheckpointInfo(iteration, str(path), not missing, missing, notes, total, newest)
    if not missing:  # the index is only compared when every file is there
        _check_shards(info, path, {name for name in sizes if name.endswith(SHARD_SUFFIX)})
    return info


def incomplete_text(info: CheckpointInfo) -> str:
    """Why a checkpoint is not loadable: the files missing, or the shards/index mismatch."""
    parts = ([_reason("incomplete", files=", ".join(info.missing))] if info.missing else [])
    return "; ".join(parts + ([info.shard_reason] if info.shard_reason else []))


def iter_dirs(directory: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        iteration = parse_iter_dirname(entry.name)
        if iteration is not None and entry.is_dir(follow_symlinks=False):
            found[iteration] = Path(entry.path)
    return dict(sorted(found.items()))


def _kind_text(kind: str) -> str:
    from mbridge_launch.base.i18n import t

    return t(f"file.kind.{kind}")


def read_in_save_dir(save_dir: Path, name: str, limit: int) -> Probe:
    """A tracker (or journal) in `save_dir`, read bounded. A symlink is followed only when it
    resolves inside the save directory; else it is reported as kind "link_outside", unread."""
    path = Path(save_dir) / name
    if os.path.islink(path):
        if not inside(path, save_dir):
            return Probe("link_outside")
        path = Path(os.path.realpath(path))
    return probe_read(path, limit, nofollow=True)


def describe_tracker(probe: Probe, limit: int) -> str:
    """A tracker that is not an iteration number, by size and kind only (never its bytes)."""
    from mbridge_launch.base.i18n import t

    if probe.too_large:
        return t("ckpt.tracker_too_large", limit=limit)
    if probe.data is None:
        return _kind_text(probe.kind)
    kind = "text" if all(32 <= b < 127 or b in b"\t\r\n" for b in probe.data) else "binary"
    return t("ckpt.tracker_content", size=len(probe.data), kind=t(f"ckpt.tracker_kind.{kind}"))


def _txt_tracker(save_dir: Path) -> tuple[Optional[str], Optional[int]]:
    """(what the .txt tracker says, its iteration): the digits when it holds an iteration number,
    else its description; (None, None) when it is absent."""
    probe = read_in_save_dir(save_dir, TXT_TRACKER, TXT_TRACKER_MAX)
    if probe.kind == "missing":
        return None, None
    text = probe.data.decode("ascii", "replace").strip() if probe.data is not None else ""
    if DIGITS_RE.fullmatch(text):
        return text, int(text)
    return describe_tracker(probe, TXT_TRACKER_MAX), None


def _read_bytes(path: Path) -> Optional[bytes]:
    """A train state inside an iteration directory (no symlink followed), bounded."""
    return probe_read(path, TRAIN_STATE_MAX, nofollow=True).data


def _json_iteration(data: bytes) -> Optional[int]:
    """The stand-in trainer's train_state.pt is JSON; a real one is a torch zip (not parsed)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if isinstance(value, dict) and isinstance(value.get("iteration"), int):
        return value["iteration"]
    return None


@dataclass
class TrackerState:
    txt_raw: Optional[str]  # None: file absent; the digits; or its size and kind (never its bytes)
    txt_iteration: Optional[int]
    pt_present: bool
    pt_iteration: Optional[int]  # what latest_train_state.pt designates
    pt_matched_by: str = ""  # "bytes" (equal to iter_N/train_state.pt), "json", "" (unknown)
    pt_match_location: str = ""  # "save_dir" or "rolled_back/<stamp>"


def read_trackers(save_dir: Path) -> TrackerState:
    save_dir = Path(save_dir)
    txt_raw, txt_iter = _txt_tracker(save_dir)
    pt_probe = read_in_save_dir(save_dir, PT_TRACKER, TRAIN_STATE_MAX)
    pt = pt_probe.data
    # anything there that Bridge would try to read counts as present (and unknown if unreadable)
    state = TrackerState(txt_raw, txt_iter, pt_probe.kind != "missing", None)
    if pt is None:
        return state
    candidates = [("save_dir", iter_dirs(save_dir))]
    for stamp_dir in rolled_back_dirs(save_dir):
        candidates.append((f"{ROLLED_BACK_DIR}/{stamp_dir.name}", iter_dirs(stamp_dir)))
    for location, dirs in candidates:
        for iteration, path in sorted(dirs.items(), reverse=True):
            if _read_bytes(path / TRAIN_STATE) == pt:
                state.pt_iteration, state.pt_matched_by, state.pt_match_location = iteration, "bytes", location
                return state
    state.pt_iteration = _json_iteration(pt)
    state.pt_matched_by = "json" if state.pt_iteration is not None else ""
    return state


def rolled_back_dirs(save_dir: Path) -> list[Path]:
    root = Path(save_dir) / ROLLED_BACK_DIR
    if root.is_symlink():  # never a tree outside the save directory
        return []
    try:
        return sorted((Path(e.path) for e in os.scandir(root) if e.is_dir(follow_symlinks=False)),
                      key=lambda p: p.name)
    except OSError:
        return []


@dataclass
class Resolution:
    """What Bridge would resume from. `loadable` is False when it would fail."""

    source: str  # load_iter_dir, ckpt_step, latest_train_state.pt, latest_checkpointed_iteration.txt, none
    iteration: Optional[int]
    path: Optional[str]
    loadable: bool
    reason: str = ""


def resolve_resume(save_dir: Path, *, load: Optional[Path] = None, ckpt_step: Optional[int] = None) -> Resolution:
    """Bridge's resume resolution order, on the files as they are now: `load` naming an iter_*
    directory; else `ckpt_step` (a missing iteration is an error); else latest_train_state.pt;
    the .txt tracker only as a fallback."""
    save_dir = Path(save_dir)
    if load is not None and parse_iter_dirname(Path(load).name) is not None:
        info = inspect_iter_dir(Path(load)) if Path(load).is_dir() else None
        ok = bool(info and info.complete)
        return Resolution("load_iter_dir", parse_iter_dirname(Path(load).name), str(load), ok,
                          "" if ok else _reason("missing_or_incomplete"))
    base = Path(load) if load is not None else save_dir
    if ckpt_step is not None:
        return _resolved("ckpt_step", base, ckpt_step)
    trackers = read_trackers(base)
    if trackers.pt_present:
        if trackers.pt_iteration is None:
            return Resolution(PT_TRACKER, None, None, False, _reason("pt_unknown"))
        return _resolved(PT_TRACKER, base, trackers.pt_iteration)
    if trackers.txt_raw is not None:
        if trackers.txt_iteration is None:
            return Resolution(TXT_TRACKER, None, None, False, _reason("not_an_iteration", value=trackers.txt_raw))
        return _resolved(TXT_TRACKER, base, trackers.txt_iteration)
    # No tracker: Bridge starts from scratch (a fresh run), which is loadable only if nothing
    # was ever saved here (otherwise progress would be silently thrown away).
    has_iters = bool(iter_dirs(base))
    return Resolution("none", None, None, not has_iters, _reason("no_tracker") if has_iters else "")


def _resolved(source: str, base: Path, iteration: int) -> Resolution:
    path = base / iter_dirname(iteration)
    if _link_escapes(path, base):
        return Resolution(source, iteration, str(path), False, _reason("iter_link_outside"))
    if not path.is_dir():
        return Resolution(source, iteration, str(path), False, _reason("dir_missing"))
    info = inspect_iter_dir(path)
    reason = "" if info.complete else incomplete_text(info)
    return Resolution(source, iteration, str(path), info.complete, reason)


@dataclass
class RolledBackSet:
    stamp: str
    path: str
    iterations: list[int]
    journal_state: Optional[str]  # state in ROLLBACK.json; None when the journal is missing
    to_iter: Optional[int]


@dataclass
class CheckpointReport:
    save_dir: str
    checkpoints: list[CheckpointInfo]
    trackers: TrackerState
    resume: Resolution
    rolled_back: list[RolledBackSet]
    log_path: Optional[str] = None

    @property
    def interrupted(self) -> list[RolledBackSet]:
        """Rollbacks or undos that did not finish (a crash): the next rollback command finishes them."""
        return [s for s in self.rolled_back if s.journal_state in ("started", "undoing")]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for item in data["checkpoints"]:
            if isinstance(item.get("loss"), float) and item["loss"] != item["loss"]:
                item["loss"] = "nan"
        data["interrupted"] = [s.stamp for s in self.interrupted]
        return data


def read_journal(stamp_dir: Path) -> Optional[dict[str, Any]]:
    data = probe_read(Path(stamp_dir) / JOURNAL_NAME, JOURNAL_MAX, nofollow=True).data
    try:
        value = json.loads(data.decode("utf-8")) if data is not None else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def list_checkpoints(save_dir: str | Path, log_path: str | Path | list | None = None) -> CheckpointReport:
    """`log_path`: one log or several (oldest first: per-restart logs of a run); the loss shown
    for a checkpoint comes from the latest timeline that logged it."""
    from mbridge_launch.base.errors import UserError

    save_dir = Path(save_dir)
    if not save_dir.is_dir():
        raise UserError("ckpt.not_a_dir", path=str(save_dir))
    infos = [inspect_iter_dir(p) for p in iter_dirs(save_dir).values()]
    trackers = read_trackers(save_dir)
    for info in infos:
        if trackers.txt_iteration == info.iteration:
            info.tracked_by.append(TXT_TRACKER)
        if trackers.pt_iteration == info.iteration and trackers.pt_match_location in ("save_dir", ""):
            info.tracked_by.append(PT_TRACKER)
    logs = [Path(p) for p in (log_path if isinstance(log_path, (list, tuple)) else [log_path] if log_path else [])]
    if logs:
        _attach_losses(infos, logs)
    sets = []
    for stamp_dir in rolled_back_dirs(save_dir):
        journal = read_journal(stamp_dir)
        sets.append(RolledBackSet(stamp_dir.name, str(stamp_dir), list(iter_dirs(stamp_dir)),
                                  journal.get("state") if journal else None,
                                  journal.get("to_iter") if journal else None))
    return CheckpointReport(str(save_dir), infos, trackers, resolve_resume(save_dir), sets,
                            ", ".join(str(p) for p in logs) or None)


def _attach_losses(infos: list[CheckpointInfo], log_paths: list[Path]) -> None:
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.rollback.lossmon import loss_by_iteration, read_log

    records = []
    for log_path in log_paths:
        try:
            records.extend(read_log(log_path))
        except FileNotFoundError:
            raise UserError("file.not_found", path=str(log_path)) from None
        except OSError as exc:
            raise UserError("file.unreadable", path=str(log_path), reason=exc.strerror or str(exc)) from None
    losses = loss_by_iteration(records)
    logged = sorted(losses)
    for info in infos:
        before = [i for i in logged if i <= info.iteration]
        if before:
            info.loss_iteration = before[-1]
            info.loss = losses[before[-1]]


def latest_complete(save_dir: Path, before: Optional[int] = None) -> Optional[int]:
    """The newest complete checkpoint (strictly before `before`, if given)."""
    best = None
    for iteration, path in iter_dirs(Path(save_dir)).items():
        if (before is None or iteration < before) and inspect_iter_dir(path).complete:
            best = iteration
    return best
