"""The memory-relevant settings of a Megatron Bridge recipe, read from the catalog's stored values
(`features`, written by catalog sync), as planner Layout fields.

`memory_settings(features, precision)` gives the Layout changes (rules.Layout: cpu_offload_layers,
offload_modules, optimizer_bytes, optimizer_offload_fraction, grad_bytes, cuda_graph_scope,
ce_fusion, mtp_layers, frozen_language); `applied(changes)` lists them as (setting, value) pairs for `estimate --recipe` to say
which it used. A value the catalog does not record (None) changes nothing: the planner's default.
"""

from __future__ import annotations

from typing import Any, Mapping

from mbridge_launch.planner.recompute import parse_modules

# bytes of the torch dtypes the optimizer settings name (catalog values are their dotted names)
_DTYPE_BYTES = {"torch.float32": 4.0, "torch.float": 4.0, "torch.bfloat16": 2.0, "torch.float16": 2.0,
                "torch.half": 2.0, "torch.uint8": 1.0, "torch.float8_e4m3fn": 1.0}
FP32_ADAM_BYTES = 12.0  # fp32 master weights + exp_avg + exp_avg_sq (planner.memory.OPTIM_BYTES)
# CUDA-graph implementations that capture per-layer graphs with static buffers (Megatron Core
# transformer/cuda_graphs.py: one set of static inputs per (layer, micro-batch));
# "full_iteration" graphs the whole step in the allocator's own pool (nothing beside eager)
PER_LAYER_GRAPHS = ("transformer_engine", "local")
LAYER_SCOPES = ("attn", "mlp", "moe", "mamba", "moe_router", "moe_preprocess")


def _on(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


def _dtype_bytes(value: Any) -> float | None:
    return _DTYPE_BYTES.get(str(value).strip()) if value is not None else None


def optimizer_bytes(features: Mapping[str, Any], precision: str) -> float | None:
    """Bytes per trained parameter of the optimizer state under the precision-aware optimizer
    (optimizer.use_precision_aware_optimizer), None when the recipe keeps fp32 Adam (12).

    Megatron Core optimizer/__init__.py: TE's FusedAdam holds exp_avg / exp_avg_sq in exp_avg_dtype /
    exp_avg_sq_dtype. The master weights are TE's (master_weight_dtype = main_params_dtype) only when
    optimizer_config.py's use_precision_aware_optimizer_no_fp8_or_ds_fp8 holds: main_params_dtype not
    fp32, or fp8_recipe None or "delayed", or optimizer CPU offload; otherwise Megatron keeps an fp32
    master (4 bytes). Bridge's MixedPrecisionConfig copies its fp8_recipe ("tensorwise" by default,
    even in bf16 runs) onto the optimizer config, so a Bridge recipe keeps the fp32 master unless it
    runs delayed scaling or a 16-bit master. A TE-managed fp32 master of bf16 params is stored as its
    16-bit remainder (store_param_remainders, default True: distrib_optimizer.py, 2 bytes)."""
    if not _on(features.get("use_precision_aware_optimizer")):
        return None
    moments = (_dtype_bytes(features.get("exp_avg_dtype")) or 4.0) + (_dtype_bytes(features.get("exp_avg_sq_dtype"))
                                                                       or 4.0)
    main = _dtype_bytes(features.get("main_params_dtype")) or 4.0
    recipe = str(features.get("fp8_recipe") or "tensorwise").strip().lower()
    te_master = main < 4.0 or recipe == "delayed" or precision == "fp8ds" or _on(features.get("optimizer_cpu_offload"))
    if not te_master:
        master = 4.0
    elif main < 4.0:
        master = main
    else:
        master = 2.0  # fp32 kept as the 16-bit remainder beside the bf16 parameter
    return master + moments


def memory_settings(features: Mapping[str, Any] | None, precision: str) -> dict[str, Any]:
    """Layout changes (rules.Layout field -> value) for a recipe's stored settings."""
    f = features or {}
    out: dict[str, Any] = {}
    layers = f.get("cpu_offloading_num_layers")
    if _on(f.get("cpu_offloading")) and isinstance(layers, int) and layers > 0 \
            and f.get("cpu_offloading_activations", True) is not False:
        out["cpu_offload_layers"] = layers
    # a list, or an override's text with or without brackets ("core_attn", "[core_attn,mlp]")
    modules = parse_modules(f.get("offload_modules"))
    if _on(f.get("fine_grained_activation_offloading")) and modules:
        out["offload_modules"] = modules
    opt = optimizer_bytes(f, precision)
    if opt is not None and opt != FP32_ADAM_BYTES:
        out["optimizer_bytes"] = opt
    fraction = f.get("optimizer_offload_fraction")
    if _on(f.get("optimizer_cpu_offload")) and isinstance(fraction, (int, float)) and 0 < fraction <= 1:
        out["optimizer_offload_fraction"] = float(fraction)
    reduce_fp32 = f.get("grad_reduce_in_fp32")
    if reduce_fp32 is not None:
        out["grad_bytes"] = 4.0 if _on(reduce_fp32) else 2.0
    impl = str(f.get("cuda_graph_impl") or "none").strip().lower()
    scope = f.get("cuda_graph_scope")
    if impl in PER_LAYER_GRAPHS:
        # an unset scope graphs the whole layer (Megatron Core: cuda_graph_scope [] = full layer)
        # Megatron Core takes one scope as a plain string too ("full_iteration", "attn")
        if isinstance(scope, str):
            scope = [part.strip() for part in scope.strip("[]").split(",") if part.strip()]
        names = tuple(str(s) for s in scope) if isinstance(scope, (list, tuple)) else ()
        if "full_iteration" not in names:
            out["cuda_graph_scope"] = tuple(s for s in names if s in LAYER_SCOPES) or ("full",)
    fusion = f.get("cross_entropy_loss_fusion")
    if fusion is not None:
        out["ce_fusion"] = _on(fusion)
    if _on(f.get("freeze_language_model")):
        out["frozen_language"] = True
    mtp = f.get("mtp_num_layers")
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp >= 0:
        out["mtp_layers"] = mtp
    return out


def applied(changes: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(setting, value) of each change, in the order of memory_settings, for display."""
    shown = []
    for name, value in changes.items():
        if isinstance(value, tuple):
            text = ",".join(value)
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
        shown.append((name, text))
    return shown


# Recipe settings Megatron Core 0.19 (Megatron Bridge 0.6.2) rejects beside some layouts
# (transformer_config.py __post_init__): CPU activation offloading "no support for Pipeline
# parallelism" and "does not work when activation recomputation is enabled"; per-layer CUDA
# graphs: "full recompute is only supported with full iteration CUDA graph". A layout the search
# offers keeps the recipe's setting where Megatron accepts it; where not, the Plan switches the
# setting off with this override (key, value) and every estimate of that layout goes without it.
SWITCH_OFF: dict[str, tuple[str, Any]] = {"cpu_offload_layers": ("model.cpu_offloading", False),
              "cuda_graph_scope": ("model.cuda_graph_impl", "none")}


def rejected_beside(name: str, layout: Any) -> bool:
    """Megatron rejects the recipe setting `name` (a SWITCH_OFF field) beside this layout."""
    if name == "cpu_offload_layers":
        return layout.pp > 1 or (layout.recompute or "none") != "none"
    if name == "cuda_graph_scope":
        return layout.recompute == "full"
    return False


def switched_off(settings: Mapping[str, Any], layout: Any) -> tuple[tuple[str, Any], ...]:
    """The overrides (key, value) a Plan of `layout` writes to switch off the recipe settings
    (memory_settings' changes) Megatron rejects beside that layout (SWITCH_OFF)."""
    return tuple(SWITCH_OFF[name] for name in SWITCH_OFF if settings.get(name) and rejected_beside(name, layout))


def run_layout(layout: Any, settings: Mapping[str, Any]) -> Any:
    """`layout` as its Plan runs it: the recipe's settings (memory_settings' changes) on the fields
    it leaves None, less those Megatron rejects beside its PP and recompute (SWITCH_OFF)."""
    from mbridge_launch.planner.rules import evolve

    changes = {name: value for name, value in settings.items() if getattr(layout, name, None) is None}
    for name in SWITCH_OFF:
        value = changes.get(name, getattr(layout, name, None))
        if value and rejected_beside(name, layout):
            changes[name] = None
    return evolve(layout, **changes) if changes else layout
