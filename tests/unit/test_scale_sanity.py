"""Issue 33 item 5: scale sanity. The global batch weak-scales at another GPU count (run_recipe.py's
rule), a step beyond the time limit is an error and a run beyond it a warning (with the numbers
that fix them), and a tiny batch with near-zero MFU is a warning with the batch that helps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mbridge_launch.base.i18n import t
from mbridge_launch.plan.scale_sanity import (
    RUN_OVER_LIMIT,
    STEP_OVER_LIMIT,
    time_findings,
    weak_scaled_gbs,
)
from mbridge_launch.planner.search import estimate_layout
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.plan_checks import run_plan_checks
from preflight_fixtures import edit, valid_plan

pytestmark = pytest.mark.usefixtures("english")
HOUR = 3600


def test_weak_scaling_keeps_samples_per_gpu():
    assert weak_scaled_gbs(512, 64, 128) == 1024
    assert weak_scaled_gbs(8, 1, 8) == 64
    assert weak_scaled_gbs(512, 64, 16) == 128
    assert weak_scaled_gbs(512, 64, 64) is None  # the recipe's own count: nothing to scale
    assert weak_scaled_gbs(None, 64, 128) is None
    assert weak_scaled_gbs(8, 64, 1) is None  # below one sample


def test_a_step_longer_than_the_limit_is_an_error_with_the_batch_and_time_that_fit():
    # the case: GBS 512 at 1,000,000 tokens, a 9.6 h step, a 4 h limit
    [finding] = time_findings(step_s=9.6 * HOUR, limit_s=4 * HOUR, train_iters=100, gbs=512, batch_quantum=8)
    assert (finding.code, finding.severity) == (STEP_OVER_LIMIT, "error")
    p = finding.params
    assert p["needed"] == "09:46:00"  # the step plus start-up, in minutes
    assert p["gbs"] % 8 == 0 and 0 < p["gbs"] < 512
    assert p["gbs"] * 9.6 / 512 <= 4 - 600 / HOUR  # the lower batch's step fits the limit after start-up


def test_a_step_that_no_batch_makes_fit_asks_for_time_only():
    [finding] = time_findings(step_s=9.6 * HOUR, limit_s=4 * HOUR, train_iters=None, gbs=8, batch_quantum=8)
    assert finding.message_key == "pitfall.step_over_time_limit_time_only"


def test_a_run_longer_than_the_limit_is_a_warning_with_the_iterations_that_fit():
    [finding] = time_findings(step_s=2.0, limit_s=4 * HOUR, train_iters=100_000, gbs=512, batch_quantum=8)
    assert (finding.code, finding.severity) == (RUN_OVER_LIMIT, "warning")
    assert finding.params["fit"] == (4 * HOUR - 600) // 2
    assert finding.params["needed"] == "2-07:44:00"  # 200,000 s + 600 s start-up, rounded up to the minute


def test_a_run_of_many_jobs_counts_the_jobs_instead_of_a_time_no_site_grants():
    # a pretraining recipe's train_iters at 104 s a step: about 1,400 days, 133 iterations a job
    [finding] = time_findings(step_s=103.7, limit_s=4 * HOUR, train_iters=1_168_251, gbs=128, batch_quantum=4)
    assert finding.message_key == "pitfall.run_over_time_limit_jobs" and finding.severity == "warning"
    assert finding.params["fit"] == 133 and finding.params["jobs"] == 8784
    assert finding.params["total"] == "1,402 d"  # not 1.4e+03 d
    text = t(finding.message_key, lang="en", **finding.params)
    assert "8784 jobs of 04:00:00" in text and "--time" not in text


def test_a_run_within_the_limit_says_nothing():
    assert time_findings(step_s=2.0, limit_s=4 * HOUR, train_iters=1000, gbs=512, batch_quantum=8) == []
    assert time_findings(step_s=None, limit_s=4 * HOUR, train_iters=1000, gbs=512, batch_quantum=8) == []


# ---------------------------------------------------------------------- preflight on the Plan
@pytest.fixture
def plan(shared_dir):
    return valid_plan(shared_dir)


def time_checks(plan):
    return {c.code: c for c in run_plan_checks(PreflightContext(plan=plan, env={})) if "time_limit" in c.code}


def test_preflight_errors_on_a_step_beyond_cluster_time(plan):
    data = edit(plan, **{"estimates.step_time_s": 9.6 * HOUR, "cluster.time": "04:00:00"})
    check = time_checks(data)["plan.step_over_time_limit"]
    assert check.severity == "error"
    assert "--time 09:46:00" in check.message() and "train.global_batch_size" in check.message()


def test_preflight_warns_on_a_run_beyond_cluster_time(plan):
    # valid_plan: train.train_iters=100, time 01:00:00
    data = edit(plan, **{"estimates.step_time_s": 60.0})
    check = time_checks(data)["plan.run_over_time_limit"]
    assert check.severity == "warning"
    assert "train.train_iters=50" in check.message()  # (3600 - 600) / 60


def test_preflight_passes_a_run_that_fits(plan):
    assert time_checks(edit(plan, **{"estimates.step_time_s": 1.0})) == {}


# ---------------------------------------------------------------------- tiny batch
def test_tiny_batch_warning_names_a_batch_that_raises_mfu():
    from mbridge_launch.recommend.build import recommend
    from mbridge_launch.recommend.request import Request
    from mbridge_launch.recommend.time_fit import TINY_MFU, _tiny_batch, sane_batch

    rec = recommend(Request(model="llama3_70b", gpus=64))
    # a deep pipeline fed by one micro batch per step: the pipeline bubble is nearly the whole step
    tiny = replace(rec.layout, tp=4, pp=16, vp=None, cp=1, mbs=1, gbs=1, split=None, uneven_pp=True)

    est = estimate_layout(tiny, rec.arch, rec.hardware, precision="bf16", goal="pretrain")
    assert est.mfu < TINY_MFU
    better = sane_batch(tiny, rec.arch, rec.hardware, "bf16", "pretrain", est.mfu)
    assert better is not None and better[0] > 1 and better[1] >= 2 * est.mfu
    rec.layout, rec.estimate = tiny, est
    [(code, message)] = _tiny_batch(rec)
    assert code == "TINY_BATCH_MFU"
    assert f"train.global_batch_size={better[0]}" in str(message)


def test_a_healthy_batch_gets_no_tiny_batch_warning():
    from mbridge_launch.recommend.build import recommend
    from mbridge_launch.recommend.request import Request
    from mbridge_launch.recommend.time_fit import _tiny_batch

    rec = recommend(Request(model="llama3_8b", gpus=8))
    assert rec.estimate.mfu > 0.2 and _tiny_batch(rec) == []
