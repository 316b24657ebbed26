"""Fit a recipe's layout to the GPUs the user has: the planner's first layout.

At another GPU count or system than the recipe's own, the recommended layout is the one `plan`
puts first for the same request (planner.entry.plan_request, the recipe's global batch and the
requested sequence length): the recipe's layout scaled in DP is only one candidate among the
planner's, and recommend never claims a ranking the planner does not make. Where the layout
differs from the planner's first (the recipe at its own count and system, a benchmark recipe,
the user's overrides, sequence packing, an architecture the planner cannot estimate), the
LayoutChoice says why and carries the planner's first with both predicted speeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from mbridge_launch.base.errors import NoLayoutError
from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.planner.rules import divisors

# why a recommended layout is not the planner's first (messages recommend.layout_reason.*)
REASONS = ("recipe_own", "recipe_same_generation", "benchmark", "user_override", "packing", "no_estimate")


@dataclass
class Resized:
    layout: Any  # planner.rules.Layout
    estimate: Any = None  # planner estimate for the layout, when available
    gbs_changed_from: int | None = None
    notes: list[str] = field(default_factory=list)
    # the planner's answer (planner.entry.PlanResult) the layout was taken from, when it was asked
    planned: Any = None
    reason: str | None = None  # REASONS: why the layout is not the planner's first (None: it is)


@dataclass(frozen=True)
class LayoutChoice:
    """Where the recommended layout comes from: "planner" (the planner's first for the request),
    or another source with the reason (REASONS) and, where the planner was asked, its first
    layout and predicted tokens/s/GPU beside the recommended one's."""

    source: str  # "planner", "recipe" (kept as shipped or weak-scaled), "adjusted" or "rules"
    reason: str | None = None
    planner_first: Any = None  # search.Candidate
    tokens_per_sec_per_gpu: float | None = None  # of the recommended layout

    def reason_msg(self) -> Msg | None:
        return msg(f"recommend.layout_reason.{self.reason}") if self.reason else None

    def as_json(self) -> dict[str, Any]:
        first = self.planner_first
        reason = self.reason_msg()
        return {
            "source": self.source, "reason": self.reason, "reason_text": str(reason) if reason is not None else None,
            "tokens_per_sec_per_gpu": _round(self.tokens_per_sec_per_gpu),
            "planner_first": None if first is None else {
                **layout_key_json(first.layout), "tokens_per_sec_per_gpu": _round(first.tokens_per_sec_per_gpu)},
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def layout_key(L: Any) -> tuple:
    """What makes two layouts the same choice of the planner (the pipeline split and the
    memory-only settings aside)."""
    return (L.tp, L.pp, L.vp_size, L.cp, L.ep, L.etp_size, L.mbs, bool(L.fsdp), L.recompute or "none",
            L.recompute_layers)


def layout_key_json(L: Any) -> dict[str, Any]:
    return {"tp": L.tp, "pp": L.pp, "vp": L.vp_size, "cp": L.cp, "ep": L.ep, "etp": L.etp_shown, "mbs": L.mbs,
            "fsdp": bool(L.fsdp), "recompute": L.recompute or "none", "recompute_layers": L.recompute_layers}


def choice_of(resized: Any, layout: Any, estimate: Any, *, benchmark: bool, user_layout: bool) -> LayoutChoice:
    """The LayoutChoice of a recommendation: `resized` (what the resize gave), `layout` (what is
    recommended after the user's overrides), `estimate` (its estimate)."""
    tps = getattr(estimate, "tokens_per_sec_per_gpu", None)
    if benchmark:
        return LayoutChoice("recipe", "benchmark", None, tps)
    planned = getattr(resized, "planned", None) if resized is not None else None
    first = planned.best if planned is not None else None
    if first is not None and layout_key(first.layout) == layout_key(layout):
        return LayoutChoice("planner", None, first, tps)
    reason = resized.reason if resized is not None else None
    if first is not None and (reason is None or user_layout):
        reason = "user_override" if user_layout else reason or "packing"
        return LayoutChoice("adjusted", reason, first, tps)
    source = {"recipe_own": "recipe", "recipe_same_generation": "recipe", "no_estimate": "rules"}.get(reason or "",
                                                                                                 "adjusted")
    return LayoutChoice(source, reason, first, tps)


def _planner_request(arch: Any, hardware: Any, world: int, gbs: int, seq_length: int, precision: str, goal: str,
                     model: str | None, recipe: Any = None) -> Any:
    from mbridge_launch.planner.entry import PlanRequest

    # the recipe the Plan runs: its memory settings in every estimate (planner.entry)
    return PlanRequest(model or arch.name, arch, hardware, world, gbs, seq_length, precision, goal, top=1,
                       recipe=recipe)


def resize_layout(recipe_layout: Any, *, world: int, seq_length: int, arch: Any, hardware: Any,
                  precision: str, goal: str, model: str | None = None, recipe: Any = None) -> Resized:
    """The planner's first layout for the recipe's request at `world` GPUs (module docstring);
    without a planner estimate of the architecture, the rule-valid layout nearest the recipe's."""
    from mbridge_launch.planner import rules

    target_cp = _cp_for_seq(recipe_layout.cp, recipe_layout.seq_length, seq_length)
    keep = replace(recipe_layout, world=world, seq_length=seq_length, cp=target_cp, sp=recipe_layout.tp > 1)
    if arch is None or getattr(arch, "missing", ()):
        # the planner cannot estimate this architecture: the nearest rule-valid layout, unchecked for memory
        resized = _closest_valid(keep, recipe_layout.gbs, world, arch, hardware, rules)
        return replace(resized, reason="no_estimate")
    return _planner_first(keep, arch, hardware, world, precision, goal, model, recipe)


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


def _planner_first(prefer: Any, arch: Any, hardware: Any, world: int, precision: str, goal: str,
                   model: str | None, recipe: Any = None) -> Resized:
    """The planner's first layout at the recipe's global batch; when no data-parallel size of a
    layout divides that batch, at the nearest multiple of the GPU count (a GBS change, said by the
    caller). No layout at all: NoLayoutError naming the most common reasons."""
    from mbridge_launch.planner.entry import estimate_request, plan_request
    from mbridge_launch.planner.search import rejection_summary

    request = _planner_request(arch, hardware, world, prefer.gbs, prefer.seq_length, precision, goal, model, recipe)
    planned = plan_request(request, nvidia=False)
    gbs_from = None
    if planned.best is None and "RULE_GBS" in planned.rejected:
        gbs = max(world, round(prefer.gbs / world) * world)  # a multiple of every DP size
        if gbs != prefer.gbs:
            retried = plan_request(replace(request, gbs=gbs), nvidia=False)
            if retried.best is not None:
                planned, gbs_from = retried, prefer.gbs
    if planned.best is None:
        # each reason with its rule's message, not only the code
        raise NoLayoutError("recommend.no_layout", model=arch.name, gpus=world, gpu_type=hardware.name,
                            seq=prefer.seq_length, reason=rejection_summary(planned.rejected))
    first = planned.best
    if prefer.packing and first.layout.mbs != 1:
        # offline sequence packing needs MBS=1, which `plan` does not model: the planner's first
        # among the layouts at MBS=1, said beside its unconstrained first (LayoutChoice)
        packed = plan_request(replace(planned.request, mbs=1), nvidia=False).best
        if packed is not None:
            layout = replace(packed.layout, packing=True)
            return Resized(layout, replace(packed, layout=layout), gbs_from, planned=planned, reason="packing")
        # no layout fits at MBS=1 by the model: the planner's first at MBS=1 anyway (less memory than its MBS)
        layout = replace(first.layout, mbs=1, packing=True)
        estimate = estimate_request(planned.request, layout, planned.calibration).candidate
        return Resized(layout, estimate, gbs_from, planned=planned, reason="packing")
    if prefer.packing:
        layout = replace(first.layout, packing=True)
        return Resized(layout, replace(first, layout=layout), gbs_from, planned=planned)
    return Resized(first.layout, first, gbs_from, planned=planned)


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
