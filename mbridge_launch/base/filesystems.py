"""The one file-system table and the one mount parser.

Both the run ledger (which journal mode: WAL needs shared memory that network file systems do not
give) and preflight (is this path seen by every node?) ask what holds a path. They used to keep
their own lists (11 and 26 types) and their own parsers (/proc/mounts and /proc/self/mountinfo),
so the ledger used WAL on file systems preflight knew to be shared. Here is the single answer;
it sits in `base` so that every layer may import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = "/proc/self/mountinfo"

# Storage every node sees, over a network: shared for preflight, no WAL for the ledger.
NETWORK_FSTYPES = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "ceph", "cephfs", "glusterfs",
    "fuse.glusterfs", "wekafs", "fuse.weka", "panfs", "pvfs2", "orangefs", "afs", "fuse.juicefs",
    "fuse.cephfs", "fuse.gcsfuse", "fuse.s3fs", "fuse.mountpoint-s3", "fuse.sshfs", "vast", "fuse.vast",
})
NODE_LOCAL_FSTYPES = frozenset({"tmpfs", "ramfs", "devtmpfs"})
PSEUDO_FSTYPES = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "securityfs", "tracefs", "configfs", "pstore", "bpf",
    "devpts", "mqueue", "hugetlbfs", "fusectl", "binfmt_misc",
})


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    read_only: bool


def is_network(fstype: str) -> bool:
    """Whether a mount type is a network file system (the table above; mountinfo names types in
    lower case)."""
    return fstype.lower() in NETWORK_FSTYPES


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    out, i = [], 0
    while i < len(text):
        code = text[i + 1:i + 4]
        if text[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    """The mounts of a mountinfo text (proc(5)): field 5 is the mount point, field 6 its options,
    and after the ' - ' separator the type. Lines that do not have that shape are skipped."""
    found: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rest = left.split(), right.split()
        if len(fields) < 6 or not rest:
            continue
        options = set(fields[5].split(","))
        found.append(Mount(_unescape(fields[4]), rest[0], "ro" in options))
    return tuple(found)


def mounts(mountinfo: str = MOUNTINFO) -> tuple[Mount, ...]:
    """This process's mounts, in the kernel's order (later ones shadow earlier ones); none when the
    file cannot be read (not Linux)."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            return parse_mountinfo(handle.read())
    except OSError:
        return ()


def existing_ancestor(path: Path) -> Path:
    """The path itself or its nearest ancestor that exists (a file or a directory)."""
    current = Path(os.path.abspath(path))
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def mount_of(path: Path, table: tuple[Mount, ...] | None = None) -> Mount | None:
    """The mount holding `path` (its links resolved; the part not created yet kept as written, so
    it lands on the mount of its nearest existing ancestor): the longest mount point above it, the
    later of two on the same point."""
    real = os.path.realpath(os.path.abspath(path))
    best: Mount | None = None
    for mount in mounts() if table is None else table:
        point = mount.mount_point.rstrip("/") or "/"
        if real == point or real.startswith(point + "/") or point == "/":
            if best is None or len(point) >= len(best.mount_point.rstrip("/") or "/"):
                best = mount
    return best


def journal_mode_for(path: Path, table: tuple[Mount, ...] | None = None) -> str:
    """SQLite's journal mode for a database at `path`: 'delete' on a network file system (WAL's
    shared-memory index is not shared between hosts there, so two nodes could corrupt it), 'wal'
    elsewhere. A path whose mount cannot be found gets 'wal' (a local disk is far more likely)."""
    mount = mount_of(path, table)
    return "delete" if mount is not None and is_network(mount.fstype) else "wal"
