"""Fit a recipe's layout to the GPUs the user has.

The recipe's own layout is kept when it is valid at the new world size (and fits memory, when the
planner can estimate it). Otherwise the planner's search picks a layout; if the planner cannot
estimate the model, a rule-valid layout closest to the recipe's is chosen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from mbridge_launch.base.errors import NoLayoutError
from mbridge_launch.planner.pitfall_rules import ranked_count
from mbridge_launch.planner.rules import divisors


@dataclass
class Resized:
    layout: Any  # planner.rules.Layout
    estimate: Any = None  # planner estimate for the layout, when available
    gbs_changed_from: int | None = None
    notes: list[str] = field(default_factory=list)


def _cp_for_seq(recipe_cp: int, recipe_seq: int, seq: int) -> int:
    if not recipe_seq or seq == recipe_seq:
        return recipe_cp
    if seq > recipe_seq:
        return recipe_cp * 2 ** math.ceil(math.log2(seq / recipe_seq))
    return max(1, recipe_cp // 2 ** math.floor(math.log2(recipe_seq / seq)))


def _errors(rules: Any, layout: Any, arch: Any, hardware: Any) -> list[Any]:
    return [v for v in rules.check_layout(layout, arch, hardware) if v.severity == "error"]


def _fix_batch(layout: Any, recipe_gbs: int) -> tuple[Any, int | None]:
    """Keep GBS (the convergence contract) by lowering MBS; change GBS only as a last resort."""
    dp = layout.dp
    for mbs in sorted({layout.mbs, 1}, reverse=True):
        if recipe_gbs % (mbs * dp) == 0:
            return replace(layout, mbs=mbs, gbs=recipe_gbs), None
    step = dp  # with mbs=1
    new_gbs = max(step, round(recipe_gbs / step) * step)
    return replace(layout, mbs=1, gbs=new_gbs), recipe_gbs


def resize_layout(recipe_layout: Any, *, world: int, seq_length: int, arch: Any, hardware: Any,
                  precision: str, goal: str) -> Resized:
    from mbridge_launch.planner import rules

    target_cp = _cp_for_seq(recipe_layout.cp, recipe_layout.seq_length, seq_length)
    keep = replace(recipe_layout, world=world, seq_length=seq_length, cp=target_cp, sp=recipe_layout.tp > 1)
    # A longer sequence than the recipe's: CP grows with it at most (the recipe's tokens per GPU);
    # with a memory estimate, the smallest CP that fits wins, since CP costs communication and
    # takes GPUs from data parallelism (an 8B LoRA at 16k needs no CP=8).
    cps = [target_cp]
    if target_cp > recipe_layout.cp and arch is not None and not getattr(arch, "missing", ()):
        cps = [c for c in (recipe_layout.cp * 2 ** k for k in range(target_cp.bit_length())) if c <= target_cp]
    for cp in cps:
        candidate = replace(keep, cp=cp)
        if world % (candidate.tp * candidate.pp * candidate.cp):
            continue
        candidate, gbs_from = _fix_batch(candidate, recipe_layout.gbs)
        if _errors(rules, candidate, arch, hardware):
            continue
        estimate = _planner_estimate(candidate, arch, hardware, precision, goal)
        # a layout pitfall (planner.pitfall_rules) sends it to the planner, which keeps it only when
        # no layout carries fewer
        if estimate is None or (getattr(estimate, "fits", True) and not ranked_count(getattr(estimate, "pitfalls", ()))):
            return Resized(candidate, estimate, gbs_from)
    planned = _planner_best(keep, arch, hardware, world, precision, goal)
    if planned is not None:
        return planned
    # the planner cannot estimate this architecture: the nearest rule-valid layout, unchecked for memory
    return _closest_valid(keep, recipe_layout.gbs, world, arch, hardware, rules)


def _planner_estimate(layout: Any, arch: Any, hardware: Any, precision: str, goal: str) -> Any:
    if arch is None:
        return None
    from mbridge_launch.planner.measured import shipped_for
    from mbridge_launch.planner.search import estimate_layout

    # corrected by NVIDIA's published rows of this configuration, as plan and estimate are
    return estimate_layout(layout, arch, hardware, precision=precision, goal=goal,
                           measured=shipped_for(arch.name, hardware.name, layout.world or 0, precision))


def _planner_best(prefer: Any, arch: Any, hardware: Any, world: int, precision: str, goal: str) -> Resized | None:
    """The planner's choice; None when the planner cannot estimate this architecture. When it can
    and nothing fits, there is no layout: NoLayoutError names the most common reason."""
    if arch is None or getattr(arch, "missing", ()):
        return None
    from mbridge_launch.planner.search import best_layout, rejection_summary, search

    result = best_layout(arch, hardware, world, gbs=prefer.gbs, seq_length=prefer.seq_length,
                         precision=precision, goal=goal, prefer=prefer)
    if result is None:
        found = search(arch, hardware, world, gbs=prefer.gbs, seq_length=prefer.seq_length,
                       precision=precision, goal=goal, top=1)
        # each reason with its rule's message, not only the code
        raise NoLayoutError("recommend.no_layout", model=arch.name, gpus=world, gpu_type=hardware.name,
                            seq=prefer.seq_length, reason=rejection_summary(found.rejected))
    layout = result.layout
    if prefer.packing and (layout.mbs != 1 or not layout.packing):
        # the search does not model sequence packing, which needs MBS=1 (offline packing); GBS
        # stays divisible (it was by MBS x DP) and a smaller micro batch only needs less memory
        layout = replace(layout, mbs=1, packing=True)
        result = _planner_estimate(layout, arch, hardware, precision, goal)
    return Resized(layout, result, prefer.gbs if layout.gbs != prefer.gbs else None)


def _closest_valid(target: Any, recipe_gbs: int, world: int, arch: Any, hardware: Any, rules: Any) -> Resized:
    """Without a memory model: the rule-valid layout nearest to the recipe's (log distance)."""
    moe = bool(getattr(arch, "num_moe_experts", None)) or target.ep > 1
    best: tuple[float, Any, int | None] | None = None
    first_reason = None
    ds = divisors(world)
    for tp in ds:
        for pp in ds:
            if world % (tp * pp):
                continue
            for cp in ds:
                if world % (tp * pp * cp):
                    continue
                for ep in (ds if moe else [1]):
                    cand = replace(target, tp=tp, pp=pp, cp=cp, ep=ep, sp=tp > 1,
                                   vp=target.vp if pp == target.pp and pp > 1 else None,
                                   etp=target.etp if moe else None)
                    cand, gbs_from = _fix_batch(cand, recipe_gbs)
                    errors = _errors(rules, cand, arch, hardware)
                    if errors:
                        first_reason = first_reason or errors[0]
                        continue
                    score = sum(abs(math.log2(a / b)) for a, b in
                                ((tp, target.tp), (pp, target.pp), (cp, target.cp), (ep, target.ep)))
                    # shrinking model parallelism risks memory; growing it only costs speed
                    if tp * pp * cp < target.tp * target.pp * target.cp:
                        score += 2.0
                    score += 3.0 if gbs_from is not None else 0.0
                    if best is None or score < best[0]:
                        best = (score, cand, gbs_from)
    if best is None:
        reason = first_reason.message() if first_reason is not None else "-"
        raise NoLayoutError("recommend.no_layout", model=getattr(arch, "name", "?"), gpus=world,
                            gpu_type=getattr(hardware, "name", "?"), seq=target.seq_length, reason=reason)
    return Resized(best[1], None, best[2])
