"""Layout pitfalls: valid layouts that NVIDIA's tuning says train slower than they need to.

Unlike planner.rules (what Megatron Core refuses or warns about), a pitfall breaks no rule; it is
a layout choice the published recipes avoid. They live here, below the search, so that one
predicate serves both sides: `search` ranks every layout carrying a pitfall after every layout
that carries fewer (a pitfall is an input of the choice, not a remark after it; PRICED ones
through the predicted speed), and
recommend.pitfalls turns the ones left on the chosen layout into warnings. The search never
prefers a layout it would then warn against; a pitfall stays on the chosen layout only when no
layout the search found avoids it (`SearchResult.unavoidable`).

`layout_pitfalls(layout, arch, hardware)` -> `Violation`s with severity "pitfall".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mbridge_launch.knowledge.vocabulary import HOPPER
from mbridge_launch.planner.rules import Layout, Violation

if TYPE_CHECKING:
    from mbridge_launch.knowledge.hardware import Hardware
    from mbridge_launch.knowledge.models import ModelArch

PITFALL = "pitfall"
# Sequence length from which a layout without context parallelism is a pitfall: every published
# Megatron Bridge recipe at 32k tokens or more splits the sequence (CP >= 2).
LONG_CONTEXT = 32768
# 1F1B bubble fraction (PP-1)/(m+PP-1) above which interleaving (VP) is worth its extra
# communication. Below it a pipeline without VP is fine (many accumulation steps hide the bubble)
# and is neither charged nor warned about.
BUBBLE_WORTH_VP = 0.05
# An MoE layer is EP-starved when each GPU holds more than this many experts.
EXPERTS_PER_GPU_HIGH = 8

# The codes, in the order they are checked; `grid_pitfalls` are those a grid (TP, PP, CP, EP,
# FSDP) decides alone, before its micro-batch and VP are chosen.
CODES = ("PP_WITHOUT_VP", "EP_LOW", "LONG_CONTEXT_NO_CP", "FSDP_TP_H100")
GRID_CODES = frozenset({"EP_LOW", "LONG_CONTEXT_NO_CP", "FSDP_TP_H100"})
# Pitfalls the step model already prices (the pipeline bubble; small expert GEMMs and the
# all-to-all of a low EP), and which NVIDIA's own published layouts carry (EP_LOW 24 and
# PP_WITHOUT_VP 9 of the 129 benchmark rows): ranking them out lexicographically put the published
# layout first in 62 of 128 rows, weighing them by speed in 76 (benchmarks/accuracy.py). The
# search weighs them through the predicted speed; the others (what the step model does not see)
# rank a layout after every layout with fewer of them.
PRICED = frozenset({"PP_WITHOUT_VP", "EP_LOW"})
# Why each pitfall flags a layout Megatron Bridge's validation accepts (every one does: a pitfall
# is a valid layout; tests/bridge/test_rules_conformance.py measures it). Developer-facing.
STRICTER_THAN_MEGATRON: dict[str, str] = {
    "PP_WITHOUT_VP": "throughput: a 1F1B pipeline bubble of 5% or more that interleaving would shrink",
    "EP_LOW": "throughput: more than 8 experts per GPU (small expert GEMMs) or no expert parallelism at all",
    "LONG_CONTEXT_NO_CP": "memory/throughput: every published recipe at 32k tokens or more splits the sequence",
    "FSDP_TP_H100": "throughput: NVIDIA's Hopper recipes do not combine Megatron-FSDP with TP",
}


def ranked_count(pitfalls: Any) -> int:
    """How many of `pitfalls` (Violations) the ranking puts before speed: those not PRICED."""
    return sum(1 for p in pitfalls if p.code not in PRICED)


def pipeline_bubble(layout: Layout) -> float:
    """The 1F1B pipeline bubble's share of the step without interleaving: (PP-1)/(m+PP-1) with
    m micro-batches per step."""
    micro_batches = max(1, layout.gbs // max(1, layout.mbs * layout.dp))
    return (layout.pp - 1) / (micro_batches + layout.pp - 1)


def _pitfall(code: str, key: str, fld: str, **params: Any) -> Violation:
    return Violation(code=code, key=key, params=params, field=fld, severity=PITFALL)


def layout_pitfalls(layout: Layout, arch: ModelArch | None, hardware: Hardware | None,
                    only: frozenset[str] | None = None) -> list[Violation]:
    """The pitfalls `layout` carries (`only`: check just these codes)."""
    found: list[Violation] = []
    L = layout

    def wanted(code: str) -> bool:
        return only is None or code in only

    if wanted("PP_WITHOUT_VP") and L.pp > 1 and not L.vp:
        bubble = pipeline_bubble(L)
        if bubble >= BUBBLE_WORTH_VP:
            found.append(_pitfall("PP_WITHOUT_VP", "pitfall.pp_without_vp", "vp", pp=L.pp, bubble=bubble))
    experts = getattr(arch, "num_moe_experts", None) if arch is not None else None
    if wanted("EP_LOW") and experts and experts > 1 and (L.world or 0) > L.ep:
        per_gpu = experts // max(L.ep, 1)
        if per_gpu > EXPERTS_PER_GPU_HIGH or L.ep == 1:
            found.append(_pitfall("EP_LOW", "pitfall.ep_low", "ep", experts=experts, ep=L.ep, per_gpu=per_gpu))
    if wanted("LONG_CONTEXT_NO_CP") and L.seq_length >= LONG_CONTEXT and L.cp == 1:
        found.append(_pitfall("LONG_CONTEXT_NO_CP", "pitfall.long_context_no_cp", "cp", seq=L.seq_length))
    if wanted("FSDP_TP_H100") and L.fsdp and L.tp > 1 and hardware is not None and hardware.name in HOPPER:
        found.append(_pitfall("FSDP_TP_H100", "pitfall.fsdp_tp_h100", "tp", tp=L.tp))
    return found


def grid_pitfalls(grid: Layout, arch: ModelArch | None, hardware: Hardware | None) -> list[Violation]:
    """The pitfalls every layout of this grid carries, whatever its micro-batch and VP (a lower
    bound of what its best layout carries: the search prunes on it)."""
    return layout_pitfalls(grid, arch, hardware, only=GRID_CODES)
