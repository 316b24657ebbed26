"""Issue 32, a ledger that survives, through the command line: for each ledger fault (read-only,
immutable, full disk, corrupt pages, foreign schema, junk rows) every command answers with one line
naming the file and what to do, never a traceback or "internal error", never the raw bytes of a
broken row, and nothing is written into the bad file (its bytes and mtime are compared); a read-only
ledger is read; `runs recover` restores a usable ledger."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.cli_helpers import run_cli
from tests.unit.test_ledger_faults import (
    SUPERSCRIPT_TWO,
    corrupt_page_holding,
    fingerprint,
    immutable,
    make_ledger,
)

# What a user runs against a ledger: queries, then commands that record something.
QUERIES = [("runs",), ("runs", "--active"), ("status", "run1"), ("logs", "run1"), ("diagnose", "run1"),
           ("checkpoints", "run1")]
WRITERS = [("cancel", "run1", "--yes"), ("runs", "forget", "run1", "--reason", "gone", "--yes")]
NO_SLURM = {"PATH": "/usr/bin:/bin"}  # whatever Slurm a fault test would ask must not be asked


def one_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def cli(*args: object, ledger: Path, **kwargs) -> subprocess.CompletedProcess:
    return run_cli(*args, "--ledger", ledger, env=NO_SLURM, **kwargs)


# ---------------------------------------------------------------- read-only and immutable


def test_an_immutable_ledger_is_read_and_refuses_writes_in_one_line(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger)
    before = fingerprint(ledger)
    with immutable(ledger):
        runs = cli("runs", ledger=ledger)
        assert runs.returncode == 0 and runs.stderr == "", runs.stderr
        assert [line.split()[1] for line in runs.stdout.splitlines()[1:]] == ["run2", "run1", "run0"]
        status = cli("status", "run1", "--format", "json", ledger=ledger)
        assert status.returncode == 0 and status.json()["job_ids"] == ["101"], status.stderr
        for args in WRITERS:
            one_line(cli(*args, ledger=ledger), 1, str(ledger), "read-only", "--ledger PATH")
        assert fingerprint(ledger) == before


def test_a_read_only_ledger_skips_the_refresh_with_one_note(tmp_path):
    """An active run would be refreshed from Slurm (a write): on a read-only ledger the state is
    shown as last recorded, with one note, and Slurm is not even asked."""
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger)
    conn = sqlite3.connect(ledger)
    conn.execute("UPDATE runs SET state='running' WHERE id=2")
    conn.commit()
    conn.close()
    before = fingerprint(ledger)
    with immutable(ledger):
        proc = cli("runs", ledger=ledger)
    assert proc.returncode == 0, proc.stderr
    note = one_line(proc, 0, str(ledger), "read-only", "last recorded")
    assert note.startswith("warning:")
    assert "run1  running" in proc.stdout
    assert fingerprint(ledger) == before


def test_a_read_only_mount_is_read(tmp_path):
    """A ledger on a read-only bind mount (root passes every mode check; only the mount stops it):
    no -shm can be made there, so it is read as immutable."""
    source, view = tmp_path / "source", tmp_path / "view"
    source.mkdir()
    view.mkdir()
    make_ledger(source / "ledger.sqlite3")
    before = fingerprint(source / "ledger.sqlite3")
    if subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True).returncode != 0:
        pytest.skip("bind mounts are not allowed here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True).returncode != 0:
            pytest.skip("read-only remounts are not allowed here")
        ledger = view / "ledger.sqlite3"
        runs = cli("runs", ledger=ledger)
        assert runs.returncode == 0 and "run1" in runs.stdout, runs.stderr
        one_line(cli("runs", "forget", "run1", "--reason", "x", "--yes", ledger=ledger), 1, str(ledger), "read-only")
    finally:
        subprocess.run(["umount", str(view)], check=True)
    assert fingerprint(source / "ledger.sqlite3") == before
    assert sorted(p.name for p in source.iterdir()) == ["ledger.sqlite3"]


# ---------------------------------------------------------------- full disk


@contextmanager
def tiny_disk(folder: Path, size_kb: int = 512) -> Iterator[Path]:
    """A tmpfs of a few hundred KB (root may mount one); skipped where mounting is not allowed."""
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path) -> None:
    """Every free byte of the disk taken by a filler file."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:
        pass  # ENOSPC: full
    finally:
        os.close(fd)


def test_a_full_disk_is_one_line_and_nothing_recorded(tmp_path):
    with tiny_disk(tmp_path / "disk") as disk:
        ledger = disk / "ledger.sqlite3"
        make_ledger(ledger)
        fill(disk)
        before = fingerprint(ledger)
        for args in WRITERS:
            one_line(cli(*args, ledger=ledger), 1, str(ledger), "full", "free space")
        for args in QUERIES[:3]:
            proc = cli(*args, ledger=ledger)
            assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
            if proc.returncode:
                one_line(proc, 1, str(ledger), "full")
        assert fingerprint(ledger) == before


# ---------------------------------------------------------------- damaged files


def test_corrupt_pages_are_one_line_for_every_command_and_never_written(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger, runs=60)
    corrupt_page_holding(ledger, b"name: run30\n")
    before = fingerprint(ledger)
    for args in [*QUERIES, *WRITERS]:
        line = one_line(cli(*args, ledger=ledger), 2, str(ledger), "damaged", "runs recover")
        assert "\\xde" not in line and "\ufffd" not in line
    assert fingerprint(ledger) == before


def test_a_foreign_database_is_one_line_and_untouched(tmp_path):
    ledger = tmp_path / "app.db"
    conn = sqlite3.connect(ledger)
    conn.execute("CREATE TABLE runs (something_else TEXT)")  # another program's, with a 'runs' table
    conn.execute("INSERT INTO runs VALUES ('theirs')")
    conn.commit()
    conn.close()
    before = fingerprint(ledger)
    for args in [*QUERIES, *WRITERS]:
        one_line(cli(*args, ledger=ledger), 2, str(ledger), "not a run ledger", "--ledger PATH")
    assert fingerprint(ledger) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, -shm or journal made


@pytest.mark.parametrize("sql, params, needle", [
    ("UPDATE runs SET job_ids='[broken' WHERE id=2", (), "runs row 2, column job_ids"),
    ("UPDATE runs SET created_at='noon' WHERE id=2", (), "runs row 2, column created_at"),
    ("UPDATE runs SET name=CAST(X'1B5B33316DFF' AS TEXT) WHERE id=2", (), "runs row 2, column name"),
    ("UPDATE runs SET parent_run_id=? WHERE id=2", (SUPERSCRIPT_TWO,), "runs row 2, column parent_run_id"),
])
def test_junk_rows_are_one_line_without_their_bytes(tmp_path, sql, params, needle):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger)
    conn = sqlite3.connect(ledger)
    conn.execute(sql, params)
    conn.commit()
    conn.close()
    for args in (("runs",), ("runs", "--format", "json"), ("status", "run0"), ("runs", "forget", "run0", "--reason",
                                                                                  "x", "--yes")):
        proc = cli(*args, ledger=ledger)
        if "status" in args or "forget" in args:  # run0's own row is sound: these only read it
            assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
            continue
        line = one_line(proc, 2, str(ledger), needle, "runs recover")
        assert "\x1b" not in line and "noon" not in line and "[broken" not in line


def test_a_superscript_in_a_recorded_override_is_one_line(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger)
    conn = sqlite3.connect(ledger)
    conn.execute("UPDATE overrides SET run_id=1, detail=? WHERE id=1", (f'{{"checks": [{SUPERSCRIPT_TWO}]}}',))
    conn.commit()
    conn.close()
    one_line(cli("status", "run0", "--format", "json", ledger=ledger), 2, "overrides row 1, column detail")


# ---------------------------------------------------------------- recover


def test_runs_recover_restores_a_usable_ledger(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger, runs=60)
    corrupt_page_holding(ledger, b"name: run30\n")
    damaged = fingerprint(ledger)
    refused = cli("runs", "recover", "--reason", "disk fault", ledger=ledger)  # no terminal, no --yes
    one_line(refused, 1)
    assert fingerprint(ledger) == damaged
    proc = cli("runs", "recover", "--reason", "disk fault", "--yes", "--no-slurm", ledger=ledger)
    assert proc.returncode == 0, proc.stderr
    assert "rebuilt the run ledger" in proc.stdout and "lost" in proc.stdout
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("ledger.sqlite3.damaged-")
               and not p.name.endswith(("-wal", "-shm"))]
    assert len(backups) == 1 and fingerprint(backups[0]) == damaged
    runs = cli("runs", "--all", "--limit", "0", "--format", "json", ledger=ledger)
    assert runs.returncode == 0, runs.stderr
    names = {r["name"] for r in runs.json()}
    assert {"run0", "run59"} <= names and "run30" not in names
    status = cli("status", "run59", "--format", "json", ledger=ledger)
    assert status.returncode == 0 and status.json()["job_ids"] == ["159"], status.stderr
    # the recovery itself is recorded, with who confirmed it and why
    conn = sqlite3.connect(ledger)
    action, method = conn.execute("SELECT action, method FROM confirmations WHERE action='recover'").fetchone()
    conn.close()
    assert (action, method) == ("recover", "flag-yes")


def test_runs_recover_in_chinese_and_without_a_ledger(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger)
    proc = run_cli("runs", "recover", "--reason", "x", "--yes", "--no-slurm", "--ledger", ledger, lang="zh", env=NO_SLURM)
    assert proc.returncode == 0 and "已重建运行台账" in proc.stdout, proc.stderr
    one_line(cli("runs", "recover", "--reason", "x", "--yes", ledger=tmp_path / "missing.sqlite3"), 2,
             "missing.sqlite3", "nothing to recover")
    assert not os.path.exists(tmp_path / "missing.sqlite3")


def test_recover_never_replaces_a_file_that_is_not_a_ledger(tmp_path, mbl):
    """`runs recover` rebuilds a damaged ledger; an SQLite database of another program, or a text
    file given as --ledger by mistake, is refused in one line and left exactly as it was (issue 32:
    a foreign file is not touched at all)."""
    import sqlite3

    foreign = tmp_path / "other-app.db"
    conn = sqlite3.connect(str(foreign))
    conn.execute("CREATE TABLE t(x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    text = tmp_path / "plan.yaml"
    text.write_text("name: not-a-ledger\n")
    for path in (foreign, text):
        before = (path.read_bytes(), path.stat().st_mtime_ns)
        result = mbl.run("runs", "recover", "--ledger", str(path), "--reason", "test", "--yes", "--no-slurm")
        assert result.rc == 2 and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "not a run ledger" in result.stderr
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["other-app.db", "plan.yaml"]  # no backup, no new file
