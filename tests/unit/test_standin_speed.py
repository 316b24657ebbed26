"""The stand-in trainer's MBL_STANDIN_SPEED_MODEL knob (tests/standin/speed.py): the step time it
sleeps and logs, and the peak memory it reports, follow the layout; without the knob it sleeps
MBL_STANDIN_ITER_SECONDS and logs what it measured, as before. The trainer runs in-process
(standin.train.main) with time.sleep recorded; its output is read by runs/step_metrics.py."""

from __future__ import annotations

import os

import pytest

from mbridge_launch.runs.step_metrics import read_step_metrics
from standin import speed, train
from standin.config import parse


@pytest.fixture
def trainer_env(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("SLURM_", "MBL_STANDIN_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(tmp_path / "report"))
    slept: list[float] = []
    monkeypatch.setattr(train.time, "sleep", slept.append)
    monkeypatch.setattr(train, "_stop_signal", [])
    return slept


def run(tmp_path, capsys, slept, args: list[str], name: str):
    """(logged lines, sleeps, StepMetrics) of a 12-iteration run with `args`."""
    slept.clear()
    work = tmp_path / name
    argv = ["--recipe", "llama3_8b_pretrain_config", "--dataset", "mock", "-ms", "12", "--save_dir", str(work / "save"),
            "--load_dir", str(work / "load"), *args]
    assert train.main(argv) == 0
    out = capsys.readouterr().out
    log = work / "out.log"
    log.write_text(out, encoding="utf-8")
    return out.splitlines(), list(slept), read_step_metrics([log], skip=3)


LAYOUTS = {"tp1": ["-tp", "1"], "tp2": ["-tp", "2"], "tp4": ["-tp", "4"], "tp8": ["-tp", "8"],
           "tp2_full": ["-tp", "2", "model.recompute_granularity=full"], "tp2_pp2_vp2": ["-tp", "2", "-pp", "2", "-vp", "2"],
           "tp2_pp2": ["-tp", "2", "-pp", "2"], "tp2_mbs2": ["-tp", "2", "-mb", "2"]}


def test_speed_model_step_time_follows_the_layout(tmp_path, capsys, monkeypatch, trainer_env):
    monkeypatch.setenv("MBL_STANDIN_SPEED_MODEL", "layout-v1")
    measured = {}
    for name, args in LAYOUTS.items():
        lines, slept, metrics = run(tmp_path, capsys, trainer_env, args, name)
        expected = speed.step_seconds(parse(["--recipe", "x", *args]).values, 8)
        assert slept == [expected] * 12  # the real sleep is the model's time
        assert metrics.step_time_s == pytest.approx(expected, abs=1e-4)  # and so is the logged one
        assert 0 < expected <= speed.MAX_STEP_S
        measured[name] = metrics
    t = {name: m.step_time_s for name, m in measured.items()}
    assert t["tp2"] < t["tp4"] < t["tp1"] < t["tp8"]  # the TP table, not FLOPs
    assert t["tp2_mbs2"] < t["tp2"] < t["tp2_pp2_vp2"] < t["tp2_pp2"]  # MBS helps; VP shrinks the bubble
    assert t["tp2"] < t["tp2_full"]  # recompute costs
    peaks = {name: m.peak_memory_gb for name, m in measured.items()}
    assert peaks["tp1"] > peaks["tp2"] > peaks["tp4"] > peaks["tp8"]
    assert peaks["tp2_full"] < peaks["tp2"] < peaks["tp2_mbs2"]
    assert all(p == pytest.approx(speed.peak_memory_gib(parse(["--recipe", "x", *LAYOUTS[n]]).values, 8), rel=1e-4)
               for n, p in peaks.items())


def test_favour_makes_the_named_layout_fastest(tmp_path, capsys, monkeypatch, trainer_env):
    monkeypatch.setenv("MBL_STANDIN_SPEED_MODEL", "favour:tp=8")
    t = {name: run(tmp_path, capsys, trainer_env, LAYOUTS[name], name)[2].step_time_s for name in ("tp1", "tp2", "tp8")}
    assert min(t, key=lambda k: t[k]) == "tp8"
    monkeypatch.setenv("MBL_STANDIN_SPEED_MODEL", "favour:tp=2,recompute=full")
    t = {name: run(tmp_path, capsys, trainer_env, LAYOUTS[name], name + "b")[2].step_time_s for name in ("tp2", "tp2_full")}
    assert t["tp2_full"] < t["tp2"]


def test_without_the_knob_the_stand_in_is_as_before(tmp_path, capsys, monkeypatch, trainer_env):
    monkeypatch.setenv("MBL_STANDIN_ITER_SECONDS", "0.002")
    for name in ("tp1", "tp8"):
        lines, slept, metrics = run(tmp_path, capsys, trainer_env, LAYOUTS[name], name)
        assert slept == [0.002] * 12  # MBL_STANDIN_ITER_SECONDS whatever the layout
        assert sum(" iteration " in line and "elapsed time per iteration (ms)" in line for line in lines) == 12
        memory = [line for line in lines if "memory (GB)" in line]
        # Bridge's report_memory_flag: after iterations 1 and 2 only, rank 0's line
        assert [m.split(")")[0] for m in memory] == ["[Rank 0] (after 1 iterations", "[Rank 0] (after 2 iterations"]
        assert metrics.samples == 9


def test_an_unknown_speed_model_exits_2(tmp_path, capsys, monkeypatch, trainer_env):
    monkeypatch.setenv("MBL_STANDIN_SPEED_MODEL", "warp-drive")
    assert train.main(["--recipe", "x", "--save_dir", str(tmp_path / "s"), "--load_dir", str(tmp_path / "l")]) == 2
    assert "unknown MBL_STANDIN_SPEED_MODEL 'warp-drive'" in capsys.readouterr().err
    assert trainer_env == []
