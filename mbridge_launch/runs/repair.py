"""Repairing the ledger by hand, for what reconciliation cannot settle (`runs adopt|mark-lost|forget`).

Each repair is confirmed like `cancel` (the typed run name, or --yes), needs a reason, and is
recorded twice: an event on the run (what changed) and a row of the confirmations table (who,
when, how confirmed, why). Nothing is deleted: `forget` moves the run to the final state
`forgotten`, which hides it from `runs`, from the active checks and from the duplicate and
save-directory guards, while `runs --all` and `status` still show it with its history.
"""

from __future__ import annotations

from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.reconcile import SlurmQuery, SlurmUnavailable, run_state_for


def adopt(ledger: L.Ledger, run: L.RunRecord, job_id: str, query: SlurmQuery, *, reason: str,
          method: str) -> L.RunRecord:
    """Give `run` the Slurm job `job_id`: it must exist in Slurm and belong to no other run."""
    job_id = job_id.strip()
    if not job_id.isdigit():
        raise UserError("repair.bad_job_id", value=job_id)
    holders = [r for r in ledger.job_holders(job_id) if r.id != run.id]
    if holders:
        raise CheckFailed("repair.job_held", job=job_id, run=holders[0].name, id=holders[0].id)
    try:
        job = query.job_states([job_id]).get(job_id)
    except SlurmUnavailable:
        raise CheckFailed("repair.slurm_unavailable", action="adopt") from None
    if job is None:
        raise CheckFailed("repair.job_not_found", job=job_id)
    detail = {"reason": reason, "job_name": job.name, "found_by": "adopt", "was": run.state}
    record = ledger.record_found_job(run.id, job_id, run_state_for(job.state) or L.SUBMITTED, job.state,
                                     kind="adopt", detail=detail)
    ledger.record_confirmation(run.id, "adopt", method, {"job_id": job_id, "reason": reason})
    return record


def mark_lost(ledger: L.Ledger, run: L.RunRecord, query: SlurmQuery, *, reason: str, method: str) -> L.RunRecord:
    """Declare that `run` has no job (any more): refused while Slurm still runs its job."""
    _refuse_if_live(run, query, "mark-lost")
    record = ledger.set_state(run.id, L.LOST, kind="mark_lost", detail={"reason": reason, "was": run.state})
    _stop_looking(ledger, record, reason)
    ledger.record_confirmation(run.id, "mark-lost", method, {"reason": reason, "was": run.state})
    return ledger.get_run(run.id)


def forget(ledger: L.Ledger, run: L.RunRecord, *, reason: str, method: str) -> L.RunRecord:
    """Hide `run` from the active checks and the guards; its row and history stay."""
    if run.state == L.FORGOTTEN:
        return run
    record = ledger.set_state(run.id, L.FORGOTTEN, kind="forget", detail={"reason": reason, "was": run.state})
    _stop_looking(ledger, record, reason)
    ledger.record_confirmation(run.id, "forget", method, {"reason": reason, "was": run.state})
    return ledger.get_run(run.id)


def _stop_looking(ledger: L.Ledger, run: L.RunRecord, reason: str) -> None:
    if run.may_have_job:
        ledger.settle_no_job(run.id, {"by": "repair", "reason": reason})


def _refuse_if_live(run: L.RunRecord, query: SlurmQuery, action: str) -> None:
    if not run.job_ids:
        return
    try:
        states = query.job_states(list(run.job_ids))
    except SlurmUnavailable:
        raise CheckFailed("repair.slurm_unavailable", action=action) from None
    live = [j for j, info in states.items() if run_state_for(info.state) in L.ACTIVE_STATES]
    if live:
        raise CheckFailed("repair.job_still_live", run=run.name, id=run.id, jobs=", ".join(live))
