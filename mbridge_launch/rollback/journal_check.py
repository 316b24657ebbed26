"""Read a rollback journal as untrusted data and check every field against what the tool writes.

`SAVE/rolled_back/<stamp>/ROLLBACK.json` sits in a directory other people can write, and the engine
renames directories and writes trackers from it. So: it is opened without following a link and
read within a size bound; a name to move is an `iter_*` directly in the save directory (no '/',
no '..'), newer than the rollback's target; a tracker snapshot holds at most TRACKER_MAX_BYTES,
its checksum matches, the .txt tracker holds an iteration number or Megatron's `release`, and its
mode has read/write bits only. A journal that fails is one UserError naming the file and the field.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.files import probe_read
from mbridge_launch.rollback.checkpoints import JOURNAL_NAME, PT_TRACKER, TXT_TRACKER, parse_iter_dirname

JOURNAL_FORMAT = 1
JOURNAL_MAX_BYTES = 4 * 1024 * 1024  # two tracker snapshots (base64) and a list of names
TRACKER_MAX_BYTES = 1024 * 1024  # a train_state.pt is a few KB; the .txt a few bytes
MAX_MOVED = 100_000
STATES = ("started", "done", "undoing", "undone")
TRACKER_MODE_BITS = 0o666  # what a tracker may carry: read/write only (no x, setuid, setgid, sticky)
_TXT_CONTENT = re.compile(rb"\s*(?:[0-9]{1,20}|release)?\s*")  # what Megatron and this tool write
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NS_MAX = 2**63 - 1


class BadField(Exception):
    """One field (or the file itself, '(file)') that is not what the tool writes."""

    def __init__(self, field: str, reason_key: str, **params: Any) -> None:
        super().__init__(field)
        self.field, self.reason_key, self.params = field, reason_key, params


def journal_error(path: Path, field: str, reason_key: str, **params: Any) -> UserError:
    from mbridge_launch.base.i18n import t

    return UserError("rollback.journal_invalid", path=str(path), field=field, reason=t(reason_key, **params))


def read_bounded(path: Path, limit: int) -> Optional[bytes]:
    found = read_bounded_stat(path, limit)
    return found[0] if found is not None else None


def read_bounded_stat(path: Path, limit: int) -> Optional[tuple[bytes, os.stat_result]]:
    """The bytes and stat of the regular file at `path` (None when absent), never through a
    symbolic link and never more than `limit` (base/files.py's bounded reader); BadField('(file)',
    ...) for anything else."""
    probe = probe_read(path, limit, nofollow=True)
    if probe.kind == "missing":
        return None
    if probe.kind == "symlink":
        raise BadField("(file)", "journal.reason.symlink")
    if probe.kind == "unreadable":
        raise BadField("(file)", "journal.reason.unreadable", reason=probe.reason)
    if probe.kind != "regular":
        raise BadField("(file)", "journal.reason.not_regular")
    if probe.data is None or probe.stat is None:
        raise BadField("(file)", "journal.reason.too_large", limit=limit)
    return probe.data, probe.stat


def load_journal(stamp_dir: Path) -> Optional[dict[str, Any]]:
    """The checked journal of `stamp_dir`, None when it has none; UserError when it is not valid."""
    path = Path(stamp_dir) / JOURNAL_NAME
    try:
        data = read_bounded(path, JOURNAL_MAX_BYTES)
        if data is None:
            return None
        try:
            journal = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise BadField("(file)", "journal.reason.not_json") from None
        _check(journal, Path(stamp_dir).name)
    except BadField as bad:
        raise journal_error(path, bad.field, bad.reason_key, **bad.params) from None
    return journal


def check_journal(journal: Any, stamp_dir: Path) -> None:
    """The same checks for a journal about to be written (built here, or copied from the ledger)."""
    try:
        _check(journal, Path(stamp_dir).name)
    except BadField as bad:
        raise journal_error(Path(stamp_dir) / JOURNAL_NAME, bad.field, bad.reason_key, **bad.params) from None


def _check(journal: Any, stamp: str) -> None:
    if not isinstance(journal, dict):
        raise BadField("(document)", "journal.reason.wrong_type", expected="object")
    _choice(journal, "format", (JOURNAL_FORMAT,))
    _choice(journal, "stamp", (stamp,))
    _choice(journal, "state", STATES)
    to_iter = _int(journal, "to_iter")
    _int(journal, "from_iter", optional=True)
    _typed(journal, "save_dir", str)
    _check_moved(journal, to_iter)
    _check_snapshots(journal)
    _check_after(journal)
    for key in ("save_dir_atime_ns", "save_dir_mtime_ns", "created_ns", "run_id"):
        _int(journal, key, optional=True)
    _typed(journal, "rolled_back_existed", bool, optional=True)
    _typed(journal, "trigger", dict, optional=True)
    _typed(journal, "history", list, optional=True)
    times = journal.get("rolled_back_times_ns")
    if times is not None and not (isinstance(times, (list, tuple)) and len(times) == 2 and all(_is_ns(v) for v in times)):
        raise BadField("rolled_back_times_ns", "journal.reason.wrong_type", expected="[atime_ns, mtime_ns] or null")


def _check_moved(journal: dict[str, Any], to_iter: int) -> None:
    moved = _typed(journal, "moved", list)
    if len(moved) > MAX_MOVED:
        raise BadField("moved", "journal.reason.too_many", limit=MAX_MOVED)
    seen: set[str] = set()
    for k, item in enumerate(moved):
        field = f"moved[{k}]"
        if not isinstance(item, dict):
            raise BadField(field, "journal.reason.wrong_type", expected="object")
        name = _typed(item, "name", str, field=f"{field}.name")
        iteration = parse_iter_dirname(name) if name.isascii() else None
        if iteration is None or iteration <= to_iter or name in seen:
            raise BadField(f"{field}.name", "journal.reason.bad_name", name=ascii(name[:100]), to_iter=to_iter)
        seen.add(name)
        _int(item, "mtime_ns", field=f"{field}.mtime_ns")
        _int(item, "atime_ns", optional=True, field=f"{field}.atime_ns")


def _check_snapshots(journal: dict[str, Any]) -> None:
    before = _typed(journal, "trackers_before", dict)
    for name in (PT_TRACKER, TXT_TRACKER):
        field = f"trackers_before.{name}"
        snap = _typed(before, name, dict, field=field)
        if not _typed(snap, "present", bool, field=f"{field}.present"):
            continue
        data = _snapshot_bytes(snap, field)
        if name == TXT_TRACKER and not _TXT_CONTENT.fullmatch(data):
            raise BadField(f"{field}.b64", "journal.reason.bad_tracker", size=len(data))
        mode = _int(snap, "mode", field=f"{field}.mode")
        if mode & ~TRACKER_MODE_BITS:
            raise BadField(f"{field}.mode", "journal.reason.bad_mode", mode=oct(mode), allowed=oct(TRACKER_MODE_BITS))
        _int(snap, "mtime_ns", field=f"{field}.mtime_ns")
        _int(snap, "atime_ns", optional=True, field=f"{field}.atime_ns")


def _snapshot_bytes(snap: dict[str, Any], field: str) -> bytes:
    text = _typed(snap, "b64", str, field=f"{field}.b64")
    if len(text) > (TRACKER_MAX_BYTES * 4) // 3 + 4:
        raise BadField(f"{field}.b64", "journal.reason.too_large", limit=TRACKER_MAX_BYTES)
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise BadField(f"{field}.b64", "journal.reason.wrong_type", expected="base64") from None
    if _typed(snap, "sha256", str, field=f"{field}.sha256") != hashlib.sha256(data).hexdigest():
        raise BadField(f"{field}.sha256", "journal.reason.sha_mismatch")
    return data


def _check_after(journal: dict[str, Any]) -> None:
    after = _typed(journal, "trackers_after", dict)
    for name in (PT_TRACKER, TXT_TRACKER):
        value = _typed(after, name, str, field=f"trackers_after.{name}")
        if not _SHA256.fullmatch(value):
            raise BadField(f"trackers_after.{name}", "journal.reason.wrong_type", expected="sha256 hex")


def _typed(obj: dict[str, Any], key: str, kind: type, *, optional: bool = False, field: str = "") -> Any:
    field = field or key
    if key not in obj or (optional and obj[key] is None):
        if optional:
            return None
        raise BadField(field, "journal.reason.missing")
    value = obj[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise BadField(field, "journal.reason.wrong_type", expected=kind.__name__)
    return value


def _is_ns(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _NS_MAX


def _int(obj: dict[str, Any], key: str, *, optional: bool = False, field: str = "") -> Any:
    """A non-negative integer within 63 bits (iterations, ids and nanosecond times alike)."""
    value = _typed(obj, key, int, optional=optional, field=field)
    if value is not None and not _is_ns(value):
        raise BadField(field or key, "journal.reason.out_of_range")
    return value


def _choice(obj: dict[str, Any], key: str, valid: tuple) -> Any:
    if key not in obj:
        raise BadField(key, "journal.reason.missing")
    if obj[key] not in valid or isinstance(obj[key], bool):
        raise BadField(key, "journal.reason.not_allowed", valid=", ".join(map(str, valid)))
    return obj[key]
