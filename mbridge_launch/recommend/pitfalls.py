"""Known pitfalls that apply to a recommendation (issue 2's list), each a (code, message) pair."""

from __future__ import annotations

from typing import Any

from mbridge_launch.i18n import t

BLACKWELL = ("b200", "b300", "gb200", "gb300", "vr200", "r100")
LONG_CONTEXT = 32768
# 1F1B bubble fraction (PP-1)/(m+PP-1) above which interleaving (VP) is worth its extra communication
BUBBLE_WORTH_VP = 0.05


def _feature(recipe: Any, *names: str) -> Any:
    features = recipe.features or {}
    for name in names:
        if name in features and features[name] not in (None, False, "none", "None"):
            return features[name]
    return None


def _override(overrides: dict[str, str], key: str) -> str | None:
    return overrides.get(key)


def is_vlm(recipe: Any) -> bool:
    family = (recipe.family or "").lower()
    return "vl" in family.split("_") or family.endswith("_vl") or "omni" in family or "vl" in (recipe.model or "").split("_")


def find_pitfalls(*, recipe: Any, layout: Any, arch: Any, gpu_type: str, dataset: str,
                  dataset_is_vlm: bool | None, vlm_choices: list[str], overrides: dict[str, str],
                  recompute: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def add(warning_code: str, key: str, **params: Any) -> None:
        found.append((warning_code, t(key, **params)))

    if recipe.kind == "benchmark":
        add("BENCHMARK_NOT_TRAINING", "pitfall.benchmark_not_training")
    if layout.pp > 1 and not layout.vp:
        micro_batches = max(1, layout.gbs // max(1, layout.mbs * layout.dp))
        bubble = (layout.pp - 1) / (micro_batches + layout.pp - 1)
        if bubble >= BUBBLE_WORTH_VP:
            add("PP_WITHOUT_VP", "pitfall.pp_without_vp", pp=layout.pp, bubble=bubble)
    experts = getattr(arch, "num_moe_experts", None) if arch is not None else None
    if experts and layout.ep * 8 <= experts and layout.world and layout.world >= 8 and layout.ep < min(8, experts):
        add("EP_LOW", "pitfall.ep_low", experts=experts, ep=layout.ep, per_gpu=experts // layout.ep)
    cuda_graph = _override(overrides, "model.cuda_graph_impl") or _feature(recipe, "cuda_graph_impl", "enable_cuda_graph", "cuda_graph")
    cuda_graph_on = cuda_graph not in (None, "none", "false", "False")
    packing = (_override(overrides, "dataset.enable_offline_packing") or "").lower() == "true" or bool(_feature(recipe, "packed_sequence", "enable_offline_packing"))
    if cuda_graph_on and packing:
        add("CUDA_GRAPH_PACKING", "pitfall.cuda_graph_packing")
    if cuda_graph_on and recompute == "full":
        add("CUDA_GRAPH_FULL_RECOMPUTE", "pitfall.cuda_graph_full_recompute")
    te_rng = _override(overrides, "model.use_te_rng_tracker")
    te_rng_on = (te_rng or "").lower() == "true" if te_rng is not None else bool(_feature(recipe, "use_te_rng_tracker"))
    if cuda_graph_on and not te_rng_on:
        add("CUDA_GRAPH_RNG", "pitfall.cuda_graph_rng")
    if layout.fsdp and layout.tp > 1 and gpu_type in ("h100", "h200"):
        add("FSDP_TP_H100", "pitfall.fsdp_tp_h100", tp=layout.tp)
    if layout.seq_length >= LONG_CONTEXT and layout.cp == 1:
        add("LONG_CONTEXT_NO_CP", "pitfall.long_context_no_cp", seq=layout.seq_length)
    overlap = _override(overrides, "ddp.overlap_grad_reduce")
    overlap_on = (overlap or "").lower() == "true" if overlap is not None else bool(_feature(recipe, "overlap_grad_reduce"))
    if experts and gpu_type in ("h100", "h200") and overlap_on:
        add("MOE_OVERLAP_GRAD_REDUCE_H100", "pitfall.moe_overlap_grad_reduce_h100")
    if is_vlm(recipe) and dataset_is_vlm is False:
        add("VLM_TEXT_DATA", "pitfall.vlm_text_data", model=recipe.model, dataset=dataset, choices=", ".join(vlm_choices))
    if recipe.hardware in BLACKWELL and gpu_type not in BLACKWELL:
        add("BLACKWELL_ONLY", "pitfall.blackwell_only", recipe=recipe.name, hardware=recipe.hardware, gpu_type=gpu_type)
    max_pos = getattr(arch, "max_position_embeddings", None) if arch is not None else None
    if max_pos and layout.seq_length > max_pos:
        add("SEQ_BEYOND_MODEL", "pitfall.seq_beyond_model", seq=layout.seq_length, max_pos=max_pos)
    for finding in recipe.findings or []:
        code = finding["code"] if isinstance(finding, dict) else finding.code
        message = finding["message"] if isinstance(finding, dict) else finding.message
        add(code.upper() if code.upper().startswith("RECIPE") else f"RECIPE_{code}".upper(),
            "pitfall.recipe_finding", code=code, message=message)
    return found
