"""The ledger's record types and run states (see ledger.py for the database itself)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Optional

# Run states. ACTIVE ones may still write checkpoints; the rest are final.
SUBMITTING = "submitting"  # row written, scheduler call not known to have returned
SUBMITTED = "submitted"  # scheduler accepted it; Slurm state not yet seen
PENDING = "pending"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TIMEOUT = "timeout"
SUBMIT_FAILED = "submit_failed"  # the scheduler refused it
LOST = "lost"  # the process died between the two writes and Slurm has no such job (or `runs mark-lost`)
# `runs forget`: hidden from `runs`, active checks and the duplicate/ownership guards; the row and
# its history stay (`runs --all` shows it)
FORGOTTEN = "forgotten"
ACTIVE_STATES = frozenset({SUBMITTING, SUBMITTED, PENDING, RUNNING})
FINAL_STATES = frozenset({COMPLETED, FAILED, CANCELLED, TIMEOUT, SUBMIT_FAILED, LOST, FORGOTTEN})
ALL_STATES = ACTIVE_STATES | FINAL_STATES


@dataclass
class RunRecord:
    id: int
    name: str
    plan_hash: str
    plan_path: Optional[str]
    plan_yaml: str
    executor: str
    cluster: dict[str, Any]
    job_name: Optional[str]
    job_token: str
    job_ids: list[str]
    script_path: Optional[str]
    script_text: Optional[str]
    work_dir: Optional[str]
    save_dir: Optional[str]
    log_paths: list[str]
    state: str
    slurm_state: Optional[str]
    submitter: Optional[str]
    parent_run_id: Optional[int]
    created_at: float
    submitted_at: Optional[float]
    updated_at: float
    error: Optional[str]
    watcher_job_id: Optional[str] = None  # schema v2: the auto-rollback watcher job, if one was started
    scheduler_called_at: Optional[float] = None  # schema v3: when the scheduler was called
    may_have_job: int = 0  # schema v3: 1 while reconcile must still look for this run's job

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def unresolved(self) -> bool:
        """The scheduler was called and gave no answer: the run may have a job nobody has seen yet."""
        return self.state == SUBMIT_FAILED and bool(self.may_have_job)

    @property
    def holds(self) -> bool:
        """Whether the run holds its plan hash and checkpoint directory (Ledger.holding_runs):
        active, or unresolved."""
        return self.active or self.unresolved

    def summary(self) -> dict[str, Any]:
        """The fields `runs`/`status` show (no script or plan text)."""
        return {
            "id": self.id, "name": self.name, "state": self.state, "slurm_state": self.slurm_state,
            "executor": self.executor, "job_ids": self.job_ids, "plan_hash": self.plan_hash,
            "cluster": self.cluster, "save_dir": self.save_dir, "log_paths": self.log_paths,
            "created_at": self.created_at, "submitted_at": self.submitted_at,
            "parent_run_id": self.parent_run_id, "error": self.error, "watcher_job_id": self.watcher_job_id,
            "scheduler_called_at": self.scheduler_called_at,
        }

    def plan(self):  # -> Plan
        """The Plan exactly as submitted (from the ledger's copy, not the possibly edited file)."""
        from mbridge_launch.base.user_yaml import load_user_yaml
        from mbridge_launch.plan.model import plan_from_dict

        # the ledger may be another user's (a shared state dir): the same loader as a Plan file
        where = f"ledger run {self.id}"
        return plan_from_dict(load_user_yaml(self.plan_yaml, where), where)


class DamagedRow(ValueError):
    """A ledger row whose column holds what the ledger never writes (invalid JSON, text where a
    number belongs, bytes that are not UTF-8, a state that does not exist): another program or a
    damaged disk wrote it. It names the table, the row and the column, never the value (which may
    be anything, control characters and raw bytes included); runs/ledger_faults.py makes it the
    one line the user sees."""

    def __init__(self, table: str, row_id: object, column: str) -> None:
        self.table, self.column = table, column
        self.row_id = row_id if type(row_id) is int else "?"
        super().__init__(f"{table} row {self.row_id}: column {column}")


# Column kinds: what a value must be for the ledger to have written it. "?" after a kind: NULL allowed.
_INT, _REAL, _TEXT, _FLAG, _STATE = "int", "real", "text", "flag", "state"
_JSON_DICT, _JSON_LIST = "json_dict", "json_list"
COLUMNS: dict[str, dict[str, str]] = {
    "runs": {
        "id": _INT, "name": _TEXT, "plan_hash": _TEXT, "plan_path": _TEXT + "?", "plan_yaml": _TEXT,
        "executor": _TEXT, "cluster": _JSON_DICT, "job_name": _TEXT + "?", "job_token": _TEXT,
        "job_ids": _JSON_LIST, "script_path": _TEXT + "?", "script_text": _TEXT + "?", "work_dir": _TEXT + "?",
        "save_dir": _TEXT + "?", "log_paths": _JSON_LIST, "state": _STATE, "slurm_state": _TEXT + "?",
        "submitter": _TEXT + "?", "parent_run_id": _INT + "?", "created_at": _REAL, "submitted_at": _REAL + "?",
        "updated_at": _REAL, "error": _TEXT + "?", "watcher_job_id": _TEXT + "?",
        "scheduler_called_at": _REAL + "?", "may_have_job": _FLAG,
    },
    "events": {"id": _INT, "run_id": _INT + "?", "at": _REAL, "kind": _TEXT, "old_state": _TEXT + "?",
               "new_state": _TEXT + "?", "detail": _JSON_DICT},
    "confirmations": {"id": _INT, "run_id": _INT + "?", "at": _REAL, "action": _TEXT, "method": _TEXT,
                      "user": _TEXT + "?", "detail": _JSON_DICT},
    "overrides": {"id": _INT, "run_id": _INT + "?", "at": _REAL, "kind": _TEXT, "reason": _TEXT,
                  "user": _TEXT + "?", "detail": _JSON_DICT},
    "rollbacks": {"id": _INT, "run_id": _INT + "?", "save_dir": _TEXT, "stamp": _TEXT, "to_iter": _INT,
                  "from_iter": _INT + "?", "state": _TEXT, "journal": _JSON_DICT, "trigger": _JSON_DICT + "?",
                  "created_at": _REAL, "updated_at": _REAL},
}
# What a JSON column of the runs table reads as when empty (rows of the first versions).
_JSON_EMPTY = {_JSON_DICT: {}, _JSON_LIST: []}
_BAD = object()


def _sound_text(value: object) -> bool:
    """Text as the ledger writes it: a str that was valid UTF-8 (the connection decodes invalid
    bytes to lone surrogates, see ledger_faults.decode_text, so they are caught here)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _checked(kind: str, value: object) -> object:
    """`value` as the column kind wants it (JSON parsed), or _BAD."""
    if kind == _INT:
        return value if type(value) is int and 0 <= value < 2**63 else _BAD
    if kind == _FLAG:
        return value if value in (0, 1) and type(value) is int else _BAD
    if kind == _REAL:
        if type(value) not in (int, float):
            return _BAD
        number = float(value)  # type: ignore[arg-type]
        return number if 0 <= number < float("inf") else _BAD  # NaN fails both comparisons
    if not _sound_text(value):
        return _BAD
    if kind == _STATE:
        return value if value in ALL_STATES else _BAD
    if kind in _JSON_EMPTY:
        if value == "":
            return type(_JSON_EMPTY[kind])()
        try:
            parsed = json.loads(value)  # type: ignore[arg-type]
        except ValueError:
            return _BAD
        if kind == _JSON_LIST:
            return parsed if isinstance(parsed, list) and all(_sound_text(x) for x in parsed) else _BAD
        return parsed if isinstance(parsed, dict) else _BAD
    return value


def _column_value(kind: str, value: object) -> object:
    if value is None:
        if kind.endswith("?"):
            return None
        base = kind.rstrip("?")
        return type(_JSON_EMPTY[base])() if base in _JSON_EMPTY else _BAD
    return _checked(kind.rstrip("?"), value)


def decode_row(table: str, row: sqlite3.Row | dict[str, Any]) -> dict[str, Any]:
    """The values of a ledger row, each checked against its column's kind (JSON columns parsed):
    a row the ledger could have written. DamagedRow names the first column that is not."""
    data = dict(row)
    kinds = COLUMNS[table]
    for column, value in data.items():
        kind = kinds.get(column)
        if kind is None:
            continue  # a column this version does not know (never read by it)
        checked = _column_value(kind, value)
        if checked is _BAD:
            raise DamagedRow(table, data.get("id"), column)
        data[column] = checked
    return data


def salvage_row(table: str, row: sqlite3.Row | dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """For `runs recover`: the row with each damaged column that may be empty set to empty (NULL,
    or an empty JSON list/object), and the names of those columns; (None, columns) when a column
    that must hold a value is damaged (the row cannot be kept)."""
    data, cleared = dict(row), []
    kinds = COLUMNS[table]
    for column, value in data.items():
        kind = kinds.get(column)
        if kind is None or _column_value(kind, value) is not _BAD:
            continue
        cleared.append(column)
        base = kind.rstrip("?")
        if kind.endswith("?"):
            data[column] = None
        elif base in _JSON_EMPTY:
            data[column] = json.dumps(_JSON_EMPTY[base])
        elif base == _FLAG:
            data[column] = 1  # keep looking for a job: the safe side
        else:
            return None, cleared
    return data, cleared


def run_from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(**decode_row("runs", row))


def rollback_from_row(row: sqlite3.Row) -> "RollbackRecord":
    return RollbackRecord(**decode_row("rollbacks", row))


@dataclass
class RollbackRecord:
    id: int
    run_id: Optional[int]
    save_dir: str
    stamp: str
    to_iter: int
    from_iter: Optional[int]
    state: str
    journal: dict[str, Any]
    trigger: Optional[dict[str, Any]]
    created_at: float
    updated_at: float
