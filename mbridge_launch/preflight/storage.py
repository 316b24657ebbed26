"""Where a path lives: its mount (base/filesystems.py), whether that storage is node-local
or shared across nodes, whether it can be written, and its free space. Read-only: nothing here
creates or touches a file.
"""

from __future__ import annotations

import os
from pathlib import Path

# The file-system table and the mount parser are the ledger's too (base/filesystems.py): one answer
# to "is this storage shared?" for preflight and for the ledger's journal mode.
from mbridge_launch.base.filesystems import NODE_LOCAL_FSTYPES, PSEUDO_FSTYPES, is_network
from mbridge_launch.base.filesystems import Mount as Mount
from mbridge_launch.base.filesystems import existing_ancestor as existing_ancestor
from mbridge_launch.base.filesystems import mount_of as mount_of
from mbridge_launch.base.filesystems import mounts as mounts

# Conventional node-local locations on GPU clusters (DGX /raid, local NVMe scratch).
NODE_LOCAL_PREFIXES = (
    "/tmp", "/dev/shm", "/var/tmp", "/run", "/raid", "/local", "/scratch/local", "/localscratch",
    "/local_scratch", "/lscratch", "/mnt/local", "/mnt/localdisk", "/mnt/nvme", "/nvme", "/ssd",
)
# A site can declare prefixes shared (colon-separated), e.g. a cluster whose /tmp is NFS.
SHARED_PREFIXES_ENV = "MBRIDGE_LAUNCH_SHARED_PREFIXES"


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
    if is_network(fstype):  # every node sees it; unknown types (ext4, xfs, overlay) are a node's own disk
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
