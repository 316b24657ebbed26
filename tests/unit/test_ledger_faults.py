"""Issue 32, a ledger that survives (in process): rows the ledger never writes are named, not
crashed on; a foreign or damaged file is refused before anything writes to it; a read-only ledger
opens for reading; `runs recover` rebuilds a damaged ledger from its readable rows and Slurm's jobs."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs import ledger_faults, records
from mbridge_launch.runs.recover import recover

SUPERSCRIPT_TWO = "\u00b2"  # str.isdigit() accepts it; int() fails on it


def fingerprint(path: Path) -> tuple[str, int]:
    """The file's bytes (hash) and mtime: what must not change when a file is refused."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


def make_ledger(path: Path, runs: int = 3, first_job: int = 100) -> None:
    """`runs` completed runs run0... with jobs first_job...; a test on the real cluster passes job ids
    Slurm will not reach, so that they are not taken for the cluster's own jobs."""
    with L.Ledger.open(path) as ledger:
        for i in range(runs):
            run = ledger.begin_submission(name=f"run{i}", plan_hash=f"hash{i}", plan_yaml=f"name: run{i}\n",
                                          executor="sbatch", save_dir=f"/ckpt/{i}", job_token=f"mbl-{i:016x}")
            ledger.mark_submitted(run.id, [str(first_job + i)])
            ledger.set_state(run.id, L.COMPLETED, slurm_state="COMPLETED")
        ledger.record_override(1, "preflight", "forced", {"checks": ["x"]})
    settle(path)


def settle(path: Path) -> None:
    """Everything in the main file, no -wal/-shm beside it (as after the last command closed)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = delete")
    conn.close()


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`chattr +i` for the block (root cannot write it either); the test is skipped where chattr
    does not work on the test's folder."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i does not work here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


# ---------------------------------------------------------------- rows the ledger never writes


@pytest.mark.parametrize("column, value", [
    ("job_ids", "[not json"),
    ("job_ids", '{"a": 1}'),  # JSON, but not a list
    ("log_paths", "[1, 2]"),  # a list, but not of paths
    ("created_at", "yesterday"),
    ("created_at", -5.0),  # before 1970: out of range
    ("parent_run_id", SUPERSCRIPT_TWO),
    ("may_have_job", 7),
    ("state", "exploded"),
    ("name", b"\xff\xfeA"),  # bytes that are not UTF-8, stored as TEXT by another program
])
def test_a_damaged_run_row_is_named_not_crashed_on(tmp_path, column, value):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path)
    conn = sqlite3.connect(path)
    if isinstance(value, bytes):
        conn.execute(f"UPDATE runs SET {column}=CAST(? AS TEXT) WHERE id=2", (value,))
    else:
        conn.execute(f"UPDATE runs SET {column}=? WHERE id=2", (value,))
    conn.commit()
    conn.close()
    with L.Ledger.open(path, create=False) as ledger:
        assert ledger.get_run(1).name == "run0"  # the sound rows still read
        with pytest.raises(records.DamagedRow) as err:
            ledger.list_runs()
    error = ledger_faults.fault(err.value, path)
    assert error is not None and error.key == "ledger.damaged_row"
    text = error.render("en")
    assert f"runs row 2, column {column}" in text and str(path) in text and "runs recover" in text
    assert "\ufffd" not in text and "\\xff" not in text  # the value itself is never shown


def test_a_superscript_in_a_recorded_override_is_named(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO overrides(run_id, at, kind, reason, detail) VALUES (?, 1.0, 'preflight', 'r', '{}')",
                 (SUPERSCRIPT_TWO,))
    conn.execute("UPDATE overrides SET detail='{\"checks\": ' WHERE id=1")
    conn.commit()
    conn.close()
    with L.Ledger.open(path, create=False) as ledger:
        with pytest.raises(records.DamagedRow) as err:
            ledger.overrides(1)
    assert (err.value.table, err.value.row_id, err.value.column) == ("overrides", 1, "detail")
    row = {"id": 2, "run_id": SUPERSCRIPT_TWO, "at": 1.0, "kind": "preflight", "reason": "r", "user": None,
           "detail": "{}"}
    with pytest.raises(records.DamagedRow) as err:
        records.decode_row("overrides", row)
    assert err.value.column == "run_id"


# ---------------------------------------------------------------- refused before any write


def test_a_foreign_sqlite_file_is_not_touched(tmp_path):
    path = tmp_path / "other-app.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = fingerprint(path)
    for create in (True, False):
        with pytest.raises(UserError) as err:
            L.Ledger.open(path, create=create)
        assert err.value.key == "ledger.cannot_open" and "not a run ledger" in err.value.render("en")
    assert fingerprint(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # never switched to WAL
    conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-app.sqlite3"]


def test_another_applications_id_is_foreign_even_with_our_tables(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.commit()
    conn.close()
    before = fingerprint(path)
    with pytest.raises(UserError) as err:
        L.Ledger.open(path)
    assert "application_id 1234" in err.value.render("en")
    assert fingerprint(path) == before


def test_a_new_ledger_carries_the_application_id(tmp_path):
    from mbridge_launch.runs.integrity import APPLICATION_ID

    path = tmp_path / "ledger.sqlite3"
    L.Ledger.open(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def corrupt_page_holding(path: Path, marker: bytes) -> None:
    """Garbage over the whole page that holds `marker` (a damaged disk sector), header left intact."""
    data = path.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    offset = data.index(marker)
    start = offset - offset % page_size
    assert start > 0  # never the header page
    with open(path, "r+b") as handle:
        handle.seek(start)
        handle.write(b"\xde\xad\xbe\xef" * (page_size // 4))


def test_corrupt_pages_are_refused_and_never_written(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path, runs=60)
    corrupt_page_holding(path, b"name: run30\n")
    before = fingerprint(path)
    for create in (True, False):
        with pytest.raises(UserError) as err:
            L.Ledger.open(path, create=create)
        assert err.value.key == "ledger.damaged" and "runs recover" in err.value.render("en")
    assert fingerprint(path) == before


# ---------------------------------------------------------------- read-only


def test_an_immutable_ledger_opens_read_only(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path)
    before = fingerprint(path)
    with immutable(path):
        with L.Ledger.open(path, create=False) as ledger:
            assert ledger.read_only
            assert [r.name for r in ledger.list_runs()] == ["run2", "run1", "run0"]
            with pytest.raises(UserError) as err:
                ledger.set_state(1, L.FAILED)
            assert err.value.key == "ledger.read_only" and err.value.exit_code == 1
        with pytest.raises(UserError) as err:
            L.Ledger.open(path, create=True)  # a command that records: refused at once
        assert err.value.key == "ledger.read_only"
        assert fingerprint(path) == before


def test_an_immutable_folder_opens_read_only_without_side_files(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    path = folder / "ledger.sqlite3"
    make_ledger(path)
    L.Ledger.open(path).close()  # in WAL mode now, as a ledger on a local disk is
    with immutable(folder):  # not even -shm can be made: immutable=1
        with L.Ledger.open(path, create=False) as ledger:
            assert ledger.read_only and ledger.get_run("run1").job_ids == ["101"]
    assert sorted(p.name for p in folder.iterdir()) == ["ledger.sqlite3"]


# ---------------------------------------------------------------- recover


@dataclass
class Job:
    job_id: str
    name: str
    state: str
    comment: str


class FakeSlurm:
    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self.since: list[float] = []

    def jobs_since(self, since: float) -> list[Job]:
        self.since.append(since)
        return self.jobs


def test_recover_keeps_readable_rows_and_adds_slurms_jobs(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path, runs=80)
    with L.Ledger.open(path) as ledger:
        kept = {r.job_token: r for r in ledger.list_runs(limit=None)}
    corrupt_page_holding(path, b"name: run40\n")
    damaged = fingerprint(path)
    slurm = FakeSlurm([
        Job("100", "run0", "COMPLETED", "mbl-0000000000000000"),  # a run that is still recorded
        Job("900", "lost-run", "RUNNING", "mbl-00000000000000aa"),  # a run the damage took
        Job("901", "by-hand", "RUNNING", ""),  # not the tool's: no token
    ])
    report = recover(path, slurm)
    assert report.lost > 0 and report.recovered > 0 and report.slurm_asked and report.from_slurm == 1
    assert fingerprint(report.backup) == damaged  # the old file kept beside, as it was
    with L.Ledger.open(path, create=False) as ledger:  # sound again: passes every check
        runs = {r.job_token: r for r in ledger.list_runs(limit=None)}
        assert not ledger.read_only
    survivors = [t for t in kept if t in runs]
    assert "mbl-0000000000000028" not in runs  # run40's page is gone
    assert 40 <= len(survivors) < 80  # the runs on the other pages outlive it
    for token in survivors:
        assert (runs[token].name, runs[token].job_ids) == (kept[token].name, kept[token].job_ids)
    lost_run = runs["mbl-00000000000000aa"]
    assert (lost_run.job_ids, lost_run.state, lost_run.name) == (["900"], L.RUNNING, "lost-run")
    assert not any(r.job_ids == ["901"] for r in runs.values())


def test_recover_clears_junk_values_and_drops_rows_without_a_name(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    make_ledger(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET job_ids='[not json', parent_run_id=? WHERE id=2", (SUPERSCRIPT_TWO,))
    conn.execute("UPDATE runs SET name=CAST(X'FFFE41' AS TEXT) WHERE id=3")
    conn.commit()
    conn.close()
    report = recover(path, None)
    assert (report.cleared, report.slurm_asked) == (2, False)
    with L.Ledger.open(path, create=False) as ledger:
        runs = ledger.list_runs(limit=None)
        assert [(r.id, r.job_ids, r.parent_run_id) for r in runs] == [(2, [], None), (1, ["100"], None)]
        assert [o["kind"] for o in ledger.overrides(1)] == ["preflight"]
        # the events of the run that could not be kept stay, without their run
        orphans = ledger.conn.execute("SELECT count(*) FROM events WHERE run_id IS NULL").fetchone()[0]
    assert orphans == 3 and report.lost == 1


def test_recover_through_a_link_rebuilds_the_file_it_points_to(tmp_path):
    """A ledger given by a link (a shared one): the file it points to is rebuilt beside itself and
    the link stays a link (the rebuild replaced the link with a new file, the real ledger untouched)."""
    shared = tmp_path / "shared" / "ledger.sqlite3"
    shared.parent.mkdir()
    make_ledger(shared)
    conn = sqlite3.connect(shared)
    conn.execute("UPDATE runs SET job_ids='[not json' WHERE id=2")
    conn.commit()
    conn.close()
    link = tmp_path / "mine.sqlite3"
    link.symlink_to(shared)
    before = fingerprint(shared)
    report = recover(link, None)
    assert link.is_symlink() and os.readlink(link) == str(shared)
    assert report.backup.parent == shared.parent and fingerprint(report.backup) == before
    assert report.cleared == 1 and not list(tmp_path.glob("mine.sqlite3.*"))
    with L.Ledger.open(shared, create=False) as ledger:
        assert [r.job_ids for r in ledger.list_runs(limit=None) if r.id == 2] == [[]]


def test_recover_of_a_file_that_is_no_database_keeps_it_and_starts_afresh(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"\x00garbage, not SQLite\n" * 300)
    before = fingerprint(path)
    report = recover(path, FakeSlurm([Job("7", "orphan", "PENDING", "mbl-00000000000000bb")]))
    assert report.recovered == 0 and report.from_slurm == 1 and "runs" in report.tables_lost
    assert fingerprint(report.backup) == before
    with L.Ledger.open(path, create=False) as ledger:
        assert [(r.name, r.job_ids, r.state) for r in ledger.list_runs()] == [("orphan", ["7"], L.PENDING)]
