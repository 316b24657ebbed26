"""Bounded reads of files other people can write (Plans, trackers, configs, journals, logs).

Such a path may name a FIFO with no writer (a plain open blocks forever), a device such as
/dev/zero (a plain read never ends), a directory, or a symlink to /proc/self/environ. Every read
here opens non-blocking, checks with fstat on the open descriptor (no race with a rename) that it
is a regular file, and reads at most `limit` bytes: a file that says it is small but is not
(/proc files report size 0) is caught by reading one byte past the limit.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

from mbridge_launch.base.errors import UserError

_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "device"),
          (stat.S_ISBLK, "device"), (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symlink"))


def kind_of_mode(mode: int) -> str:
    """'regular', 'directory', 'fifo', 'device', 'socket', 'symlink' or 'other'."""
    if stat.S_ISREG(mode):
        return "regular"
    return next((name for test, name in _KINDS if test(mode)), "other")


@dataclass
class Probe:
    """What a bounded read found. `data` is set only for a regular file within the limit."""

    kind: str  # regular, missing, directory, fifo, device, socket, symlink, other, unreadable
    data: Optional[bytes] = None
    size: int = 0  # bytes read (regular files), or what fstat says
    too_large: bool = False
    reason: str = ""  # the OS's words when unreadable
    stat: Optional[os.stat_result] = None  # fstat of the open descriptor (regular files)


def _open_flags(nofollow: bool) -> int:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    return flags | (getattr(os, "O_NOFOLLOW", 0) if nofollow else 0)


def _open_regular(path: str | Path, nofollow: bool) -> tuple[Optional[int], Probe]:
    """An fd on a regular file (non-blocking open, then fstat), or None and what the path is."""
    try:
        fd = os.open(path, _open_flags(nofollow))
    except FileNotFoundError:
        return None, Probe("missing")
    except OSError as exc:
        if nofollow and os.path.islink(path):  # ELOOP: the path is a symlink
            return None, Probe("symlink")
        return None, Probe("unreadable", reason=exc.strerror or str(exc))
    st = os.fstat(fd)
    kind = kind_of_mode(st.st_mode)
    if kind != "regular":
        os.close(fd)
        return None, Probe(kind, size=st.st_size)
    return fd, Probe("regular", size=st.st_size, stat=st)


def probe_read(path: str | Path, limit: int, *, nofollow: bool = False) -> Probe:
    """Read at most `limit` bytes of a regular file, never blocking; never raises for the path."""
    fd, probe = _open_regular(path, nofollow)
    if fd is None:
        return probe
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        return Probe("unreadable", reason=exc.strerror or str(exc))
    if len(data) > limit:
        return Probe("regular", size=max(probe.size, len(data)), too_large=True, stat=probe.stat)
    return Probe("regular", data=data, size=len(data), stat=probe.stat)


def refusal(path: str | Path, probe: Probe, limit: int, what: str) -> UserError:
    """One line naming the path, what it is and the limit."""
    if probe.kind == "missing":
        return UserError("file.not_found", path=str(path))
    if probe.kind == "unreadable":
        return UserError("file.unreadable", path=str(path), reason=probe.reason)
    from mbridge_launch.base.i18n import t

    if probe.too_large:
        return UserError("file.too_large", path=str(path), what=t(f"file.what.{what}"), limit=limit)
    return UserError("file.not_regular", path=str(path), what=t(f"file.what.{what}"),
                     kind=t(f"file.kind.{probe.kind}"))


def read_bounded(path: str | Path, limit: int, what: str, *, nofollow: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; a UserError (one line) otherwise.
    `what` names the file's role in the message: file.what.<what> ("plan", "hf_config", "log")."""
    probe = probe_read(path, limit, nofollow=nofollow)
    if probe.data is None:
        raise refusal(path, probe, limit, what)
    return probe.data


def read_bounded_text(path: str | Path, limit: int, what: str) -> str:
    """read_bounded decoded as UTF-8; a byte that is not UTF-8 is one line naming its offset."""
    data = read_bounded(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from mbridge_launch.base.i18n import t

        reason = t("file.not_utf8", byte=f"{data[exc.start]:02x}", offset=exc.start)
        raise UserError("file.unreadable", path=str(path), reason=reason) from None


def open_regular_text(path: str | Path, what: str, newline: Optional[str] = None,
                      errors: str = "replace") -> IO[str]:
    """A text handle on a regular file, for files read as a stream (logs, JSONL data): opened
    non-blocking so that a FIFO cannot hang, refused unless regular. The caller bounds how much it
    keeps (readline(limit), a record count)."""
    fd, probe = _open_regular(path, nofollow=False)
    if fd is None:
        raise refusal(path, probe, 0, what)
    os.set_blocking(fd, True)  # a regular file never blocks; plain reads from here on
    return os.fdopen(fd, encoding="utf-8", errors=errors, newline=newline)


def open_regular_binary(path: str | Path, what: str) -> IO[bytes]:
    """A binary handle on a regular file read in place by a library (a wheel's zip directory):
    the same non-blocking, regular-only open as open_regular_text."""
    fd, probe = _open_regular(path, nofollow=False)
    if fd is None:
        raise refusal(path, probe, 0, what)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path`, all symlinks resolved, lies in `root` (resolved too)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)
