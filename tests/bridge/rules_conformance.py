"""Rules conformance (issue 15): the planner's rules against the real Megatron Bridge 0.6.2 validation.

The probe table. Each `Probe` is one layout on a base recipe that the tier builds (every base
below builds, and all but IN_BATCH validate unchanged at their own GPU count), rendered as the
`key=value` overrides the tool itself writes (`recommend.plan_file.layout_overrides`, plus the
sequence length as `recommend` records it, and `extra` keys only where the tool renders nothing for
the setting), and run through the real `runtime_config_update` at `layout.world` GPUs.

- Forward probes break exactly one rule of `planner.rules.check_layout` (or one pitfall of
  `planner.pitfall_rules`): `variant` names it as (code, message key). Every variant the two
  modules can produce has one (`rule_variants()` reads them from the source, so a new rule
  without a probe fails the test).
- Reverse probes (variant None) are layouts around the rules that no forward probe covers
  (grids, pipeline splits, CP and SP against the sequence, hybrid models...) and controls. Each
  one the real code rejects must be rejected by some error of `check_layout` too, unless
  `outside_layout` says why no layout rule can see it. The recipes' own rejections (the tier's
  `--all` run) are checked the same way: LAYOUT_ERRORS, OUTSIDE_LAYOUT.

`real` records what the real code said when the table was written ("rejects: <fragment of the
real error>" or "accepts"); the test re-runs every probe and checks the record still holds, so a
Megatron upgrade that changes a verdict shows up here. A rule whose probe the real code accepts
must carry its reason in `planner.rules.STRICTER_THAN_MEGATRON` (pitfalls:
`planner.pitfall_rules.STRICTER_THAN_MEGATRON`).

Runs in the project's Python (it imports mbridge_launch, never megatron).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.hardware import Hardware, get_hardware
from mbridge_launch.knowledge.models import ModelArch, load_arch
from mbridge_launch.planner import pitfall_rules, rules
from mbridge_launch.planner.pipeline_split import FIRST_LAST, PipelineSplit, balanced_layout
from mbridge_launch.planner.rules import Layout, Violation, check_layout
from mbridge_launch.recommend.plan_file import layout_overrides

ACCEPTS = "accepts"
REJECTS = "rejects: "

# Base recipes (each validates unchanged at its own GPU count in the tier): a dense GPT, a MoE, a
# hybrid Mamba model, an offline-packed SFT recipe, and a dense model with 16+ KV groups (TP=16).
DENSE = "llama3_8b_pretrain_2gpu_h100_bf16_config"  # llama3_8b: 32 layers, 32 heads, 8 KV groups
MOE = "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config"  # qwen3_30b_a3b: 48 layers, 128 experts, 4 KV groups
HYBRID = "nemotronh_8b_pretrain_2gpu_h100_bf16_config"  # nemotronh_8b: 52 hybrid layers
PACKED = "llama3_8b_sft_2gpu_h100_bf16_config"  # offline packed SQuAD, seq 4096
WIDE = "gpt3_175b_pretrain_32gpu_h100_bf16_config"  # gpt3_175b: 96 heads (MHA), 96 layers
IN_BATCH = "ministral3_3b_sft_1gpu_h100_bf16_config"  # in-batch packed VLM SFT (the recipe itself is at MBS=1)

# valid starting points: each breaks no rule on its base
D = Layout(tp=2, sp=True, mbs=1, gbs=16, seq_length=8192, world=2)
M = Layout(tp=1, ep=8, mbs=1, gbs=8, seq_length=4096, world=8)


@dataclass(frozen=True)
class Probe:
    id: str
    recipe: str
    layout: Layout
    real: str  # what the real validation said: ACCEPTS or REJECTS + a fragment of its error
    variant: Optional[tuple[str, str]] = None  # (code, message key) it breaks; None: a reverse probe
    extra: tuple[str, ...] = ()  # overrides the tool does not render for this setting (why: `note`)
    arch_changes: dict[str, Any] = field(default_factory=dict)  # model fields `extra` changes
    note: str = ""
    # reverse probes only: why no rule of check_layout can see this rejection (reviewed list)
    outside_layout: str = ""

    @property
    def reverse(self) -> bool:
        return self.variant is None


def _p(id: str, recipe: str, layout: Layout, real: str, variant: tuple[str, str] | None = None, **kw: Any) -> Probe:
    return Probe(id, recipe, layout, real, variant, **kw)


PROBES: tuple[Probe, ...] = (
    # ------------------------------------------------------------ check_layout: sizes
    _p("positive", DENSE, replace(D, tp=0), "rejects: integer modulo by zero", ("RULE_POSITIVE", "planner.rule.positive")),
    _p("size_limit", DENSE, replace(D, gbs=2**31 + 2), ACCEPTS, ("RULE_SIZE_LIMIT", "planner.rule.size_limit")),
    # ------------------------------------------------------------ grids and batch
    _p("dense_grid", DENSE, replace(D, tp=4, gbs=6, world=6), "rejects: world size (6) is not divisible by total_model_size",
       ("RULE_DENSE_GRID", "planner.rule.dense_grid")),
    _p("expert_grid", MOE, replace(M, pp=2, ep=8), ACCEPTS, ("RULE_EXPERT_GRID", "planner.rule.expert_grid")),
    _p("gbs", DENSE, replace(D, gbs=6, world=8),
       "rejects: eval_global_batch_size (6) must be divisible by eval_micro_batch_size * eval_data_parallel_size (1 * 4 = 4)",
       ("RULE_GBS", "planner.rule.gbs")),
    _p("packing_mbs", PACKED, replace(D, mbs=2, gbs=8, seq_length=4096, packing=True),
       "rejects: Micro batch size should be 1 when training with packed sequence", ("RULE_PACKING_MBS", "planner.rule.packing_mbs")),
    _p("in_batch_packing_mbs", IN_BATCH, Layout(mbs=1, gbs=32, seq_length=4096, world=1, in_batch_packing=True),
       "rejects: micro_batch_size should be greater than 1 when using enable_in_batch_packing",
       ("RULE_IN_BATCH_PACKING_MBS", "planner.rule.in_batch_packing_mbs")),
    _p("in_batch_packing_ok", IN_BATCH, Layout(mbs=2, gbs=32, seq_length=4096, world=1, in_batch_packing=True), ACCEPTS,
       note="control: the same recipe at MBS=2"),
    # ------------------------------------------------------------ features
    _p("vp_pp", DENSE, replace(D, vp=2), ACCEPTS, ("RULE_VP_PP", "planner.rule.vp_pp")),
    _p("cpu_offload_pp", DENSE, replace(D, pp=2, gbs=4, world=4, cpu_offload=True),
       "rejects: Currently there is no support for Pipeline parallelism with CPU offloading",
       ("RULE_CPU_OFFLOAD_PP", "planner.rule.cpu_offload_pp")),
    _p("fsdp_pp", DENSE, replace(D, pp=2, gbs=4, world=4, fsdp=True), ACCEPTS, ("RULE_FSDP_PP", "planner.rule.fsdp_pp")),
    _p("fsdp_dp", DENSE, replace(D, fsdp=True), ACCEPTS, ("RULE_FSDP_DP", "planner.rule.fsdp_dp")),
    _p("recompute", DENSE, replace(D, recompute="sometimes"), 'rejects: must be "full"or "selective"',
       ("RULE_RECOMPUTE", "planner.rule.recompute"), extra=("model.recompute_granularity=sometimes",),
       note="layout_overrides renders only the levels it knows: the unknown level is written as run_recipe.py would get it"),
    _p("recompute_layers_full", DENSE, replace(D, recompute="selective", recompute_layers=2),
       "rejects: When using recompute_granularity: selective recompute_num_layers must be None",
       ("RULE_RECOMPUTE_LAYERS", "planner.rule.recompute_layers_full"),
       extra=("model.recompute_method=block", "model.recompute_num_layers=2"),
       note="layout_overrides writes a layer count only with full recompute: the block settings are written by hand"),
    _p("recompute_layers_chunk", DENSE, replace(D, pp=2, gbs=4, world=4, recompute="full", recompute_layers=20), ACCEPTS,
       ("RULE_RECOMPUTE_LAYERS", "planner.rule.recompute_layers_chunk")),
    _p("sp_off", DENSE, replace(D, sp=False), ACCEPTS, ("RULE_SP_TP", "planner.rule.sp_off")),
    _p("sp_tp1", DENSE, replace(D, tp=1, world=1), ACCEPTS, ("RULE_SP_TP", "planner.rule.sp_tp1"),
       note="Megatron Core refuses SP without TP, but the Bridge's provider switches SP off first (transformer_config.py)"),
    _p("sp_seq", DENSE, replace(D, tp=4, gbs=4, world=4, seq_length=8190), ACCEPTS, ("RULE_SP_SEQ", "planner.rule.sp_seq")),
    _p("cp_seq", DENSE, replace(D, tp=1, sp=False, cp=2, seq_length=8190),
       "rejects: Sequence length must be divisible by 2 * context parallel size", ("RULE_CP_SEQ", "planner.rule.cp_seq")),
    _p("cp_comm", DENSE, replace(D, tp=1, sp=False, cp=2, cp_comm_type="ring"), ACCEPTS, ("RULE_CP_COMM", "planner.rule.cp_comm")),
    _p("cp_hierarchical", DENSE, replace(D, tp=1, sp=False, cp=2, cp_comm_type="a2a+p2p"),
       "rejects: hierarchical_context_parallel_sizes must be set when cp_comm_type contains 'a2a+p2p'",
       ("RULE_CP_HIERARCHICAL", "planner.rule.cp_hierarchical")),
    _p("cp_hierarchical_ok", DENSE, replace(D, tp=1, sp=False, cp=2, cp_comm_type="a2a+p2p", hierarchical_cp=(2, 1)), ACCEPTS,
       extra=("model.hierarchical_context_parallel_sizes=[2,1]",),
       note="control: with the sizes set (by hand: layout_overrides does not render them) the real code accepts a2a+p2p"),
    # ------------------------------------------------------------ model
    _p("tp_kv_heads", DENSE, replace(D, tp=4, gbs=4, world=4),
       "rejects: num_query_groups (6) must be a multiple or divisor of tensor_model_parallel_size (4)",
       ("RULE_TP_KV_HEADS", "planner.rule.tp_kv_heads"),
       extra=("model.num_attention_heads=24", "model.num_query_groups=6", "model.kv_channels=128"),
       arch_changes={"num_attention_heads": 24, "num_query_groups": 6, "kv_channels": 128},
       note="TP a multiple of the KV groups is valid (replicated KV heads: r_tp_kv_multiple); no catalog model "
            "has groups that TP neither divides nor multiplies: 6 groups on 24 heads, set on the real model too"),
    _p("r_tp_kv_multiple", DENSE, replace(D, tp=16, world=16), ACCEPTS),
    _p("tp_heads", DENSE, replace(D, tp=3, sp=False, gbs=3, world=3),
       "rejects: num_attention_heads (32) must be a multiple of tensor_model_parallel_size (3)",
       ("RULE_TP_HEADS", "planner.rule.tp_heads"), extra=("model.num_query_groups=3",), arch_changes={"num_query_groups": 3},
       note="no catalog architecture has KV groups that do not divide its heads (TP_KV_HEADS fires first): "
            "3 KV groups on llama3_8b's 32 heads, set on the real model too"),
    _p("tp_ffn", DENSE, replace(D, tp=4, gbs=4, world=4), ACCEPTS, ("RULE_TP_FFN", "planner.rule.tp_ffn"),
       extra=("model.ffn_hidden_size=14338",), arch_changes={"ffn_hidden_size": 14338},
       note="no GPT in the catalog has an FFN width that a head-dividing TP does not divide: 14338 on llama3_8b"),
    _p("cp_a2a_heads", DENSE, replace(D, cp=8, cp_comm_type="a2a", world=16), ACCEPTS,
       ("RULE_CP_A2A_HEADS", "planner.rule.cp_a2a_heads")),
    _p("pp_uneven", DENSE, replace(D, pp=4, gbs=8, world=8, uneven_pp=True, split=PipelineSplit(FIRST_LAST, first=9, last=10)),
       "rejects: number of layers at middle stage: 13 must be divisible by", ("RULE_PP_UNEVEN", "planner.rule.pp_uneven")),
    _p("pp_layers", DENSE, replace(D, tp=1, sp=False, pp=3, gbs=3, world=3), ACCEPTS, ("RULE_PP_LAYERS", "planner.rule.pp_layers")),
    _p("vp_layers", DENSE, replace(D, tp=1, sp=False, pp=4, vp=3, gbs=4, world=4), ACCEPTS,
       ("RULE_VP_LAYERS", "planner.rule.vp_layers")),
    _p("recompute_layers_ok", DENSE, replace(D, pp=2, gbs=4, world=4, recompute="full", recompute_layers=16), ACCEPTS,
       note="control: full recompute of every layer of a 16-layer chunk, block method"),
    _p("ep_dense", DENSE, replace(D, tp=1, sp=False, ep=2), "rejects: num_moe_experts must be non None to use expert-parallel",
       ("RULE_EP_DENSE", "planner.rule.ep_dense")),
    _p("ep_experts", MOE, replace(M, ep=3, gbs=3, world=3), ACCEPTS, ("RULE_EP_EXPERTS", "planner.rule.ep_experts")),
    _p("etp_ffn", MOE, replace(M, ep=1, etp=5, gbs=5, world=5), ACCEPTS, ("RULE_ETP_FFN", "planner.rule.etp_ffn")),
    _p("moe_sp", MOE, replace(M, tp=2, ep=2, gbs=4, world=4), ACCEPTS, ("RULE_MOE_SP", "planner.rule.moe_sp")),
    _p("seq_positions", DENSE, replace(D, seq_length=16384), ACCEPTS, ("RULE_SEQ_POSITIONS", "planner.rule.seq_positions")),
    # ------------------------------------------------------------ hardware (the recipes' H100)
    _p("tp_nvlink", WIDE, Layout(tp=16, pp=2, sp=True, gbs=32, seq_length=2048, world=32), ACCEPTS,
       ("RULE_TP_NVLINK", "planner.rule.tp_nvlink"),
       note="PP=2: the recipe defers the embedding wgrad, which needs PP > 1 (r_defer_wgrad_pp1)"),
    _p("ep_nvlink", MOE, replace(M, ep=16, gbs=16, world=16), ACCEPTS, ("RULE_EP_NVLINK", "planner.rule.ep_nvlink")),
    _p("partial_node", DENSE, replace(D, gbs=12, world=12), ACCEPTS, ("RULE_PARTIAL_NODE", "planner.rule.partial_node")),
    # ------------------------------------------------------------ pitfalls (valid, slower)
    _p("pp_without_vp", DENSE, replace(D, pp=2, gbs=4, world=4), ACCEPTS, ("PP_WITHOUT_VP", "pitfall.pp_without_vp")),
    _p("ep_low", MOE, replace(M, ep=1), ACCEPTS, ("EP_LOW", "pitfall.ep_low")),
    _p("long_context_no_cp", DENSE, replace(D, seq_length=32768), ACCEPTS, ("LONG_CONTEXT_NO_CP", "pitfall.long_context_no_cp")),
    _p("fsdp_tp_h100", DENSE, replace(D, gbs=4, world=4, fsdp=True), ACCEPTS, ("FSDP_TP_H100", "pitfall.fsdp_tp_h100")),
    # ------------------------------------------------------------ reverse: real layout rejections
    _p("r_tp_kv_no_sp", DENSE, replace(D, tp=3, sp=False, gbs=3, world=3),
       "rejects: num_attention_heads (32) must be a multiple of tensor_model_parallel_size (3)"),
    _p("r_pp_vp_layers", DENSE, replace(D, pp=2, vp=3, gbs=4, world=4), ACCEPTS),
    _p("r_mp_world", DENSE, replace(D, pp=2, cp=2, gbs=12, world=12), "rejects: world size (12) is not divisible by total_model_size"),
    _p("r_gbs_mbs_dp", DENSE, replace(D, tp=1, sp=False, mbs=2, gbs=12, world=4),
       "rejects: eval_global_batch_size (12) must be divisible by eval_micro_batch_size * eval_data_parallel_size (2 * 4 = 8)"),
    _p("r_mbs_over_gbs", DENSE, replace(D, mbs=4, gbs=2),
       "rejects: eval_global_batch_size (2) must be divisible by eval_micro_batch_size * eval_data_parallel_size (4 * 1 = 4)"),
    _p("r_cp_seq_sp", DENSE, replace(D, cp=2, seq_length=8196, gbs=4, world=4), ACCEPTS),
    _p("r_ep_etp_world", MOE, replace(M, ep=4, etp=4), ACCEPTS),
    _p("r_ep_world", MOE, replace(M, ep=16), ACCEPTS),
    _p("r_etp_over_tp", MOE, replace(M, ep=4, etp=2), ACCEPTS),
    _p("r_moe_pp_layers", MOE, replace(M, pp=5, ep=1, gbs=5, world=5), ACCEPTS),
    _p("r_hybrid_pp3", HYBRID, Layout(pp=3, gbs=3, seq_length=8192, world=3), ACCEPTS),
    _p("r_hybrid_pp4", HYBRID, Layout(pp=4, gbs=4, seq_length=8192, world=4), ACCEPTS),
    _p("r_hybrid_tp3", HYBRID, Layout(tp=3, gbs=3, seq_length=8192, world=3),
       "rejects: num_attention_heads (32) must be a multiple of tensor_model_parallel_size (3)"),
    _p("r_layout_vp", DENSE, replace(D, pp=2, vp=2, gbs=4, world=4, split=balanced_layout(32, 2, 2)), ACCEPTS),
    _p("r_layout_no_vp", DENSE, replace(D, pp=2, gbs=4, world=4, split=balanced_layout(32, 2, 1)), ACCEPTS),
    _p("r_packing_seq_tp", PACKED, replace(D, tp=2, seq_length=4095, packing=True, gbs=8), ACCEPTS),
    _p("r_defer_wgrad_pp1", WIDE, Layout(tp=8, sp=True, gbs=8, seq_length=2048, world=8),
       "rejects: Cannot defer embedding wgrad compute when pipeline model parallel is not used",
       outside_layout="a recipe setting (model.defer_embedding_wgrad_compute, gpt3_175b) that needs PP > 1: the Layout "
                      "does not carry recipe features; Plan conformance builds every Plan on its real recipe"),
)


# ------------------------------------------------------------------ the rules, read from their source


def _literal_calls(path: Path, function: str) -> set[tuple[str, str]]:
    """(code, key) of every `function("CODE", "key", ...)` call in the module's source."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function:
            args = node.args[:2]
            if len(args) == 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
                found.add((args[0].value, args[1].value))
    return found


def rule_variants() -> set[tuple[str, str]]:
    """Every (code, message key) planner.rules and planner.pitfall_rules can produce."""
    return _literal_calls(Path(rules.__file__), "_v") | _literal_calls(Path(pitfall_rules.__file__), "_pitfall")


def stricter_reasons() -> dict[str, str]:
    """code -> why the rule refuses (or warns about) what the real Megatron accepts."""
    return {**rules.STRICTER_THAN_MEGATRON, **pitfall_rules.STRICTER_THAN_MEGATRON}


# ------------------------------------------------------------------ one probe: model, hardware, overrides


@lru_cache(maxsize=None)
def _recipe(name: str) -> Any:
    return load_catalog().require(name)


def arch_of(probe: Probe) -> ModelArch:
    arch = load_arch(_recipe(probe.recipe).model)
    assert arch is not None, f"{probe.recipe}: its model has no architecture in catalog/models.yaml"
    return replace(arch, **probe.arch_changes) if probe.arch_changes else arch


def hardware_of(probe: Probe) -> Hardware:
    return get_hardware(_recipe(probe.recipe).hardware)


def violations(probe: Probe) -> list[Violation]:
    """What the planner says about the probe's layout: check_layout, then the pitfalls."""
    arch, hw = arch_of(probe), hardware_of(probe)
    return check_layout(probe.layout, arch, hw) + pitfall_rules.layout_pitfalls(probe.layout, arch, hw)


def overrides(probe: Probe) -> list[str]:
    """The probe's layout as the tool writes it: the Plan's layout overrides, the sequence length
    on the model and the dataset (recommend records both), packing and CPU offloading as the Plan
    reader (plan.layout.layout_of) reads them back, then the probe's hand-written extras."""
    L = probe.layout
    out = layout_overrides(L)
    out += [f"model.seq_length={L.seq_length}", f"dataset.seq_length={L.seq_length}"]
    if L.packing:
        out += ["dataset.enable_offline_packing=true", f"dataset.offline_packing_specs.packed_sequence_size={L.seq_length}"]
    if L.in_batch_packing:
        out.append("dataset.enable_in_batch_packing=true")
    if L.cpu_offload:
        out.append("model.cpu_offloading=true")
    return out + list(probe.extra)


def job(probe: Probe) -> dict[str, Any]:
    return {"id": probe.id, "name": probe.recipe, "kind": "library", "overrides": overrides(probe),
            "gpus": probe.layout.world, "gpu_type": None, "placeholders": True}


def jobs() -> list[dict[str, Any]]:
    return [job(p) for p in PROBES]


def verdict(result: dict[str, Any]) -> str:
    """ACCEPTS, or REJECTS + the real error (type and message), from one build_recipe.py line."""
    if result.get("validated"):
        return ACCEPTS
    error = result.get("error") or {}
    return f"{REJECTS}[{result.get('stage')}] {error.get('type')}: {error.get('message', '')}"


def built(result: dict[str, Any]) -> bool:
    """The recipe itself built: a failure is the layout's (override or validation), not the tier's."""
    return bool(result.get("built")) and result.get("stage") in (None, "override", "validate")


# ------------------------------------------------------------------ the recipes' own rejections (all_results)

# Fragments of the real validation's errors that are about the layout (the sizes a Layout holds):
# a recipe rejected with one of them must be rejected by a rule on its own layout too.
LAYOUT_ERRORS = (
    "is not divisible by total_model_size", "eval_global_batch_size", "must be a multiple of tensor_model_parallel_size",
    "must be a multiple or divisor of tensor_model_parallel_size", "Sequence length must be divisible by 2 * context parallel",
    "conflicts with pipeline_model_parallel_layout", "number of layers at", "pipeline_model_parallel_layout",
    "Micro batch size should be 1 when training with packed sequence", "enable_in_batch_packing",
    "hierarchical_context_parallel_sizes", "num_moe_experts must be non None to use expert-parallel",
    "no support for Pipeline parallelism with CPU offloading", "Sequence length in model config",
)
# Layout errors that no rule of check_layout can see, and why (reviewed).
OUTSIDE_LAYOUT = {
    "Sequence length in model config": "the recipe's model and dataset sequence lengths differ; a Layout has one "
                                       "sequence length (the catalog's finding seq_length_mismatch flags the recipe)",
}


def layout_rejection(result: dict[str, Any]) -> Optional[str]:
    """The LAYOUT_ERRORS fragment a recipe's real rejection matches, else None."""
    if result.get("validated") or not result.get("built"):
        return None
    message = (result.get("error") or {}).get("message", "")
    return next((f for f in LAYOUT_ERRORS if f in message), None)


def recipe_layout(result: dict[str, Any]) -> tuple[Layout, Optional[ModelArch], Optional[Hardware]]:
    """The recipe's layout at its GPU count as the recommender reads it from the catalog
    (recommend.build), with the dataset's in-batch packing, and its model and hardware."""
    from mbridge_launch.recommend.build import _recipe_layout

    rec = load_catalog().require(result["name"], result.get("kind"))
    layout = replace(_recipe_layout(rec, int(result["world_size"])),
                     in_batch_packing=bool((rec.dataset or {}).get("in_batch_packing")))
    # no architecture (None): the model rules skip, the grid and batch rules still apply
    arch = load_arch(rec.model) if rec.model else None
    return layout, arch, get_hardware(rec.hardware) if rec.hardware else None


def main() -> None:
    """Write the jobs file (python tests/bridge/rules_conformance.py > jobs.jsonl)."""
    for item in jobs():
        print(json.dumps(item))


if __name__ == "__main__":
    main()
