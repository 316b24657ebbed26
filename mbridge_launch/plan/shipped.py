"""A library recipe as NVIDIA ships it: at its own GPU count and system, with its own layout.

NVIDIA ran these layouts, so an estimate that says one does not fit is first a question for the
memory model: recommend keeps the shipped layout (with a warning that gives the figures and the
smallest change that fits by the model) and preflight reports the overflow as a warning while the
layout is unchanged, as an error once the user has changed it. Whether a Plan still holds the
shipped layout is computed from the Plan and the catalog recipe (no field of its own): same GPU
count and system, the recipe's layout, batch, recompute and FSDP, and no override of them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS
from mbridge_launch.plan import settings
from mbridge_launch.planner.recipe_settings import memory_settings

# An H100 recipe on H200 is the same system with more HBM (H200 recipes do not exist in 0.6.2).
SAME_SYSTEM = {("h100", "h200")}
# Overrides that change what the memory model sees besides the layout fields themselves.
_MEMORY_KEYS = ("model.recompute_granularity", "model.recompute_method", "model.recompute_num_layers",
                "ddp.use_megatron_fsdp", "dist.use_megatron_fsdp", "ddp.data_parallel_sharding_strategy",
                "ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer",
                "model.num_layers_in_first_pipeline_stage", "model.num_layers_in_last_pipeline_stage")


def same_system(recipe_hardware: str | None, gpu_type: str) -> bool:
    """The recipe was tuned for this GPU type (a recipe without a system matches any)."""
    return recipe_hardware is None or recipe_hardware == gpu_type or (recipe_hardware, gpu_type) in SAME_SYSTEM


def recipe_seq(recipe: Any) -> int:
    return int(recipe.seq_length or recipe.dataset_seq_length or 4096)


def is_shipped_request(recipe: Any, *, gpus: int | None, gpu_type: str, seq_length: int | None,
                       precision: str | None) -> bool:
    """A request for a library recipe at its own count (or no count), system, sequence length
    and precision: what recommend must keep as shipped."""
    return (recipe.kind == "library" and bool(recipe.gpus) and gpus in (None, recipe.gpus)
            and same_system(recipe.hardware, gpu_type) and seq_length in (None, recipe_seq(recipe))
            and precision in (None, recipe.precision))


def with_recipe_settings(layout: Any, recipe: Any) -> Any:
    """The recipe's memory-relevant settings that its Layout (recommend's `_recipe_layout`) leaves
    at the planner's defaults: the distributed optimizer (off in some recipes, which then keep
    all 12 bytes of optimizer state per parameter), uneven first/last pipeline stages and the
    settings of planner.recipe_settings.memory_settings."""
    features = recipe.features or {}
    changes: dict[str, Any] = {}
    dist = distributed_optimizer(recipe)
    if dist is not None and not layout.fsdp:
        changes["distributed_optimizer"] = dist
    first = features.get("num_layers_in_first_pipeline_stage")
    last = features.get("num_layers_in_last_pipeline_stage")
    if (first is not None or last is not None) and not layout.uneven_pp and layout.pp > 1:
        changes.update(uneven_pp=True, first_stage_layers=first, last_stage_layers=last)
    # what the recipe runs besides its layout: offloading, optimizer and gradient dtypes, CUDA
    # graphs, fused cross entropy (planner.recipe_settings); a field the caller set stays
    for name, value in memory_settings(features, recipe.precision or "bf16").items():
        if getattr(layout, name, None) is None:
            changes[name] = value
    return replace(layout, **changes) if changes else layout


def distributed_optimizer(recipe: Any) -> bool | None:
    """Whether the recipe trains with the distributed optimizer. The catalog records the DDP
    switch (`use_distributed_optimizer`); Bridge turns the optimizer on when EITHER the DDP or the
    optimizer config asks for it (training/config.py, _validate_and_sync_distributed_optimizer_settings),
    and the shared optimizer helper (distributed_fused_adam_with_cosine_annealing) asks for it. Only
    the PEFT recipes set optimizer.use_distributed_optimizer=False as well (read from the 0.6.2
    sources), so a DDP `false` means off only for them."""
    features = recipe.features or {}
    if "optimizer_use_distributed_optimizer" in features:  # a catalog that records the optimizer's switch too
        return bool(features.get("use_distributed_optimizer")) or bool(features["optimizer_use_distributed_optimizer"])
    ddp = features.get("use_distributed_optimizer")
    if ddp is None:
        return None
    return bool(ddp) or recipe.mode != "peft"


def plan_is_shipped(plan: Any, recipe: Any) -> bool:
    """The Plan runs the (library or benchmark) recipe's own layout at the recipe's own count and system: its
    parallelism equals the recipe's and no override changes the layout, batch, recompute or FSDP."""
    # benchmark recipes too: NVIDIA ran them at their own count (the published rows)
    if recipe is None or getattr(recipe, "kind", None) != plan.recipe.kind:
        return False
    c, p = plan.cluster, plan.parallelism
    if not recipe.gpus or c.total_gpus != recipe.gpus or not same_system(recipe.hardware, c.gpu_type):
        return False
    own = {"tp": recipe.tp or 1, "pp": recipe.pp or 1, "vp": recipe.vp or None, "cp": recipe.cp or 1,
           "ep": recipe.ep or 1, "mbs": recipe.mbs or 1, "gbs": recipe.gbs or 1, "seq_length": recipe_seq(recipe),
           "recompute": settings.recompute(recipe, {}), "fsdp": settings.megatron_fsdp(recipe, {})}
    if any(getattr(p, name) != value for name, value in own.items()):
        return False
    if (p.etp or 1) != (recipe.etp or 1) or bool(p.sp) != bool(recipe.sp):
        return False
    changed = set(LAYOUT_KEYS.values()) | set(_MEMORY_KEYS)
    # a repair (plan.recipe_repairs) keeps the layout: it removes what Megatron Bridge would stop at
    return not any(o.key.lstrip("+~") in changed and o.source not in ("launcher", "dataset", "repair") for o in plan.overrides)


def smallest_fitting_change(layout: Any, arch: Any, hardware: Any, *, precision: str, goal: str,
                            grad_bytes: float = 4.0, recipe: Any = None) -> Msg:
    """The smallest change that fits by the memory model, as a message: a heavier recompute at
    the same GPU count, else the smallest count (2x, 4x, 8x, whole nodes) at which the planner
    finds a layout for the same global batch, else none up to 8x. `recipe`: the one the run keeps
    (its settings in the planner's estimates, less those Megatron rejects beside a heavier recompute)."""
    from mbridge_launch.planner.entry import PlanRequest, plan_request
    from mbridge_launch.planner.memory import estimate_memory
    from mbridge_launch.planner.recipe_settings import run_layout
    from mbridge_launch.planner.rules import evolve

    order = ("none", "selective", "full")
    heavier = order[order.index(layout.recompute) + 1:] if layout.recompute in order else ()
    for level in heavier:
        trial = run_layout(evolve(layout, recompute=level, recompute_layers=None), {})
        if estimate_memory(arch, trial, hardware.hbm_gb, precision=precision, goal=goal, grad_bytes=grad_bytes).fits:
            return msg("shipped.change.recompute", level=level)
    world = layout.world or layout.tp * layout.pp * layout.cp
    per_node = hardware.gpus_per_node
    for factor in (2, 4, 8):
        gpus = world * factor
        if gpus > per_node and gpus % per_node:
            continue
        # the planner's first at that count (planner.entry), as recommend would choose there
        request = PlanRequest(arch.name, arch, hardware, gpus, layout.gbs, layout.seq_length, precision, goal,
                              grad_bytes=grad_bytes, top=1, recipe=recipe)
        found = plan_request(request, nvidia=False).best if not arch.missing else None
        if found is not None:
            L = found.layout
            # the level in the reader's words (激活重计算=无 in Chinese), kept as a message: the Plan stays neutral
            shown_level: Any = msg(f"planner.recompute_level.{L.recompute}") if L.recompute in order else L.recompute
            return msg("shipped.change.gpus", gpus=gpus, layout=f"TP={L.tp} PP={L.pp} CP={L.cp} EP={L.ep}"
                       + (" FSDP" if L.fsdp else ""), recompute=shown_level, total=f"{found.memory.total:.1f}")
    return msg("shipped.change.none", gpus=world * 8)


def over_params(memory: Any, hbm: float) -> dict[str, Any]:
    """The figures of a memory overflow for a message: total, usable, HBM and every component."""
    from mbridge_launch.planner.memory import HEADROOM

    d = memory.as_dict()
    return {"total": f"{d['total']:.1f}", "usable": f"{HEADROOM * hbm:.1f}", "hbm": f"{hbm:.0f}",
            **{k: f"{d[k]:.1f}" for k in ("weights", "gradients", "optimizer", "activations", "logits", "allowance")}}


def shipped_recipe_for_layout(model: str, gpu_type: str, layout: Any) -> str | None:
    """The library recipe that ships exactly this planner Layout for `model` at its GPU count
    (`layout.world`) and system (tp, pp, vp, cp, ep, mbs, gbs), if any: `estimate` of such a
    layout warns instead of refusing, as recommend and preflight do."""
    from mbridge_launch.knowledge.catalog import load_catalog

    for recipe in load_catalog().by_model(model):
        if recipe.kind != "library" or recipe.gpus != layout.world or not same_system(recipe.hardware, gpu_type):
            continue
        own = (recipe.tp or 1, recipe.pp or 1, recipe.vp or None, recipe.cp or 1, recipe.ep or 1, recipe.mbs or 1,
               recipe.gbs)
        if own == (layout.tp, layout.pp, layout.vp, layout.cp, layout.ep, layout.mbs, layout.gbs):
            return recipe.name
    return None
