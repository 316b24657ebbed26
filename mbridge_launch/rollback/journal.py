"""The pieces under a rollback: the save-dir lock, the journal file, tracker snapshots, and the
crash-injection hook the crash-safety tests use.

Lock: `SAVE/.mbridge-launch.lock`, an exclusive flock (base.locks.try_lock). After locking, the holder checks
that the path still names the inode it locked: a finishing holder unlinks the file while still
holding the lock (so a rollback then undo leaves no trace in the tree), and a process that opened
the old inode just before must not believe it holds the lock.

Journal: `SAVE/rolled_back/<stamp>/ROLLBACK.json`, always rewritten whole by temp + fsync + rename,
written BEFORE the first change so that a crash at any later point can be finished. Anyone who can
write the save directory can write a journal, so it is read as data (load_journal): opened without
following a link, size-bounded, and every field checked against what write_journal puts there
before the engine moves a directory or writes a tracker from it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.atomic import atomic_write_bytes, fsync_dir
from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.base.faults import fault_point
from mbridge_launch.base.locks import open_lock, try_lock
from mbridge_launch.rollback.checkpoints import JOURNAL_NAME
from mbridge_launch.rollback.journal_check import (
    TRACKER_MAX_BYTES,
    TRACKER_MODE_BITS,
    BadField,
    check_journal,
    read_bounded,
    read_bounded_stat,
)

LOCK_NAME = ".mbridge-launch.lock"
HOLDER_MAX_BYTES = 512


def crash_point(step: str) -> None:
    """The fault point `rollback.<step>`: nothing, unless a crash-safety test installed a hook
    there (base/faults.py) that dies as a kill -9 would or pauses holding the lock mid-way."""
    fault_point(f"rollback.{step}")


class SaveDirLock:
    def __init__(self, save_dir: Path) -> None:
        self.path = Path(save_dir) / LOCK_NAME
        self.fd: Optional[int] = None
        self.dir_times_ns: tuple[int, int] = (0, 0)

    @staticmethod
    def _holder(fd: int) -> str:
        """The holder line, read through our own descriptor (never through the name)."""
        try:
            return os.pread(fd, HOLDER_MAX_BYTES, 0).decode("utf-8", "replace").strip() or "?"
        except OSError:
            return "?"

    @staticmethod
    def _write_holder(fd: int) -> None:
        """Only a file no bigger than a holder line is rewritten: the lock file is a regular file
        with one name (open_lock), and anything larger is not one this tool wrote."""
        if os.fstat(fd).st_size > HOLDER_MAX_BYTES:
            return
        os.ftruncate(fd, 0)
        line = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        os.pwrite(fd, line.encode()[:HOLDER_MAX_BYTES], 0)

    def acquire(self) -> "SaveDirLock":
        # The directory's times before the lock file touched them (undo restores them).
        st = os.stat(self.path.parent)
        self.dir_times_ns = (st.st_atime_ns, st.st_mtime_ns)
        for _ in range(20):
            try:
                fd = open_lock(self.path)
            except OSError as exc:
                raise UserError("rollback.lock_failed", path=str(self.path), reason=exc.strerror or str(exc)) from None
            try:
                taken = try_lock(fd)
            except OSError as exc:  # no flock on this file system (ENOLCK, EOPNOTSUPP)
                os.close(fd)
                raise UserError("rollback.lock_failed", path=str(self.path), reason=exc.strerror or str(exc)) from None
            if not taken:
                holder = self._holder(fd)
                os.close(fd)
                raise CheckFailed("rollback.locked", path=str(self.path.parent), holder=holder)
            try:
                same = os.lstat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # unlinked by the previous holder after we opened it: try again
                os.close(fd)
                continue
            self._write_holder(fd)
            self.fd = fd
            return self
        raise CheckFailed("rollback.locked", path=str(self.path.parent), holder="?")

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # still holding the lock: see the module docstring
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> "SaveDirLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot_file(path: Path) -> dict[str, Any]:
    """Everything needed to put a small file back exactly: bytes, mode, mtime. Read without
    following a link and within TRACKER_MAX_BYTES: a tracker linked to /proc/self/environ must
    not be copied into the journal."""
    try:
        found = read_bounded_stat(path, TRACKER_MAX_BYTES)
    except BadField as bad:
        raise _tracker_error(path, bad) from None
    if found is None:
        return {"present": False}
    data, st = found
    return {"present": True, "b64": base64.b64encode(data).decode("ascii"), "sha256": sha256(data),
            "mode": st.st_mode & 0o7777, "mtime_ns": st.st_mtime_ns, "atime_ns": st.st_atime_ns}


def _tracker_error(path: Path, bad: BadField) -> UserError:
    from mbridge_launch.base.i18n import t

    return UserError("rollback.tracker_unsafe", path=str(path), reason=t(bad.reason_key, **bad.params))


def restore_file(path: Path, snap: dict[str, Any]) -> None:
    """Put a tracker back from a checked snapshot (journal_check): the recorded bytes and mode on a
    regular file (atomic_write refuses a link or device at the tracker's name)."""
    if not snap.get("present"):
        try:
            os.unlink(path)
            fsync_dir(path.parent)
        except FileNotFoundError:
            pass
        return
    data = base64.b64decode(snap["b64"])
    mode = snap.get("mode", 0o644) & TRACKER_MODE_BITS
    if read_tracker(path) != data:
        atomic_write_bytes(path, data, mode, exact_mode=True)
    else:
        os.chmod(path, mode)  # _read refused a link: this is the regular file itself
    os.utime(path, ns=(snap.get("atime_ns", snap["mtime_ns"]), snap["mtime_ns"]), follow_symlinks=False)


def file_sha(path: Path) -> Optional[str]:
    data = read_tracker(path)
    return sha256(data) if data is not None else None


def read_tracker(path: Path) -> Optional[bytes]:
    """A tracker's bytes (None when absent), refusing a link, a device or a huge file."""
    try:
        return read_bounded(Path(path), TRACKER_MAX_BYTES)
    except BadField as bad:
        raise _tracker_error(Path(path), bad) from None


def write_if_changed(path: Path, data: bytes, mode: int) -> None:
    """Idempotent tracker write (recovery may repeat it)."""
    if read_tracker(path) != data:
        atomic_write_bytes(path, data, mode & TRACKER_MODE_BITS, exact_mode=True)


def write_journal(stamp_dir: Path, journal: dict[str, Any], state: str) -> dict[str, Any]:
    journal = dict(journal)
    journal["state"] = state
    journal["history"] = [*journal.get("history", []), {"state": state, "at": time.time()}]
    check_journal(journal, Path(stamp_dir))  # never write one that load_journal would refuse
    atomic_write_bytes(Path(stamp_dir) / JOURNAL_NAME, (json.dumps(journal, indent=2) + "\n").encode("utf-8"))
    return journal


def unique_stamp(parent: Path, now: Optional[float] = None) -> str:
    base = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    stamp, n = base, 1
    while (parent / stamp).exists():
        n += 1
        stamp = f"{base}-{n}"
    return stamp


def rename_durably(src: Path, dst: Path) -> None:
    """os.rename (same filesystem, atomic, never a copy) made durable in both directories."""
    if dst.exists():
        raise UserError("rollback.destination_exists", path=str(dst))
    os.rename(src, dst)
    fsync_dir(dst.parent)
    fsync_dir(src.parent)


def remove_stale_temp_files(save_dir: Path, names: tuple[str, ...]) -> list[str]:
    """Temp files atomic_write left behind when a crash hit between mkstemp and rename."""
    removed = []
    for entry in os.scandir(save_dir):
        if any(entry.name.startswith(f".{n}.") and entry.name.endswith(".tmp") for n in names):
            try:
                os.unlink(entry.path)
                removed.append(entry.name)
            except OSError:
                pass
    return removed
