"""The pieces under a rollback: the save-dir lock, the journal file, tracker snapshots, and the
crash-injection hook the crash-safety tests use.

Lock: `SAVE/.mbridge-launch.lock`, an exclusive flock (base.locks.try_lock). After locking, the holder checks
that the path still names the inode it locked: a finishing holder unlinks the file while still
holding the lock (so a rollback then undo leaves no trace in the tree), and a process that opened
the old inode just before must not believe it holds the lock.

Journal: `SAVE/rolled_back/<stamp>/ROLLBACK.json`, always rewritten whole by temp + fsync + rename,
written BEFORE the first change so that a crash at any later point can be finished.
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
from mbridge_launch.base.locks import try_lock
from mbridge_launch.rollback.checkpoints import JOURNAL_NAME

LOCK_NAME = ".mbridge-launch.lock"
JOURNAL_FORMAT = 1
CRASH_ENV = "MBL_ROLLBACK_CRASH_AFTER"
PAUSE_ENV = "MBL_ROLLBACK_PAUSE_AFTER"  # with MBL_ROLLBACK_PAUSE_FILE: the concurrency tests' barrier
PAUSE_FILE_ENV = "MBL_ROLLBACK_PAUSE_FILE"


def crash_point(step: str) -> None:
    """Test hooks: die right after `step` as a kill -9 would (no cleanup, no flush), or pause
    there (create the pause file, wait until the test deletes it) to hold the lock mid-way."""
    if os.environ.get(CRASH_ENV) == step:
        os._exit(137)
    if os.environ.get(PAUSE_ENV) == step and os.environ.get(PAUSE_FILE_ENV):
        marker = Path(os.environ[PAUSE_FILE_ENV])
        marker.write_text(str(os.getpid()))
        deadline = time.monotonic() + 60
        while marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)


class SaveDirLock:
    def __init__(self, save_dir: Path) -> None:
        self.path = Path(save_dir) / LOCK_NAME
        self.fd: Optional[int] = None
        self.dir_times_ns: tuple[int, int] = (0, 0)

    def _holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip() or "?"
        except OSError:
            return "?"

    def acquire(self) -> "SaveDirLock":
        # The directory's times before the lock file touched them (undo restores them).
        st = os.stat(self.path.parent)
        self.dir_times_ns = (st.st_atime_ns, st.st_mtime_ns)
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise UserError("rollback.lock_failed", path=str(self.path), reason=exc.strerror or str(exc)) from None
            try:
                taken = try_lock(fd)
            except OSError as exc:  # no flock on this file system (ENOLCK, EOPNOTSUPP)
                os.close(fd)
                raise UserError("rollback.lock_failed", path=str(self.path), reason=exc.strerror or str(exc)) from None
            if not taken:
                os.close(fd)
                raise CheckFailed("rollback.locked", path=str(self.path.parent), holder=self._holder())
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # unlinked by the previous holder after we opened it: try again
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            self.fd = fd
            return self
        raise CheckFailed("rollback.locked", path=str(self.path.parent), holder=self._holder())

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
    """Everything needed to put a small file back exactly: bytes, mode, mtime."""
    try:
        data = path.read_bytes()
        st = os.stat(path)
    except FileNotFoundError:
        return {"present": False}
    return {"present": True, "b64": base64.b64encode(data).decode("ascii"), "sha256": sha256(data),
            "mode": st.st_mode & 0o7777, "mtime_ns": st.st_mtime_ns, "atime_ns": st.st_atime_ns}


def restore_file(path: Path, snap: dict[str, Any]) -> None:
    if not snap.get("present"):
        try:
            os.unlink(path)
            fsync_dir(path.parent)
        except FileNotFoundError:
            pass
        return
    data = base64.b64decode(snap["b64"])
    current = _read(path)
    if current != data:
        atomic_write_bytes(path, data, snap.get("mode", 0o644))
    else:
        os.chmod(path, snap.get("mode", 0o644))
    os.utime(path, ns=(snap.get("atime_ns", snap["mtime_ns"]), snap["mtime_ns"]))


def file_sha(path: Path) -> Optional[str]:
    data = _read(path)
    return sha256(data) if data is not None else None


def _read(path: Path) -> Optional[bytes]:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def write_if_changed(path: Path, data: bytes, mode: int) -> None:
    """Idempotent tracker write (recovery may repeat it)."""
    if _read(path) != data:
        atomic_write_bytes(path, data, mode)


def write_journal(stamp_dir: Path, journal: dict[str, Any], state: str) -> dict[str, Any]:
    journal = dict(journal)
    journal["state"] = state
    journal["history"] = [*journal.get("history", []), {"state": state, "at": time.time()}]
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
