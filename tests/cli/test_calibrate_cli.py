"""`mbridge-launch calibrate` (in process, a few rows: the closed-form correction takes a second)
and `plan`/`estimate --calibration FILE`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mbridge_launch.base.paths import STATE_ENV
from mbridge_launch.cli.main import main
from mbridge_launch.planner import calibration_file as cf
from mbridge_launch.planner.calibration_rows import COLUMNS, csv_path
from mbridge_launch.planner.throughput import CAL, out_of_bounds

# ten published rows of two dense models
DENSE = ("llama3_8b", "llama3_70b")


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv(STATE_ENV, str(directory))
    return directory


def _shipped() -> list[dict[str, str]]:
    with open(csv_path(), newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write(path: Path, records: list[dict[str, str]], columns=COLUMNS) -> Path:  # noqa: ANN001
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    return path


@pytest.fixture()
def ten_rows(tmp_path) -> Path:
    rows = [r for r in _shipped() if r["model"] in DENSE][:10]
    assert len(rows) == 10
    return _write(tmp_path / "ten.csv", rows)


def calibrate(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main(["calibrate", "--no-shipped-rows", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def test_calibrate_writes_a_valid_file_and_reports_before_after(capsys, tmp_path, ten_rows):
    code, data, _ = calibrate(capsys, "--rows", str(ten_rows), "-o", str(tmp_path / "cal.json"))
    assert code == 0
    assert data["measured_rows"] == {"kept": 10, "given": 10}
    assert data["written"] == str(tmp_path / "cal.json") and data["rows"] == 10
    assert data["sources"]["files"] == [{"path": str(ten_rows), "rows": 10}] and data["sources"]["shipped"] == 0
    assert data["started_from"] == {"source": "shipped", "path": None, "measured_rows": 0}
    for side in ("before", "after"):
        assert 0 <= data[side]["median_error"] < 1 and 0 <= data[side]["within_15"] <= 1
    assert data["after"]["objective"] <= data["before"]["objective"]  # never worse on its own rows
    cal, meta = cf.read(tmp_path / "cal.json")
    assert out_of_bounds(cal) == []
    assert meta.rows == 10 and meta.median_error == pytest.approx(data["after"]["median_error"])


def test_default_output_is_the_state_directory_and_estimate_then_uses_it(capsys, state, ten_rows):
    code, data, _ = calibrate(capsys, "--rows", str(ten_rows))
    assert code == 0 and data["written"] == str(state / "calibration.json")
    code = main(["estimate", "--model", "llama3_8b", "--gpus", "8", "--tp", "2", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    # the ten rows of the CSV are the user's measurements: the file carries them as evidence
    assert code == 0 and out["calibration"] == {"source": "state", "path": str(state / "calibration.json"),
                                                "measured_rows": 10}


def test_text_output_names_the_figures(capsys, tmp_path, ten_rows):
    code = main(["calibrate", "--no-shipped-rows", "--rows", str(ten_rows), "-o", str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "before: median |error|" in out and "after:" in out and str(tmp_path / "c.json") in out
    assert "your measured rows kept in the file as evidence for plan, estimate and tune: 10 of 10" in out


def test_the_old_search_options_are_accepted_with_a_warning_and_change_nothing(capsys, tmp_path, ten_rows):
    """--iters and --time-limit drove the optimizer calibrate ran until issue 34; scripts that pass
    them keep running, told once per option that they do nothing (the correction is closed-form)."""
    code, plain, err = calibrate(capsys, "--rows", str(ten_rows), "-o", str(tmp_path / "a.json"))
    assert code == 0 and err == ""
    code, old, err = calibrate(capsys, "--rows", str(ten_rows), "-o", str(tmp_path / "b.json"), "--iters", "3",
                               "--time-limit", "0")
    assert code == 0 and old["method"] == plain["method"] == "closed-form"
    assert err.count("warning: ") == 2 and "--iters has no effect" in err and "--time-limit has no effect" in err
    assert cf.read(tmp_path / "a.json")[0] == cf.read(tmp_path / "b.json")[0]
    assert old["after"] == plain["after"] and old["moved"] == plain["moved"]


def test_a_slower_cluster_moves_the_constants_and_plan_follows(capsys, tmp_path, ten_rows):
    """Rows 20% slower than the shipped constants predict: the written constants predict them
    within a few percent, and the rows of the same models, systems and precisions it was not
    given about 20% slower too (a precision the rows do not exercise keeps its GEMM constant)."""
    from mbridge_launch.planner.calibration_correction import predict
    from mbridge_launch.planner.calibration_rows import read_rows, with_fitting_recompute

    records = [r for r in _shipped() if r["model"] in DENSE]
    given = records[:10]
    seen = {(r["system"], r["precision"]) for r in given}
    held = [r for r in records[10:] if (r["system"], r["precision"]) in seen]
    assert len(held) >= 3
    slow = []
    for record in given:
        row = read_rows(_write(tmp_path / "one.csv", [record]))[0][0]
        slow.append({**record, "tokens_per_sec_per_gpu": f"{0.8 * predict(row, with_fitting_recompute(row), CAL):.1f}"})
    code, data, _ = calibrate(capsys, "--rows", str(_write(tmp_path / "slow.csv", slow)), "-o", str(tmp_path / "c.json"))
    assert code == 0 and not data["kept_start"] and data["moved"]
    assert data["before"]["median_error"] > 0.2 and data["after"]["median_error"] < 0.05
    cal = cf.read(tmp_path / "c.json")[0]
    rows, _ = read_rows(_write(tmp_path / "held.csv", held))
    for row in rows:
        layout = with_fitting_recompute(row)
        ratio = predict(row, layout, cal) / predict(row, layout, CAL)
        assert 0.7 < ratio < 0.9, row.label  # the other rows of these models: the same 20% slower


@pytest.mark.parametrize("column, value, shown", [
    ("tp", "two", "a positive whole number"),
    ("tp", "9" * 100_000 + "x\x1b[31m", "'" + "9" * 80 + "...'"),  # echoed bounded, on one line
    ("system", "h900", "gb200"),  # the valid systems are listed
    ("precision", "fp7", "bf16"),
    ("tokens_per_sec_per_gpu", "-5", "a positive number"),
    ("num_gpus", "7", "TP x PP x CP"),
])
def test_a_bad_field_is_exit_2_naming_file_line_and_column(capsys, tmp_path, column, value, shown):
    rows = [r for r in _shipped() if r["model"] in DENSE][:3]
    rows[1] = {**rows[1], column: value}
    path = _write(tmp_path / "bad.csv", rows)
    code, _, err = calibrate(capsys, "--rows", str(path))
    assert code == 2
    assert f"{path} line 3, column {column}" in err and shown in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_missing_column_is_exit_2_naming_it(capsys, tmp_path):
    rows = [r for r in _shipped() if r["model"] in DENSE][:2]
    path = _write(tmp_path / "short.csv", rows, [c for c in COLUMNS if c != "seq_length"])
    code, _, err = calibrate(capsys, "--rows", str(path))
    assert code == 2 and "seq_length" in err and str(path) in err


def test_unknown_models_are_skipped_with_a_reason_and_no_rows_is_exit_2(capsys, tmp_path):
    rows = [{**r, "model": "no_such_model"} for r in _shipped()[:2]]
    path = _write(tmp_path / "unknown.csv", rows)
    code, _, err = calibrate(capsys, "--rows", str(path))
    assert code == 2
    assert err.count("no_such_model") == 2 and f"{path} line 2" in err  # one skip line per row
    assert "no row with a measured tokens/s" in err and "Traceback" not in err


def test_nothing_to_fit_on_is_exit_2(capsys):
    code, _, err = calibrate(capsys)
    assert code == 2 and "no row with a measured tokens/s" in err


def test_from_runs_with_no_ledger_adds_nothing(capsys, tmp_path, ten_rows):
    code, data, _ = calibrate(capsys, "--from-runs", "--rows", str(ten_rows), "-o", str(tmp_path / "c.json"))
    assert code == 0 and data["rows"] == 10 and data["sources"]["ledger_runs"] == []


def _calibration_file(tmp_path: Path, **changes) -> Path:  # noqa: ANN003
    data = cf.to_json(CAL, cf.Meta(rows=0))
    for name, value in changes.items():
        group, _, key = name.partition("__")
        if key:
            data["constants"][group][key] = value
        else:
            data["constants"][group] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


ESTIMATE = ["estimate", "--model", "llama3_8b", "--gpus", "8", "--tp", "2", "--format", "json"]
PLAN = ["plan", "--model", "llama3_8b", "--gpus", "8", "--top", "1", "--format", "json"]


@pytest.mark.parametrize("argv, figure", [(ESTIMATE, lambda d: d["tokens_per_sec_per_gpu"]),
                                          (PLAN, lambda d: d["candidates"][0]["tokens_per_sec_per_gpu"])])
def test_plan_and_estimate_use_the_calibration_given_and_name_it(capsys, tmp_path, argv, figure):
    assert main(argv) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert shipped["calibration"] == {"source": "shipped", "path": None, "measured_rows": 0}
    slow = _calibration_file(tmp_path, gemm_eff__bf16=0.45)  # BF16 GEMMs well below the shipped 0.78
    assert main([*argv, "--calibration", str(slow)]) == 0
    used = json.loads(capsys.readouterr().out)
    assert used["calibration"] == {"source": "file", "path": str(slow), "measured_rows": 0}
    assert figure(used) < 0.9 * figure(shipped)


def test_the_text_names_a_non_shipped_calibration_and_the_band_caveat(capsys, tmp_path):
    path = _calibration_file(tmp_path, attn_eff=0.3)
    assert main(ESTIMATE[:-2] + ["--calibration", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"Throughput constants: {path}." in out and "measured for the shipped constants" in out


@pytest.mark.parametrize("argv", [ESTIMATE, PLAN])
def test_a_constant_out_of_bounds_is_exit_2(capsys, tmp_path, argv):
    path = _calibration_file(tmp_path, attn_eff=0.986)
    code = main([*argv, "--calibration", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "attn_eff" in err and "0.75" in err and "Traceback" not in err


def test_from_runs_fits_the_ledger_rows_and_skips_an_odd_run(capsys, tmp_path, monkeypatch):
    """The rows runs/measured_rows.ledger_rows gives (CSV-column dicts and skip reasons; its own
    tests read them from a real ledger): used like a file's rows, a bad one skipped with a warning
    rather than stopping the fit."""
    from mbridge_launch.runs import measured_rows

    measured = [{**r, "release": f"run:trial-{i}"} for i, r in enumerate(_shipped()) if r["model"] in DENSE][:4]
    odd = {**measured[0], "release": "run:odd", "tp": "3"}  # 3 does not divide the 8 GPUs
    monkeypatch.setattr(measured_rows, "ledger_rows", lambda state=None: ([*measured, odd], ["run x: still running"]))
    code, data, err = calibrate(capsys, "--from-runs", "-o", str(tmp_path / "c.json"))
    assert code == 0 and data["rows"] == 4
    assert data["sources"]["ledger_runs"] == [r["release"] for r in measured]
    assert err.count("warning: ") == 2 and "num_gpus" in err and "still running" in err
    assert {s["where"] for s in data["skipped"]} == {"ledger line 5", "ledger"}


# one row of the user's own cluster, of a configuration NVIDIA published no row of (16 H100)
MINE = {"release": "my-cluster 2026-12", "task": "pretrain", "model": "llama3_8b", "system": "h100", "num_gpus": "16",
        "precision": "fp8cs", "gbs": "128", "mbs": "1", "seq_length": "8192", "tp": "2", "pp": "1", "cp": "1",
        "vp": "", "ep": "1", "tokens_per_sec_per_gpu": "9000"}
MINE_PLAN = ["plan", "--model", "llama3_8b", "--gpus", "16", "--gpu-type", "h100", "--precision", "fp8cs",
             "--gbs", "128", "--seq-length", "8192", "--top", "5"]


def test_the_users_measured_rows_travel_with_the_calibration_and_rank_first(capsys, tmp_path, ten_rows):
    """calibrate keeps the rows of --rows (and --from-runs) in the file; plan and estimate with that
    calibration rank the layout the user measured first, at the measured speed, and say so."""
    mine = _write(tmp_path / "mine.csv", [MINE])
    out = tmp_path / "cal.json"
    code, data, _ = calibrate(capsys, "--rows", str(ten_rows), "--rows", str(mine), "-o", str(out))
    assert code == 0 and data["measured_rows"] == {"kept": 11, "given": 11}
    cal, meta = cf.read(out)
    assert len(meta.measured) == 11 and meta.measured[-1].release == MINE["release"]
    assert main([*MINE_PLAN, "--calibration", str(out), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    first = plan["candidates"][0]
    assert (first["tp"], first["pp"], first["cp"]) == (2, 1, 1)
    assert first["measured"]["source"] == "yours" and first["measured"]["release"] == MINE["release"]
    # the measured speed, up to the gradient reduction: a measured row is predicted with the
    # published rows' (calibration_rows.GRAD_BYTES), the plan with its own (fp32, the default)
    assert first["tokens_per_sec_per_gpu"] == pytest.approx(9000, rel=0.01)
    assert plan["calibration"]["measured_rows"] == 11 and plan["error_band"]["held_out"] == "measured"
    # estimate of that layout gives the same corrected figure
    assert main(["estimate", "--model", "llama3_8b", "--gpus", "16", "--gpu-type", "h100", "--precision", "fp8cs",
                 "--gbs", "128", "--seq-length", "8192", "--tp", "2", "--mbs", str(first["mbs"]),
                 "--calibration", str(out), "--format", "json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["tokens_per_sec_per_gpu"] == pytest.approx(first["tokens_per_sec_per_gpu"], rel=1e-3)
    for lang, marker in (("en", "measured: your run measured 9,000 tokens/s/GPU"), ("zh", "实测：你的运行")):
        assert main(["--lang", lang, *MINE_PLAN, "--calibration", str(out)]) == 0
        assert marker in capsys.readouterr().out
    # without the calibration: NVIDIA has no row here, the model's own figure
    assert main([*MINE_PLAN, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["candidates"][0]["corrected_by"] is None


@pytest.mark.parametrize("rows, names", [
    ("not a list", "measured_rows must be a list"),
    ([["a"]], "row 1 is list"),
    ([{**MINE, "colour": "red"}], 'unknown column "colour"'),
    ([{**MINE, "tp": {"x": 1}}], "column tp: not text or a number"),
    ([{**MINE, "tp": "many"}], "tp"),
])
def test_a_hand_edited_measured_row_is_a_clear_error(capsys, tmp_path, rows, names):
    data = cf.to_json(CAL, cf.Meta(rows=0))
    data["measured_rows"] = rows
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    assert main([*MINE_PLAN, "--calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert names in err and "measured_rows" in err and "Traceback" not in err
