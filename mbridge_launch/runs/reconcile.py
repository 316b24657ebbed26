"""Bring the ledger in line with what Slurm actually has.

Two jobs:
- `reconcile_submitting`: rows left in `submitting` (the process died between the ledger write and
  the scheduler's answer) become `submitted` with the job found in squeue/sacct (by the unique
  token the executor put in the job's comment, else by job name and submit-time window), or
  `lost` when Slurm has no such job. A row whose submitter may still be running is left alone.
- `refresh_runs`: active runs get their current Slurm state.

Both take a `SlurmQuery` so tests can fake Slurm; `SacctQuery` is the real one (squeue for live
jobs, sacct for finished ones, both with parsable output, run through the executors' Slurm layer).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Iterable, Optional, Protocol

from mbridge_launch.executors.slurm_cli import SlurmUnavailable as SlurmUnavailable
from mbridge_launch.executors.slurm_cli import call
from mbridge_launch.runs import ledger as L

# How long a `submitting` row from another host (whose process we cannot check) is given.
DEFAULT_GRACE_S = 120.0
# Slurm's submit time comes from the controller's clock; allow this much skew.
CLOCK_SLACK_S = 300.0
_FIELDS = ("job_id", "name", "state", "submit", "comment")

_SLURM_TO_RUN = {
    "PENDING": L.PENDING, "REQUEUED": L.PENDING, "REQUEUE_FED": L.PENDING, "REQUEUE_HOLD": L.PENDING,
    "RUNNING": L.RUNNING, "COMPLETING": L.RUNNING, "CONFIGURING": L.RUNNING, "SUSPENDED": L.RUNNING,
    "STOPPED": L.RUNNING, "SIGNALING": L.RUNNING, "STAGE_OUT": L.RUNNING, "RESIZING": L.RUNNING,
    "COMPLETED": L.COMPLETED, "CANCELLED": L.CANCELLED, "TIMEOUT": L.TIMEOUT,
    "FAILED": L.FAILED, "NODE_FAIL": L.FAILED, "OUT_OF_MEMORY": L.FAILED, "BOOT_FAIL": L.FAILED,
    "DEADLINE": L.FAILED, "PREEMPTED": L.FAILED, "REVOKED": L.FAILED, "SPECIAL_EXIT": L.FAILED,
}


def run_state_for(slurm_state: str) -> str | None:
    """Ledger state for a Slurm state such as 'CANCELLED by 0' (None if unknown)."""
    word = (slurm_state or "").split()[0].rstrip("+").upper() if slurm_state else ""
    return _SLURM_TO_RUN.get(word)


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    name: str
    state: str  # Slurm's word, e.g. RUNNING
    submit_time: Optional[float]  # epoch seconds
    comment: str = ""


class SlurmQuery(Protocol):
    def job_states(self, job_ids: list[str]) -> dict[str, JobInfo]: ...

    def find_jobs(self, *, name: str | None, token: str | None, since: float) -> list[JobInfo]: ...


@dataclass
class ReconcileResult:
    run_id: int
    outcome: str  # submitted, lost, waiting, ambiguous, unknown (Slurm could not be asked)
    job_ids: list[str]


def _submitter_may_be_alive(submitter: str | None) -> bool:
    if not submitter or ":" not in submitter:
        return True
    host, _, pid_text = submitter.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another login node: cannot tell, rely on the grace period
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reconcile_submitting(ledger: L.Ledger, query: SlurmQuery, *, now: float | None = None,
                         grace_s: float = DEFAULT_GRACE_S) -> list[ReconcileResult]:
    now = time.time() if now is None else now
    results: list[ReconcileResult] = []
    stuck = ledger.list_runs(limit=None, states={L.SUBMITTING})
    if not stuck:
        return results
    claimed = {j for r in ledger.list_runs(limit=None) for j in r.job_ids}
    for run in stuck:
        if run.submitter == f"{socket.gethostname()}:{os.getpid()}":
            continue  # this very process is submitting it
        if now - run.created_at < grace_s and _submitter_may_be_alive(run.submitter):
            results.append(ReconcileResult(run.id, "waiting", []))
            continue
        try:
            found = [j for j in query.find_jobs(name=run.job_name, token=run.job_token,
                                                since=run.created_at - CLOCK_SLACK_S) if j.job_id not in claimed]
        except SlurmUnavailable:
            results.append(ReconcileResult(run.id, "unknown", []))
            continue
        by_token = [j for j in found if run.job_token and (run.job_token in j.comment or run.job_token in j.name)]
        by_name = [j for j in found if j.name == run.job_name and
                   (j.submit_time is None or j.submit_time >= run.created_at - CLOCK_SLACK_S)]
        matches = by_token or by_name
        if len(matches) == 1:
            job = matches[0]
            ledger.mark_submitted(run.id, [job.job_id], raw_output="reconciled from Slurm")
            state = run_state_for(job.state)
            ledger.set_state(run.id, state or L.SUBMITTED, slurm_state=job.state, kind="reconcile",
                             detail={"found_by": "token" if by_token else "name+time", "job_id": job.job_id})
            claimed.add(job.job_id)
            results.append(ReconcileResult(run.id, "submitted", [job.job_id]))
        elif not matches:
            ledger.set_state(run.id, L.LOST, kind="reconcile", error="no Slurm job found for this submission",
                             detail={"searched": {"name": run.job_name, "token": run.job_token}})
            results.append(ReconcileResult(run.id, "lost", []))
        else:
            ids = [j.job_id for j in matches]
            ledger.add_event(run.id, "reconcile_ambiguous", {"candidates": ids})
            results.append(ReconcileResult(run.id, "ambiguous", ids))
    return results


def refresh_runs(ledger: L.Ledger, query: SlurmQuery, runs: Iterable[L.RunRecord], *,
                 raise_unavailable: bool = False) -> list[L.RunRecord]:
    """Update active runs from Slurm; returns the runs as they are now (inactive ones unchanged).
    When Slurm cannot be asked the recorded states are kept (or SlurmUnavailable is raised)."""
    runs = list(runs)
    wanted = [r for r in runs if r.active and r.job_ids]
    ids = sorted({r.job_ids[0] for r in wanted})
    try:
        states = query.job_states(ids) if ids else {}
    except SlurmUnavailable:
        if raise_unavailable:
            raise
        return runs
    out = []
    for run in runs:
        job = states.get(run.job_ids[0]) if run.job_ids and run in wanted else None
        new_state = run_state_for(job.state) if job else None
        if job and new_state and (new_state != run.state or job.state != run.slurm_state):
            run = ledger.set_state(run.id, new_state, slurm_state=job.state)
        out.append(run)
    return out


# ---------------------------------------------------------------------- the real Slurm
def _parse_time(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def _parse_rows(text: str) -> list[JobInfo]:
    jobs = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 4 or not parts[0].strip():
            continue
        comment = "|".join(parts[4:]) if len(parts) > 4 else ""
        jobs.append(JobInfo(parts[0].strip(), parts[1], parts[2].strip(), _parse_time(parts[3]), comment))
    return jobs


class SacctQuery:
    """squeue (live jobs, freshest state) + sacct (finished jobs), parsable output."""

    def __init__(self, user: str | None = None, timeout_s: float = 30.0) -> None:
        self.user = user or L._user()
        self.timeout_s = timeout_s

    def _run(self, argv: list[str]) -> Optional[str]:
        """stdout, or None when the command is missing, hangs or fails."""
        try:
            proc = call(argv, timeout=self.timeout_s)
        except SlurmUnavailable:
            return None
        return proc.stdout if proc.ok else None

    def _squeue(self) -> Optional[list[JobInfo]]:
        out = self._run(["squeue", "-h", "-u", self.user, "-o", "%i|%j|%T|%V|%k"])
        return None if out is None else _parse_rows(out)

    def _sacct(self, extra: list[str]) -> Optional[list[JobInfo]]:
        out = self._run(["sacct", "-X", "-P", "-n", "-u", self.user,
                         "--format=JobIDRaw,JobName,State,Submit,Comment", *extra])
        return None if out is None else _parse_rows(out)

    def job_states(self, job_ids: list[str]) -> dict[str, JobInfo]:
        if not job_ids:
            return {}
        wanted = set(job_ids)
        history, live = self._sacct(["-j", ",".join(job_ids)]), self._squeue()
        if history is None and live is None:
            raise SlurmUnavailable("squeue and sacct both failed")
        found = {j.job_id: j for j in history or [] if j.job_id in wanted}
        # squeue wins for live jobs: sacct lags a few seconds behind the controller.
        found.update({j.job_id: j for j in live or [] if j.job_id in wanted})
        return found

    def find_jobs(self, *, name: str | None, token: str | None, since: float) -> list[JobInfo]:
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        extra = ["-S", start] + (["--name", name] if name and not token else [])
        history, live = self._sacct(extra), self._squeue()
        jobs = {j.job_id: j for j in history or []}
        jobs.update({j.job_id: j for j in live or []})
        matches = [j for j in jobs.values()
                   if (name and j.name == name) or (token and (token in j.comment or token in j.name))]
        if not matches and history is None:
            # Without accounting a finished job is invisible: "not found" would be a guess.
            raise SlurmUnavailable("sacct failed; cannot tell whether the job ever existed")
        return matches
