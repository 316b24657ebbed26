"""Write files so that a crash never leaves a half-written one: temp file, fsync, rename.

The rename replaces whatever directory entry is at the target, so the target is checked first:
only a missing path or a regular file may be replaced. A device node, FIFO, socket, directory or
symbolic link there is refused (an `-o /dev/tty` or a link left by someone else must not be turned
into a regular file), and an existing file keeps its mode (and, for root, its owner).

A new file's mode follows the umask: the temp file is created by the kernel with FILE_MODE (or
EXECUTABLE_MODE) less the umask, and a directory's default ACL, as `open()` creates any file.
mkstemp's fixed 0600 made Plans and calibration files private under umask 022 and 002, and a
forced 0644 kept a group-shared project folder (umask 002) from being shared. No file the tool
writes holds a secret (secrets travel by the name of a variable, never by value), so none is
made stricter than the umask asks.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Optional

from mbridge_launch.base.errors import UserError

FILE_MODE = 0o666  # before the umask: 0644 under umask 022, 0664 under 002
EXECUTABLE_MODE = 0o777  # scripts the scheduler runs: 0755 / 0775
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))


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


def create_temp(directory: Path, name: str, mode: int = FILE_MODE) -> tuple[int, str]:
    """A new, empty temp file `.NAME.XXXXXXXX.tmp` in `directory` (the name remove_stale_temp_files
    looks for), opened for writing; created with `mode` less the umask, never following a link."""
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, _CREATE_FLAGS, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name for {name} in {directory}")


def create_new_file(path: Path, mode: int = FILE_MODE) -> bool:
    """Create `path` empty with `mode` less the umask when nothing is there (True); False when
    something already is. For files a library creates with a fixed mode of its own (SQLite: 0644
    whatever the umask), so that the library opens a file that follows the umask."""
    try:
        os.close(os.open(path, _CREATE_FLAGS, mode))
    except FileExistsError:
        return False
    return True


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None, *, exact_mode: bool = False,
                       replace_links: bool = False) -> Path:
    """`mode` is for a new file, before the umask (FILE_MODE when None, EXECUTABLE_MODE for a
    script); an existing regular file keeps its own mode. `exact_mode`: `mode` exactly, umask or
    not (the rollback restoring a tracker's recorded mode). `replace_links`: only for a name that
    is the tool's own (a claim file), where a planted link is replaced rather than refused."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = check_output_target(path, replace_links=replace_links)
    fd, tmp = create_temp(path.parent, path.name, FILE_MODE if mode is None else mode & 0o777)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _keep_owner(handle.fileno(), old)
            os.fsync(handle.fileno())
        if exact_mode and mode is not None:
            os.chmod(tmp, mode)
        elif old is not None:
            os.chmod(tmp, stat.S_IMODE(old.st_mode) & 0o777)
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


def backup_name(path: Path, number: int) -> Path:
    """GNU's numbered backup name, PATH.~N~ (what `cp --backup=numbered` and Emacs write)."""
    return path.with_name(f"{path.name}.~{number}~")


def _next_backup_number(path: Path) -> int:
    import re

    pattern = re.compile(re.escape(path.name) + r"\.~([0-9]{1,9})~")
    numbers = [int(m.group(1)) for name in os.listdir(path.parent) if (m := pattern.fullmatch(name))]
    return max(numbers, default=0) + 1


def keep_backup(path: Path, data: bytes, mode: int) -> Path:
    """`data`, the previous bytes of `path`, kept beside it as PATH.~N~ with the previous file's
    `mode`: N is one above the highest backup there, so an older backup is never overwritten. It
    is written and synced under a temp name, then linked to its name, which fails rather than
    replaces when another process took that number first (the next number is tried then)."""
    path = Path(path)
    fd, tmp = create_temp(path.parent, path.name, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode & 0o777)
            os.fsync(handle.fileno())
        number = _next_backup_number(path)
        while True:
            target = backup_name(path, number)
            try:
                os.link(tmp, target)
                break
            except FileExistsError:
                number += 1
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    fsync_dir(path.parent)
    return target


def replace_keeping_backup(path: Path, data: bytes, what: str, limit: int) -> Optional[Path]:
    """Write `data` to `path` atomically, keeping what was there as a numbered backup (the
    backup's path; None when there was no file, or it already held exactly `data`). A file there
    that cannot be read back whole (over `limit` bytes, unreadable) is refused, not replaced:
    its backup could not be made. `what` names the file's role (file.what.<what>)."""
    from mbridge_launch.base.files import probe_read, refusal

    path = Path(path)
    check_output_target(path)
    probe = probe_read(path, limit, nofollow=True)
    backup = None
    if probe.kind != "missing":
        if probe.data is None or probe.stat is None:
            raise refusal(path, probe, limit, what)
        if probe.data == data:
            return None
        backup = keep_backup(path, probe.data, stat.S_IMODE(probe.stat.st_mode))
    atomic_write_bytes(path, data)
    return backup
