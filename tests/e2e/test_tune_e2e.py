"""`mbridge-launch tune PLAN` on the local Slurm cluster with the stand-in trainer, whose step time
is a function of the layout the planner does not know (MBL_STANDIN_SPEED_MODEL=layout-v1,
tests/standin/speed.py): every trial is submitted through the real gate (one `--yes`), runs as a
real job, is measured from its own log lines, and the really fastest layout, which is not the
planner's first choice, is written into the Plan. A trial that fails (a layout the Plan's
settings break) is left out with its diagnosis, and the fastest of the others wins.

The truth the test compares with is the stand-in's own: each trial's report (rank-0.json: the
resolved config and world size the trainer ran with) fed to speed.step_seconds, not a layout
written into the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate_fixtures import unique, write_plan
from mbridge_launch.plan.model import load_plan, plan_from_dict, save_plan
from mbridge_launch.runs import ledger as L
from mbridge_launch.tune.trials import same_layout
from standin import speed

pytestmark = pytest.mark.slurm

SPEED_MODEL = "layout-v1"
STEPS = 20


def _plan(base_plan: dict, shared: Path, name: str, overrides: list[dict] | None = None) -> Path:
    path = write_plan(base_plan, shared, name, env={"MBL_STANDIN_SPEED_MODEL": SPEED_MODEL})
    data = load_plan(path).canonical_dict()
    # the trials share the nodes (each its own GPUs); a failed trial stays failed
    data["cluster"].update(exclusive=False, requeue=False)
    data["overrides"] += overrides or []
    return save_plan(plan_from_dict(data), path)


def _tune(mbl, plan_path: Path, shared: Path, tmp_path: Path) -> dict:
    proc = mbl.run("tune", str(plan_path), "--yes", "--steps", str(STEPS), "--time-limit", "00:05:00",
                   "--ledger", str(shared / "ledger.sqlite3"), "--script-dir", str(shared), "--format", "json",
                   env={"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _truth(trial_save: str) -> tuple[float, dict]:
    """The stand-in's step time for the layout it really ran, and that layout."""
    report = json.loads((Path(trial_save).parent / "standin-report" / "rank-0.json").read_text())
    return (speed.step_seconds(report["config"], report["dist"]["world_size"], SPEED_MODEL),
            speed.layout(report["config"]))


def test_e2e_tune_picks_the_really_fastest_layout_and_writes_it_into_the_plan(base_plan, slurm_env, shared_dir,
                                                                              tmp_path, mbl):
    name = unique("tune")
    plan_path = _plan(base_plan, shared_dir, name)
    before = load_plan(plan_path)
    db = shared_dir / "ledger.sqlite3"
    answer = _tune(mbl, plan_path, shared_dir, tmp_path)
    trials = answer["trials"]
    assert len(trials) >= 2 and all(t["state"] == "completed" for t in trials), answer

    truth = {t["name"]: _truth(t["save_dir"]) for t in trials}
    for t in trials:  # each trial ran its own layout, and was measured from its own log
        seconds, ran = truth[t["name"]]
        assert ran["tp"] == int(t["layout"].split("TP=")[1].split()[0])
        assert ran["mbs"] == int(t["layout"].split("MBS=")[1].split()[0])
        # Megatron's log line gives the step in ms with one decimal: 0.05 ms of rounding on top
        assert t["step_time_s"] == pytest.approx(seconds, rel=1e-3, abs=5e-5)
        assert t["peak_memory_gb"] and t["tokens_per_sec_per_gpu"]
    fastest = min(trials, key=lambda t: (truth[t["name"]][0], t["index"]))
    first = next(t for t in trials if t["planner_rank"] == 1)
    assert fastest["name"] != first["name"]  # the premise: the planner's first choice is not the fastest
    assert answer["winner"] == fastest["name"] and answer["changed"]

    after = load_plan(plan_path)
    with L.Ledger.open(db) as ledger:
        runs = {r.name: r for r in ledger.list_runs(limit=None)}
    assert {t["name"] for t in trials} <= set(runs)
    assert all(runs[t["name"]].state == "completed" for t in trials)
    won_run = runs[fastest["name"]]
    assert same_layout(after.parallelism, won_run.plan().parallelism)
    assert after.parallelism.gbs == before.parallelism.gbs
    assert after.dataset == before.dataset and after.checkpoint == before.checkpoint
    assert after.tune is not None and after.tune.winner == fastest["name"]
    assert {t.name: t.job_id for t in after.tune.trials} == {t["name"]: runs[t["name"]].job_ids[-1] for t in trials}
    assert not Path(before.checkpoint.save).exists()  # no trial wrote into the Plan's checkpoint directory
    check = mbl.run("preflight", str(plan_path), "--no-cluster")
    assert check.returncode == 0, check.stdout + check.stderr
    # the measurements feed calibration: calibrate --from-runs reads the trial runs from the ledger
    cal_file = tmp_path / "calibration.json"
    fitted = mbl.run("calibrate", "--from-runs", "--no-shipped-rows", "--iters", "3", "-o", str(cal_file),
                     "--format", "json", env={"MBRIDGE_LAUNCH_LEDGER": str(db),
                                              "MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}, timeout=600)
    assert fitted.returncode == 0, fitted.stdout + fitted.stderr
    from_runs = json.loads(fitted.stdout)["sources"]["ledger_runs"]
    assert {f"local:{t['name']}" for t in trials} <= set(from_runs), from_runs
    assert cal_file.exists()


def test_e2e_a_trial_that_fails_is_left_out_with_its_diagnosis(base_plan, slurm_env, shared_dir, tmp_path, mbl):
    """`model.num_query_groups=3` (a Plan setting the stand-in checks as Megatron Core does): the
    TP 2 trial fails at start with Megatron's ValueError, is diagnosed and left out; the fastest of
    the trials that ran wins."""
    name = unique("tune-fail")
    groups = {"key": "model.num_query_groups", "value": "3", "class": "convergence", "reason": "test"}
    plan_path = _plan(base_plan, shared_dir, name, overrides=[groups])
    answer = _tune(mbl, plan_path, shared_dir, tmp_path)
    trials = answer["trials"]
    failed = [t for t in trials if "TP=2" in t["layout"]]
    ran = [t for t in trials if t not in failed]
    assert failed and ran
    for t in failed:
        assert t["state"] == "failed" and t["step_time_s"] is None
        assert t["left_out"].startswith("tp_kv_mismatch on rank 0") and "\n" not in t["left_out"], t["left_out"]
    assert all(t["state"] == "completed" and t["step_time_s"] for t in ran)
    fastest = min(ran, key=lambda t: (_truth(t["save_dir"])[0], t["index"]))
    assert answer["winner"] == fastest["name"]
    record = load_plan(plan_path).tune
    assert record.winner == fastest["name"]
    assert [t.diagnosis for t in record.trials if not t.won and t.state == "failed"] == [t["left_out"] for t in failed]
