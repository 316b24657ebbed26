"""Is this file a sound run ledger? Asked read-only, before anything writes to it.

Ledger.open used to set the journal mode and migrate first and look at the answer after: a file of
another program was switched to WAL before it was refused, and a damaged one was written to. Here a
read-only connection (SQLite's `mode=ro`; `immutable=1` where not even the -shm file can be made,
a read-only directory or mount) reads the identity of the file (application_id, user_version, the
tables and the runs table's columns) and runs SQLite's quick_check; only a file that passes is
then opened for writing. A file that fails is left exactly as it was: bytes and mtime.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

from mbridge_launch.base.errors import UserError
from mbridge_launch.runs import ledger_faults, schema
from mbridge_launch.runs.records import COLUMNS

# PRAGMA application_id of a ledger (the bytes "MBL1"), set when the file is created; ledgers made
# before it have 0, and are known by their tables instead.
APPLICATION_ID = 0x4D424C31
LEDGER_TABLES = ("runs", "events", "confirmations", "overrides", "rollbacks")
# The runs columns the first schema version created (later versions only add columns).
_RUNS_V1_COLUMNS = frozenset(COLUMNS["runs"]) - {"watcher_job_id", "scheduler_called_at", "may_have_job"}


def _uri(path: Path, option: str) -> str:
    # a path with '?', '#' or '%' in it must be percent-encoded inside an SQLite URI
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{option}"


def connect_read_only(path: Path, busy_ms: int) -> sqlite3.Connection:
    """A connection that cannot write to `path`. `mode=ro` sees a WAL ledger's latest commits but
    needs the -shm file, which SQLite cannot create in a read-only directory: `immutable=1` then
    reads the file alone (nobody can be writing it there either)."""
    conn = _connect(_uri(path, "mode=ro"), busy_ms)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if ledger_faults.kind_of(exc) != "io":
            raise
    conn = _connect(_uri(path, "immutable=1"), busy_ms)
    return conn


def _connect(uri: str, busy_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, timeout=busy_ms / 1000, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.text_factory = ledger_faults.decode_text
    return conn


def check(conn: sqlite3.Connection, path: Path) -> int:
    """Refuse (UserError naming `path`) a file that is not a sound ledger; returns its schema
    version (0: an empty database, a new ledger). sqlite3 errors (locked, not a database) pass
    through for the caller to name."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    tables.discard("sqlite_sequence")
    if version > schema.SCHEMA_VERSION and app_id in (0, APPLICATION_ID):  # a newer mbridge-launch's
        raise UserError("ledger.schema_too_new", path=str(path), found=version, supported=schema.SCHEMA_VERSION)
    if app_id not in (0, APPLICATION_ID):
        raise ledger_faults.foreign(path, f"application_id {app_id}")
    if version == 0:
        if tables:  # a database with tables but no ledger version: another program's
            raise ledger_faults.foreign(path, f"tables {', '.join(sorted(tables)[:5])}")
        return 0
    missing = [t for t in LEDGER_TABLES if t not in tables]
    if missing:
        raise ledger_faults.foreign(path, f"user_version {version}, no table {', '.join(missing) or '-'}")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    if not _RUNS_V1_COLUMNS <= columns:
        raise ledger_faults.foreign(path, f"runs table without {', '.join(sorted(_RUNS_V1_COLUMNS - columns)[:3])}")
    problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        raise UserError("ledger.damaged", path=str(path), error=problems[0] if problems else "quick_check")
    return version


def writable(path: Path) -> bool:
    """Whether this process may write the ledger: the file, and its directory (the journal, or
    WAL's -wal and -shm files, are made there). access(2) answers for a read-only mount (EROFS)
    and an immutable file or directory (EPERM) even for root, who passes every mode check."""
    directory = path.parent
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return False
    return os.access(directory, os.W_OK | os.X_OK)
