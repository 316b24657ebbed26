"""The external memory set (Megatron-LM functional tests) and the memory band it gives.

The extract is committed (CI has no network); its rows become planner requests through
benchmarks/external/memory_rows.py, the benchmark script runs on it, and the band file the script
writes is what `plan` and `estimate` print.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.planner import memory_band as band_module
from mbridge_launch.planner.memory import MemoryBreakdown, estimate_memory
from mbridge_launch.planner.rules import check_layout

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "benchmarks" / "external"))
memory_rows = importlib.import_module("memory_rows")


@pytest.fixture(scope="module")
def extract() -> dict:
    return memory_rows.load()


@pytest.fixture(scope="module")
def built(extract) -> tuple[list, dict]:
    used, skipped = [], {}
    for row in extract["rows"]:
        try:
            used.append(memory_rows.build(row))
        except memory_rows.Skip as why:
            skipped[str(why)] = skipped.get(str(why), 0) + 1
    return used, skipped


def test_extract_loads_and_every_row_names_its_source(extract):
    assert extract["source"]["repo"] == "NVIDIA/Megatron-LM" and len(extract["source"]["commit"]) == 40
    assert len(extract["rows"]) > 300
    for row in extract["rows"]:
        src = row["source"]
        assert src["commit"] == extract["source"]["commit"]
        assert src["golden"].startswith("tests/functional_tests/test_cases/") and src["golden"].endswith(".json")
        assert src["config"].endswith("/model_config.yaml")
        assert row["platform"] in ("dgx_h100", "dgx_gb200")
        assert row["peak_max_allocated_gib"] > 0


def test_every_row_parses_into_a_request_the_planner_accepts_or_one_reason(extract, built):
    used, skipped = built
    assert len(used) + sum(skipped.values()) == len(extract["rows"])
    assert len(used) > 150  # most training rows are usable
    assert all(why for why in skipped)
    for r in used:
        # the rules refuse nothing a real run used (warnings, such as TP>1 without SP, are advice)
        problems = [v.code for v in check_layout(r.layout, r.arch) if v.severity != "warning"]
        assert not problems, (r.row["id"], problems)
        m = estimate_memory(r.arch, r.layout, precision=r.precision, grad_bytes=r.grad_bytes)
        assert math.isfinite(m.total) and m.total > m.allowance > 0, r.row["id"]
        assert r.layout.world == r.layout.dp * r.layout.tp * r.layout.pp * r.layout.cp


def test_rows_read_megatron_lm_defaults():
    row = {"id": "x", "family": "gpt", "case": "x", "platform": "dgx_h100", "second_run": False,
           "recipes": [{"nodes": 1, "gpus_per_node": 8}],
           "args": {"num-layers": 12, "hidden-size": 512, "num-attention-heads": 8, "seq-length": 1024,
                    "micro-batch-size": 4, "tensor-model-parallel-size": 2, "bf16": True, "vocab-file": "vocab.json",
                    "swiglu": True, "untie-embeddings-and-output-weights": True}}
    r = memory_rows.build(row)
    assert r.arch.ffn_hidden_size == int(4 * 512 * 2 / 3 / 64) * 64  # Megatron-LM's SwiGLU default
    assert r.arch.vocab_size == memory_rows.GPT2_BPE_VOCAB
    assert not r.arch.share_embeddings_and_output_weights
    assert (r.layout.dp, r.layout.gbs, r.grad_bytes) == (4, 16, 4.0)  # GBS defaults to MBS x DP; fp32 grads with bf16
    row["args"]["fp8-format"] = "hybrid"
    row["args"]["fp8-recipe"] = "tensorwise"
    assert memory_rows.build(row).precision == "fp8cs"
    # a release test's GPU count is not public: every count its layout allows (DP divides GBS / MBS)
    row["args"]["global-batch-size"] = 16
    assert memory_rows.world_candidates(row, most=64) == [2, 4, 8]  # TP2 x DP, DP in 1, 2, 4 (GBS 16 / MBS 4)
    del row["args"]["bf16"], row["args"]["fp8-format"]
    with pytest.raises(memory_rows.Skip, match="fp32 training"):
        memory_rows.build(row)


def test_the_script_runs_on_a_few_rows(capsys):
    script = importlib.import_module("external_memory")
    assert script.main(["--no-write", "--limit", "60"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(script.HEADING)
    assert "Median |error|" in out and "held-out coverage" in out


def test_the_band_file_was_written_by_the_script_from_the_committed_extract(extract, built):
    data = json.loads(band_module.band_file().read_text(encoding="utf-8"))
    assert data["written_by"].startswith("benchmarks/external_memory.py")
    assert data["source"]["commit"] == extract["source"]["commit"]
    peaks = []
    for row in extract["rows"]:
        try:
            request = memory_rows.build(row)
        except memory_rows.Skip:
            continue
        peaks.append((request, row["peak_max_allocated_gib"]))
    used = [r for r, _ in peaks]
    # the band's rows: no setting the memory model lacks, and a peak of training size (not a
    # test model whose few GiB are mostly fixed buffers)
    band_min_peak = importlib.import_module("external_memory").BAND_MIN_PEAK_GIB
    expressible = [r for r, peak in peaks if not r.lacks and peak >= band_min_peak]
    assert 0 < len(expressible) < len([r for r in used if not r.lacks]) < len(used)
    assert data["regimes"]["all"]["rows"] == len(expressible)
    kinds = ("dense", "moe", "hybrid")
    assert sum(data["regimes"][k]["rows"] for k in kinds if k in data["regimes"]) == len(expressible)
    for entry in data["regimes"].values():
        assert entry["low"] <= entry["median"] <= entry["high"]


def _breakdown(modelled: float, allowance: float) -> MemoryBreakdown:
    return MemoryBreakdown(weights=modelled, gradients=0.0, optimizer=0.0, activations=0.0, logits=0.0,
                           allowance=allowance, stage="only")


def test_the_band_applies_the_measured_error_to_the_modelled_part(monkeypatch):
    from mbridge_launch.knowledge.models import load_arch

    arch = load_arch("llama3_8b")
    table = {"min_regime_rows": 20, "regimes": {
        "all": {"rows": 100, "low": -0.1, "high": 0.3, "median": 0.0},
        "dense": {"rows": 50, "low": -0.05, "high": 0.1, "median": 0.0},
        "moe": {"rows": 5, "low": -0.9, "high": 0.9, "median": 0.0}}}
    monkeypatch.setattr(band_module, "_table", lambda: table)
    band = band_module.memory_band(arch, _breakdown(40.0, 5.0))
    assert band is not None and band.regime == "dense" and band.rows == 50 and band.reliable
    assert band.low_gib == pytest.approx(5.0 + 40.0 * 0.95) and band.high_gib == pytest.approx(5.0 + 40.0 * 1.1)
    table["regimes"]["dense"]["rows"] = 10  # too few rows: the band of all rows
    band = band_module.memory_band(arch, _breakdown(40.0, 5.0))
    assert band.regime == "all" and band.reliable  # 16 of 45 GiB wide: within WIDE
    table["regimes"]["all"]["high"] = 0.9
    assert band_module.memory_band(arch, _breakdown(40.0, 5.0)).reliable is False


def test_estimate_prints_the_band_in_text_and_json(capsys):
    argv = ["estimate", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--recompute", "full"]
    assert main([*argv, "--format", "json"]) in (0, 3)
    data = json.loads(capsys.readouterr().out)
    band = data["memory_band_gb"]
    assert band["regime"] == "dense" and band["low_gb"] < band["high_gb"]
    main(argv)
    text = capsys.readouterr().out
    assert "external check on" in text and f"{band['low_gb']:.1f}" in text
