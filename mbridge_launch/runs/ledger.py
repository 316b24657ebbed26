"""The run ledger: an embedded SQLite database of what was submitted and what was done to it.

Where it lives: `--ledger PATH`, else $MBRIDGE_LAUNCH_LEDGER, else <state dir>/ledger.sqlite3 with
the state dir $MBRIDGE_LAUNCH_STATE_DIR, else $XDG_STATE_HOME/mbridge-launch, else
~/.local/state/mbridge-launch.

Durability rules:
- one transaction per state change (`BEGIN IMMEDIATE` ... `COMMIT`), each with its event row;
- WAL mode on local disks; rollback-journal mode on network filesystems (NFS, Lustre, GPFS...),
  where WAL's shared memory is unsafe; a busy timeout so concurrent commands wait, not fail;
- a submission is written three times: a `submitting` row BEFORE the scheduler call, the fact
  that the scheduler is being called (`may_have_job`) right before it, and the job ids AFTER it
  (`begin_submission` / `_Submission.call_scheduler` / `mark_submitted`). Whatever cuts the
  window (kill -9, Ctrl-C, a timeout) leaves a row that `reconcile.reconcile_submitting` resolves
  against squeue/sacct on the next command, by the token every executor puts in the job's comment.
  Only Slurm's definite refusal (sbatch exited non-zero) ends the search for a job.
"""

from __future__ import annotations

import errno
import getpass
import json
import os
import secrets
import socket
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from mbridge_launch.base import filesystems
from mbridge_launch.base.errors import EXIT_CHECK_FAILED, SubmissionError, UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.base.paths import state_dir
from mbridge_launch.plan.overrides import whole_number
from mbridge_launch.runs import integrity, ledger_faults
from mbridge_launch.runs.records import (  # noqa: F401 - re-exported: the ledger API
    ACTIVE_STATES,
    ALL_STATES,
    CANCELLED,
    COMPLETED,
    FAILED,
    FINAL_STATES,
    FORGOTTEN,
    LOST,
    PENDING,
    RUNNING,
    SUBMIT_FAILED,
    SUBMITTED,
    SUBMITTING,
    TIMEOUT,
    RollbackRecord,
    RunRecord,
    decode_row,
    rollback_from_row,
    run_from_row,
)
from mbridge_launch.runs.schema import migrate

LEDGER_FILENAME = "ledger.sqlite3"
JOB_REF_PREFIX = "job:"  # RUN given as one of its Slurm jobs: `status job:61`
# the confirmation method of the watcher's rollbacks and resubmissions (consent: plan.auto_rollback)
AUTO_ROLLBACK_METHOD = "auto-rollback"
BUSY_TIMEOUT_MS = 15_000
# the wait for another command's write lock; tests set a short one (a whole number of ms)
BUSY_TIMEOUT_ENV = "MBRIDGE_LAUNCH_LEDGER_BUSY_MS"


def default_ledger_path() -> Path:
    explicit = os.environ.get("MBRIDGE_LAUNCH_LEDGER")
    return Path(explicit).expanduser() if explicit else state_dir() / LEDGER_FILENAME


def _storable(text: str) -> bool:
    """Whether SQLite can take the text: argv bytes that are not UTF-8 reach Python as lone
    surrogates, which it refuses with UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# SubmissionError keys that mean no job exists (slurm/commands.py DEFINITE): refused, or no controller reached
DEFINITE_SUBMIT_KEYS = ("executors.submit_refused", "executors.submit_unreachable")


def _now() -> float:
    return time.time()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return str(os.getuid())


def filesystem_type(path: Path) -> str:
    """The mount type holding `path` (base/filesystems.py, the table preflight uses too), or ''."""
    mount = filesystems.mount_of(path)
    return mount.fstype if mount else ""


def _busy_timeout_ms() -> int:
    from mbridge_launch.base.numbers import whole_or_none

    return whole_or_none(os.environ.get(BUSY_TIMEOUT_ENV, ""), high=3_600_000) or BUSY_TIMEOUT_MS


def _open_error(exc: sqlite3.DatabaseError, path: Path, busy_ms: int) -> UserError:
    """What SQLite's refusal at opening means for the user (runs/ledger_faults.py): locked by
    another command (exit 1, wait), not an SQLite file, damaged, a full disk..."""
    if ledger_faults.kind_of(exc) == "other":  # a migration that failed, say: SQLite's words
        return UserError("ledger.cannot_open", path=str(path), reason=str(exc))
    return ledger_faults.fault(exc, path, busy_ms=busy_ms) or UserError("ledger.cannot_open", path=str(path),
                                                                         reason=str(exc))


def _create_following_umask(path: Path) -> None:
    """A new ledger file created empty (SQLite's new database) with 0666 less the umask: SQLite
    itself creates 0644 whatever the umask, so a group-shared ledger (umask 002) came out
    unwritable by the group. Its journal and WAL files take the database file's mode."""
    from mbridge_launch.base.atomic import create_new_file

    if os.path.lexists(path):
        return
    try:
        create_new_file(path)
    except OSError:
        pass  # sqlite3.connect reports what is wrong with the place, as it always did


@contextmanager
def _closed_on_refusal(conn: sqlite3.Connection, path: Path, busy_ms: int) -> Iterator[None]:
    """Around the checks of a freshly opened connection: a refusal closes it, and SQLite's own error
    becomes the one line that names the file (_open_error)."""
    try:
        yield
    except UserError:
        conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _open_error(exc, path, busy_ms) from None


@dataclass
class Ledger:
    path: Path
    conn: sqlite3.Connection = field(repr=False)
    journal_mode: str = "wal"
    # opened read-only (the file, its directory or its mount cannot be written): queries work,
    # every write is refused with one line (transaction), state refreshes are skipped (operations)
    read_only: bool = False
    read_only_noted: bool = field(default=False, repr=False)  # runs.operations said so once

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path: str | Path | None = None, *, create: bool = True) -> "Ledger":
        """The ledger at `path`. `create=False` (commands that only look runs up, and every
        --dry-run): a ledger that does not exist yet, or a link to nothing, is read as an empty
        one held in memory, so a query never creates folders or a database at a mistyped path."""
        path = Path(path).expanduser() if path else default_ledger_path()
        if not create and not path.exists():  # exists() follows links: a dangling one is missing
            return cls._empty(path)
        busy_ms = _busy_timeout_ms()
        ledger_faults.remember(path)
        if os.path.isdir(path):  # SQLite would call it a disk I/O error
            raise UserError("ledger.cannot_open", path=str(path), reason=os.strerror(errno.EISDIR))
        if os.path.exists(path) and not os.path.isfile(path):
            # a FIFO, socket or device: SQLite's open of a FIFO waits for a writer forever
            raise UserError("ledger.cannot_open", path=str(path), reason=t("preflight.detail.not_regular_file"))
        if os.path.exists(path):
            # identity and integrity first, read-only: a foreign or damaged file is never written
            read_only = cls._checked_read_only(path, busy_ms)
            if not integrity.writable(path):
                if create:  # this command records something: say so now, before it acts
                    read_only.close()
                    raise UserError("ledger.read_only", exit_code=EXIT_CHECK_FAILED, path=str(path))
                return cls(path=path, conn=read_only, journal_mode="read-only", read_only=True)
            read_only.close()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _create_following_umask(path)
            conn = sqlite3.connect(str(path), timeout=busy_ms / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise UserError("ledger.cannot_open", path=str(path), reason=str(exc)) from None
        conn.row_factory = sqlite3.Row
        conn.text_factory = ledger_faults.decode_text
        with _closed_on_refusal(conn, path, busy_ms):
            conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            # re-checked on this connection: the file may have been created or replaced meanwhile
            if integrity.check(conn, path) == 0:
                conn.execute(f"PRAGMA application_id = {integrity.APPLICATION_ID}")
            wanted = filesystems.journal_mode_for(path.parent)
            mode = conn.execute(f"PRAGMA journal_mode = {wanted}").fetchone()[0]
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        return cls(path=path, conn=conn, journal_mode=str(mode).lower())

    @staticmethod
    def _checked_read_only(path: Path, busy_ms: int) -> sqlite3.Connection:
        """A read-only connection to a file that passed integrity.check (else its one line)."""
        try:
            conn = integrity.connect_read_only(path, busy_ms)
        except sqlite3.DatabaseError as exc:
            raise _open_error(exc, path, busy_ms) from None
        with _closed_on_refusal(conn, path, busy_ms):
            integrity.check(conn, path)
        return conn

    @classmethod
    def _empty(cls, path: Path) -> "Ledger":
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn)
        return cls(path=path, conn=conn, journal_mode="memory")

    def close(self) -> None:
        self.conn.close()

    def require_writable(self) -> None:
        """For a command that will record something: refuse a read-only ledger now, before it
        acts (a cancel that could not be recorded must not be sent)."""
        if self.read_only:
            raise UserError("ledger.read_only", exit_code=EXIT_CHECK_FAILED, path=str(self.path))

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE takes the write lock up front so two commands
        never both read-then-write the same row. An exception at any point, a signal handler's
        included (the watcher job's SIGTERM raises between any two statements, even right after
        BEGIN), leaves no transaction open: the next one would fail with "cannot start a
        transaction within a transaction"."""
        self.require_writable()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def _event(self, conn: sqlite3.Connection, run_id: int | None, kind: str, old: str | None = None,
               new: str | None = None, detail: dict[str, Any] | None = None) -> None:
        conn.execute(
            "INSERT INTO events(run_id, at, kind, old_state, new_state, detail) VALUES (?,?,?,?,?,?)",
            (run_id, _now(), kind, old, new, json.dumps(detail or {}, default=str)),
        )

    # ------------------------------------------------------------------ submissions
    def begin_submission(self, *, name: str, plan_hash: str, plan_yaml: str, executor: str,
                         plan_path: str | None = None, cluster: dict[str, Any] | None = None,
                         job_name: str | None = None, script_path: str | None = None,
                         script_text: str | None = None, work_dir: str | None = None,
                         save_dir: str | None = None, parent_run_id: int | None = None,
                         job_token: str | None = None, guard: Callable[[], None] | None = None) -> RunRecord:
        """Write the `submitting` row. Call BEFORE the scheduler. Reconcile finds a lost submission
        by its token in the job's comment (every shipped executor sets it), else, for an executor
        that does not take the token, by job name and submit time.

        `guard` runs inside the same write transaction, right before the insert, and refuses by
        raising (runs/exclusive.py: the plan hash or the save directory is held): the write lock
        of BEGIN IMMEDIATE spans processes, so of concurrent submissions through one ledger the
        check and the insert of one cannot interleave with another's."""
        token = job_token or f"mbl-{secrets.token_hex(8)}"
        now = _now()
        with self.transaction() as conn:
            if guard is not None:
                guard()
            cur = conn.execute(
                "INSERT INTO runs(name, plan_hash, plan_path, plan_yaml, executor, cluster, job_name,"
                " job_token, script_path, script_text, work_dir, save_dir, state, submitter,"
                " parent_run_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (name, plan_hash, plan_path, plan_yaml, executor, json.dumps(cluster or {}), job_name or name,
                 token, script_path, script_text, work_dir, _norm(save_dir), SUBMITTING,
                 f"{socket.gethostname()}:{os.getpid()}", parent_run_id, now, now),
            )
            run_id = int(cur.lastrowid)
            self._event(conn, run_id, "state", None, SUBMITTING, {"executor": executor})
        return self.get_run(run_id)

    def mark_submitted(self, run_id: int, job_ids: list[str], *, log_paths: list[str] | None = None,
                       script_path: str | None = None, raw_output: str = "",
                       release_pending: bool = False) -> RunRecord:
        """The scheduler accepted the job: record its ids. Call right AFTER the scheduler call.
        `release_pending`: the job waits held for a release that did not go through (an event
        `release_pending`, which refresh_runs settles with `released`)."""
        with self.transaction() as conn:
            old = self._state(conn, run_id)
            conn.execute(
                "UPDATE runs SET job_ids=?, log_paths=?, script_path=COALESCE(?, script_path), state=?,"
                " submitted_at=?, updated_at=?, may_have_job=0 WHERE id=?",
                (json.dumps([str(j) for j in job_ids]), json.dumps([str(p) for p in log_paths or []]),
                 script_path, SUBMITTED, _now(), _now(), run_id),
            )
            self._event(conn, run_id, "state", old, SUBMITTED, {"job_ids": job_ids, "output": raw_output[-2000:]})
            if release_pending:
                self._event(conn, run_id, "release_pending", None, None, {"job_ids": job_ids})
        return self.get_run(run_id)

    def release_pending(self, run_id: int) -> bool:
        """Whether the run's job still waits held for the release its submission could not give."""
        kinds = [e["kind"] for e in self.events(run_id) if e["kind"] in ("release_pending", "released")]
        return bool(kinds) and kinds[-1] == "release_pending"

    def mark_scheduler_called(self, run_id: int) -> RunRecord:
        """Committed right before the scheduler is called: from here on the run may have a job, so
        any failure short of Slurm's definite refusal leaves it for reconciliation."""
        with self.transaction() as conn:
            conn.execute("UPDATE runs SET scheduler_called_at=?, may_have_job=1, updated_at=? WHERE id=?",
                         (_now(), _now(), run_id))
            self._event(conn, run_id, "scheduler_called", None, None, {})
        return self.get_run(run_id)

    def mark_submit_failed(self, run_id: int, error: str, *, definite: bool = True) -> RunRecord:
        """`definite`: Slurm refused the job (no job exists); otherwise a job may exist and
        reconcile keeps looking for it."""
        record = self.set_state(run_id, SUBMIT_FAILED, error=error, detail={"definite": definite})
        if definite and record.may_have_job:
            record = self.settle_no_job(run_id, {"reason": "refused by Slurm"})
        return record

    def settle_no_job(self, run_id: int, detail: dict[str, Any]) -> RunRecord:
        """Stop looking for a job of this run (refused, or reconcile found none)."""
        with self.transaction() as conn:
            conn.execute("UPDATE runs SET may_have_job=0, updated_at=? WHERE id=?", (_now(), run_id))
            self._event(conn, run_id, "no_job", None, None, detail)
        return self.get_run(run_id)

    def record_found_job(self, run_id: int, job_id: str, state: str, slurm_state: str | None, *,
                         kind: str, detail: dict[str, Any]) -> RunRecord:
        """A job found for the run after the fact (reconcile by token, `runs adopt`): its id and
        state in one transaction with the event saying how it was found. Clears the submission
        error (it described the interrupted call, not the job)."""
        if state not in ALL_STATES:
            raise ValueError(f"unknown run state {state!r}")
        with self.transaction() as conn:
            old = self._state(conn, run_id)
            conn.execute(
                "UPDATE runs SET job_ids=?, state=?, slurm_state=?, error=NULL, may_have_job=0,"
                " submitted_at=COALESCE(submitted_at, ?), updated_at=? WHERE id=?",
                (json.dumps([str(job_id)]), state, slurm_state, _now(), _now(), run_id))
            self._event(conn, run_id, kind, old, state, {**detail, "job_id": str(job_id), "slurm_state": slurm_state})
        return self.get_run(run_id)

    def reconcile_candidates(self) -> list[RunRecord]:
        """Every run that may have a Slurm job the ledger does not know: `submitting` rows, and
        `submit_failed` rows whose failure came after the scheduler was called and was not a
        definite refusal."""
        rows = self.conn.execute(
            "SELECT * FROM runs WHERE state=? OR (state=? AND may_have_job=1) ORDER BY id",
            (SUBMITTING, SUBMIT_FAILED))
        return [run_from_row(r) for r in rows]

    def holding_runs(self, plan_hash: str | None = None) -> list[RunRecord]:
        """The runs that hold their plan hash and save directory (newest first, optionally of one
        plan hash): the active ones (`submitting` included) and those whose scheduler call ended
        without an answer (`submit_failed` that may have a job, until reconcile settles it)."""
        sql = (f"SELECT * FROM runs WHERE (state IN ({','.join('?' * len(ACTIVE_STATES))})"
               " OR (state=? AND may_have_job=1))")
        params: list[Any] = [*sorted(ACTIVE_STATES), SUBMIT_FAILED]
        if plan_hash is not None:
            sql += " AND plan_hash=?"
            params.append(plan_hash)
        return [run_from_row(r) for r in self.conn.execute(sql + " ORDER BY id DESC", params)]

    def job_holders(self, job_id: str) -> list[RunRecord]:
        """The runs that record `job_id` as one of their jobs."""
        rows = self.conn.execute("SELECT * FROM runs WHERE job_ids LIKE ? ORDER BY id", (f'%"{job_id}"%',))
        return [r for r in map(run_from_row, rows) if str(job_id) in r.job_ids]

    @contextmanager
    def submission(self, **fields: Any) -> Iterator["_Submission"]:
        """`with ledger.submission(name=..., ...) as sub: sub.call_scheduler(lambda: executor.submit(...))`.
        An exception before the scheduler call marks the run submit_failed (and re-raises); one
        during it is classified by call_scheduler; a crash leaves it `submitting` for
        reconciliation. A refusal of `guard` (begin_submission) writes no row at all."""
        record = self.begin_submission(**fields)
        sub = _Submission(self, record)
        try:
            yield sub
        except BaseException as exc:
            if not sub.finished:
                raw = getattr(exc, "raw_output", "") or ""
                self.mark_submit_failed(record.id, f"{type(exc).__name__}: {exc}\n{raw}".strip())
            raise

    # ------------------------------------------------------------------ state changes
    def _state(self, conn: sqlite3.Connection, run_id: int) -> str:
        row = conn.execute("SELECT state FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise UserError("ledger.run_not_found", run=str(run_id), known="-")
        return row[0]

    def set_state(self, run_id: int, state: str, *, slurm_state: str | None = None, error: str | None = None,
                  kind: str = "state", detail: dict[str, Any] | None = None,
                  job_ids: list[str] | None = None) -> RunRecord:
        if state not in ALL_STATES:
            raise ValueError(f"unknown run state {state!r}")
        with self.transaction() as conn:
            old = self._state(conn, run_id)
            conn.execute(
                "UPDATE runs SET state=?, slurm_state=COALESCE(?, slurm_state), error=COALESCE(?, error),"
                " job_ids=COALESCE(?, job_ids), updated_at=? WHERE id=?",
                (state, slurm_state, error, json.dumps(job_ids) if job_ids is not None else None, _now(), run_id),
            )
            if old != state or kind != "state":
                self._event(conn, run_id, kind, old, state, {**(detail or {}), "slurm_state": slurm_state})
        return self.get_run(run_id)

    def set_watcher_job(self, run_id: int, job_id: str | None, detail: dict[str, Any] | None = None) -> RunRecord:
        """Record (or, with None, clear) the auto-rollback watcher job of a run, with its event."""
        with self.transaction() as conn:
            self._state(conn, run_id)  # the run must exist
            conn.execute("UPDATE runs SET watcher_job_id=?, updated_at=? WHERE id=?", (job_id, _now(), run_id))
            self._event(conn, run_id, "watcher_job", None, None, {**(detail or {}), "job_id": job_id})
        return self.get_run(run_id)

    def add_event(self, run_id: int | None, kind: str, detail: dict[str, Any] | None = None) -> None:
        with self.transaction() as conn:
            self._event(conn, run_id, kind, None, None, detail)

    def record_confirmation(self, run_id: int | None, action: str, method: str,
                            detail: dict[str, Any] | None = None) -> None:
        self._record_by_user("confirmations", run_id, {"action": action, "method": method}, detail)

    def record_override(self, run_id: int | None, kind: str, reason: str,
                        detail: dict[str, Any] | None = None) -> None:
        self._record_by_user("overrides", run_id, {"kind": kind, "reason": reason}, detail)

    def _record_by_user(self, table: str, run_id: int | None, what: dict[str, str],
                        detail: dict[str, Any] | None) -> None:
        """A row of a table of what a user did or accepted (confirmations, overrides): the run, when,
        what (its columns), who and the detail."""
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO {table}(run_id, at, {', '.join(what)}, user, detail) VALUES (?,?,?,?,?,?)",
                (run_id, _now(), *what.values(), _user(), json.dumps(detail or {}, default=str)),
            )

    # ------------------------------------------------------------------ queries
    def get_run(self, ref: int | str) -> RunRecord:
        """A run by id (`12` or `#12`), by name (the newest run with that name), or by one of its
        Slurm jobs (`job:61`; `:` is in no run name). The one reference grammar of every command."""
        text = str(ref).strip()
        if text.startswith(JOB_REF_PREFIX):
            return self._run_with_job(text[len(JOB_REF_PREFIX):])
        row = None
        run_id = whole_number(text.lstrip("#"))
        if run_id is not None and run_id < 2**63:  # SQLite's largest integer
            row = self.conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None and _storable(text):  # a name that is not UTF-8 (argv bytes) names no run
            row = self.conn.execute("SELECT * FROM runs WHERE name=? ORDER BY id DESC LIMIT 1", (text,)).fetchone()
        if row is None:
            known = [r[0] for r in self.conn.execute("SELECT DISTINCT name FROM runs ORDER BY id DESC LIMIT 8")]
            raise UserError("ledger.run_not_found", run=text, known=", ".join(known) or "-")
        return run_from_row(row)

    def _run_with_job(self, job_id: str) -> RunRecord:
        """The newest run whose Slurm jobs include `job_id` (job_ids is a JSON list of strings)."""
        if job_id.isascii() and job_id.isdigit():
            for row in self.conn.execute("SELECT * FROM runs WHERE job_ids LIKE ? ORDER BY id DESC",
                                         (f'%"{job_id}"%',)):
                run = run_from_row(row)
                if job_id in run.job_ids:
                    return run
        raise UserError("ledger.job_run_not_found", job=job_id)

    def find_run(self, ref: int | str) -> RunRecord | None:
        try:
            return self.get_run(ref)
        except UserError:
            return None

    def list_runs(self, *, limit: int | None = 50, states: set[str] | frozenset[str] | None = None,
                  name: str | None = None) -> list[RunRecord]:
        sql, params = "SELECT * FROM runs", []
        where = []
        if states:
            where.append(f"state IN ({','.join('?' * len(states))})")
            params.extend(sorted(states))
        if name:
            if not _storable(name):
                return []
            where.append("name = ?")
            params.append(name)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [run_from_row(r) for r in self.conn.execute(sql, params)]

    def runs_for_save_dir(self, save_dir: str | Path) -> list[RunRecord]:
        if not _storable(_norm(save_dir) or ""):
            return []
        rows = self.conn.execute("SELECT * FROM runs WHERE save_dir=? ORDER BY id DESC", (_norm(save_dir),))
        return [run_from_row(r) for r in rows]

    def active_runs_with_plan_hash(self, plan_hash: str) -> list[RunRecord]:
        """For the duplicate checks: the same plan already submitted and not finished, a run that
        may have a job after a scheduler call without an answer included (holding_runs)."""
        return self.holding_runs(plan_hash)

    def run_chain(self, run_id: int) -> list[RunRecord]:
        """The run and its ancestors (resubmissions after rollbacks), oldest first."""
        chain: list[RunRecord] = []
        current: int | None = run_id
        while current is not None and len(chain) < 10_000:
            record = self.get_run(current)
            chain.append(record)
            current = record.parent_run_id
        return list(reversed(chain))

    def events(self, run_id: int) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM events WHERE run_id=? ORDER BY id", (run_id,))
        return [decode_row("events", r) for r in rows]

    def confirmations(self, run_id: int | None = None) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM confirmations WHERE run_id IS ? ORDER BY id", (run_id,))
        return [decode_row("confirmations", r) for r in rows]

    def overrides(self, run_id: int | None = None) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM overrides WHERE run_id IS ? ORDER BY id", (run_id,))
        return [decode_row("overrides", r) for r in rows]

    # ------------------------------------------------------------------ rollbacks
    def record_rollback(self, *, save_dir: str | Path, stamp: str, to_iter: int, from_iter: int | None,
                        state: str, journal: dict[str, Any], run_id: int | None = None,
                        trigger: dict[str, Any] | None = None) -> None:
        """Insert or update the rollback (save_dir, stamp) with the journal's current content."""
        now = _now()
        key = _norm(save_dir)
        with self.transaction() as conn:
            exists = conn.execute("SELECT id, run_id FROM rollbacks WHERE save_dir=? AND stamp=?", (key, stamp)).fetchone()
            if exists:
                conn.execute("UPDATE rollbacks SET state=?, journal=?, updated_at=? WHERE id=?",
                             (state, json.dumps(journal), now, exists[0]))
                run_id = run_id if run_id is not None else exists[1]
            else:
                conn.execute(
                    "INSERT INTO rollbacks(run_id, save_dir, stamp, to_iter, from_iter, state, journal, trigger,"
                    " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (run_id, key, stamp, to_iter, from_iter, state, json.dumps(journal),
                     json.dumps(trigger) if trigger else None, now, now),
                )
            self._event(conn, run_id, "rollback", None, state,
                        {"save_dir": key, "stamp": stamp, "to_iter": to_iter, "from_iter": from_iter})

    def rollbacks(self, *, run_ids: list[int] | None = None, save_dir: str | Path | None = None) -> list[RollbackRecord]:
        sql, params = "SELECT * FROM rollbacks", []
        if run_ids is not None:
            sql += f" WHERE run_id IN ({','.join('?' * len(run_ids)) or 'NULL'})"
            params.extend(run_ids)
        elif save_dir is not None:
            sql += " WHERE save_dir=?"
            params.append(_norm(save_dir))
        return [rollback_from_row(r) for r in self.conn.execute(sql + " ORDER BY id", params)]


class _Submission:
    def __init__(self, ledger: Ledger, record: RunRecord) -> None:
        self.ledger = ledger
        self.record = record
        self.finished = False

    @property
    def token(self) -> str:
        return self.record.job_token

    def call_scheduler(self, submit: Callable[[], Any]) -> RunRecord:
        """Record that the scheduler is being called, call it, record the job. Run it inside
        base.signals.deferred_signals so that no interrupt lands between the call and the record.
        A SubmissionError of Slurm's refusal is definite (no job); anything else (Ctrl-C that got
        through, a timeout, a reply without a job id) leaves the run for reconciliation."""
        self.ledger.mark_scheduler_called(self.record.id)
        try:
            submitted = submit()
        except BaseException as exc:
            self.finished = True
            definite = isinstance(exc, SubmissionError) and exc.key in DEFINITE_SUBMIT_KEYS
            raw = getattr(exc, "raw_output", "") or ""
            self.record = self.ledger.mark_submit_failed(
                self.record.id, f"{type(exc).__name__}: {exc}\n{raw}".strip(), definite=definite)
            raise
        return self.done(submitted)

    def done(self, submitted: Any) -> RunRecord:
        """`submitted`: an executors.base.Submitted (job_ids, script_path, log_paths, raw_output)."""
        self.finished = True
        self.record = self.ledger.mark_submitted(
            self.record.id, list(submitted.job_ids),
            log_paths=[str(p) for p in getattr(submitted, "log_paths", []) or []],
            script_path=str(submitted.script_path) if getattr(submitted, "script_path", None) else None,
            raw_output=getattr(submitted, "raw_output", "") or "",
            release_pending=bool(getattr(submitted, "release_pending", False)),
        )
        return self.record


def plan_save_dir(plan: Any, submit_dir: str | Path) -> str | None:
    """The absolute checkpoint directory of a plan as the job will see it: a relative
    checkpoint.save is relative to the job's start directory (launch.workdir, itself relative to
    the submit directory, else the submit directory). Pass this as begin_submission(save_dir=)."""
    if not plan.checkpoint.save:
        return None
    save = Path(plan.checkpoint.save).expanduser()
    if save.is_absolute():
        return str(save)
    base = Path(submit_dir)
    if plan.launch.workdir:
        workdir = Path(plan.launch.workdir).expanduser()
        base = workdir if workdir.is_absolute() else base / workdir
    return os.path.abspath(base / save)


def _norm(path: str | Path | None) -> str | None:
    """Save dirs are compared as absolute paths (not resolved: a symlinked scratch stays as typed)."""
    if path is None:
        return None
    return os.path.abspath(os.path.expanduser(str(path)))

