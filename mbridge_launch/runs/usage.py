"""GPU-hours this user submitted in the last 24 hours, from the ledger (the policy's
max_gpu_hours_per_day). A submission counts from its creation with its full reservation (GPUs x
time limit, policy.cost.gpu_hours), as the per-submission limit does; runs the scheduler refused
(submit_failed) or that never reached Slurm (lost) count nothing. "This user": the gate records
who confirmed each submission; a run without a submit confirmation (written by another tool) is
counted, as the ledger is the user's own unless shared.
"""

from __future__ import annotations

import getpass
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.policy.cost import gpu_hours
from mbridge_launch.runs import ledger as L

DAY_S = 24 * 3600
_NO_JOB = frozenset({L.SUBMIT_FAILED, L.LOST})
_SUBMIT_ACTIONS = ("submit", "resubmit")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container: the uid still names it
        return str(os.getuid())


def run_gpu_hours(run: L.RunRecord) -> float:
    """The reservation of a recorded run, from the cluster settings the ledger keeps."""
    cluster = run.cluster or {}
    try:
        gpus = int(cluster.get("nodes", 1)) * int(cluster.get("gpus_per_node", 8))
        return gpu_hours(gpus, str(cluster.get("time", "0")))
    except (TypeError, ValueError):  # a hand-edited ledger row: count nothing rather than crash
        return 0.0


def _by_user(ledger: L.Ledger, run: L.RunRecord, user: str) -> bool:
    submits = [c for c in ledger.confirmations(run.id) if c.get("action") in _SUBMIT_ACTIONS]
    return not submits or any(c.get("user") == user for c in submits)


def gpu_hours_last_day(ledger: L.Ledger, *, now: Optional[float] = None, user: Optional[str] = None) -> float:
    """The sum of run_gpu_hours over this user's runs created in the last 24 h."""
    since = (time.time() if now is None else now) - DAY_S
    who = user or _user()
    recent = [r for r in ledger.list_runs(limit=None) if r.created_at >= since and r.state not in _NO_JOB]
    return sum(run_gpu_hours(r) for r in recent if _by_user(ledger, r, who))


def usage_callback(ledger_path: Optional[str]) -> Callable[[], float]:
    """For `preflight` and `submit --dry-run`: the ledger is opened only if it exists (a preflight
    creates none) and closed after."""

    def used() -> float:
        path = Path(ledger_path).expanduser() if ledger_path else L.default_ledger_path()
        if not os.path.exists(path):
            return 0.0
        ledger = L.Ledger.open(path, create=False)  # only read: a read-only ledger is fine
        try:
            return gpu_hours_last_day(ledger)
        finally:
            ledger.close()

    return used


def open_ledger_callback(ledger: Any) -> Callable[[], float]:
    """For the gate, which has the ledger open already."""
    return lambda: gpu_hours_last_day(ledger)
