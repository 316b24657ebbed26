"""Advisory file locks (flock) for the watcher and the rollback, in one place that tells "another
process holds the lock" from "this file system cannot lock at all".

Only EWOULDBLOCK/EAGAIN (and EACCES, which some flock emulations over fcntl locks return) mean
that another process holds the lock. Any other error (ENOLCK or EOPNOTSUPP on a file system
without flock, such as some NFS mounts) is raised as the OSError it is, so that callers report it
as such and never as "already locked".
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

_HELD = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})


class LockHeld(Exception):
    """Another process holds the lock."""


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
    it; OSError when the file cannot be opened or this file system cannot lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
