"""The trials of `tune PLAN`: the layouts the throughput model cannot tell apart, each as a short
derived Plan.

The layouts: the planner's answer (planner.entry.plan_request) to the Plan's own request (model,
system, GPU count, GBS, sequence length, precision, goal): its near-tie set within the request's
leave-one-out error, the Plan's own layout kept in (it is what runs if
nothing measures faster), at most `max_layouts` of them.

A trial Plan is the Plan with one of those layouts written as overrides (tune.layout_change, the
mapping of recommend.plan_file), mock data (pretraining), `train.train_iters=<steps>`, its own
fresh checkpoint directory (never the Plan's: a trial must not resume from, or write into, the
run it measures for), a short time limit, no auto-rollback, and the run name `<plan>-tune-<i>`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.i18n import msg
from mbridge_launch.plan.changecontrol import classify
from mbridge_launch.plan.model import DatasetSpec, Override, Plan
from mbridge_launch.planner.rules import SHARED_FIELDS
from mbridge_launch.tune import DEFAULT_MAX_LAYOUTS, DEFAULT_STEPS, DEFAULT_TIME_LIMIT  # noqa: F401 - re-exported
from mbridge_launch.tune.layout_change import apply_layout, layout_label

# the fields that make two layouts the same run (dp follows from the world size; the distributed
# optimizer is the Plan's own choice, which a layout change keeps: tune.layout_change)
_SAME_LAYOUT = tuple(name for name in SHARED_FIELDS if name not in ("gbs", "seq_length", "distributed_optimizer"))


@dataclass(frozen=True)
class Request:
    """What the Plan asks the planner, read from the Plan (as preflight reads it)."""

    arch: Any
    hardware: Any
    gpus: int
    gbs: int
    seq_length: int
    precision: str
    goal: str
    model: str
    # the Plan's catalog recipe (None: not in the catalog): the planner estimates every layout with
    # its settings, as preflight reads them back (planner.entry.PlanRequest.recipe)
    recipe: Any = None


@dataclass(frozen=True)
class Layout:
    """One layout to measure: its planner candidate (None: the Plan's own, when the search did
    not list it), its rank in the planner's order, and whether it is the Plan's own."""

    candidate: Any
    rank: Optional[int]
    own: bool
    label: str


@dataclass(frozen=True)
class Trial:
    index: int  # from 1, as in the run name
    layout: Layout
    plan: Plan


def plan_request(plan: Plan) -> Request:
    """The planner's request of a Plan; a Plan whose model or system the knowledge base does not
    know cannot be searched (bad input)."""
    from mbridge_launch.preflight.context import PreflightContext
    from mbridge_launch.preflight.plan_checks import plan_precision

    ctx = PreflightContext(plan)
    arch, hw = ctx.arch(), ctx.hardware()
    if not arch.ok or not hw.ok:
        raise UserError("tune.unknown_model", model=plan.recipe.model, gpu_type=plan.cluster.gpu_type,
                        reason=arch.reason if not arch.ok else hw.reason)
    p = plan.parallelism
    recipe = ctx.recipe()
    return Request(arch.value, hw.value, plan.cluster.total_gpus, p.gbs, p.seq_length, plan_precision(ctx), plan.mode,
                   plan.recipe.model, recipe.value if recipe.ok else None)


def same_layout(a: Any, b: Any) -> bool:
    return all(getattr(a, name) == getattr(b, name) for name in _SAME_LAYOUT)


def near_tie_layouts(plan: Plan, max_layouts: int = DEFAULT_MAX_LAYOUTS, *, top: int = 20) -> list[Layout]:
    """The near-tie set of the Plan's request in the planner's order, the Plan's own layout
    included (in its rank when the set holds it, else last, in place of the set's last one when
    the cap is reached), at most `max_layouts` layouts."""
    from mbridge_launch.planner.entry import calibration_in_use
    from mbridge_launch.planner.entry import plan_request as ask_planner

    if max_layouts < 1:
        raise UserError("tune.max_layouts", value=max_layouts)
    req = plan_request(plan)
    calibration = calibration_in_use()  # the state directory's calibration, else the shipped constants
    # the ranking, estimates and near-tie set `plan` gives for this request (planner.entry)
    result = ask_planner(_planner_request(req, top), calibration, nvidia=False)
    own = plan.parallelism
    found = [Layout(c, rank, same_layout(c.layout, own), layout_label(c.layout)) for rank, c in result.near_tie]
    chosen = found[:max_layouts]
    if not any(item.own for item in chosen):
        mine = next((item for item in found if item.own), None) or _own_layout(plan, result.candidates, req, calibration)
        chosen = chosen[:max_layouts - 1] + [mine]
    return chosen


def _planner_request(req: Request, top: int | None = None) -> Any:
    """The Plan's request as the planner's entry point takes it (planner.entry.PlanRequest)."""
    from mbridge_launch.planner.entry import PlanRequest

    return PlanRequest(req.model, req.arch, req.hardware, req.gpus, req.gbs, req.seq_length, req.precision, req.goal,
                       top=top, recipe=req.recipe)


def _own_layout(plan: Plan, candidates: list[Any], req: Request, calibration: Any) -> Layout:
    """The Plan's own layout: its place in the planner's list, else the planner's estimate of
    it with no rank (the search keeps the best variant of each grid, not every one)."""
    from mbridge_launch.planner.entry import estimate_request
    from mbridge_launch.preflight.context import PreflightContext
    from mbridge_launch.preflight.plan_checks import plan_layout

    for rank, c in enumerate(candidates, 1):
        if same_layout(c.layout, plan.parallelism):
            return Layout(c, rank, True, layout_label(c.layout))
    # the layout as preflight reads it from the Plan (its recipe's settings under its overrides)
    estimate = estimate_request(_planner_request(req), plan_layout(PreflightContext(plan)), calibration).candidate
    return Layout(estimate, None, True, layout_label(plan.parallelism))


def trial_root(plan: Plan, base: Optional[Path] = None) -> Path:
    """A new directory for one tune session's trials: beside the Plan's checkpoint directory
    (shared storage the nodes see), else under its work directory; its name is unique, so a
    trial never finds an earlier trial's checkpoint to resume from."""
    if base is None:
        save = plan.checkpoint.save
        base = Path(save).parent if save else Path(plan.launch.workdir or Path.cwd()) / "tune"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path(base) / f"{plan.name}-tune-{stamp}-{secrets.token_hex(2)}"


def trial_plans(plan: Plan, layouts: list[Layout], root: Path, *, steps: int = DEFAULT_STEPS,
                time_limit: str = DEFAULT_TIME_LIMIT) -> list[Trial]:
    if steps < 1:
        raise UserError("tune.steps", value=steps)
    req = plan_request(plan)
    return [Trial(i, item, trial_plan(plan, item, req, root / str(i), name=f"{plan.name}-tune-{i}", steps=steps,
                                      time_limit=time_limit))
            for i, item in enumerate(layouts, 1)]


def trial_plan(plan: Plan, layout: Layout, req: Request, directory: Path, *, name: str, steps: int,
               time_limit: str) -> Plan:
    """One trial (module docstring). Its overrides: the layout's (execution class), then the
    trial's length; checkpoint settings of the Plan's own are dropped (the trial saves only at its
    end, into its own directory)."""
    data = plan.model_dump(mode="python", by_alias=True)
    data.pop("tune", None)  # a tune record belongs to the Plan it measured, not to a trial
    derived = Plan.model_validate(data)
    if layout.candidate is not None and not layout.own:
        derived = apply_layout(derived, layout.candidate, req.arch, req.precision, recipe=req.recipe)
    dropped = ("train.train_iters", "checkpoint.save_interval", "checkpoint.save", "checkpoint.load")
    kept = [o for o in derived.overrides if o.key.lstrip("+") not in dropped]
    kept.append(Override.model_validate({
        "key": "train.train_iters", "value": str(steps), "from": _override(plan, "train.train_iters"),
        "class": classify("train.train_iters").change_class, "reason": msg("change.reason.tune_trial", steps=steps),
        "source": "tune"}))
    save = str(directory / "checkpoints")
    values: dict[str, Any] = {
        "name": name, "overrides": kept,
        "checkpoint": derived.checkpoint.model_copy(update={"save": save, "load": save, "save_interval": None}),
        "cluster": derived.cluster.model_copy(update={"time": time_limit}),
        "auto_rollback": derived.auto_rollback.model_copy(update={"enabled": False}),
        "launch": derived.launch.model_copy(update={"log_dir": str(directory / "logs")}),
    }
    if plan.mode == "pretrain":  # mock data is for pretraining only (run_recipe.py refuses it otherwise)
        values["dataset"] = DatasetSpec(selector="mock")
    data = derived.model_dump(mode="python", by_alias=True)
    data.update({k: (v.model_dump(mode="python", by_alias=True) if hasattr(v, "model_dump") else v)
                 for k, v in values.items()})
    data["overrides"] = [o.model_dump(mode="python", by_alias=True) for o in kept]
    return Plan.model_validate(data)


def _override(plan: Plan, key: str) -> Optional[str]:
    found = None
    for item in plan.overrides:
        if item.key.lstrip("+") == key:
            found = item.value
    return found


def gpu_hours_total(trials: list[Trial]) -> float:
    """What the one confirmation covers: the sum over trials of GPUs x time limit."""
    from mbridge_launch.gate.card import gpu_hours

    return sum(gpu_hours(trial.plan) for trial in trials)
