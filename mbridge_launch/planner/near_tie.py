"""The near-tie set: the candidates the throughput model cannot tell from the first one.

A layout predicted within the model's leave-one-out error (planner.domain's band for the request)
of the first is as likely to be the fastest as the first: `plan` shows the set, `tune` measures
it, and the benchmarks score whether the published layout lies inside it.
"""

from __future__ import annotations

from mbridge_launch.planner.search import Candidate


def tie_distance(first: Candidate, candidate: Candidate) -> float:
    """The smallest tolerance under which near_tie_set holds `candidate` beside `first`: 0 for a
    measured layout (always held), else how far its predicted tokens/s/GPU lies from the first's,
    either way, as a fraction of the first's. The benchmarks measure a published layout's distance
    with this very function, so the tolerance they derive is the one the set applies."""
    if candidate.measured is not None:
        return 0.0
    best = first.tokens_per_sec_per_gpu
    return abs(candidate.tokens_per_sec_per_gpu / best - 1.0) if best > 0 else float("inf")


def near_tie_set(candidates: list[Candidate], within: float) -> list[tuple[int, Candidate]]:
    """(rank, candidate) of every listed candidate (the first included) predicted within `within`
    (a fraction) of the first one's tokens/s/GPU, either way: a faster one ranked lower (a
    pitfall, the memory charge) is a tie too. One predicted faster by more than that is not a tie
    but the model's disagreement with a first that ranks on other evidence (a measured layout,
    planner.measured): it stays in the ranked list, outside the set. Every measured layout is in
    the set: each was the fastest NVIDIA (or the user) found on some release, and speeds measured
    on different releases do not compare (tie_distance)."""
    if not candidates:
        return []
    first = candidates[0]
    return [(i, c) for i, c in enumerate(candidates, 1) if c is first or tie_distance(first, c) <= within + 1e-12]


# Where the model cannot rank a near-tie set at all (issue 34, item 4). A tolerance at or above the
# "no reliable estimate" threshold says the estimates are no more precise than the gaps between
# the layouts, and a set of more than LARGE_SET layouts is no shortlist: plan then says that it
# cannot rank them and points to `tune`, and shows the first SHOWN of them, never "within 100%".
NO_RELIABLE_ESTIMATE = 0.5
LARGE_SET = 10
SHOWN = 5


def cannot_rank(within: float, size: int) -> bool:
    """True when a near-tie set of `size` layouts under tolerance `within` (a fraction) cannot be
    ranked by the model: the tolerance is at least NO_RELIABLE_ESTIMATE or the set holds more
    than LARGE_SET layouts. A set of one layout (the first alone) is no tie. (A band too wide for
    a reliable estimate is said by the domain line, planner.domain.)"""
    if size <= 1:
        return False
    return within >= NO_RELIABLE_ESTIMATE or size > LARGE_SET


def shown(ties: list[tuple[int, Candidate]], unranked: bool) -> list[tuple[int, Candidate]]:
    """The part of a near-tie set that plan lists: all of it, or the first SHOWN of a set the
    model cannot rank (the rest are as likely, and `tune` measures them)."""
    return ties[:SHOWN] if unranked else ties
