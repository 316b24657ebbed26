"""The Plan's layout in the planner's terms, one mapping each way between a Plan's `parallelism`
section (`plan.model.Parallelism`: the Plan file's form, its YAML field names unchanged) and the
planner's `planner.rules.Layout`.

The layout fields both hold are SHARED_FIELDS, those of `planner.rules.LayoutFields`, which both
classes inherit (tests/unit/test_vocabulary.py checks it). Beyond them the Parallelism records
`dp`, which the Layout derives from the world size; the Layout also carries what the planner reads
from the rest of the Plan: the world and GPUs per node (cluster section) and the feature switches
the overrides set (CP communication type, CPU offload, the pipeline split over the recipe's).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mbridge_launch.plan.model import Parallelism, Plan
from mbridge_launch.plan.overrides import is_true
from mbridge_launch.planner.pipeline_split import PipelineSplit
from mbridge_launch.planner.rules import SHARED_FIELDS, Layout


def plan_override(plan: Plan, key: str) -> Optional[str]:
    """The value of the Plan's last override of `key` (`+key=` counts as `key`), or None."""
    found = None
    for item in plan.overrides:
        if item.key.lstrip("+") == key:
            found = item.value or ""
    return found


def split_of_plan(plan: Plan, recipe_features: Optional[Mapping[str, Any]] = None) -> PipelineSplit:
    """The pipeline split the run gets: the recipe's own (its features) with the Plan's overrides
    of the five split settings on top."""
    base = PipelineSplit.from_settings(recipe_features or {})
    return PipelineSplit.from_overrides(base, lambda key: plan_override(plan, key))


def int_list_override(plan: Plan, key: str) -> Optional[tuple[int, ...]]:
    """A Hydra list of whole numbers the Plan overrides `key` with ("[2,4]"), or None (unset, or
    not such a list: the rule that reads it then sees no sizes and says so)."""
    text = plan_override(plan, key)
    if text is None:
        return None
    inner = text.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        return None
    items = [item.strip() for item in inner[1:-1].split(",") if item.strip()]
    return tuple(int(item) for item in items) if items and all(item.isdigit() for item in items) else None


def layout_of(plan: Plan, *, recompute_layers: Optional[int] = None, packing: bool = False,
              recipe_features: Optional[Mapping[str, Any]] = None, precision: str = "bf16") -> Layout:
    """The planner's Layout of a Plan. `recompute_layers`: N when full recompute covers only N
    layers per pipeline chunk (read from the recipe by the caller); `packing`: the run packs
    sequences (from its dataset settings); `recipe_features`: the recipe's settings (catalog),
    whose pipeline split the run keeps unless the Plan overrides it; `precision`: the run's, which
    decides the precision-aware optimizer's master weights (recipe_settings.optimizer_bytes)."""
    p, c = plan.parallelism, plan.cluster
    split = split_of_plan(plan, recipe_features)
    return Layout(
        **{name: getattr(p, name) for name in SHARED_FIELDS},
        world=c.total_gpus,
        gpus_per_node=c.gpus_per_node,
        cp_comm_type=plan_override(plan, "model.cp_comm_type"),
        hierarchical_cp=int_list_override(plan, "model.hierarchical_context_parallel_sizes"),
        in_batch_packing=is_true(plan_override(plan, "dataset.enable_in_batch_packing")),
        recompute_layers=recompute_layers if p.recompute == "full" else None,
        recompute_modules=_recompute_modules(plan, recipe_features) if p.recompute == "selective" else None,
        fp8_param_gather=_fp8_param_gather(plan, recipe_features),
        moe_dispatcher=_moe_dispatcher(plan, recipe_features),
        packing=packing,
        cpu_offload=is_true(plan_override(plan, "model.cpu_offloading")),
        uneven_pp=split.uneven,  # null (or not a number: reported) is the even split
        split=split,
        # the recipe's memory settings under the Plan's overrides (planner.recipe_settings)
        **recipe_memory_settings(plan, recipe_features, precision),
    )


# catalog feature name -> the override keys that set it in a Plan (the first given wins)
_MEMORY_OVERRIDES = {
    "cpu_offloading": ("model.cpu_offloading",),
    "cpu_offloading_num_layers": ("model.cpu_offloading_num_layers",),
    "fine_grained_activation_offloading": ("model.fine_grained_activation_offloading",),
    "offload_modules": ("model.offload_modules",),
    "use_precision_aware_optimizer": ("optimizer.use_precision_aware_optimizer",),
    "main_params_dtype": ("optimizer.main_params_dtype",),
    "exp_avg_dtype": ("optimizer.exp_avg_dtype",),
    "exp_avg_sq_dtype": ("optimizer.exp_avg_sq_dtype",),
    "optimizer_cpu_offload": ("optimizer.optimizer_cpu_offload",),
    "optimizer_offload_fraction": ("optimizer.optimizer_offload_fraction",),
    "grad_reduce_in_fp32": ("mixed_precision.grad_reduce_in_fp32", "ddp.grad_reduce_in_fp32"),
    "cuda_graph_impl": ("model.cuda_graph_impl",),
    "cuda_graph_scope": ("model.cuda_graph_scope",),
    "cross_entropy_loss_fusion": ("model.cross_entropy_loss_fusion",),
    "mtp_num_layers": ("model.mtp_num_layers",),
    "freeze_language_model": ("model.freeze_language_model",),
}


def recipe_memory_settings(plan: Plan, recipe_features: Optional[Mapping[str, Any]],
                           precision: str = "bf16") -> dict[str, Any]:
    """The Layout fields of planner.recipe_settings.memory_settings for the recipe's stored settings,
    each replaced by the Plan's override of it (an override is text: numbers, lists and booleans
    are read back from it)."""
    from mbridge_launch.planner.recipe_settings import memory_settings

    # every setting, MTP depth and CUDA graphs included: the search estimates each layout with the
    # recipe's settings and the overrides that switch off what Megatron rejects beside it
    # (planner.entry, planner.recipe_settings.switched_off), as read back here
    features = dict(recipe_features or {})
    for name, keys in _MEMORY_OVERRIDES.items():
        for key in keys:
            text = plan_override(plan, key)
            if text is not None:
                features[name] = _value(text)
                break
    return memory_settings(features, precision)


def _value(text: str) -> Any:
    """An override's text as the catalog would store it: int, float, list of names, or the text."""
    raw = text.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        return float(raw)
    except ValueError:
        pass
    if raw.startswith("[") and raw.endswith("]"):
        return [part.strip().strip("'\"") for part in raw[1:-1].split(",") if part.strip()]
    return raw


def _recompute_modules(plan: Plan, recipe_features: Optional[Mapping[str, Any]]) -> tuple[str, ...]:
    """The selective modules the run gets: the Plan's override, the recipe's, else Megatron's default."""
    from mbridge_launch.planner.recompute import MEGATRON_DEFAULT, OVERRIDE_KEY, parse_modules

    found = parse_modules(plan_override(plan, OVERRIDE_KEY))
    if found is None:
        found = parse_modules((recipe_features or {}).get("recompute_modules"))
    return MEGATRON_DEFAULT if found is None else found


def _fp8_param_gather(plan: Plan, recipe_features: Optional[Mapping[str, Any]]) -> Optional[bool]:
    for key in ("mixed_precision.fp8_param_gather", "mixed_precision.fp8_param", "model.fp8_param_gather",
                "model.fp8_param"):
        text = plan_override(plan, key)
        if text is not None:
            return is_true(text)
    value = (recipe_features or {}).get("fp8_param_gather")
    return None if value is None else bool(value) and str(value).lower() not in ("false", "0", "no")


def _moe_dispatcher(plan: Plan, recipe_features: Optional[Mapping[str, Any]]) -> Optional[str]:
    features = recipe_features or {}
    kind = plan_override(plan, "model.moe_token_dispatcher_type") or features.get("moe_token_dispatcher_type")
    if not kind:
        return None
    kind = str(kind).strip().lower()
    if kind != "flex":
        return kind
    backend = plan_override(plan, "model.moe_flex_dispatcher_backend") or features.get("moe_flex_dispatcher_backend")
    return str(backend).strip().lower() if backend else "deepep"


def parallelism_of(layout: Layout) -> Parallelism:
    """The Plan's parallelism section for a planner Layout."""
    return Parallelism(**{name: getattr(layout, name) for name in SHARED_FIELDS}, dp=layout.dp)
