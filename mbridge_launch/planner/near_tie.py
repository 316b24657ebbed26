"""The near-tie set: the candidates the throughput model cannot tell from the first one.

A layout predicted within the model's leave-one-out error (planner.domain's band for the request)
of the first is as likely to be the fastest as the first: `plan` shows the set, `tune` measures
it, and the benchmarks score whether the published layout lies inside it.
"""

from __future__ import annotations

from mbridge_launch.planner.search import Candidate


def near_tie_set(candidates: list[Candidate], within: float) -> list[tuple[int, Candidate]]:
    """(rank, candidate) of every listed candidate (the first included) predicted no slower than
    the first one's tokens/s/GPU less `within` (a fraction); a faster one ranked lower is a tie too."""
    if not candidates:
        return []
    floor = candidates[0].tokens_per_sec_per_gpu * (1 - within)
    return [(i, c) for i, c in enumerate(candidates, 1) if c.tokens_per_sec_per_gpu >= floor]
