"""Pick the recipe: a library recipe for real training, a benchmark recipe only on request."""

from __future__ import annotations

import difflib
import math
from typing import Any, Iterable

from mbridge_launch.base.errors import UserError
from mbridge_launch.plan.shipped import same_system

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


def _is_exact(recipe: Any, *, gpus: int | None, gpu_type: str, seq_length: int | None,
              precision: str | None) -> bool:
    """The recipe NVIDIA ships for exactly this request: its GPU count, system, sequence length and
    precision (a dimension the request leaves open matches any)."""
    return ((gpus is None or recipe.gpus == gpus) and same_system(recipe.hardware, gpu_type)
            and (seq_length is None or _variant_seq(recipe) == seq_length)
            and (precision is None or recipe.precision == precision))


def _library_candidates(catalog: Any, model: str, goal: str, recipe_mode: str) -> list[Any]:
    for_model = [r for r in catalog.recipes if r.kind == "library" and r.model == model]
    if not for_model:
        known = models_with_recipes(catalog.recipes, "library")
        closest = difflib.get_close_matches(model, known, n=5, cutoff=0.3) or known[:5]
        from mbridge_launch.base.i18n import msg

        raise UserError("recommend.no_recipe_for_model", kind=msg("card.kind_short.library"), model=model,
                        version=catalog.version, closest=", ".join(closest))
    candidates = [r for r in for_model if r.mode == recipe_mode and not r.raises_not_implemented]
    if not candidates:
        available = sorted({"lora/dora" if r.mode == "peft" else r.mode for r in for_model if not r.raises_not_implemented})
        raise UserError("recommend.no_recipe_for_goal", model=model, goal=goal, available=", ".join(available) or "-")
    return candidates


def recipe_for(catalog: Any, model: str, request: Any, gpu_type: str) -> Any:
    """The recipe recommend runs `request` (recommend.request.Request) with: the benchmark recipe
    when it asks for one, else the library recipe (select_library). `plan` asks it too, for the
    recipe its Plan will run (recommend.plan_file.plan_recipe)."""
    if request.benchmark:
        return select_benchmark(catalog, model, request.recipe_mode, gpu_type=gpu_type,
                                precision=request.precision, gpus=request.gpus, seq_length=request.seq_length)
    return select_library(catalog, model, request.goal, request.recipe_mode, seq_length=request.seq_length,
                          gpu_type=gpu_type, precision=request.precision, gpus=request.gpus)


def select_library(catalog: Any, model: str, goal: str, recipe_mode: str, *, seq_length: int | None,
                   gpu_type: str, precision: str | None, gpus: int | None) -> Any:
    """The library recipe for the request. The order of the key is the policy:
    1. one run_recipe.py can load (a library recipe shadowed by a benchmark of the same name and
       without an alias would run the benchmark: `passed_over` names it instead);
    2. a general-purpose recipe before a deterministic/functional/low-precision variant;
    3. the recipe shipped for exactly this count, system, sequence length and precision: NVIDIA ran
       that layout, so no other recipe, however close in sequence length, is resized over it;
    4. then the sequence length (the shortest recipe that covers it: long-context variants carry
       convergence settings such as RoPE scaling), the system, a recipe without an error finding,
       the precision, the nearest GPU count, and the recipe without a variant suffix; the system
       before the sequence length where the recipe stands in for a shipped one of step 1."""
    candidates = _library_candidates(catalog, model, goal, recipe_mode)
    wanted_precision = precision or "bf16"
    # standing in for a shipped recipe run_recipe.py cannot load: the system it was tuned for
    # outranks the sequence length (no Blackwell recipe resized for the H100 request it replaces)
    standing_in = any(catalog.run_recipe_name(r.name) is None and not _is_special(r)
                      and _is_exact(r, gpus=gpus, gpu_type=gpu_type, seq_length=seq_length, precision=precision)
                      for r in candidates)

    def key(r: Any) -> tuple:
        seq = _variant_seq(r)
        if seq_length is None:
            seq_score: tuple = (bool(r.variant), 0)  # no length asked: the recipe without a variant suffix
        elif seq >= seq_length:
            seq_score = (0, seq)  # the shortest recipe that covers the request
        else:
            seq_score = (1, -seq)  # none covers it: the longest, CP grows to cover the rest
        return (
            catalog.run_recipe_name(r.name) is None,  # run_recipe.py would load the benchmark of that name
            _is_special(r),
            not _is_exact(r, gpus=gpus, gpu_type=gpu_type, seq_length=seq_length, precision=precision),
            *((_hardware_rank(r, gpu_type), seq_score) if standing_in else (seq_score, _hardware_rank(r, gpu_type))),
            _error_findings(r) > 0,
            r.precision != wanted_precision,
            _gpu_distance(r, gpus),
            bool(r.variant),
            r.name,
        )

    return min(candidates, key=key)


def passed_over(catalog: Any, chosen: Any, *, seq_length: int | None, gpu_type: str, precision: str | None,
                gpus: int | None) -> Any:
    """The library recipe shipped for exactly this request that `select_library` had to pass over
    because run_recipe.py cannot load it (a benchmark function of the same name takes precedence
    and it has no alias: glm52_sft_416gpu_h100_bf16_config in 0.6.2), or None. Its dataset selector
    is the request's default, and the card says why another recipe stands in for it."""
    if chosen.kind != "library" or _is_exact(chosen, gpus=gpus, gpu_type=gpu_type, seq_length=seq_length,
                                             precision=precision):
        return None
    shadowed = [r for r in catalog.recipes
                if r.kind == "library" and r.model == chosen.model and r.mode == chosen.mode
                and not r.raises_not_implemented and not _is_special(r) and catalog.run_recipe_name(r.name) is None
                and _is_exact(r, gpus=gpus, gpu_type=gpu_type, seq_length=seq_length, precision=precision)]
    return min(shadowed, key=lambda r: (_hardware_rank(r, gpu_type), _gpu_distance(r, gpus), r.name), default=None)


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
