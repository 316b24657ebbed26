"""Issue 32: one file-system table and one mount parser decide the ledger's journal mode (no WAL on
network file systems) and preflight's shared/node-local answer (base/filesystems.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mbridge_launch.base import filesystems as F
from mbridge_launch.preflight import storage

# A mountinfo as the kernel writes it (proc(5)): a root disk, then one mount per network file system
# (the ledger's old 11-entry list lacked beegfs? no: it lacked panfs, cephfs, afs, juicefs, vast...),
# one with an optional field before the separator, and one whose mount point has an escaped space.
MOUNTINFO = """\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:40 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw,size=1024k
41 22 0:51 / /home rw,relatime shared:20 - nfs4 srv:/home rw,vers=4.2
42 22 0:52 / /lustre rw,relatime - lustre 10.0.0.1@o2ib:/fs rw
43 22 0:53 / /gpfs rw,relatime - gpfs gpfs0 rw
44 22 0:54 / /beegfs rw,relatime - beegfs beegfs_nodev rw
45 22 0:55 / /pan rw,relatime - panfs panfs://x rw
46 22 0:56 / /ceph rw,relatime - cephfs 10.0.0.2:/ rw
47 22 0:57 / /juice rw,relatime - fuse.juicefs redis://x rw
48 22 0:58 / /vast rw,relatime master:7 - vast v:/ rw
49 22 0:59 / /mnt/with\\040space ro,relatime - nfs srv:/x ro
50 41 0:60 / /home/local rw,relatime - xfs /dev/nvme0n1 rw
malformed line without the separator
"""


@pytest.fixture
def table() -> tuple[F.Mount, ...]:
    return F.parse_mountinfo(MOUNTINFO)


def test_parser_reads_type_point_and_read_only(table):
    assert len(table) == 12  # the malformed line is skipped
    by_point = {m.mount_point: m for m in table}
    assert by_point["/mnt/with space"] == F.Mount("/mnt/with space", "nfs", True)
    assert by_point["/vast"].fstype == "vast" and not by_point["/vast"].read_only
    assert by_point["/home"].fstype == "nfs4"


@pytest.mark.parametrize("folder, mode", [
    ("/home/alice/.local/state/mbridge-launch", "delete"),  # nfs4
    ("/lustre/proj/state", "delete"),
    ("/gpfs/x", "delete"),
    ("/beegfs/x", "delete"),
    ("/pan/x", "delete"),  # panfs: missing from the ledger's old list, which used WAL on it
    ("/ceph/x", "delete"),  # cephfs: the old list had only 'ceph'
    ("/juice/x", "delete"),
    ("/vast/x", "delete"),
    ("/mnt/with space/x", "delete"),
    ("/home/local/x", "wal"),  # a local disk mounted below an NFS home: the longest mount point wins
    ("/tmp/x", "wal"),
    ("/var/lib/x", "wal"),
])
def test_journal_mode_from_the_one_table(table, folder, mode):
    assert F.journal_mode_for(Path(folder), table) == mode


def test_preflight_and_ledger_read_the_same_table(monkeypatch, table):
    """Every type the ledger refuses WAL on is one preflight calls shared, and the other way round."""
    monkeypatch.setattr(F, "mounts", lambda mountinfo=F.MOUNTINFO: table)
    for mount in table:
        if mount.mount_point in ("/", "/tmp", "/home/local"):
            continue
        place = Path(mount.mount_point) / "state"
        assert F.journal_mode_for(place) == "delete", mount
        assert storage.storage_kind(place, env={})[0] == "shared", mount
    assert F.journal_mode_for(Path("/home/local/x")) == "wal"
    assert storage.storage_kind(Path("/home/local/x"), env={}) == ("local_fs", "xfs")


def test_ledger_uses_the_table(monkeypatch, tmp_path, table):
    """The ledger opened in a folder the table calls lustre uses the rollback journal, not WAL."""
    from mbridge_launch.runs import ledger as L

    fake = (*table, F.Mount(str(tmp_path), "lustre", False))
    monkeypatch.setattr(F, "mounts", lambda mountinfo=F.MOUNTINFO: fake)
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        assert ledger.journal_mode == "delete"
        assert L.filesystem_type(tmp_path) == "lustre"
    monkeypatch.setattr(F, "mounts", lambda mountinfo=F.MOUNTINFO: (*table, F.Mount(str(tmp_path), "ext4", False)))
    with L.Ledger.open(tmp_path / "other.sqlite3") as ledger:
        assert ledger.journal_mode == "wal"


def test_unreadable_mountinfo_means_no_mounts(tmp_path):
    assert F.mounts(str(tmp_path / "missing")) == ()
    assert F.journal_mode_for(tmp_path, ()) == "wal"
