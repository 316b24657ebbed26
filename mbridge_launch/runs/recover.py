"""`runs recover`: a usable ledger rebuilt from a damaged one.

The damaged file is only read (a read-only connection: nothing is written into it) and kept: it
is renamed beside the new one, `<name>.damaged-<time>`, together with its -wal/-shm/-journal files
(a stale WAL left under the ledger's name would be replayed into the new file). What is rebuilt:

- every row that can still be read, table by table: first in one pass, and where a damaged page
  stops that pass, row by row by id (each table's ids are AUTOINCREMENT: 1 up to the highest id
  sqlite_sequence or the table knows), skipping the rows whose pages cannot be read;
- values the ledger never writes (records.salvage_row) cleared where the column may be empty, the
  row dropped where it must hold a value (a run without a name or a token is no run);
- references to rows that were lost set to NULL (the new file keeps its foreign keys);
- the jobs Slurm knows by token (each executor puts the run's token in the job's comment): a
  recovered run without a job gets it back, and a queued or running job whose run was lost gets a
  run of its own (state from Slurm, no Plan), so that no live job is missing from the ledger and
  the guards see it. A finished job whose run was lost is left out: a token does not say which
  ledger it came from, and a user with several (--ledger) would get every other ledger's history.

The new ledger is written to a temporary file beside the old one and put in its place with one
rename (os.replace), after the old file was linked (or copied) to its backup name: at every moment
the ledger's path holds either the old file or the complete new one.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from mbridge_launch.base.errors import UserError
from mbridge_launch.runs import integrity, ledger_faults, schema
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.records import COLUMNS, salvage_row
from mbridge_launch.slurm.commands import SlurmUnavailable

TABLES = ("runs", "events", "confirmations", "overrides", "rollbacks")  # parents before children
# How far back Slurm is asked when no recovered run says when the ledger began.
DEFAULT_LOOKBACK_S = 60 * 24 * 3600.0
TOKEN_PREFIX = "mbl-"
_SIDE_FILES = ("-wal", "-shm", "-journal")


class SlurmJobs(Protocol):
    """What recovery asks Slurm (runs.slurm_jobs.SacctQuery; tests pass a fake)."""

    def jobs_since(self, since: float) -> list[Any]: ...


@dataclass
class Recovery:
    path: Path
    backup: Path
    recovered: int = 0  # rows copied into the new ledger
    lost: int = 0  # rows that could not be read, or had no usable value where one is needed
    cleared: int = 0  # damaged values set to empty in rows that were kept
    from_slurm: int = 0  # runs added, or given their job, from Slurm's answer
    slurm_asked: bool = False
    tables_lost: list[str] = field(default_factory=list)


def recover(path: Path, query: Optional[SlurmJobs], *, now: Optional[float] = None) -> Recovery:
    """Rebuild the ledger at `path` (see the module docstring); `query` None: Slurm is not asked."""
    # a --ledger that is a link (a shared ledger, say) names the file it points to, as SQLite
    # opens it: that file is rebuilt in its folder and the link kept (replacing the link itself
    # left the real ledger damaged and the link turned into a private copy)
    path = Path(os.path.realpath(path))
    _refuse_if_not_a_ledger(path)
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    report = Recovery(path=path, backup=path.with_name(f"{path.name}.damaged-{stamp}"))
    work = path.with_name(f".{path.name}.recovering-{os.getpid()}")
    _remove_with_side_files(work)
    try:
        with L.Ledger.open(work) as fresh:
            fresh.conn.execute("PRAGMA journal_mode = delete")  # one file to move, no -wal beside it
            rows = _readable_rows(path, report)
            _copy(fresh.conn, rows, report)
            if query is not None:
                _add_slurm_jobs(fresh, query, rows.get("runs", []), report, now)
            fresh.conn.execute("PRAGMA foreign_key_check")
        _fsync(work)
        _keep_old(path, report.backup)
        os.replace(work, path)
        _fsync_dir(path.parent)
    finally:
        _remove_with_side_files(work)
    return report


def _refuse_if_not_a_ledger(path: Path) -> None:
    """A file that is plainly something else is never moved aside and replaced: an SQLite database
    of another program (another application_id, or tables but none of the ledger's), a ledger of a
    newer mbridge-launch, or a text file (an SQLite file, damaged or not, holds NUL bytes; a Plan or
    a log given as --ledger by mistake does not). Only a file that may be a damaged ledger is rebuilt."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
    except OSError:
        return  # the rebuild says what is wrong with the path
    if head and b"\0" not in head:
        raise ledger_faults.foreign(path, "a text file")
    try:
        conn = integrity.connect_read_only(path, busy_ms=2_000)
    except sqlite3.DatabaseError:
        return  # not even readable as SQLite: a damaged ledger, maybe
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} - {"sqlite_sequence"}
    except sqlite3.DatabaseError:
        return
    finally:
        conn.close()
    if app_id not in (0, integrity.APPLICATION_ID):
        raise ledger_faults.foreign(path, f"application_id {app_id}")
    if tables and not tables & set(integrity.LEDGER_TABLES):
        raise ledger_faults.foreign(path, f"tables {', '.join(sorted(tables)[:5])}")
    if version > schema.SCHEMA_VERSION:
        raise UserError("ledger.schema_too_new", path=str(path), found=version, supported=schema.SCHEMA_VERSION)


# ------------------------------------------------------------------ reading what can be read
def _readable_rows(path: Path, report: Recovery) -> dict[str, list[dict[str, Any]]]:
    try:
        conn = integrity.connect_read_only(path, busy_ms=2_000)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError:
        report.tables_lost = list(TABLES)  # not even the table list can be read
        return {}
    try:
        return {table: _table_rows(conn, table, report) for table in TABLES}
    finally:
        conn.close()


def _table_rows(conn: sqlite3.Connection, table: str, report: Recovery) -> list[dict[str, Any]]:
    """The readable rows of `table`: one pass while the pages read, then row by row by id."""
    rows: dict[int, dict[str, Any]] = {}
    try:
        for row in conn.execute(f"SELECT rowid AS _rowid_, * FROM {table} ORDER BY rowid"):
            rows[row["_rowid_"]] = dict(row)
        return _without_rowid(rows)
    except sqlite3.DatabaseError:
        pass  # a damaged page (or the whole table): go id by id
    top = max([*rows, *_known_top(conn, table)], default=0)
    unreadable = 0
    for rowid in range(1, top + 1):
        if rowid in rows:
            continue
        try:
            row = conn.execute(f"SELECT rowid AS _rowid_, * FROM {table} WHERE rowid=?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            unreadable += 1
            continue
        if row is not None:
            rows[rowid] = dict(row)
    if top and not rows and unreadable == top:
        report.tables_lost.append(table)
    report.lost += unreadable
    return _without_rowid(rows)


def _known_top(conn: sqlite3.Connection, table: str) -> list[int]:
    """The highest ids the file still knows for `table` (either source may be on a bad page)."""
    tops = []
    for sql, args in (("SELECT seq FROM sqlite_sequence WHERE name=?", (table,)), (f"SELECT max(rowid) FROM {table}", ())):
        try:
            value = conn.execute(sql, args).fetchone()
        except sqlite3.DatabaseError:
            continue
        if value is not None and type(value[0]) is int:
            tops.append(min(value[0], 10_000_000))  # a damaged counter must not make the scan endless
    return tops


def _without_rowid(rows: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for rowid in sorted(rows):
        row = rows[rowid]
        row.pop("_rowid_", None)
        row.setdefault("id", rowid)
        out.append(row)
    return out


# ------------------------------------------------------------------ writing the new ledger
def _copy(conn: sqlite3.Connection, rows: dict[str, list[dict[str, Any]]], report: Recovery) -> None:
    kept: dict[str, set[int]] = {}
    with _transaction(conn):
        for table in TABLES:
            kept[table] = set()
            known = COLUMNS[table]
            for raw in rows.get(table, []):
                row, cleared = salvage_row(table, {k: v for k, v in raw.items() if k in known})
                if row is None:
                    report.lost += 1
                    continue
                _drop_lost_references(table, row, kept)
                columns = list(row)
                conn.execute(f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                             [row[c] for c in columns])
                kept[table].add(row["id"])
                report.recovered += 1
                report.cleared += len(cleared)


def _drop_lost_references(table: str, row: dict[str, Any], kept: dict[str, set[int]]) -> None:
    """A reference to a run that was lost (or comes later: never, ids only grow) becomes NULL."""
    if table == "runs":
        if row.get("parent_run_id") is not None and row["parent_run_id"] not in kept["runs"]:
            row["parent_run_id"] = None
    elif row.get("run_id") is not None and row["run_id"] not in kept["runs"]:
        row["run_id"] = None


def _add_slurm_jobs(ledger: L.Ledger, query: SlurmJobs, runs: list[dict[str, Any]], report: Recovery,
                    now: float) -> None:
    """The jobs Slurm knows by token: a recovered run without its job gets it, a live job whose
    run was lost gets a run. Slurm that cannot be asked adds nothing (report.slurm_asked False)."""
    from mbridge_launch.runs.reconcile import run_state_for

    times = [r["created_at"] for r in runs if type(r.get("created_at")) in (int, float)]
    since = min(times) - 3600 if times else now - DEFAULT_LOOKBACK_S
    try:
        jobs = query.jobs_since(since)
    except SlurmUnavailable:
        return
    report.slurm_asked = True
    by_token = {r.job_token: r for r in ledger.list_runs(limit=None)}
    held = {j for r in by_token.values() for j in r.job_ids}
    for job in sorted(jobs, key=lambda j: int(j.job_id) if j.job_id.isdigit() else 0):
        token = (job.comment or "").strip()
        if not token.startswith(TOKEN_PREFIX) or job.job_id in held:
            continue
        state = run_state_for(job.state) or L.SUBMITTED
        run = by_token.get(token)
        if run is None and state not in L.ACTIVE_STATES:
            continue  # a finished job: history, and as likely another --ledger's of this user as this one's
        if run is None:
            run = ledger.begin_submission(name=job.name or token, plan_hash="", plan_yaml="", executor="unknown",
                                          job_name=job.name, job_token=token)
            by_token[token] = run
        elif run.job_ids:
            continue
        ledger.record_found_job(run.id, job.job_id, state, job.state, kind="recovered",
                                detail={"found_by": "runs recover", "token": token})
        held.add(job.job_id)
        report.from_slurm += 1


class _transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


# ------------------------------------------------------------------ files
def _keep_old(path: Path, backup: Path) -> None:
    """The damaged file under its backup name (a hard link: no copy, same bytes; a copy where links
    are not allowed), and its side files moved beside it."""
    try:
        os.link(path, backup)
    except FileNotFoundError:
        return  # nothing was there: the new ledger simply appears
    except OSError:
        shutil.copy2(path, backup)
    for suffix in _SIDE_FILES:
        side = Path(f"{path}{suffix}")
        if side.exists():
            os.replace(side, Path(f"{backup}{suffix}"))


def _remove_with_side_files(path: Path) -> None:
    for name in (str(path), *(f"{path}{s}" for s in _SIDE_FILES)):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        _fsync(directory)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename is still done
