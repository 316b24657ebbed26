"""The Plan a run is resubmitted with after a rollback: the batches to skip and/or a new seed as
convergence changes, loading from the rolled-back save directory. Shared by `rollback --resubmit`
and the auto-rollback watcher (through the gate)."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from mbridge_launch.base.i18n import msg
from mbridge_launch.plan.model import Override, Plan, plan_from_dict

SKIP_KEY = "train.iterations_to_skip"
SEED_KEY = "rng.seed"


def resubmission_plan(plan: Plan, *, reason: Any, skip_iters: Iterable[int] = (), seed: Optional[int] = None) -> Plan:
    """The plan to resubmit after a rollback: `skip_iters` added to train.iterations_to_skip
    (the batches are consumed without an update) and/or a new `rng.seed`, each a convergence
    change with `reason`; checkpoint.load set to the save directory when empty, so the new job
    resumes from the rolled-back trackers. Shared by the watcher and `rollback --resubmit`."""
    data = plan.canonical_dict()
    skips: set[int] = set()
    kept = []
    for o in data["overrides"]:
        if o["key"] == SKIP_KEY:
            skips |= {int(x) for x in o["value"].strip("[] ").split(",") if x.strip()}
        elif not (seed is not None and o["key"] == SEED_KEY):
            kept.append(o)
    skips |= {int(i) for i in skip_iters}

    def change(key: str, value: str) -> dict:
        return Override.model_validate({"key": key, "value": value, "class": "convergence", "reason": reason,
                                        "source": "launcher"}).model_dump(mode="json", by_alias=True)

    if skips:
        kept.append(change(SKIP_KEY, "[" + ",".join(map(str, sorted(skips))) + "]"))
    if seed is not None:
        kept.append(change(SEED_KEY, str(int(seed))))
    data["overrides"] = kept
    if not data["checkpoint"].get("load"):
        data["checkpoint"]["load"] = data["checkpoint"].get("save")
    return plan_from_dict(data, "resubmission")


def skip_plan(plan: Plan, iteration: int, reason: Any) -> Plan:
    return resubmission_plan(plan, reason=reason, skip_iters=[iteration])


def auto_rollback_plan(plan: Plan, to_iter: int, trigger: Any) -> Plan:
    """The plan the watcher resubmits: `plan` with the trigger's batch skipped (`trigger`: a
    rollback.lossmon.Trigger, read for its kind and iteration)."""
    reason = msg("change.reason.auto_rollback", to_iter=to_iter, kind=trigger.kind, iteration=trigger.iteration)
    return skip_plan(plan, trigger.iteration, reason)
