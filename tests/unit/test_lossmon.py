"""Megatron log parsing, NaN/spike detection, rollback target choice, and following a growing log."""

from __future__ import annotations

import math
import os

import pytest

from checkpoint_fixtures import log_line
from mbridge_launch.plan.model import AutoRollback
from mbridge_launch.rollback import lossmon as M

DOC_LINE = (" [2026-11-29 20:00:00] iteration       10/     100 | consumed samples:         1280 | elapsed time per "
            "iteration (ms): 812.3 | learning rate: 3.000000E-04 | global batch size:   128 | lm loss: 7.654321E+00 |"
            " loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |")


def test_parse_documented_line():
    rec = M.parse_line(DOC_LINE)
    assert isinstance(rec, M.IterationLog)
    assert (rec.iteration, rec.train_iters, rec.nan_iterations, rec.timestamp) == (10, 100, 0, "2026-11-29 20:00:00")
    assert rec.loss == pytest.approx(7.654321)
    assert rec.values["grad norm"] == "1.234" and rec.values["global batch size"] == "128"


@pytest.mark.parametrize("text, check", [
    ("nan", math.isnan), ("NAN", math.isnan), ("inf", math.isinf), ("-inf", math.isinf), ("INF", math.isinf),
])
def test_parse_nonfinite(text, check):
    assert check(M.parse_line(log_line(5, text)).loss)


def test_parse_save_resume_and_noise():
    save = M.parse_line(" successfully saved checkpoint from iteration     100 to /ckpt/run [ t 1/1, p 1/1 ]")
    assert save == M.SaveLog(100, "/ckpt/run")
    resume = M.parse_line(" loading checkpoint from /ckpt/run at iteration 100")
    assert resume == M.ResumeLog(100, "/ckpt/run")
    assert M.parse_line("  successfully loaded checkpoint from /ckpt/run [ t 1/1, p 1/1 ] at iteration 40") == \
        M.ResumeLog(40, "/ckpt/run")
    assert M.parse_line("srun: job 12 queued and waiting for resources") is None
    assert M.parse_line("iteration 5 done") is None
    other_key = M.parse_line(log_line(3, "1.0").replace("lm loss", "loss"))
    assert other_key.loss is None and M.parse_line(log_line(3, "1.0").replace("lm loss", "loss"), "loss").loss == 1.0


def feed(watcher, losses, start=1):
    for k, loss in enumerate(losses, start=start):
        trigger = watcher.feed(M.parse_line(log_line(k, loss)))
        if trigger:
            return trigger
    return None


def test_nan_and_inf_trigger_at_their_iteration():
    trig = feed(M.LossWatcher(), ["5.0", "4.9", "nan"])
    assert (trig.kind, trig.iteration) == ("nan", 3) and math.isnan(trig.loss)
    trig = feed(M.LossWatcher(), ["5.0", "inf"])
    assert (trig.kind, trig.iteration) == ("inf", 2)
    assert feed(M.LossWatcher(on_nan=False, spike_factor=None), ["5.0", "nan", "inf"]) is None


def test_nan_iterations_counter_triggers():
    watcher = M.LossWatcher()
    assert watcher.feed(M.parse_line(log_line(1, "5.0"))) is None
    trig = watcher.feed(M.parse_line(log_line(2, "5.0", nan_iters=1)))
    assert (trig.kind, trig.iteration) == ("nan_iterations", 2)


def test_spike_over_moving_median():
    falling = [f"{10 - k * 0.1:.4f}" for k in range(30)]  # early training: high, falling loss
    watcher = M.LossWatcher(spike_factor=2.0, window=10)
    assert feed(watcher, falling) is None
    trig = watcher.feed(M.parse_line(log_line(31, "20.0")))
    assert trig.kind == "spike" and trig.iteration == 31
    assert trig.median == pytest.approx(statistics_median([10 - k * 0.1 for k in range(20, 30)]))
    # below the factor: no trigger
    assert feed(M.LossWatcher(spike_factor=2.0, window=10), falling + ["13.0"]) is None


def statistics_median(values):
    import statistics

    return statistics.median(values)


def test_spike_needs_min_points_and_can_be_disabled():
    assert feed(M.LossWatcher(spike_factor=2.0, window=10), ["1.0", "1.0", "9.0"]) is None  # only 2 points
    assert feed(M.LossWatcher(spike_factor=2.0, window=10, min_points=2), ["1.0", "1.0", "9.0"]).kind == "spike"
    assert feed(M.LossWatcher(spike_factor=None), ["1.0"] * 10 + ["100.0"]) is None
    with pytest.raises(ValueError):
        M.LossWatcher(spike_factor=0.5)


def test_resume_starts_a_new_timeline():
    watcher = M.LossWatcher(spike_factor=2.0, window=4, min_points=3)
    feed(watcher, ["1.0", "1.0", "1.0", "1.0", "1.0"], start=1)
    # resume from iteration 2: only iterations 1-2 remain, too few for the spike check
    watcher.feed(M.ResumeLog(2, "/ckpt"))
    assert watcher.feed(M.parse_line(log_line(3, "5.0"))) is None
    # an iteration number going backwards without a resume line also rewinds
    watcher2 = M.LossWatcher(spike_factor=2.0, window=4, min_points=3)
    feed(watcher2, ["1.0"] * 6)
    assert watcher2.feed(M.parse_line(log_line(2, "5.0"))) is None


def test_from_plan_config():
    watcher = M.LossWatcher.from_auto_rollback(AutoRollback(enabled=True, on_nan=False, spike_factor=4.0, window=8))
    assert (watcher.on_nan, watcher.spike_factor, watcher.window, watcher.min_points) == (False, 4.0, 8, 5)


def test_pick_rollback_target_strictly_before():
    ckpts = [(100, True), (200, True), (250, False), (300, True)]
    assert M.pick_rollback_target(ckpts, 300) == 200  # strictly before the trigger
    assert M.pick_rollback_target(ckpts, 301) == 300
    assert M.pick_rollback_target(ckpts, 260) == 200  # 250 is incomplete
    assert M.pick_rollback_target(ckpts, 100) is None


def test_trigger_as_dict_is_json_safe():
    import json

    assert json.loads(json.dumps(M.Trigger("nan", 7, float("nan")).as_dict()))["loss"] == "nan"


def test_follower_partial_lines_growth_and_replacement(tmp_path):
    path = tmp_path / "log"
    follower = M.LogFollower(path)
    assert follower.read_new() == []  # not there yet
    path.write_text("one\ntw")
    assert follower.read_new() == ["one\n"]
    with open(path, "a") as handle:
        handle.write("o\nthree\n")
    assert follower.read_new() == ["two\n", "three\n"]
    assert follower.read_new() == []
    replacement = tmp_path / "log.new"
    replacement.write_text("fresh\n")
    os.replace(replacement, path)  # rotated: read the new file from its start
    assert follower.read_new() == ["fresh\n"]
    path.write_text("")  # truncated
    assert follower.read_new() == []
    path.write_text("again\n")
    assert follower.read_new() == ["again\n"]
    follower.close()


def test_follow_until_stop(tmp_path):
    path = tmp_path / "log"
    path.write_text(log_line(1, "2.0") + log_line(2, "nan") + "tail-without-newline")
    lines = list(M.LogFollower(path).follow(poll_s=0.01, stop=lambda: True))
    assert len(lines) == 3 and lines[-1] == "tail-without-newline"
    assert M.LossWatcher().feed_lines(lines).iteration == 2
