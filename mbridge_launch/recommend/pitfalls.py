"""Known pitfalls that apply to a recommendation (issue 2's list), each a (code, message) pair.

The layout pitfalls (PP_WITHOUT_VP, EP_LOW, LONG_CONTEXT_NO_CP, FSDP_TP_H100) are the planner's
(planner.pitfall_rules), which the search also ranks by: a layout the planner chose carries one
only when no layout avoids it, and the warning says so. The recipe's own layout at its own GPU
count and system is NVIDIA's measured choice and, like the recipe's settings below, is not warned
about; a layout the user's overrides make is.

Settings are read with the user's overrides on top of the recipe (plan.settings). A pitfall
that NVIDIA's own recipe ships on purpose (a Hopper MoE recipe with overlap_grad_reduce on, a
benchmark recipe that packs sequences under CUDA graphs with padding set) is not reported
against that recipe; it is reported when the user's overrides or a substituted recipe create it.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.i18n import Msg, by_lang, msg
from mbridge_launch.knowledge.vocabulary import BLACKWELL, HOPPER, RUBIN
from mbridge_launch.plan import settings as S
from mbridge_launch.plan.shipped import recipe_seq, same_system
from mbridge_launch.planner.pitfall_rules import CODES as PITFALL_CODES
from mbridge_launch.planner.pitfall_rules import PRICED, layout_pitfalls

BLACKWELL_OR_NEWER = (*BLACKWELL, *RUBIN)

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
                  seq_changed: bool = False, estimate: Any = None) -> list[tuple[str, Msg]]:
    """The pitfalls of the recommendation; `estimate` (the planner's Candidate for `layout`, when
    it chose it) says why a layout pitfall was kept."""
    from mbridge_launch.planner import rules

    gpu_type = hardware.name
    found: list[tuple[str, Msg]] = []

    def add(warning_code: str, key: str, **params: Any) -> None:
        found.append((warning_code, msg(key, **params)))

    if recipe.kind == "benchmark":
        add("BENCHMARK_NOT_TRAINING", "pitfall.benchmark_not_training")
    # --- the layout (the planner's pitfall rules, which its search avoids where it can)
    if not _is_recipe_layout(recipe, layout, gpu_type):
        kept: dict[str, str] = dict(getattr(estimate, "kept_pitfalls", None) or ()) if _same_layout(estimate, layout) else {}
        if arch is None or arch.missing:
            kept = {code: "no_arch" for code in PITFALL_CODES}  # no search: the layout is the rules' nearest
        chosen = _same_layout(estimate, layout)  # the search (or resize) chose it, weighing its speed
        for pitfall in layout_pitfalls(layout, arch, hardware):
            reason = kept.get(pitfall.code)
            if reason is None and chosen and pitfall.code in PRICED:
                reason = "priced"  # the step model prices it in and still predicts this layout fastest
            if reason is None:
                found.append((pitfall.code, pitfall.as_msg()))
            else:
                add(pitfall.code, f"pitfall.kept_{reason}", message=pitfall.as_msg(), gpus=layout.world or 1)
    experts = getattr(arch, "num_moe_experts", None) if arch is not None else None
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
            found.append((violation.code, violation.as_msg()))
            codes.add(violation.code)
    # --- what the catalog found irregular about the recipe itself
    for finding in recipe.findings or []:
        code, message, message_zh = _finding_fields(finding)
        if code in _LAYOUT_FINDINGS or code.startswith("RULE_") or (code == "seq_length_mismatch" and seq_changed):
            continue
        add(f"RECIPE_{code}".upper(), "pitfall.recipe_finding", code=code,
            message=by_lang(en=message, zh=message_zh or message))
    return found


def _same_layout(estimate: Any, layout: Any) -> bool:
    """The estimate is of this layout (an ETP made explicit, None -> 1, is the same layout)."""
    def key(L: Any) -> tuple:
        return (L.tp, L.pp, L.vp, L.cp, L.ep, L.etp_size, L.mbs, L.gbs, L.seq_length, L.fsdp, L.recompute,
                L.recompute_layers, L.world)

    other = getattr(estimate, "layout", None)
    return other is not None and key(other) == key(layout)


def _is_recipe_layout(recipe: Any, layout: Any, gpu_type: str) -> bool:
    """The library recipe's own layout at its own GPU count and system, as NVIDIA ships it."""
    if recipe.kind != "library" or not recipe.gpus or layout.world != recipe.gpus:
        return False
    if not same_system(recipe.hardware, gpu_type):
        return False
    own = (recipe.tp or 1, recipe.pp or 1, recipe.vp or None, recipe.cp or 1, recipe.ep or 1, recipe.mbs or 1,
           recipe.gbs or 1, recipe_seq(recipe))
    return own == (layout.tp, layout.pp, layout.vp or None, layout.cp, layout.ep, layout.mbs, layout.gbs,
                   layout.seq_length) and bool(layout.fsdp) == bool(S.megatron_fsdp(recipe, {}))
