"""The Plan a run is resubmitted with after a rollback: the batches to skip and/or a new seed as
convergence changes, loading from the rolled-back save directory. Shared by `rollback --resubmit`
and the auto-rollback watcher (through the gate)."""

from __future__ import annotations

import re
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


EXCLUDE_OPTION = "--exclude"
# A node name (or Slurm host list such as h100-[1-2]) as sbatch --exclude takes it. Node names
# come from a diagnosis, i.e. from log text anyone's job can print: anything else is left out.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-\[\],]{0,127}")


def excluding_nodes_plan(plan: Plan, nodes: Iterable[str]) -> Plan:
    """`plan` with `nodes` added to sbatch's --exclude list (a hardware fault or a failed node:
    the resubmission must not land on it again). Training settings are untouched: the same run
    resumes from its checkpoints on other nodes. An --exclude the user already gave is kept and
    extended, so nodes excluded by earlier retries stay excluded."""
    data = plan.canonical_dict()
    args = list(data["cluster"].get("sbatch_args") or [])
    excluded: list[str] = []
    kept = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == EXCLUDE_OPTION or arg == "-x":
            if i + 1 < len(args):
                excluded += [n for n in args[i + 1].split(",") if n]
            i += 2
            continue
        if arg.startswith(EXCLUDE_OPTION + "="):
            excluded += [n for n in arg.split("=", 1)[1].split(",") if n]
        elif arg.startswith("-x") and len(arg) > 2:
            excluded += [n for n in arg[2:].lstrip("=").split(",") if n]
        else:
            kept.append(arg)
        i += 1
    for node in nodes:
        if node and NODE_NAME.fullmatch(node) and node not in excluded:
            excluded.append(node)
    if excluded:
        kept.append(f"{EXCLUDE_OPTION}={','.join(excluded)}")
    data["cluster"]["sbatch_args"] = kept
    if not data["checkpoint"].get("load"):
        data["checkpoint"]["load"] = data["checkpoint"].get("save")
    return plan_from_dict(data, "resubmission")
