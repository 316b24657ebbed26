"""What a recommended run trains with: the recipe's settings (catalog features and dataset) with
the user's trailing KEY=VALUE overrides on top. The pitfalls, the layout and the "from" side of
every listed change read settings through here, so that an override is never missed because it
names the other of two equivalent ConfigContainer fields (Bridge keeps, for example,
rng.te_rng_tracker and model.use_te_rng_tracker in sync)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.hydra_values import override_text  # noqa: F401 - re-exported: plan.settings.override_text
from mbridge_launch.knowledge.vocabulary import RECIPE_KEYS
from mbridge_launch.plan.overrides import is_on

# Values that switch a setting off, as the catalog stores them and as users write them.

# Bridge's default checkpoint folder (recipes/common.py: <cwd>/nemo_experiments/default/checkpoints),
# the "from" of the explicit per-run paths a launcher sets: with the default, a rerun from the same
# directory silently resumes the previous run.
RECIPE_DEFAULT_CHECKPOINT_DIR = "nemo_experiments/default/checkpoints"

# --precision -> Megatron Bridge mixed-precision recipe name (training/mixed_precision.py), the
# value of the `mixed_precision=` override that switches a recipe to that precision.
MIXED_PRECISION = {
    "bf16": "bf16_mixed",
    "fp8cs": "bf16_with_fp8_current_scaling_mixed",
    "fp8mx": "bf16_with_mxfp8_mixed",
    "fp8sc": "bf16_with_fp8_subchannel_scaling_mixed",
    "fp8ds": "bf16_with_fp8_delayed_scaling_mixed",
    "nvfp4": "bf16_with_nvfp4_mixed",
}

# Megatron Core needs a method and a layer count with full recompute; Bridge's FSDP recipes shard
# optimizer state, gradients and parameters. Used by recommend's resize and by `plan -o`.
FULL_RECOMPUTE_SETTINGS = {"model.recompute_method": "uniform", "model.recompute_num_layers": 1}
FSDP_SHARDING_STRATEGY = "optim_grads_params"
# Megatron-FSDP saves and loads only in its own format, which only FSDP reads (ConfigContainer
# validation: "Megatron-FSDP requires the fsdp_dtensor checkpointing format!" when checkpoint.save
# or .load is set, "fsdp_dtensor checkpoint format only supports Megatron FSDP"); torch_dist is
# Bridge's default. Every Plan saves, so switching FSDP switches the format with it.
CHECKPOINT_FORMAT = {True: "fsdp_dtensor", False: "torch_dist"}

# Settings whose recipe value the catalog keeps among the recipe's features under the setting's
# last name (ddp.overlap_grad_reduce: features["overlap_grad_reduce"]).
_FEATURE_SETTINGS = (
    "rng.te_rng_tracker", "ddp.use_megatron_fsdp", "dist.use_megatron_fsdp", "ddp.overlap_grad_reduce",
    "ddp.overlap_param_gather", "ddp.data_parallel_sharding_strategy", "ddp.use_distributed_optimizer",
    "optimizer.use_distributed_optimizer", "comm_overlap.tp_comm_overlap",
)

# ConfigContainer path -> where the catalog keeps the recipe's value: ("attr", name) for a Recipe
# attribute, ("dataset", key) for the recipe's dataset record, ("feature", key) for its features.
_RECIPE_FIELDS: dict[str, tuple[str, str]] = {
    **{path: ("attr", attr) for attr, path in RECIPE_KEYS.items()},
    "dataset.enable_offline_packing": ("dataset", "offline_packing"),
    "dataset.enable_in_batch_packing": ("dataset", "in_batch_packing"),
    "mixed_precision": ("feature", "precision_recipe"),
    **{path: ("feature", path.rsplit(".", 1)[-1]) for path in _FEATURE_SETTINGS},
}





def recipe_default(recipe: Any, path: str) -> Any:
    """The recipe's value of a ConfigContainer path, when the catalog records it (else None)."""
    where = _RECIPE_FIELDS.get(path)
    if where is None:
        leaf = path.rsplit(".", 1)[-1]
        if path.startswith("model.") and leaf in (recipe.features or {}):
            return recipe.features[leaf]
        return None
    kind, name = where
    if kind == "attr":
        return getattr(recipe, name, None)
    if kind == "dataset":
        return (recipe.dataset or {}).get(name)
    return (recipe.features or {}).get(name)


@dataclass(frozen=True)
class Setting:
    value: Any
    by_user: bool  # set by one of the user's trailing overrides


def setting(recipe: Any, overrides: dict[str, str], paths: tuple[str, ...]) -> Setting:
    """The user's value for the first of `paths` they override, else the recipe's. `by_user` only
    when the override differs from the recipe's value (restating the default changes nothing)."""
    for path in paths:
        if path in overrides:
            default = recipe_default(recipe, path)
            same = default is not None and override_text(default).lower() == overrides[path].strip().lower()
            return Setting(overrides[path], not same)
    for path in paths:
        value = recipe_default(recipe, path)
        if value is not None:
            return Setting(value, False)
    return Setting(None, False)


def cuda_graphs(recipe: Any, overrides: dict[str, str]) -> Setting:
    impl = setting(recipe, overrides, ("model.cuda_graph_impl",))
    if is_on(impl.value):
        return Setting(True, impl.by_user)
    legacy = setting(recipe, overrides, ("model.enable_cuda_graph",))
    if is_on(legacy.value):
        return Setting(True, legacy.by_user)
    return Setting(False, impl.by_user or legacy.by_user)


def offline_packing(recipe: Any, overrides: dict[str, str]) -> Setting:
    found = setting(recipe, overrides, ("dataset.enable_offline_packing",))
    return Setting(is_on(found.value), found.by_user)


def packing_padding_disabled_by_user(overrides: dict[str, str]) -> bool:
    """The user turned off the static padding that packed CUDA graphs need."""
    keys = ("dataset.pad_to_max_length", "dataset.offline_packing_specs.pad_cu_seqlens",
            "dataset.dataset_kwargs.pad_to_max_length")
    return any(key in overrides and not is_on(overrides[key]) for key in keys)


def te_rng_tracker(recipe: Any, overrides: dict[str, str]) -> bool:
    """Bridge turns the tracker on everywhere when either field is true (ConfigContainer.validate)."""
    model = setting(recipe, overrides, ("model.use_te_rng_tracker",))
    rng = setting(recipe, overrides, ("rng.te_rng_tracker",))
    return is_on(model.value) or is_on(rng.value)


def recompute(recipe: Any, overrides: dict[str, str]) -> str:
    found = setting(recipe, overrides, ("model.recompute_granularity",))
    value = str(found.value).strip().lower() if is_on(found.value) else "none"
    return value if value in ("selective", "full") else "none"


def full_recompute_settings(layers: int | None) -> dict[str, Any]:
    """Megatron Core's method and layer count for full recompute of every layer (None), or of the
    first `layers` layers of each pipeline chunk (block method: the rest keep their activations)."""
    if layers is None:
        return dict(FULL_RECOMPUTE_SETTINGS)
    return {"model.recompute_method": "block", "model.recompute_num_layers": layers}


def recompute_layers(recipe: Any, overrides: dict[str, str]) -> int | None:
    """N when full recompute covers only N layers per chunk (recompute_method=block), else None."""
    if recompute(recipe, overrides) != "full":
        return None
    method = setting(recipe, overrides, ("model.recompute_method",)).value
    if str(method).strip().lower() != "block":
        return None
    found = setting(recipe, overrides, ("model.recompute_num_layers",))
    try:
        layers = int(str(found.value).strip())
    except ValueError:
        raise UserError("recommend.override_int", setting="model.recompute_num_layers", value=found.value) from None
    if layers < 1:
        raise UserError("recommend.override_int", setting="model.recompute_num_layers", value=found.value)
    return layers


def megatron_fsdp(recipe: Any, overrides: dict[str, str]) -> bool:
    return is_on(setting(recipe, overrides, ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")).value)


def overlap_grad_reduce(recipe: Any, overrides: dict[str, str]) -> Setting:
    found = setting(recipe, overrides, ("ddp.overlap_grad_reduce",))
    return Setting(is_on(found.value), found.by_user)


def recompute_modules(recipe: Any, overrides: dict[str, str]) -> tuple[str, ...] | None:
    """The selective-recompute modules the run gets: the override's or the recipe's list, Megatron
    Core's default ["core_attn"] when neither sets one; None unless recompute is selective."""
    from mbridge_launch.planner.recompute import MEGATRON_DEFAULT, OVERRIDE_KEY, parse_modules

    if recompute(recipe, overrides) != "selective":
        return None
    found = parse_modules(setting(recipe, overrides, (OVERRIDE_KEY,)).value)
    return MEGATRON_DEFAULT if found is None else found


def fp8_param_gather(recipe: Any, overrides: dict[str, str]) -> bool | None:
    """mixed_precision.fp8_param_gather (or fp8_param, kept in sync by Bridge) when the override or
    the recipe sets it; None: the mixed-precision recipe's default (planner.memory)."""
    found = setting(recipe, overrides, ("mixed_precision.fp8_param_gather", "mixed_precision.fp8_param",
                                         "model.fp8_param_gather", "model.fp8_param")).value
    if found is None:
        found = (getattr(recipe, "features", None) or {}).get("fp8_param_gather")
    return None if found is None else is_on(found)


def moe_dispatcher(recipe: Any, overrides: dict[str, str]) -> str | None:
    """The MoE token dispatcher: alltoall / allgather, or the flex dispatcher's backend (deepep,
    hybridep); None when unset (Megatron's default)."""
    kind = setting(recipe, overrides, ("model.moe_token_dispatcher_type",)).value
    if kind is None:
        return None
    kind = str(kind).strip().lower()
    if kind == "flex":
        backend = setting(recipe, overrides, ("model.moe_flex_dispatcher_backend",)).value
        return str(backend).strip().lower() if backend else "deepep"
    return kind
