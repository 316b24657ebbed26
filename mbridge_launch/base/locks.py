"""Advisory file locks (flock) for the watcher and the rollback, in one place that tells "another
process holds the lock" from "this file system cannot lock at all".

Only EWOULDBLOCK/EAGAIN (and EACCES, which some flock emulations over fcntl locks return) mean
that another process holds the lock. Any other error (ENOLCK or EOPNOTSUPP on a file system
without flock, such as some NFS mounts) is raised as the OSError it is, so that callers report it
as such and never as "already locked".

A lock file lives in a directory other people may write (a shared save directory), so it is opened
with O_NOFOLLOW and never truncated through a name: a symbolic link, a hard link, a device or a
FIFO at the lock's path is refused (UnsafeLockFile) rather than created, truncated or written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from mbridge_launch.base.errors import UserError

_HELD = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})


class LockHeld(Exception):
    """Another process holds the lock."""


class UnsafeLockFile(UserError):
    """The lock's path is not a plain file of ours (exit 2: remove it once nothing runs)."""

    def __init__(self, path: Path, kind: str) -> None:
        from mbridge_launch.base.i18n import t

        super().__init__("lock.unsafe", path=str(path), kind=t(f"file.kind.{kind}"))


def open_lock(path: Path) -> int:
    """Open (creating) the lock file without following a link and without truncating it; the
    descriptor of a regular file with one name, else UnsafeLockFile. OSError as the open raises it."""
    from mbridge_launch.base.files import kind_of_mode

    try:  # never open a device or FIFO at all: opening one can have effects of its own
        kind = kind_of_mode(os.lstat(path).st_mode)
    except FileNotFoundError:
        kind = "regular"
    if kind != "regular":
        raise UnsafeLockFile(path, kind)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)  # less the umask, like every file the tool creates
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeLockFile(path, "symlink") from None
        raise
    st = os.fstat(fd)
    kind = kind_of_mode(st.st_mode)
    if kind == "regular" and st.st_nlink > 1:  # a second name: truncating would change that file too
        kind = "hard_link"
    if kind != "regular":
        os.close(fd)
        raise UnsafeLockFile(path, kind)
    return fd


def try_lock(fd: int) -> bool:
    """Take an exclusive flock on `fd` without waiting: True when taken, False when another process
    holds it. Any other failure raises its OSError."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _HELD:
            return False
        raise
    return True


def lock_file(path: Path, *, wait_s: float = 0.0, poll_s: float = 0.5) -> int:
    """Open (creating) `path` and lock it, retrying for up to `wait_s` seconds; returns the open
    descriptor, which holds the lock until it is closed. LockHeld when another process still holds
    it; UnsafeLockFile when the path is not a plain file; OSError when the file cannot be opened
    or this file system cannot lock."""
    fd = open_lock(path)
    deadline = time.monotonic() + wait_s
    try:
        while not try_lock(fd):
            if time.monotonic() >= deadline:
                raise LockHeld(str(path))
            time.sleep(poll_s)
    except BaseException:
        os.close(fd)
        raise
    return fd
