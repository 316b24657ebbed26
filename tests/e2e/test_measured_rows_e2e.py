"""Measurements of a real run (runs/measured_rows.py) on the local Slurm cluster: a Plan with the
stand-in trainer's speed model submitted through the real gate, run as a real job, then read back
from the ledger (the run still `submitted` there: ledger_rows refreshes it from Slurm) and from
the job's own log files (the executor's step logs). The expected figures are the stand-in's own
(its report: the resolved config and world size it ran with, fed to speed.step_seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose_helpers import submit
from gate_fixtures import unique, write_plan
from mbridge_launch.plan.model import load_plan
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.measured_rows import COLUMNS, ledger_rows, run_measurement
from standin import speed

pytestmark = pytest.mark.slurm

ITERATIONS = 12


def test_e2e_a_completed_run_becomes_a_calibration_row(base_plan, slurm_env, slurm_cluster, shared_dir, mbl):
    name = unique("measured")
    plan_path = write_plan(base_plan, shared_dir, name, iters=ITERATIONS, save_interval=100,
                           env={"MBL_STANDIN_SPEED_MODEL": "layout-v1"})
    sub = submit(mbl, plan_path, shared_dir, force=False)
    assert slurm_cluster.wait(sub.job_id, timeout=240) == "COMPLETED"

    rows, reasons = ledger_rows(sub.ledger)  # the ledger says `submitted`: refreshed from Slurm here
    assert reasons == [] and len(rows) == 1 and tuple(rows[0]) == COLUMNS
    row = rows[0]

    plan = load_plan(plan_path)
    report = json.loads((Path(plan.checkpoint.save).parent / "standin-report" / "rank-0.json").read_text())
    step = speed.step_seconds(report["config"], report["dist"]["world_size"], "layout-v1")
    # the batch the trainer logged (the stand-in's recipe default unless the Plan overrides it: a
    # real recipe logs the Plan's), the Plan's sequence length and GPU count
    gbs, seq, gpus = report["config"]["train.global_batch_size"], plan.parallelism.seq_length, plan.cluster.total_gpus
    assert row["release"] == f"local:{name}" and row["num_gpus"] == str(gpus) and row["gbs"] == str(gbs)
    assert float(row["tokens_per_sec_per_gpu"]) == pytest.approx(gbs * seq / (step * gpus), rel=1e-3)
    assert float(row["model_tflops_per_gpu"]) > 0

    with L.Ledger.open(sub.ledger, create=False) as ledger:
        run = ledger.get_run(sub.run_id)
    assert run.state == "completed"
    measured = run_measurement(run)
    assert measured is not None and measured["step_time_s"] == pytest.approx(step, abs=1e-4)
    assert measured["iterations"] == ITERATIONS and measured["samples"] == ITERATIONS - 3
    assert measured["peak_memory_gb"] == pytest.approx(speed.peak_memory_gib(report["config"], gpus), rel=1e-4)
