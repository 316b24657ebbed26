"""Completed ledger runs as calibration rows (runs/measured_rows.py): a state directory with
runs written through the real ledger API, the stand-in's log lines, the CSV's own header."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.knowledge.vocabulary import recipe_task
from mbridge_launch.planner.flops import flops_per_token
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.measured_rows import COLUMNS, ledger_rows, run_measurement
from mbridge_launch.runs.records import CANCELLED, COMPLETED, FAILED, FORGOTTEN, SUBMITTED
from plan_fixtures import edit, override, single_node_h100
from standin.speed import memory_line
from standin.train import log_line
from watch_fixtures import FakeSlurm

CSV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "perf_calibration.csv"


def _log(path: Path, ms: float, *, gbs: int = 32, iterations: int = 10, peak: float = 40.0) -> Path:
    lines = [log_line(i, iterations, i * gbs, ms, 1e-4, gbs, 3.0, 1.0, 0, 0) for i in range(1, iterations + 1)]
    lines.insert(1, memory_line(0, 1, peak))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(ledger: L.Ledger, tmp: Path, name: str, state: str, plan=None, log: Path | None = None) -> L.RunRecord:
    plan = plan or single_node_h100()
    run = ledger.begin_submission(name=name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(), executor="fake",
                                  work_dir=str(tmp))
    run = ledger.mark_submitted(run.id, [str(run.id)], log_paths=[str(log)] if log else [])
    return run if state == SUBMITTED else ledger.set_state(run.id, state)


@pytest.fixture
def state(tmp_path):
    state = tmp_path / "state"
    with L.Ledger.open(state / L.LEDGER_FILENAME) as ledger:
        fp8 = edit(single_node_h100(), overrides=[override("mixed_precision", "bf16_with_fp8_current_scaling_mixed",
                                                           "convergence").model_dump(by_alias=True)])
        _run(ledger, tmp_path, "good", COMPLETED, log=_log(tmp_path / "good.log", 500.0))
        _run(ledger, tmp_path, "fp8", COMPLETED, plan=fp8, log=_log(tmp_path / "fp8.log", 400.0))
        _run(ledger, tmp_path, "failed", FAILED, log=_log(tmp_path / "failed.log", 500.0))
        _run(ledger, tmp_path, "cancelled", CANCELLED)
        _run(ledger, tmp_path, "gone", COMPLETED, log=tmp_path / "deleted.log")
        (tmp_path / "short.log").write_text(log_line(1, 2, 32, 100.0, 1e-4, 32, 3.0, 1.0, 0, 0) + "\n")
        _run(ledger, tmp_path, "short", COMPLETED, log=tmp_path / "short.log")
        unknown = edit(single_node_h100(), **{"recipe.model": "no_such_model_1b"})
        _run(ledger, tmp_path, "unknown", COMPLETED, plan=unknown, log=_log(tmp_path / "unknown.log", 500.0))
        _run(ledger, tmp_path, "hidden", FORGOTTEN, log=_log(tmp_path / "hidden.log", 500.0))
    return state


def test_rows_have_the_calibration_csv_columns(state):
    rows, reasons = ledger_rows(state)
    header = next(csv.reader(CSV.open(encoding="utf-8")))
    assert tuple(header) == COLUMNS
    assert sorted(r["release"] for r in rows) == ["local:fp8", "local:good"]
    for row in rows:
        assert list(row) == header and all(isinstance(v, str) for v in row.values())
    good = next(r for r in rows if r["release"] == "local:good")
    plan = single_node_h100()
    p = plan.parallelism
    assert (good["model"], good["system"], good["num_gpus"], good["precision"], good["task"]) == (
        plan.recipe.model, plan.cluster.gpu_type, str(plan.cluster.total_gpus), "bf16", recipe_task(plan.mode))
    assert (good["tp"], good["pp"], good["cp"], good["mbs"], good["gbs"], good["seq_length"]) == tuple(
        str(v) for v in (p.tp, p.pp, p.cp, p.mbs, p.gbs, p.seq_length))
    assert good["ga"] == str(p.gbs // (p.mbs * p.dp)) and good["fsdp"] == "0" and good["vp"] == ""
    tokens = p.gbs * p.seq_length / (0.5 * plan.cluster.total_gpus)
    assert float(good["tokens_per_sec_per_gpu"]) == pytest.approx(tokens, abs=0.1)
    per_token = flops_per_token(load_arch(plan.recipe.model), p.seq_length, tp=p.tp, goal=plan.mode).total
    assert float(good["model_tflops_per_gpu"]) == pytest.approx(tokens * per_token / 1e12, abs=0.1)
    fp8 = next(r for r in rows if r["release"] == "local:fp8")
    assert fp8["precision"] == "fp8_cs"  # the CSV's spelling, read back by normalize_precision
    assert float(fp8["tokens_per_sec_per_gpu"]) == pytest.approx(tokens * 500 / 400, abs=0.1)


def test_every_other_run_has_a_reason(state):
    rows, reasons = ledger_rows(state)
    assert len(rows) + len(reasons) == 7  # the forgotten run is left out
    joined = "\n".join(reasons)
    for name in ("failed", "cancelled", "gone", "short", "unknown"):
        assert sum(f"run {name} (#" in r for r in reasons) == 1, joined
    assert "hidden" not in joined
    assert any("failed" in r and "state failed" in r for r in reasons)
    assert any("no_such_model_1b" in r for r in reasons)


def test_a_state_dir_without_ledger_gives_nothing_and_creates_nothing(tmp_path):
    assert ledger_rows(tmp_path / "empty") == ([], [])
    assert not (tmp_path / "empty").exists()


def test_ledger_file_path_is_accepted(state):
    assert ledger_rows(state / L.LEDGER_FILENAME)[0] == ledger_rows(state)[0]


def test_run_measurement_of_one_run(state):
    with L.Ledger.open(state / L.LEDGER_FILENAME, create=False) as ledger:
        runs = {r.name: r for r in ledger.list_runs(limit=None)}
    good = run_measurement(runs["good"])
    assert good is not None and good["step_time_s"] == pytest.approx(0.5)
    assert good["peak_memory_gb"] == pytest.approx(40.0, rel=1e-4) and good["row"]["release"] == "local:good"
    assert good["samples"] == 7 and good["iterations"] == 10
    failed = run_measurement(runs["failed"])  # any state: tune measures what ran
    assert failed is not None and failed["state"] == FAILED
    unknown = run_measurement(runs["unknown"])
    assert unknown is not None and unknown["row"] is None and "no_such_model_1b" in unknown["reason"]
    assert run_measurement(runs["short"]) is None and run_measurement(runs["cancelled"]) is None


def test_runs_still_active_in_the_ledger_are_refreshed_from_slurm(tmp_path):
    state = tmp_path / "state"
    with L.Ledger.open(state / L.LEDGER_FILENAME) as ledger:
        done = _run(ledger, tmp_path, "ended-since", SUBMITTED, log=_log(tmp_path / "a.log", 250.0))
        going = _run(ledger, tmp_path, "still-going", SUBMITTED, log=_log(tmp_path / "b.log", 250.0))
    slurm = FakeSlurm()
    slurm.states.update({done.job_ids[0]: "COMPLETED", going.job_ids[0]: "RUNNING"})
    rows, reasons = ledger_rows(state, query=slurm)
    assert [r["release"] for r in rows] == ["local:ended-since"]
    assert len(reasons) == 1 and "still-going" in reasons[0] and "running" in reasons[0]
    with L.Ledger.open(state / L.LEDGER_FILENAME, create=False) as ledger:
        assert ledger.get_run(done.id).state == COMPLETED  # recorded, as `status` would
    # without the refresh the stored states are read as they are
    slurm.states.clear()
    with L.Ledger.open(state / L.LEDGER_FILENAME) as ledger:
        ledger.set_state(done.id, SUBMITTED)
    assert ledger_rows(state, refresh=False)[0] == []
