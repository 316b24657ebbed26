"""Bring the ledger in line with what Slurm actually has.

Two jobs:
- `reconcile_submitting`: every run that may have a job the ledger does not know (rows left in
  `submitting` by a process that died between the ledger write and the scheduler's answer, and
  `submit_failed` rows whose failure came after the scheduler was called and was not Slurm's
  definite refusal) is matched to its job by the exact token the executor put in the job's
  comment; only for an executor that does not take the token (a plugin) by job name and submit
  time. A hand-submitted job with the same name is therefore never adopted and never makes a run
  ambiguous. Found: the run gets its job and state, with an event saying how it was found; not
  found: a `submitting` row becomes `lost`, a `submit_failed` one stops being looked for. A row
  whose submitter may still be running is left alone.
- `refresh_runs`: active runs get their current Slurm state.

Both take a `SlurmQuery` so tests can fake Slurm; `SacctQuery` (runs/slurm_jobs.py) is the real one.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Protocol

from mbridge_launch.base.errors import UserError
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.slurm_jobs import JobInfo as JobInfo
from mbridge_launch.runs.slurm_jobs import SacctQuery as SacctQuery
from mbridge_launch.slurm.commands import SlurmUnavailable as SlurmUnavailable

# How long a `submitting` row from another host (whose process we cannot check) is given.
DEFAULT_GRACE_S = 120.0
# Slurm's submit time comes from the controller's clock; allow this much skew.
CLOCK_SLACK_S = 300.0

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


class SlurmQuery(Protocol):
    def job_states(self, job_ids: list[str]) -> dict[str, JobInfo]: ...

    def find_jobs(self, *, name: str | None, token: str | None, since: float) -> list[JobInfo]: ...


@dataclass
class ReconcileResult:
    run_id: int
    # submitted, lost, no_job (a submit_failed run: none found), waiting, ambiguous,
    # unknown (Slurm could not be asked)
    outcome: str
    job_ids: list[str]
    # lost / no_job where accounting keeps no comments: finished jobs of the same name, to adopt by hand
    candidates: list[str] = field(default_factory=list)


def executor_takes_token(run: L.RunRecord) -> bool:
    """Whether the run's executor passed the ledger's token to Slurm (executors/launch.py
    `_takes_token`): every shipped one does; a plugin that does not is matched by name and time."""
    from mbridge_launch.executors import get_executor
    from mbridge_launch.executors.launch import _takes_token, executor_options

    try:
        executor = get_executor(run.executor, **executor_options(run.executor, None))
    except Exception:  # noqa: BLE001 - an executor no longer installed: it cannot tell; use the name
        return False
    return _takes_token(executor)


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
    candidates = [] if ledger.read_only else ledger.reconcile_candidates()  # nothing could be recorded
    if not candidates:
        return results
    claimed = {j for r in ledger.list_runs(limit=None) for j in r.job_ids}
    for run in candidates:
        if run.submitter == f"{socket.gethostname()}:{os.getpid()}" and run.state == L.SUBMITTING:
            continue  # this very process is submitting it
        if (run.state == L.SUBMITTING and now - run.created_at < grace_s
                and _submitter_may_be_alive(run.submitter)):
            results.append(ReconcileResult(run.id, "waiting", []))
            continue
        result = _reconcile_one(ledger, query, run, claimed)
        claimed.update(result.job_ids if result.outcome == "submitted" else [])
        results.append(result)
    return results


def _reconcile_one(ledger: L.Ledger, query: SlurmQuery, run: L.RunRecord, claimed: set[str]) -> ReconcileResult:
    by_token = executor_takes_token(run)
    try:
        found = [j for j in query.find_jobs(name=run.job_name, token=run.job_token if by_token else None,
                                            since=run.created_at - CLOCK_SLACK_S) if j.job_id not in claimed]
    except SlurmUnavailable:
        return ReconcileResult(run.id, "unknown", [])
    if by_token:
        matches = [j for j in found if j.comment.strip() == run.job_token]
    else:
        matches = [j for j in found if j.name == run.job_name and
                   (j.submit_time is None or j.submit_time >= run.created_at - CLOCK_SLACK_S)]
    if len(matches) == 1:
        job = matches[0]
        ledger.record_found_job(run.id, job.job_id, run_state_for(job.state) or L.SUBMITTED, job.state,
                                kind="reconcile", detail={"found_by": "token" if by_token else "name+time",
                                                          "job_id": job.job_id, "was": run.state})
        try:
            why = _finish_interrupted(run, job.job_id)
        except SlurmUnavailable:  # the release did not go through: the next refresh releases it
            ledger.add_event(run.id, "release_pending", {"job_ids": [job.job_id]})
            return ReconcileResult(run.id, "submitted", [job.job_id])
        if why:
            ledger.set_state(run.id, L.CANCELLED, error=why, kind="reconcile",
                             detail={"job_id": job.job_id, "finished_by": run.executor})
        return ReconcileResult(run.id, "submitted", [job.job_id])
    if matches:
        ids = [j.job_id for j in matches]
        ledger.add_event(run.id, "reconcile_ambiguous", {"candidates": ids})
        return ReconcileResult(run.id, "ambiguous", ids)
    searched: dict[str, object] = {"token": run.job_token} if by_token else {"name": run.job_name}
    candidates = _same_name_unmatched(query, run, claimed) if by_token else []
    if candidates:
        # a finished job's comment is gone where accounting keeps none: never adopted by name
        # (a hand-submitted job may have it), only named, for `runs adopt`
        searched["same_name_jobs"] = candidates
        ledger.add_event(run.id, "reconcile_candidates", {"job_ids": candidates, "why": "accounting keeps no comments"})
    if run.state == L.SUBMITTING:
        ledger.set_state(run.id, L.LOST, kind="reconcile", error="no Slurm job found for this submission",
                         detail={"searched": searched})
        if run.may_have_job:
            ledger.settle_no_job(run.id, {"searched": searched, "by": "reconcile"})
        return ReconcileResult(run.id, "lost", [], candidates)
    ledger.settle_no_job(run.id, {"searched": searched, "by": "reconcile"})
    return ReconcileResult(run.id, "no_job", [], candidates)


def _finish_interrupted(run: L.RunRecord, job_id: str) -> Optional[str]:
    """An executor whose submission has a step after sbatch (submitit renames the job's pickle and
    then releases the held job) completes or cancels what the dead process left: its reason when
    the job was cancelled, else None; SlurmUnavailable when Slurm did not take the release."""
    from mbridge_launch.executors import get_executor
    from mbridge_launch.executors.launch import executor_options

    try:
        executor = get_executor(run.executor, **executor_options(run.executor, Path(run.work_dir) if run.work_dir else None))
        finish = getattr(executor, "finish_interrupted", None)
        return finish(run.plan(), job_id, Path(run.work_dir) if run.work_dir else None) if finish else None
    except UserError:  # the executor's library is gone, or the plan no longer loads: leave the job as found
        return None


def _release_held(ledger: L.Ledger, run: L.RunRecord, job_id: str) -> bool:
    """A job submitted held whose release did not go through (its submission recorded
    `release_pending`): the executor completes its submission now, as for a dead submitter
    (release when the job can run, else cancel with the reason). Slurm still silent: left for the
    next look. True when the executor cancelled the job instead."""
    try:
        reason = _finish_interrupted(run, job_id)
    except SlurmUnavailable:
        return False
    ledger.add_event(run.id, "released", {"job_id": job_id, "cancelled": reason})
    if reason:
        ledger.set_state(run.id, L.CANCELLED, error=reason, kind="reconcile",
                         detail={"job_id": job_id, "finished_by": run.executor})
    return bool(reason)


def _same_name_unmatched(query: SlurmQuery, run: L.RunRecord, claimed: set[str]) -> list[str]:
    """Where accounting keeps no job comments (Slurm's default), a job of this run that has left
    squeue cannot show its token: the finished jobs of the same name since the submission, with
    no comment and no owner in the ledger, are the candidates a user may adopt by hand."""
    kept = getattr(query, "comments_kept", None)
    if kept is None or kept():
        return []
    try:
        found = query.find_jobs(name=run.job_name, token=None, since=run.created_at - CLOCK_SLACK_S)
    except SlurmUnavailable:
        return []
    return sorted((j.job_id for j in found if j.job_id not in claimed and not j.comment.strip()
                   and run_state_for(j.state) in L.FINAL_STATES), key=lambda i: (len(i), i))


def refresh_runs(ledger: L.Ledger, query: SlurmQuery, runs: Iterable[L.RunRecord], *,
                 raise_unavailable: bool = False) -> list[L.RunRecord]:
    """Update active runs from Slurm; returns the runs as they are now (inactive ones unchanged).
    When Slurm cannot be asked the recorded states are kept (or SlurmUnavailable is raised).
    A read-only ledger cannot take new states: they are shown as last recorded."""
    runs = list(runs)
    if ledger.read_only:
        return runs
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
        if job and job.state == "PENDING" and job.reason.startswith("JobHeld") and ledger.release_pending(run.id):
            if _release_held(ledger, run, job.job_id):  # cancelled: the state read before is stale
                out.append(ledger.get_run(run.id))
                continue
        new_state = run_state_for(job.state) if job else None
        if job and new_state and (new_state != run.state or job.state != run.slurm_state):
            run = ledger.set_state(run.id, new_state, slurm_state=job.state)
        out.append(run)
    return out
