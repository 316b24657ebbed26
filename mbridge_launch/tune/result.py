"""The outcome of `tune` written into the Plan: the winning layout as execution-class overrides
(tune.layout_change; GBS and sequence length unchanged, so the convergence contract is the
Plan's), the estimates of that layout, and a `tune` record of every trial. When the Plan's own
layout won, only the record is added.

The new Plan must pass preflight without the cluster before it replaces the file (atomically):
a rewrite that the card or `preflight` would refuse is not written. The rewrite is a round-trip
edit of the user's file (plan.model.rewrite_plan): only the changed values are written, every
comment and the key order stay, and the previous file is kept beside it as PLAN.~N~.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.errors import CheckFailed
from mbridge_launch.base.i18n import msg
from mbridge_launch.plan.model import Estimates, Plan, Rewritten, TuneRecord, TuneTrial, rewrite_plan
from mbridge_launch.tune.layout_change import apply_layout
from mbridge_launch.tune.session import Outcome
from mbridge_launch.tune.trials import plan_request


def tune_record(outcomes: list[Outcome], winner: Optional[Outcome], steps: int) -> TuneRecord:
    trials = []
    for o in outcomes:
        item, cand = o.trial.layout, o.trial.layout.candidate
        trials.append(TuneTrial(
            name=o.trial.plan.name, layout=item.label, planner_rank=item.rank,
            predicted_tokens_per_sec_per_gpu=round(cand.tokens_per_sec_per_gpu, 1) if cand is not None else None,
            job_id=o.job_id, state=o.state, step_time_s=_round(o.step_time_s, 4),
            tokens_per_sec_per_gpu=_round(o.tokens_per_sec_per_gpu, 1), peak_memory_gb=_round(o.peak_memory_gb, 2),
            diagnosis=o.problem, won=o is winner))
    return TuneRecord(at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), steps=steps, trials=trials,
                      winner=winner.trial.plan.name if winner is not None else None)


def _round(value: Optional[float], digits: int) -> Optional[float]:
    return None if value is None else round(value, digits)


def tuned_plan(plan: Plan, winner: Outcome, record: TuneRecord) -> Plan:
    """The Plan with the winner's layout (unless it is the Plan's own) and the record."""
    item = winner.trial.layout
    if not item.own and item.candidate is not None:
        req = plan_request(plan)
        reason = msg("change.reason.tune_layout", step=round(winner.step_time_s or 0.0, 4),
                     trials=len(record.trials), winner=winner.trial.plan.name)
        plan = apply_layout(plan, item.candidate, req.arch, req.precision, reason=reason, recipe=req.recipe)
        plan = plan.model_copy(update={"estimates": _estimates(plan.estimates, item.candidate)})
    data = plan.model_dump(mode="python", by_alias=True)
    data["tune"] = record.model_dump(mode="python")
    return Plan.model_validate(data)


def _estimates(old: Estimates, cand: Any) -> Estimates:
    """The planner's estimates of the new layout (as recommend.to_plan records them); the
    measured figures are in the tune record."""
    return old.model_copy(update={
        "memory_gb_per_gpu": round(cand.memory_total_gb, 2),
        "memory_breakdown_gb": {k: round(v, 2) for k, v in cand.memory_gb.items()},
        "step_time_s": round(cand.step_time_s, 3),
        "tokens_per_sec_per_gpu": round(cand.tokens_per_sec_per_gpu, 0),
        "model_tflops_per_gpu": round(cand.model_tflops_per_gpu, 1),
        "mfu": round(cand.mfu, 3),
    })


def write_tuned(before: Plan, plan: Plan, path: str | Path) -> Rewritten:
    """Preflight without the cluster, then the atomic rewrite; CheckFailed (nothing written)
    when preflight finds an error in the new Plan that the Plan as it was did not have."""
    from mbridge_launch.preflight.runner import run_preflight

    new = set(run_preflight(plan, cluster=False).codes("error"))
    if new:
        new -= set(run_preflight(before, cluster=False).codes("error"))
    if new:
        raise CheckFailed("tune.rewrite_refused", path=str(path), codes=", ".join(sorted(new)))
    return rewrite_plan(path, before, plan)
