"""The optimizer `calibrate` ran until issue 34 (benchmarks/fitting.py fit_for_calibrate, kept as
the baseline calibrate_heldout.py compares the closed-form correction with) computes the
benchmarks' objective: the grouped regression loss equals loss(), the problems built on forked
workers equal rank_problems()."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mbridge_launch.planner.calibration_rows import load_rows
from mbridge_launch.planner.throughput import CAL, out_of_bounds

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def F():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        import fitting

        yield fitting


@pytest.fixture(scope="module")
def rows():
    dense = [r for r in load_rows() if not r.arch.is_moe and r.tokens_per_sec]
    # repeated rows (same layout, another measurement), as repeated runs of one layout give
    return dense[:10] + [replace(r, tokens_per_sec=r.tokens_per_sec * 1.05) for r in dense[:4]]


def test_grouped_loss_is_loss(F, rows):
    items = F.prepared(rows)
    groups = F._grouped(items)
    assert len(groups) == 10
    for cal in (CAL, F.from_vector([v + 0.1 for v in F.to_vector(CAL)])):
        assert F._grouped_loss(groups, len(items), cal) == pytest.approx(F.loss(items, cal), rel=1e-12)


def test_parallel_problems_are_rank_problems(F, rows):
    serial = F.rank_problems(rows)
    forked = F.parallel_rank_problems(rows, jobs=2)
    key = F._problem_key
    assert sorted((key(p.row), p.weight, len(p.variants)) for p in serial) == \
        sorted((key(p.row), p.weight, len(p.variants)) for p in forked)
    F.refresh_shortlists(serial, CAL)
    F._refresh(forked, CAL, jobs=2)
    assert F.rank_loss(serial, CAL) == pytest.approx(F.rank_loss(forked, CAL), rel=1e-9)


def test_the_fit_never_ends_worse_than_its_start(F, rows):
    far = F.from_vector([v + 0.8 for v in F.to_vector(CAL)])  # a start far from the rows' optimum
    fit = F.fit_for_calibrate(rows, far, iters=40, rounds=1, rank_iters=10, jobs=1, time_limit=None)
    assert fit.objective_after <= fit.objective_before
    assert not fit.kept_start and fit.cal != far  # 40 steps from so far off do find a lower point
    assert out_of_bounds(fit.cal) == []
