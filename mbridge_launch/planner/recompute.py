"""Selective recompute as Megatron Core 0.19 runs it: which `recompute_modules` a Plan gets and
which saved activations those modules drop (planner.memory charges exactly these).

One mapping each way:
- planner_modules(arch, precision): the list the planner writes when IT chose selective
  recompute (recommend writes it as `model.recompute_modules=[...]`);
- dropped(modules, arch): what a list (the planner's, a recipe's or a Plan override's) drops.

Megatron Core 0.19.2 (transformer_config.py TransformerConfig.__post_init__): recompute_modules
None means ["core_attn"]; allowed names are ALLOWED; "moe_act" needs moe_grouped_gemm,
"mla_up_proj" needs multi_latent_attention (set by the MLA providers and by DeepSeek-V4's, whose
compressed attention the catalog models without MLA ranks: ModelArch.uses_mla_path), fp8 delayed
scaling refuses "moe_act" and "layernorm", "shared_experts" is refused with
moe_shared_expert_overlap. "mhc" (DeepSeek-V4's hyper-connection mixing) is not in 0.19.2's list:
the V4 recipes of Megatron Bridge 0.6.2 use it and need the newer Megatron Core commit their
docstrings name, so it is accepted for models with hyper-connections only.
What each module drops (transformer_layer.py, moe_layer.py, experts.py, multi_latent_attention.py,
with the Transformer Engine layer spec of models/gpt/gpt_layer_specs.py):
- core_attn: the attention core; with TE fused/flash attention nothing the memory model counts
  (it keeps no s^2 scores).
- layernorm: a norm's output, only where the norm is a module of its own: the MoE layers'
  pre_mlp_layernorm and MLA's input_layernorm. Dense TE layers fuse both norms into
  LayerNormLinear (IdentityOp), so "layernorm" drops nothing there.
- mlp: the whole dense MLP (fc1's norm output, fc1 output, activation output); not MoE layers.
- moe_act: the routed experts' activation-function outputs (grouped GEMM only).
- shared_experts: the shared experts' fc1 and activation outputs.
- moe: the whole MoE block (norm output aside from its input, shared and routed copies).
- mla_up_proj: MLA's Q/K/V up-projection outputs.
- mhc: the hyper-connection mixing outputs (not a term of the memory model: drops nothing counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.models import ModelArch

# TransformerConfig.__post_init__'s allowed_modules in Megatron Core 0.19.2
MEGATRON_CORE_019 = frozenset({"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
                               "gdn_norm_out"})
# Used by shipped 0.6.2 recipes that run on a newer Megatron Core (DeepSeek-V4's: see above); the
# catalog's static finding recompute_modules_unknown still says 0.19.2 itself rejects them
NEWER_CORE = frozenset({"mhc"})
ALLOWED = MEGATRON_CORE_019 | NEWER_CORE
# What a known module needs of the model (the message of a name that exists but does not apply)
REQUIREMENT = {
    "mla_up_proj": "planner.recompute_requirement.mla_up_proj",
    "moe_act": "planner.recompute_requirement.moe_act",
    "mhc": "planner.recompute_requirement.mhc",
    "gdn_norm_out": "planner.recompute_requirement.gdn_norm_out",
    "shared_experts": "planner.recompute_requirement.shared_experts",
}
FP8_DELAYED_REFUSES = ("moe_act", "layernorm")
MEGATRON_DEFAULT: tuple[str, ...] = ("core_attn",)  # recompute_modules=None in Megatron Core 0.19
FP8_DELAYED = "fp8ds"  # the precision whose recipe uses delayed scaling
OVERRIDE_KEY = "model.recompute_modules"


def planner_modules(arch: Optional[ModelArch], precision: str = "bf16") -> tuple[str, ...]:
    """The modules the planner writes (and the memory model charges) when it chooses selective.
    Only modules whose recompute costs a few percent (what throughput charges for selective):
    MoE layers "layernorm" + "moe_act" (NVIDIA's usual pair; Bridge's MoE providers set
    moe_grouped_gemm), neither under fp8 delayed scaling; MLA "layernorm" and "mla_up_proj".
    Never "mlp" or "moe" (they repeat the layer's GEMMs: the planner's partial full recompute is
    the cheaper way to drop that much) nor "shared_experts" (refused with
    moe_shared_expert_overlap, which the planner does not know). Otherwise Megatron's default:
    for a dense model selective recompute then drops nothing the memory model counts."""
    if arch is None:
        return MEGATRON_DEFAULT
    chosen: list[str] = []
    delayed = precision == FP8_DELAYED
    if not delayed and (arch.num_moe_experts or arch.mla is not None):
        chosen.append("layernorm")
    if arch.num_moe_experts and not delayed:
        chosen.append("moe_act")
    if arch.mla is not None:
        chosen.append("mla_up_proj")
    return tuple(chosen) or MEGATRON_DEFAULT


def invalid_modules(modules: Iterable[str], arch: Optional[ModelArch], precision: str = "bf16", *,
                    grouped_gemm: bool = True, shared_expert_overlap: bool = False) -> list[str]:
    """The names Megatron Core 0.19 would refuse for this model and precision (empty: valid)."""
    bad = [m for m in modules if m not in ALLOWED]
    names = set(modules)
    moe = arch is not None and bool(arch.num_moe_experts)
    if "moe_act" in names and not (moe and grouped_gemm):
        bad.append("moe_act")
    if "mla_up_proj" in names and (arch is None or not arch.uses_mla_path):
        bad.append("mla_up_proj")
    if "mhc" in names and (arch is None or not arch.hyper_connection_streams):
        bad.append("mhc")
    if "gdn_norm_out" in names:
        bad.append("gdn_norm_out")  # gated_delta_net attention only: not a model the planner lays out
    if precision == FP8_DELAYED:
        bad += [m for m in FP8_DELAYED_REFUSES if m in names]
    if "shared_experts" in names and shared_expert_overlap and arch is not None and arch.moe_shared_expert_intermediate_size:
        bad.append("shared_experts")
    return sorted(set(bad))


def refusal(modules: Iterable[str], arch: Optional[ModelArch], precision: str = "bf16") -> UserError | None:
    """Why a module list is refused, as the error to raise (None: accepted). A name Megatron does
    not know lists the valid names; a known name that this model or precision cannot use says
    what it needs (listing it among the "valid choices" would contradict the refusal)."""
    names = tuple(modules)
    shown = ", ".join(sorted(ALLOWED - {"gdn_norm_out"}))
    unknown = [m for m in names if m not in ALLOWED]
    if unknown or not names:
        return UserError("arg.choice", flag="--recompute-modules", value=",".join(unknown), choices=shown)
    bad = invalid_modules(names, arch, precision)
    if not bad:
        return None
    model = arch.name if arch is not None else "-"
    if precision == FP8_DELAYED and any(m in FP8_DELAYED_REFUSES for m in bad):
        module = next(m for m in bad if m in FP8_DELAYED_REFUSES)
        return UserError("planner.recompute_not_applicable", module=module, model=model,
                         requirement=_requirement("planner.recompute_requirement.fp8ds"))
    module = bad[0]
    return UserError("planner.recompute_not_applicable", module=module, model=model,
                     requirement=_requirement(REQUIREMENT[module]))


def _requirement(key: str) -> Any:
    from mbridge_launch.base.i18n import msg

    return msg(key)


def parse_modules(value: Any) -> Optional[tuple[str, ...]]:
    """A recipe's list or an override's Hydra list text ("[layernorm,moe_act]", quotes allowed)
    as a tuple; None when unset."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value)
    text = str(value).strip()
    if text.lower() in ("", "null", "none"):
        return None
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return tuple(item.strip().strip("'\"") for item in text.split(",") if item.strip().strip("'\""))


def modules_text(modules: Iterable[str]) -> str:
    """Hydra list syntax, as the other list overrides (hierarchical_context_parallel_sizes=[2,4])."""
    return "[" + ",".join(modules) + "]"


def effective_modules(layout: Any, arch: Optional[ModelArch], precision: str = "bf16") -> frozenset[str]:
    """The modules a layout runs with: none unless selective; the layout's own list (a recipe's or
    a Plan's, Megatron's default when it set none) or, when the planner chose selective (None),
    planner_modules."""
    if getattr(layout, "recompute", "none") != "selective":
        return frozenset()
    own = getattr(layout, "recompute_modules", None)
    return frozenset(own if own is not None else planner_modules(arch, precision))


@dataclass(frozen=True)
class Dropped:
    """Saved activations a module list drops (True: recomputed in the backward, not kept)."""

    attn_norm_out: bool = False  # MLA's separate input_layernorm output
    mlp: bool = False  # the whole dense MLP but its input
    moe_norm_out: bool = False  # pre_mlp_layernorm output of MoE layers
    moe_act: bool = False
    shared_experts: bool = False
    moe: bool = False  # the whole MoE block but its input
    mla_up: bool = False


def dropped(modules: Iterable[str], arch: Optional[ModelArch]) -> Dropped:
    names = set(modules)
    mla = arch is not None and arch.mla is not None
    return Dropped(
        attn_norm_out="layernorm" in names and mla,
        mlp="mlp" in names,
        moe_norm_out="layernorm" in names,
        moe_act="moe_act" in names,
        shared_experts="shared_experts" in names,
        moe="moe" in names,
        mla_up="mla_up_proj" in names and mla,
    )


# The recompute levels the search tries, lightest first (calibration_rows fits a published row
# with the same levels, so they live here, below both).
RECOMPUTE_ORDER = ("none", "selective", "full")


def recompute_levels(recomputes: list[str], per_chunk: int, partial: bool) -> list[tuple[str, int | None]]:
    """Recompute levels from the lightest: none, selective, full recompute of a quarter, half and
    three quarters of each chunk's layers (Megatron's block method), then of every layer."""
    levels: list[tuple[str, int | None]] = []
    for recompute in recomputes:
        if recompute == "full" and partial:
            levels += [("full", n) for n in sorted({-(-per_chunk * k // 4) for k in (1, 2, 3)}) if n < per_chunk]
        levels.append((recompute, None))
    return levels
