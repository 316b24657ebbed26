"""Known pitfalls that apply to a recommendation (issue 2's list), each a (code, message) pair.

Settings are read with the user's overrides on top of the recipe (plan.settings). A pitfall
that NVIDIA's own recipe ships on purpose (a Hopper MoE recipe with overlap_grad_reduce on, a
benchmark recipe that packs sequences under CUDA graphs with padding set) is not reported
against that recipe; it is reported when the user's overrides or a substituted recipe create it.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.i18n import t
from mbridge_launch.knowledge.vocabulary import BLACKWELL, HOPPER, RUBIN
from mbridge_launch.plan import settings as S

BLACKWELL_OR_NEWER = (*BLACKWELL, *RUBIN)
LONG_CONTEXT = 32768
# 1F1B bubble fraction (PP-1)/(m+PP-1) above which interleaving (VP) is worth its extra communication
BUBBLE_WORTH_VP = 0.05
# An MoE layer is EP-starved when each GPU holds more than this many experts.
EXPERTS_PER_GPU_HIGH = 8

# Catalog findings about the recipe's own layout at its canonical GPU count. The recommended
# layout is checked afresh by the planner's rules instead (their warnings are reported below), so
# a finding the resize already fixed (SP off at TP=8, an EP grid beyond the node) is not repeated.
_LAYOUT_FINDINGS = frozenset({
    "grid_exceeds_gpus", "world_not_divisible", "expert_grid_exceeds_gpus", "expert_world_not_divisible",
    "gbs_not_divisible", "cp_seq_not_divisible", "vp_without_pp", "sp_without_tp", "pp_split_not_divisible",
    "vp_split_not_divisible",
})
# Rule warnings a pitfall above already reports in its own words.
_RULES_COVERED = {"RULE_SEQ_POSITIONS": "SEQ_BEYOND_MODEL"}


def is_vlm(recipe: Any) -> bool:
    family = (recipe.family or "").lower()
    return "vl" in family.split("_") or family.endswith("_vl") or "omni" in family or "vl" in (recipe.model or "").split("_")


def _finding_fields(finding: Any) -> tuple[str, str, str]:
    if isinstance(finding, dict):
        return finding["code"], finding.get("message", ""), finding.get("message_zh", "")
    return finding.code, finding.message, getattr(finding, "message_zh", "")


def find_pitfalls(*, recipe: Any, layout: Any, arch: Any, hardware: Any, dataset: str,
                  dataset_is_vlm: bool | None, vlm_choices: list[str], overrides: dict[str, str],
                  seq_changed: bool = False) -> list[tuple[str, str]]:
    from mbridge_launch.base.i18n import current_lang
    from mbridge_launch.planner import rules

    gpu_type = hardware.name
    found: list[tuple[str, str]] = []

    def add(warning_code: str, key: str, **params: Any) -> None:
        found.append((warning_code, t(key, **params)))

    if recipe.kind == "benchmark":
        add("BENCHMARK_NOT_TRAINING", "pitfall.benchmark_not_training")
    # --- the layout
    if layout.pp > 1 and not layout.vp:
        micro_batches = max(1, layout.gbs // max(1, layout.mbs * layout.dp))
        bubble = (layout.pp - 1) / (micro_batches + layout.pp - 1)
        if bubble >= BUBBLE_WORTH_VP:
            add("PP_WITHOUT_VP", "pitfall.pp_without_vp", pp=layout.pp, bubble=bubble)
    experts = getattr(arch, "num_moe_experts", None) if arch is not None else None
    per_gpu = experts // max(layout.ep, 1) if experts else 0
    if experts and (layout.world or 0) > layout.ep and (per_gpu > EXPERTS_PER_GPU_HIGH or (layout.ep == 1 and experts > 1)):
        add("EP_LOW", "pitfall.ep_low", experts=experts, ep=layout.ep, per_gpu=per_gpu)
    if layout.seq_length >= LONG_CONTEXT and layout.cp == 1:
        add("LONG_CONTEXT_NO_CP", "pitfall.long_context_no_cp", seq=layout.seq_length)
    if layout.fsdp and layout.tp > 1 and gpu_type in HOPPER:
        add("FSDP_TP_H100", "pitfall.fsdp_tp_h100", tp=layout.tp)
    # --- CUDA graphs
    graphs = S.cuda_graphs(recipe, overrides)
    packing = S.offline_packing(recipe, overrides)
    if graphs.value and packing.value and (graphs.by_user or packing.by_user
                                           or S.packing_padding_disabled_by_user(overrides)):
        add("CUDA_GRAPH_PACKING", "pitfall.cuda_graph_packing")
    if graphs.value and layout.recompute == "full":
        add("CUDA_GRAPH_FULL_RECOMPUTE", "pitfall.cuda_graph_full_recompute")
    if graphs.value and not S.te_rng_tracker(recipe, overrides):
        add("CUDA_GRAPH_RNG", "pitfall.cuda_graph_rng")
    # --- MoE gradient-reduce overlap on Hopper: only where no Hopper recipe vouches for it
    overlap = S.overlap_grad_reduce(recipe, overrides)
    if experts and gpu_type in HOPPER and overlap.value and (overlap.by_user or recipe.hardware not in HOPPER):
        add("MOE_OVERLAP_GRAD_REDUCE_H100", "pitfall.moe_overlap_grad_reduce_h100", gpu_type=gpu_type.upper())
    # --- data and hardware
    if is_vlm(recipe) and dataset_is_vlm is False:
        add("VLM_TEXT_DATA", "pitfall.vlm_text_data", model=recipe.model, dataset=dataset,
            choices=", ".join(vlm_choices) or "-")
    if recipe.hardware in BLACKWELL_OR_NEWER and gpu_type not in BLACKWELL_OR_NEWER:
        add("BLACKWELL_ONLY", "pitfall.blackwell_only", recipe=recipe.name, hardware=recipe.hardware, gpu_type=gpu_type)
    max_pos = getattr(arch, "max_position_embeddings", None) if arch is not None else None
    if max_pos and layout.seq_length > max_pos:
        add("SEQ_BEYOND_MODEL", "pitfall.seq_beyond_model", seq=layout.seq_length, max_pos=max_pos)
    # --- the planner's rule warnings for the layout actually recommended
    codes = {code for code, _ in found}
    for violation in rules.check_layout(layout, arch, hardware):
        if violation.severity != "warning" or _RULES_COVERED.get(violation.code) in codes:
            continue
        if violation.code not in codes:
            found.append((violation.code, violation.message()))
            codes.add(violation.code)
    # --- what the catalog found irregular about the recipe itself
    zh = current_lang() == "zh"
    for finding in recipe.findings or []:
        code, message, message_zh = _finding_fields(finding)
        if code in _LAYOUT_FINDINGS or code.startswith("RULE_") or (code == "seq_length_mismatch" and seq_changed):
            continue
        add(f"RECIPE_{code}".upper(), "pitfall.recipe_finding", code=code,
            message=message_zh if zh and message_zh else message)
    return found
