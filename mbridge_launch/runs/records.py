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


_JSON_RUN_FIELDS = {"cluster": {}, "job_ids": [], "log_paths": []}


def run_from_row(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    for key, default in _JSON_RUN_FIELDS.items():
        data[key] = json.loads(data[key]) if data.get(key) else default
    return RunRecord(**data)


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
