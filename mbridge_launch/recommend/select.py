"""Pick the recipe: a library recipe for real training, a benchmark recipe only on request."""

from __future__ import annotations

import difflib
import math
from typing import Any, Iterable

from mbridge_launch.base.errors import UserError

# Variants that are not the general-purpose recipe: used only when nothing else exists.
_SPECIAL_VARIANTS = ("deterministic", "functional", "low_precision")
# Recipe hardware a GPU type may borrow when no recipe names it (same compute generation).
HARDWARE_FALLBACK = {
    "h100": ("h100",),
    "h200": ("h100",),
    "b200": ("b200", "b300", "gb200", "h100"),
    "b300": ("b300", "b200", "gb300", "h100"),
    "gb200": ("gb200", "gb300", "b200", "h100"),
    "gb300": ("gb300", "gb200", "b300", "h100"),
}


def _variant_seq(recipe: Any) -> int:
    return int(recipe.seq_length or recipe.dataset_seq_length or 0)


def _is_special(recipe: Any) -> bool:
    return any(tag in (recipe.variant or "") for tag in _SPECIAL_VARIANTS)


def _hardware_rank(recipe: Any, gpu_type: str) -> int:
    order = HARDWARE_FALLBACK.get(gpu_type, (gpu_type, "h100"))
    return order.index(recipe.hardware) if recipe.hardware in order else len(order)


def _error_findings(recipe: Any) -> int:
    return sum(1 for f in (recipe.findings or []) if _finding_severity(f) == "error")


def _finding_severity(finding: Any) -> str:
    if isinstance(finding, dict):
        return finding.get("severity", "error")
    return getattr(finding, "severity", "error")


def _gpu_distance(recipe: Any, gpus: int | None) -> float:
    if not gpus or not recipe.gpus:
        return 0.0
    return abs(math.log2(recipe.gpus / gpus))


def models_with_recipes(recipes: Iterable[Any], kind: str) -> list[str]:
    return sorted({r.model for r in recipes if r.kind == kind})


def select_library(catalog: Any, model: str, goal: str, recipe_mode: str, *, seq_length: int | None,
                   gpu_type: str, precision: str | None, gpus: int | None) -> Any:
    for_model = [r for r in catalog.recipes if r.kind == "library" and r.model == model]
    if not for_model:
        known = models_with_recipes(catalog.recipes, "library")
        closest = difflib.get_close_matches(model, known, n=5, cutoff=0.3) or known[:5]
        raise UserError("recommend.no_recipe_for_model", kind="library", model=model,
                        version=catalog.version, closest=", ".join(closest))
    candidates = [r for r in for_model if r.mode == recipe_mode and not r.raises_not_implemented]
    if not candidates:
        available = sorted({"lora/dora" if r.mode == "peft" else r.mode for r in for_model if not r.raises_not_implemented})
        raise UserError("recommend.no_recipe_for_goal", model=model, goal=goal, available=", ".join(available) or "-")

    def key(r: Any) -> tuple:
        seq = _variant_seq(r)
        if seq_length is None:
            seq_score: tuple = (0 if not r.variant else 1, 0)
        elif seq >= seq_length:
            seq_score = (0, seq)  # the shortest recipe that covers the request
        else:
            seq_score = (1, -seq)  # none covers it: the longest, CP grows to cover the rest
        wanted_precision = precision or "bf16"
        return (
            catalog.run_recipe_name(r.name) is None,  # run_recipe.py would load the benchmark of that name
            _is_special(r),
            seq_score,
            _error_findings(r) > 0,
            _hardware_rank(r, gpu_type),
            r.precision != wanted_precision,
            _gpu_distance(r, gpus),
            r.name,
        )

    return min(candidates, key=key)


def select_benchmark(catalog: Any, model: str, recipe_mode: str, *, gpu_type: str,
                     precision: str | None, gpus: int | None, seq_length: int | None) -> Any:
    for_model = [r for r in catalog.recipes if r.kind == "benchmark" and r.model == model and not r.raises_not_implemented]
    if not for_model:
        available = models_with_recipes(catalog.recipes, "benchmark")
        raise UserError("recommend.no_benchmark", model=model, mode=recipe_mode, available=", ".join(available))
    same_mode = [r for r in for_model if r.mode == recipe_mode] or for_model

    def key(r: Any) -> tuple:
        seq_penalty = 0 if seq_length is None or _variant_seq(r) == seq_length else 1
        return (
            _hardware_rank(r, gpu_type),
            r.precision != (precision or "bf16") if precision else r.precision not in ("bf16", "fp8cs", "fp8mx"),
            _error_findings(r) > 0,
            seq_penalty,
            _gpu_distance(r, gpus),
            _is_special(r),
            r.name,
        )

    return min(same_mode, key=key)
