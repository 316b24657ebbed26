"""What a failing ledger means for the user: one line naming the file and what to do.

SQLite reports a full disk, a read-only or immutable file, a lock held too long, damaged pages and
a file of another program as `sqlite3.Error`s, at opening or at any later query; a row that
another program wrote is a `records.DamagedRow`. `fault(exc)` turns each into a UserError with its
exit code (base/errors.py): EXIT_CHECK_FAILED where the machine or another command is in the way
(try again, free space, ask for write access), EXIT_BAD_INPUT where the file itself is wrong
(recover it, or pass another --ledger). The CLI calls it at one place (cli/main.py) for whatever
a command let through, so no command prints "internal error" for a ledger, and SQLite's own text
is escaped (it may quote a row's bytes).

A process runs one command, which opens one ledger file; `remember` keeps that file's path so that
a fault raised far from the Ledger object (inside a query, a record conversion) still names it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from mbridge_launch.base.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, UserError
from mbridge_launch.runs.records import DamagedRow

_opened: list[Path] = []


def remember(path: Path) -> None:
    """Called by Ledger.open for a ledger file (not for the in-memory stand-in of a missing one)."""
    _opened.append(path)


def last_path() -> str:
    return str(_opened[-1]) if _opened else "?"


def decode_text(raw: bytes) -> str:
    """The connection's text factory: bytes that are not UTF-8 (written by another program) become
    lone surrogates, which records.decode_row refuses as a damaged column, instead of SQLite's
    OperationalError that quotes the raw bytes."""
    return raw.decode("utf-8", "surrogateescape")


def kind_of(exc: sqlite3.Error) -> str:
    """'locked', 'full', 'read_only', 'damaged', 'not_a_database', 'io' or 'other', from SQLite's
    error name (Python 3.11+) and, failing that, its message."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text or "busy" in text:
        return "locked"
    if name == "SQLITE_FULL" or "disk is full" in text:
        return "full"
    if name.startswith("SQLITE_READONLY") or "readonly" in text or "read-only" in text:
        return "read_only"
    if name == "SQLITE_NOTADB" or "not a database" in text:
        return "not_a_database"
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text or "corrupt" in text:
        return "damaged"
    if name.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")) or "unable to open" in text:
        return "io"
    return "other"


def fault(exc: BaseException, path: str | Path | None = None, *, busy_ms: int | None = None) -> UserError | None:
    """The one line for a ledger failure; None when `exc` is not one."""
    where = str(path) if path is not None else last_path()
    if isinstance(exc, DamagedRow):
        return UserError("ledger.damaged_row", path=where, table=exc.table, row=exc.row_id, column=exc.column)
    if not isinstance(exc, sqlite3.Error):
        return None
    kind = kind_of(exc)
    reason = str(exc)
    if kind == "io" and _no_space_left(where):  # SQLite says "disk I/O error" when the -shm cannot grow
        kind = "full"
    if kind == "locked":
        if busy_ms is None:
            return UserError("ledger.locked_while_writing", exit_code=EXIT_CHECK_FAILED, path=where)
        return UserError("ledger.locked", exit_code=EXIT_CHECK_FAILED, path=where, seconds=f"{busy_ms / 1000:g}")
    if kind == "full":
        return UserError("ledger.disk_full", exit_code=EXIT_CHECK_FAILED, path=where)
    if kind == "read_only":
        return UserError("ledger.read_only", exit_code=EXIT_CHECK_FAILED, path=where)
    if kind == "not_a_database":
        return UserError("ledger.cannot_open", exit_code=EXIT_BAD_INPUT, path=where, reason=_open_reason("corrupt", reason))
    if kind == "damaged":
        return UserError("ledger.damaged", exit_code=EXIT_BAD_INPUT, path=where, error=reason)
    if kind == "io":
        return UserError("ledger.io_error", exit_code=EXIT_CHECK_FAILED, path=where, error=reason)
    return UserError("ledger.database_error", exit_code=EXIT_CHECK_FAILED, path=where, error=reason)


# Less free space than this beside the ledger: an I/O error there is taken for a full disk.
_FULL_BELOW_BYTES = 64 * 1024


def _no_space_left(path: str) -> bool:
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _FULL_BELOW_BYTES


def _open_reason(kind: str, error: str) -> str:
    from mbridge_launch.base.i18n import t

    return t(f"ledger.reason.{kind}", error=error)


def foreign(path: Path, what: str) -> UserError:
    """A file that is an SQLite database but not a run ledger (`what`: which sign said so)."""
    return UserError("ledger.cannot_open", exit_code=EXIT_BAD_INPUT, path=str(path), reason=_open_reason("foreign", what))
