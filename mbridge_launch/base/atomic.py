"""Write files so that a crash never leaves a half-written one: temp file, fsync, rename.

The rename replaces whatever directory entry is at the target, so the target is checked first:
only a missing path or a regular file may be replaced. A device node, FIFO, socket, directory or
symbolic link there is refused (an `-o /dev/tty` or a link left by someone else must not be turned
into a regular file), and an existing file keeps its mode (and, for root, its owner).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

from mbridge_launch.base.errors import UserError


class OutputNotRegular(UserError):
    """The path names something other than a regular file (exit 2, naming it and what it is)."""


def check_output_target(path: Path, *, replace_links: bool = False) -> Optional[os.stat_result]:
    """The lstat of the regular file at `path` (None when nothing is there, or a link that
    `replace_links` allows); OutputNotRegular naming the path and what it is otherwise."""
    from mbridge_launch.base.files import kind_of_mode
    from mbridge_launch.base.i18n import t

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    kind = kind_of_mode(st.st_mode)
    if kind == "symlink" and replace_links:
        return None  # os.replace renames over the link itself; its target is never written
    if kind != "regular":
        raise OutputNotRegular("output.not_regular", path=str(path), kind=t(f"file.kind.{kind}"))
    return st


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None, *, exact_mode: bool = False,
                       replace_links: bool = False) -> Path:
    """`mode` is for a new file; an existing regular file keeps its own mode unless `exact_mode`
    (the rollback restoring a tracker's recorded mode). `replace_links`: only for a name that is
    the tool's own (a claim file), where a planted link is replaced rather than refused."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = check_output_target(path, replace_links=replace_links)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _keep_owner(handle.fileno(), old)
            os.fsync(handle.fileno())
        final_mode = mode if (old is None or exact_mode) else stat.S_IMODE(old.st_mode) & 0o777
        if final_mode is not None:
            os.chmod(tmp, final_mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)
    return path


def _keep_owner(fd: int, old: Optional[os.stat_result]) -> None:
    """Running as root, the replacement belongs to whoever owned the file it replaces."""
    if old is None or os.geteuid() != 0:
        return
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (old.st_uid, old.st_gid):
        os.fchown(fd, old.st_uid, old.st_gid)


def atomic_write_text(path: Path, text: str, mode: int | None = None, *, exact_mode: bool = False,
                      replace_links: bool = False) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode, exact_mode=exact_mode, replace_links=replace_links)


def fsync_dir(directory: Path) -> None:
    """Make a rename durable (the directory entry itself)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
