"""Where a path lives: its mount (from /proc/self/mountinfo), whether that storage is node-local
or shared across nodes, whether it can be written, and its free space. Read-only: nothing here
creates or touches a file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Storage every node sees. Unknown types (ext4, xfs, overlay, ...) are usually a node's own disk.
SHARED_FSTYPES = {
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "ceph", "cephfs", "glusterfs",
    "fuse.glusterfs", "wekafs", "fuse.weka", "panfs", "pvfs2", "orangefs", "afs", "fuse.juicefs",
    "fuse.cephfs", "fuse.gcsfuse", "fuse.s3fs", "fuse.mountpoint-s3", "fuse.sshfs", "vast", "fuse.vast",
}
NODE_LOCAL_FSTYPES = {"tmpfs", "ramfs", "devtmpfs"}
PSEUDO_FSTYPES = {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "securityfs", "tracefs", "configfs", "pstore", "bpf", "devpts", "mqueue", "hugetlbfs", "fusectl", "binfmt_misc"}
# Conventional node-local locations on GPU clusters (DGX /raid, local NVMe scratch).
NODE_LOCAL_PREFIXES = (
    "/tmp", "/dev/shm", "/var/tmp", "/run", "/raid", "/local", "/scratch/local", "/localscratch",
    "/local_scratch", "/lscratch", "/mnt/local", "/mnt/localdisk", "/mnt/nvme", "/nvme", "/ssd",
)
# A site can declare prefixes shared (colon-separated), e.g. a cluster whose /tmp is NFS.
SHARED_PREFIXES_ENV = "MBRIDGE_LAUNCH_SHARED_PREFIXES"


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    read_only: bool


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    out, i = [], 0
    while i < len(text):
        code = text[i + 1:i + 4]
        if text[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def mounts(mountinfo: str = "/proc/self/mountinfo") -> tuple[Mount, ...]:
    found: list[Mount] = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, sep, right = line.partition(" - ")
                if not sep:
                    continue
                fields, rest = left.split(), right.split()
                if len(fields) < 6 or not rest:
                    continue
                options = set(fields[5].split(","))
                found.append(Mount(_unescape(fields[4]), rest[0], "ro" in options))
    except OSError:
        pass
    return tuple(found)


def existing_ancestor(path: Path) -> Path:
    """The path itself or its nearest ancestor that exists (a file or a directory)."""
    current = Path(os.path.abspath(path))
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def mount_of(path: Path) -> Mount | None:
    real = os.path.realpath(existing_ancestor(path))
    best: Mount | None = None
    for mount in mounts():  # later entries shadow earlier ones on the same mount point
        point = mount.mount_point.rstrip("/") or "/"
        if real == point or real.startswith(point + "/") or point == "/":
            if best is None or len(point) >= len(best.mount_point.rstrip("/") or "/"):
                best = mount
    return best


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def storage_kind(path: Path, env: dict[str, str] | None = None) -> tuple[str, str]:
    """("shared" | "node_local" | "local_fs" | "unknown", the reason: fstype or prefix)."""
    env = env if env is not None else dict(os.environ)
    absolute = os.path.abspath(path)
    real = os.path.realpath(existing_ancestor(Path(absolute)))
    declared = [p for p in env.get(SHARED_PREFIXES_ENV, "").split(":") if p]
    for prefix in declared:
        if _under(absolute, prefix) or _under(real, prefix):
            return "shared", f"{SHARED_PREFIXES_ENV} {prefix}"
    mount = mount_of(Path(absolute))
    fstype = mount.fstype if mount else "?"
    if fstype in SHARED_FSTYPES:
        return "shared", fstype
    for prefix in NODE_LOCAL_PREFIXES:
        if _under(absolute, prefix) or _under(real, prefix):
            return "node_local", f"{prefix} ({fstype})"
    if fstype in NODE_LOCAL_FSTYPES:
        return "node_local", fstype
    if mount is None:
        return "unknown", fstype
    return "local_fs", fstype


def detail_text(key: str, **params: object) -> str:
    """A phrase (preflight.detail.KEY) used inside other messages, in the user's language."""
    from mbridge_launch.base.i18n import t

    return t(f"preflight.detail.{key}", **params)


def writable(path: Path) -> tuple[bool, str]:
    """Could this process create `path` (or files in it)? os.access alone is not enough for root,
    who passes every mode check: a read-only or pseudo file system, or a file where a directory
    must be, stops root too."""
    anchor = existing_ancestor(path)
    if not anchor.is_dir():
        return False, detail_text("not_a_directory", path=anchor)
    mount = mount_of(anchor)
    if mount is not None and mount.fstype in PSEUDO_FSTYPES:
        return False, detail_text("pseudo_fs", path=anchor, fstype=mount.fstype)
    try:
        flags = os.statvfs(anchor).f_flag
    except OSError as exc:
        return False, exc.strerror or str(exc)
    if flags & os.ST_RDONLY:
        return False, detail_text("read_only_fs", path=anchor)
    if not os.access(anchor, os.W_OK | os.X_OK):
        return False, detail_text("path_permission_denied", path=anchor)
    return True, str(anchor)


def free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(existing_ancestor(path))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize
