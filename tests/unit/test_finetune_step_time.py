"""Fine-tuning step time (issue 34, item 5): the estimates of the committed external fine-tuning
rows (benchmarks/external/data/finetune_*.csv, never fitted on) lie inside the p90 band `estimate`
prints for them, and the physics that puts them there: PEFT reduces and steps its adapters only,
and full recompute repeats half of a frozen GEMM's work."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.flops import flops_per_token, trained_params
from mbridge_launch.planner.rules import Layout
from mbridge_launch.planner.throughput import estimate_step

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import finetune_step_time as F  # noqa: E402


def _records() -> list[tuple[str, dict[str, str]]]:
    return [(name, record) for name in F.SETS for record in F.rows(name)]


def test_every_row_names_its_source_and_the_sets_hold_sft_and_lora():
    records = _records()
    assert len(records) >= 15
    assert all(r["source"].strip() for _, r in records)
    assert {r["task"] for _, r in records} == {"sft", "lora"}
    # the small-GBS regime: MLPerf's runs take 1 to 4 micro-batches per step
    assert min(int(r["gbs"]) for _, r in records) == 8


@pytest.mark.parametrize("name,record", _records(), ids=lambda x: x if isinstance(x, str) else
                         f"{x['task']}-{x['system']}-{x['num_gpus']}-{x['precision']}")
def test_the_estimate_lies_inside_the_band_it_prints(name, record):
    result = F.evaluate(name, record)
    assert result.measured == float(record["tokens_per_sec_per_gpu"])
    assert abs(result.error) <= result.p90, (result.label, result.error, result.p90)


def test_mlperf_lora_median_error_is_within_ten_percent():
    results = [F.evaluate(name, r) for name, r in _records() if name == "mlperf_lora"]
    (_, _, n, median, inside), = F.summary(results)
    assert n == 5 and median <= 0.10 and inside == 1.0


def _llama70b_lora_row():
    arch = replace(load_arch("llama3_70b"), name="llama2_70b", vocab_size=32000)
    layout = Layout(tp=4, pp=1, cp=2, sp=True, mbs=1, gbs=8, seq_length=8192, world=64, cp_comm_type="p2p")
    return arch, get_hardware("h100"), layout


def test_peft_reduces_and_steps_only_its_adapters():
    arch, hw, layout = _llama70b_lora_row()
    dense, routed = trained_params(arch, "lora")
    # rank-32 adapters on four matrices of 80 layers: a fraction of a percent of 70B
    assert 0 < dense < 0.01 * arch.total_params and routed == 0
    assert trained_params(arch, "sft") is None and trained_params(arch, "pretrain") is None
    lora = estimate_step(arch, hw, layout, "fp8cs", goal="lora").breakdown
    sft = estimate_step(arch, hw, layout, "fp8cs", goal="sft").breakdown
    assert lora["dp_comm"] < 0.01 * sft["dp_comm"]
    assert lora["optimizer"] < 0.01 * sft["optimizer"]


def test_full_recompute_repeats_half_of_a_frozen_gemm_and_a_third_of_a_trained_one():
    arch, hw, layout = _llama70b_lora_row()
    full = replace(layout, recompute="full")
    for goal, extra in (("lora", 1 / 2), ("sft", 1 / 3)):
        fl = flops_per_token(arch, layout.seq_length, tp=layout.tp, goal=goal)
        base = estimate_step(arch, hw, layout, "fp8cs", goal=goal).breakdown["gemm"]
        again = estimate_step(arch, hw, full, "fp8cs", goal=goal).breakdown["gemm"]
        # the LM head is not recomputed
        expected = (fl.gemm - fl.logits) * (1 + extra) + fl.logits
        assert again / base == pytest.approx(expected / fl.gemm, rel=1e-9)
