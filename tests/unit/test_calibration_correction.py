"""calibrate's closed-form correction (planner/calibration_correction.py): it recovers a known
offset of a cluster from some rows and predicts the rows it was not given, moves only the constants
the rows exercise, stays inside BOUNDS, and never ends worse than its start on its rows."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

import pytest

from mbridge_launch.planner import calibration_correction as C
from mbridge_launch.planner.calibration_rows import load_rows
from mbridge_launch.planner.throughput import BOUNDS, CAL, constant, out_of_bounds


@pytest.fixture(scope="module")
def dense():
    """The shipped dense rows with a measured tokens/s (their layouts as published)."""
    return [r for r in load_rows() if not r.arch.is_moe and r.tokens_per_sec]


def _measured_as(rows, factor):  # noqa: ANN001
    """The rows with tokens/s set to `factor(row)` x the shipped constants' prediction: a cluster
    whose offset from the shipped constants is known exactly."""
    out = []
    for r in rows:
        predicted = C.predict(r, C.with_fitting_recompute(r), CAL)
        out.append(replace(r, tokens_per_sec=predicted * factor(r)))
    return out


def _median_error(rows, cal):  # noqa: ANN001
    return statistics.median(abs(C.predict(r, L, cal) / r.tokens_per_sec - 1) for r, L in C.prepared(rows))


def test_a_slower_hopper_cluster_is_learnt_and_predicts_rows_it_was_not_given(dense):
    hopper = [r for r in dense if r.hw.generation == "hopper"]
    assert len(hopper) >= 6
    rnd = random.Random(3)
    # 25% slower than the shipped constants say, with 2% run-to-run noise
    rows = _measured_as(hopper, lambda r: 0.75 * (1 + rnd.gauss(0, 0.02)))
    given, held = rows[::2], rows[1::2]
    fit = C.calibrate(given, CAL)
    assert not fit.kept_start and fit.objective_after < fit.objective_before
    assert _median_error(given, CAL) > 0.2  # the start is 25% off ...
    assert fit.after.median < 0.08  # ... the correction is not, on the rows given
    assert _median_error(held, CAL) > 0.2 and _median_error(held, fit.cal) < 0.08  # nor on the others
    assert out_of_bounds(fit.cal) == []


def test_constants_the_rows_do_not_exercise_stay(dense):
    rows = _measured_as(dense[:12], lambda r: 0.9)
    fit = C.calibrate(rows, CAL)
    assert fit.moved  # something moved ...
    for name in ("moe_eff", "moe_lowp_gain", "moe_half_tokens", "moe_sync_s", "ep_exposed"):  # ... no MoE constant
        assert constant(fit.cal, name) == constant(CAL, name), name
        assert name not in fit.moved


def test_a_far_offset_is_clamped_to_the_physical_range(dense):
    rows = _measured_as(dense[:12], lambda r: 4.0)  # four times faster than physics allows
    fit = C.calibrate(rows, CAL)
    assert out_of_bounds(fit.cal) == []
    assert fit.after.median < fit.before.median
    pressed = C.at_bounds(fit.cal)
    assert pressed and all(name.split("=")[0] in BOUNDS for name in pressed)


def test_rows_the_start_predicts_exactly_keep_the_start(dense):
    rows = _measured_as(dense[:8], lambda r: 1.0)
    fit = C.calibrate(rows, CAL)
    assert fit.kept_start and fit.cal is CAL and fit.moved == ()
    assert fit.objective_after == fit.objective_before


def test_never_worse_than_the_start_on_its_rows(dense):
    rnd = random.Random(11)
    for trial in range(3):
        rows = _measured_as(dense[trial::3], lambda r: rnd.lognormvariate(0.0, 0.3))  # noise, no offset
        fit = C.calibrate(rows, CAL)
        assert fit.objective_after <= fit.objective_before
        assert C.loss(C.prepared(rows), fit.cal) == pytest.approx(fit.objective_after)


def test_no_measured_row_is_a_value_error(dense):
    with pytest.raises(ValueError):
        C.calibrate([replace(r, tokens_per_sec=None) for r in dense[:3]], CAL)


def test_the_linear_solve_is_exact():
    a = [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]]
    x = [0.3, -1.2, 2.5]
    b = [sum(a[i][j] * x[j] for j in range(3)) for i in range(3)]
    assert C._solve(a, b) == pytest.approx(x, rel=1e-12)
