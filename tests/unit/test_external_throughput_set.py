"""The external throughput sets (MLPerf Training submissions, Megatron Bridge releases the
calibration rows do not hold), the per-regime bands benchmarks/external_throughput.py computes
from them, and how planner.domain prints those bands (issue 34, items 3 and 4).

The extracts are committed (CI has no network); the extraction scripts' parsing is checked on
small synthetic inputs of the published formats.
"""

from __future__ import annotations

import csv
import importlib
import json
import re
import sys
from pathlib import Path

import pytest

from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner import domain
from mbridge_launch.planner.entry import PlanRequest, estimate_request, shipped_calibration
from mbridge_launch.planner.rules import Layout

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "benchmarks" / "external"))
mlperf = importlib.import_module("throughput_mlperf_extract")
releases = importlib.import_module("throughput_mbridge_releases_extract")
ext = importlib.import_module("external_throughput")
DATA = REPO / "benchmarks" / "external" / "data"


def _csv(name: str) -> list[dict]:
    with (DATA / name).open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------- the committed extracts
@pytest.mark.parametrize("name", ["throughput_mlperf.csv", "throughput_mbridge_releases.csv"])
def test_every_external_row_names_its_source_commit_and_path(name):
    rows = _csv(name)
    assert rows
    for r in rows:
        assert r["source"].startswith("github:") and re.fullmatch(r"[0-9a-f]{40}", r["commit"])
        assert r.get("log_path") or r.get("path")
        assert int(r["gpus"]) % (int(r["tp"]) * int(r["pp"]) * int(r["cp"])) == 0
        assert float(r["tokens_per_sec_per_gpu"]) > 0


def test_mlperf_tokens_per_second_follow_from_the_logged_step_time():
    for r in _csv("throughput_mlperf.csv"):
        tokens = int(r["gbs"]) * int(r["seq_length"]) / float(r["step_time_s"]) / int(r["gpus"])
        assert tokens == pytest.approx(float(r["tokens_per_sec_per_gpu"]), rel=2e-3)


def test_external_sets_are_kept_apart_from_the_calibration_rows():
    calibration = _csv("../../data/perf_calibration.csv")
    calibrated = {r["release"] for r in calibration}
    assert not calibrated & {r["release"] for r in _csv("throughput_mbridge_releases.csv")}
    assert set(releases.CALIBRATED) == calibrated  # the extract leaves out exactly the calibrated releases


# ---------------------------------------------------------------------- the extraction scripts
def _mllog(key: str, value) -> str:
    return ":::MLLOG " + json.dumps({"key": key, "value": value, "metadata": {}})


def test_log_figures_take_the_median_step_time_so_warm_up_does_not_count():
    text = "\n".join([_mllog("global_batch_size", 8), _mllog("max_sequence_length", 8192),
                      _mllog("tracked_stats", {"train_step_time": 9.0}),
                      *(_mllog("tracked_stats", {"train_step_time": t}) for t in (1.0, 1.2, 1.1, 1.0))])
    assert mlperf.log_figures(text) == (8, 8192, 1.1)


def test_log_figures_read_the_v41_gpt3_step_timing_key():
    text = "\n".join([_mllog("global_batch_size", 2048), _mllog("tracked_stats", {"train_step_timing in s": 18.0}),
                      _mllog("tracked_stats", {"throughput": 228000.0})])  # GPT-3's throughput is tokens/s: unused
    assert mlperf.log_figures(text) == (2048, None, 18.0)


def test_log_figures_of_v41_logs_turn_samples_per_second_into_a_step_time():
    text = "\n".join([_mllog("global_batch_size", 16), _mllog("tracked_stats", {"throughput": 8.0}),
                      _mllog("tracked_stats", {"throughput": 8.0})])
    assert mlperf.log_figures(text) == (16, None, 2.0)


class _FakeMirror:
    def __init__(self, files: dict[str, str]) -> None:
        self.contents = files
        self.files = list(files)

    def read(self, name: str) -> str:
        return self.contents.get(name, "")


def test_config_env_follows_sourced_files_and_the_gbs_is_minibs_times_dp():
    folder = "NVIDIA/benchmarks/llama31_405b/implementations/x"
    mirror = _FakeMirror({
        f"{folder}/config_common.sh": "export FP8=True\nexport MICRO_BATCH_SIZE=1\n",
        f"{folder}/config_common_fp4.sh": "export FP4=True\nexport FP8=False\n",
        f"{folder}/config_GB200_640x4x24xtp4pp8cp2.sh": (
            "source $(dirname ${BASH_SOURCE[0]})/config_common.sh\n"
            "source $(dirname ${BASH_SOURCE[0]})/config_common_fp4.sh\n"
            "export MINIBS=24\nexport TENSOR_MODEL_PARALLEL=4\nexport PIPELINE_MODEL_PARALLEL=8\n"
            "export INTERLEAVED_PIPELINE=8\nexport CONTEXT_PARALLEL=2\nexport DGXNNODES=640\nexport DGXNGPU=4\n"),
    })
    layout = mlperf.layout_of(mlperf.config_env(mirror, f"{folder}/config_GB200_640x4x24xtp4pp8cp2.sh"))
    assert layout == {"gpus": 2560, "tp": 4, "pp": 8, "cp": 2, "vp": 8, "mbs": 1, "gbs": 24 * 40, "precision": "nvfp4"}


def test_a_config_whose_includes_are_missing_has_no_precision_rather_than_a_guess():
    mirror = _FakeMirror({"S/benchmarks/b/config_X.sh": "source ./config_common.sh\nexport DGXNNODES=1\n"})
    env = mlperf.config_env(mirror, "S/benchmarks/b/config_X.sh")
    assert mlperf.precision_of(env) is None


@pytest.mark.parametrize("filename, kind, named", [
    ("config_GB200_18x4x1xtp1pp1cp8.sh", "gb200", True), ("config_GB200_18x4x1xtp1pp1cp8.sh", "b200", False),
    ("config_DGXB200_1x8x1xtp1pp1cp1.sh", "b200", True), ("config_XE9680Lx8B200-SXM-180GB.sh", "b200", True),
    ("config_DGXH100_8x8x1.sh", "h200", False),
])
def test_names_kind_tells_gb200_from_b200(filename, kind, named):
    assert mlperf.names_kind(filename, kind) is named


def test_release_extract_reads_a_summary_table_under_its_headings():
    text = "\n".join([
        "## 26.06 NeMo Container", "### LoRA Performance", "#### Model: LLAMA3_70B",
        "| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        "| DGX-H100 | 8 | FP8 | 32 | 1 | 4096 | 2 | 4 | 1 | 20 | n/a | 2643 |",
        "## 26.02 NeMo Container", "### Pre-Training Performance", "#### Model: LLAMA3_70B",
        "| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU |",
        "| DGX-H100 | 64 | FP8 | 128 | 1 | 8192 | 4 | 8 | 1 | 5 | n/a | 1600 |",
    ])
    skipped: list[str] = []
    rows = releases.rows_of(text, "docs/x.md", "0" * 40, skipped)
    assert [(r["release"], r["goal"], r["system"], r["precision"], r["vp"], r["ep"], r["tokens_per_sec_per_gpu"])
            for r in rows] == [("26.06", "lora", "h100", "fp8cs", 20, 1, 2643.0)]  # 26.02 is calibrated: left out


# ---------------------------------------------------------------------- regimes and bands
def test_regime_of_separates_long_context_small_batch_and_tuned_pretraining():
    assert domain.regime_of("pretrain", domain.LONG_CONTEXT) == "long_context"
    assert domain.regime_of("lora", 4096) == "small_batch"
    assert domain.regime_of("sft", 4096, microbatches=64) == "small_batch"
    assert domain.regime_of("pretrain", 8192, microbatches=domain.SMALL_BATCH_MICROBATCHES) == "small_batch"
    assert domain.regime_of("pretrain", 8192, microbatches=domain.SMALL_BATCH_MICROBATCHES + 1) == "pretrain"
    assert domain.regime_of("pretrain", 8192) == "pretrain"  # unknown layout: its goal decides


def _row(**over) -> dict:
    row = {"model": "llama3_8b", "family": "llama", "kind": "dense", "system": "h100", "precision": "fp8cs",
           "goal": "pretrain", "seq_length": 8192, "gpus": 8, "loso": 0.02, "lomo": 0.03}
    row.update(over)
    return row


def _table(regimes: dict) -> domain.Table:
    return domain.table_of({"rows": [_row(), _row(gpus=16, loso=0.01), _row(gpus=32, lomo=0.04)],
                            "regimes": regimes})


def _assess(table: domain.Table, goal: str = "pretrain", microbatches: int | None = 16) -> domain.Assessment:
    return domain.assess("llama3_8b", load_arch("llama3_8b"), "h100", "fp8cs", goal, 8192, 8, table=table,
                         microbatches=microbatches)


def test_the_printed_band_is_never_narrower_than_its_regimes_external_error():
    floor = {"median": 0.12, "p90": 0.3, "rows": 40}
    without = _assess(_table({}))
    band = _assess(_table({"pretrain": {"model": floor}})).band
    assert without.band.p90 < floor["p90"]  # the nearest rows alone would print a narrow band
    assert (band.median, band.p90, band.floor_regime, band.floor_rows) == (0.12, 0.3, "pretrain", 40)
    assert "40" in band.basis("en") and band.reliable


def test_a_regime_without_figures_takes_the_widest_measured_one():
    table = _table({"pretrain": {"model": {"median": 0.1, "p90": 0.2, "rows": 9}},
                    "long_context": {"model": {"median": 0.2, "p90": 0.45, "rows": 5}}})
    band = _assess(table, goal="lora").band
    assert band.regime == "small_batch" and band.floor_regime == "long_context" and band.p90 == 0.45


def test_a_band_wider_than_the_limit_says_no_reliable_estimate_in_both_languages():
    wide = {"median": 0.3, "p90": domain.RELIABLE_BAND + 0.1, "rows": 12}
    assessment = _assess(_table({"small_batch": {"model": wide}}), goal="sft")
    assert not assessment.band.reliable and assessment.band.as_json()["reliable"] is False
    assert "No reliable estimate" in assessment.text("en") and "tune" in assessment.text("en")
    assert "无可靠估计" in assessment.text("zh")
    narrow = _assess(_table({"small_batch": {"model": {**wide, "p90": domain.RELIABLE_BAND}}}), goal="sft")
    assert narrow.band.reliable and "reliable" not in narrow.text("en").lower()


def test_estimate_request_picks_the_regime_from_the_layouts_micro_batches():
    arch, hw = load_arch("llama3_8b"), get_hardware("h100")
    few = Layout(tp=1, pp=1, cp=1, mbs=1, gbs=8, seq_length=8192, world=8, gpus_per_node=8)
    many = Layout(tp=1, pp=1, cp=1, mbs=1, gbs=256, seq_length=8192, world=8, gpus_per_node=8)
    regimes = []
    for layout in (few, many):
        request = PlanRequest("llama3_8b", arch, hw, 8, layout.gbs, 8192, "fp8cs", "pretrain")
        regimes.append(estimate_request(request, layout, shipped_calibration()).assessment.band.regime)
    assert regimes == ["small_batch", "pretrain"]


def test_the_committed_domain_file_carries_bands_for_the_measured_regimes():
    table = domain.load_table()
    for regime in ("pretrain", "small_batch"):
        assert table.regimes[regime]["model"].rows > 0
        assert table.regimes[regime]["model"].p90 >= table.regimes[regime]["model"].median


# ---------------------------------------------------------------------- the benchmark's statistics
def _ext(name: str, error: float, goal: str = "lora") -> object:
    row = ext.External(name, "x", "llama3_8b", "h100", 8, "fp8cs", goal, 8, 1, 8192, 1, 1, 1, 1, 1, False, 1000.0)
    row.error = error
    return row


def test_regime_bands_pool_external_and_calibration_errors():
    rows = [_ext("a", e) for e in (0.1, -0.2, 0.3)]
    bands = ext.regime_bands(rows, {("small_batch", "model"): [0.4]})
    assert bands["small_batch"]["model"]["rows"] == 4
    assert bands["small_batch"]["model"]["median"] == pytest.approx(0.25)


def test_coverage_of_a_set_uses_bands_computed_without_it():
    # set b is far off; with a band from set a alone none of it is covered, whatever b's own errors
    rows = [_ext("a", e) for e in (0.01, 0.02, 0.03, -0.02)] + [_ext("b", e) for e in (0.8, -0.7, 0.9)]
    held = ext.coverage(rows, {"rows": [_row(), _row(gpus=16), _row(gpus=32)]}, {})
    assert held["b"] == (0, 3)
    assert held["a"][1] == 4


def test_domain_table_rewrites_keep_the_regime_bands():
    dt = importlib.import_module("domain_table")
    previous = {"rows": [], "regimes": {"pretrain": {"model": {"median": 0.1, "p90": 0.2, "rows": 3}}},
                "regimes_settings": {"rows": 3}}
    rebuilt = dt.carry_measured({"rows": []}, previous)
    assert rebuilt["regimes"] == previous["regimes"] and rebuilt["regimes_settings"] == {"rows": 3}


def test_the_external_to_nvidia_errors_join_the_tuned_pretraining_band_of_the_model_alone():
    bands = ext.regime_bands([_ext("a", 0.1, goal="lora")], {}, back=[0.5, -0.7, 0.3])
    assert bands["pretrain"]["model"] == {"median": 0.5, "p90": pytest.approx(0.66), "rows": 3}
    assert bands["small_batch"]["model"]["rows"] == 1  # fine-tuning runs keep their own band
