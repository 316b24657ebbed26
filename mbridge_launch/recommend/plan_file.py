"""`plan -o`: write the chosen layout into a Plan (the contract of DESIGN.md).

The recipe, dataset, change classification and cluster defaults come from the recommender (the
model's library recipe for the goal); the planner's layout is passed to it as the user's
ConfigContainer overrides, so every change from the recipe is listed with its class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.i18n import msg
from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS
from mbridge_launch.plan.settings import (
    CHECKPOINT_FORMAT,
    FSDP_SHARDING_STRATEGY,
    full_recompute_settings,
    override_text,
)
from mbridge_launch.planner.recompute import OVERRIDE_KEY, modules_text, planner_modules

# Layout fields always written, then those written only when set (VP, ETP).
_ALWAYS = ("tp", "pp", "cp", "ep", "sp", "mbs", "gbs")
_WHEN_SET = ("vp", "etp")


def layout_overrides(layout: Any, arch: Any = None, precision: str = "bf16") -> list[str]:
    """The layout as run_recipe.py KEY=VALUE overrides. Selective recompute the planner chose
    (no modules of its own) gets the modules the memory model charged (planner.recompute)."""
    items = [f"{LAYOUT_KEYS[attr]}={override_text(getattr(layout, attr))}" for attr in _ALWAYS]
    items += [f"{LAYOUT_KEYS[attr]}={getattr(layout, attr)}" for attr in _WHEN_SET if getattr(layout, attr)]
    if layout.cp > 1 and layout.cp_comm_type:
        items.append(f"model.cp_comm_type={layout.cp_comm_type}")
    if layout.recompute == "selective":
        items.append("model.recompute_granularity=selective")
        modules = getattr(layout, "recompute_modules", None)
        if modules is None:
            items.append(f"{OVERRIDE_KEY}={modules_text(planner_modules(arch, precision))}")
    elif layout.recompute == "full":
        items.append("model.recompute_granularity=full")
        items += [f"{key}={value}" for key, value in full_recompute_settings(layout.recompute_layers).items()]
    if layout.fsdp:
        items += ["ddp.use_megatron_fsdp=true", f"ddp.data_parallel_sharding_strategy={FSDP_SHARDING_STRATEGY}",
                  f"checkpoint.ckpt_format={CHECKPOINT_FORMAT[True]}"]
    if getattr(layout, "split", None) is not None and layout.pp > 1:
        # the planner's pipeline split (recommend switches off a recipe's own mechanism if it must)
        items += [f"{key}={value}" for key, value in layout.split.to_overrides()]
    return items


def _plan_request(got: Any, gpus: int, seq_length: int, overrides: list[str] | None = None) -> Any:
    """The recommend request `plan -o` writes its Plan through."""
    from mbridge_launch.plan.overrides import parse_overrides
    from mbridge_launch.recommend.request import Request

    return Request(model=got.model, gpus=gpus, gpu_type=got.hardware.name, goal=got.goal, seq_length=seq_length,
                   precision=got.precision, overrides=parse_overrides(overrides or []))


def plan_recipe(got: Any, gpus: int, seq_length: int) -> Any:
    """The library recipe a Plan of `plan` runs: the one recommend selects for the request
    write_plan makes (select.recipe_for), so that the planner estimates every layout with that
    recipe's settings (planner.entry.PlanRequest.recipe). None: the model has no such recipe."""
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.recommend import select

    try:
        recipe = select.recipe_for(load_catalog(), got.model, _plan_request(got, gpus, seq_length), got.hardware.name)
    except UserError:
        return None  # no recipe to run: plan ranks with the planner's defaults (plan -o refuses)
    return recipe if getattr(recipe, "kind", "library") == "library" else None


def write_plan(candidate: Any, got: Any, gpus: int, path: str, *, name: str | None = None) -> tuple[Path, str]:
    from mbridge_launch.plan.model import save_plan
    from mbridge_launch.recommend.build import recommend
    from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan

    layout = candidate.layout
    overrides = layout_overrides(layout, getattr(got, "arch", None), getattr(got, "precision", None) or "bf16")

    # --precision is a request field: recommend prefers a recipe in that precision and otherwise
    # records the mixed_precision switch as a convergence change
    rec = recommend(_plan_request(got, gpus, layout.seq_length, overrides))
    if getattr(rec.recipe, "kind", "library") != "library":
        raise UserError("planner.plan_no_recipe", model=got.model, goal=got.goal)
    # the run keeps the recipe's fp8 parameter gathering and MoE dispatcher, which the search did
    # not know: the Plan's estimate counts what it runs (as preflight recomputes it)
    rec.estimate = _with_run_settings(candidate, rec.layout, got)
    rec.layout = rec.estimate.layout
    # the layout reached the recommender as overrides, but the user did not choose it: `plan` did
    chosen = {item.partition("=")[0] for item in overrides}
    for change in rec.changes:
        if change.source == "user" and change.field in chosen:
            change.source = "planner"
            change.reason = msg("change.reason.joined", first=msg("change.reason.planner_choice", gpus=gpus),
                                second=change.reason)
    plan = build_plan(rec, ClusterFlags(name=name))
    written = save_plan(plan, path)
    return written, plan.plan_hash()


def _with_run_settings(candidate: Any, recommended: Any, got: Any) -> Any:
    """The candidate with the recommended layout's run settings (fp8_param_gather, MoE
    dispatcher) and its memory re-estimated with them; the candidate itself when they change nothing."""
    from dataclasses import replace

    from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES, estimate_memory
    from mbridge_launch.planner.rules import evolve

    layout = candidate.layout
    run = evolve(layout, fp8_param_gather=getattr(recommended, "fp8_param_gather", None),
                 moe_dispatcher=getattr(recommended, "moe_dispatcher", None))
    if run == layout or getattr(got, "arch", None) is None:
        return candidate
    kwargs = {"precision": got.precision or "bf16", "goal": got.goal}
    hbm = candidate.memory.hbm_gb
    # the gradient bytes the search used (plan --bf16-grads), told by its gradient figure
    grads = min((GRAD_BYTES, BF16_GRAD_BYTES), key=lambda b: abs(
        estimate_memory(got.arch, layout, hbm, grad_bytes=b, **kwargs).gradients - candidate.memory.gradients))
    return replace(candidate, layout=run, memory=estimate_memory(got.arch, run, hbm, grad_bytes=grads, **kwargs))
