"""The watcher's resubmission after a failure whose diagnosis says a retry helps (a `watch.RetryHook`).

Only two kinds of failure are resubmitted automatically, and only when the Plan enables
auto_rollback and the policy allows it (the watcher decides that, mbridge_launch/watch/):
- a hardware fault or a failed node (`resubmit_excluding_node`): the same Plan with the node(s)
  added to sbatch's --exclude, resuming from the run's checkpoints;
- a transient cause (`resubmit`: a port in use, a lone network flap, a time limit): the same Plan,
  resuming from the run's checkpoints.
Everything else is not retried (a software error fails again; NaN and spikes go through a
rollback that skips the bad batch, never a blind retry). The submission goes through the gate
(preflight, plan card, ledger, policy), confirmed by the plan's auto_rollback consent.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.errors import CheckFailed
from mbridge_launch.gate.submit import resubmit_options, submit_gated
from mbridge_launch.runs.ledger import AUTO_ROLLBACK_METHOD

RETRIED = ("resubmit", "resubmit_excluding_node")


def auto_retry(ledger: Any, run: Any, diagnosis: Any, *, start_watcher: bool = False) -> Any:
    """Resubmit `run` after `diagnosis` (retry in RETRIED); returns the new run record."""
    from mbridge_launch.plan.resubmission import excluding_nodes_plan

    if diagnosis.retry not in RETRIED:
        raise ValueError(f"not a retried cause: {diagnosis.cause} ({diagnosis.retry})")
    plan = run.plan()
    if diagnosis.retry == "resubmit_excluding_node" and diagnosis.exclude_nodes:
        plan = excluding_nodes_plan(plan, diagnosis.exclude_nodes)
    detail = {"reason": "diagnosis", "cause": diagnosis.cause, "retry": diagnosis.retry,
              "exclude_nodes": list(diagnosis.exclude_nodes), "parent_run_id": run.id}
    options = resubmit_options(ledger, run, resubmit=True, confirmed_by=AUTO_ROLLBACK_METHOD,
                               confirmation_detail=detail, watcher=start_watcher)
    try:
        result = submit_gated(plan, options)
    except CheckFailed as exc:
        raise CheckFailed("gate.auto_retry_refused", run=run.name, cause=diagnosis.cause,
                          reason=exc.render()) from None
    return ledger.get_run(result.run_id)
