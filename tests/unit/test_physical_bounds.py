"""Physics as hard bounds (issue 17): every fitted constant of the throughput model has a
physical range declared once (throughput.BOUNDS), the fit (benchmarks/fitting.py) cannot leave
it, the committed constants lie inside it, and no estimate exceeds the MFU ceiling of its
precision (throughput.MFU_CEILING; dense BF16: 60%)."""

from __future__ import annotations

import itertools
from dataclasses import fields, replace
from pathlib import Path

import pytest

from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.inputs import default_gbs
from mbridge_launch.planner.rules import Layout
from mbridge_launch.planner.search import search
from mbridge_launch.planner.throughput import (
    BOUNDS,
    CAL,
    MFU_CEILING,
    Calibration,
    ceiling_note,
    constant,
    estimate_step,
    out_of_bounds,
)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture()
def fitting(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import fitting as module

    return module


def _leaves(cal: Calibration) -> list[str]:
    names = []
    for f in fields(Calibration):
        value = getattr(cal, f.name)
        names += [f"{f.name}.{key}" for key in value] if isinstance(value, dict) else [f.name]
    return names


# ---------------------------------------------------------------------- the table
def test_the_table_covers_every_constant_and_every_fitted_one():
    assert sorted(_leaves(CAL)) == sorted(BOUNDS)  # no constant without a range, no range without a constant
    for name, b in BOUNDS.items():
        assert b.low <= b.high and b.why.strip(), name
        assert b.fitted == (b.low < b.high) or name == "link_eff", name  # only references are pinned


def test_the_fit_fits_exactly_the_bounded_constants(fitting):
    fitted = [name for name, _ in fitting.PARAMS]
    assert fitted == [name for name, b in BOUNDS.items() if b.fitted]
    for name, (centre, _) in fitting.PRIORS.items():
        assert name in fitted and BOUNDS[name].contains(centre), name  # a prior never pulls out of range


def test_every_committed_constant_is_inside_its_range():
    assert out_of_bounds(CAL) == []
    assert out_of_bounds(Calibration()) == []  # the defaults the refits start from


def test_out_of_bounds_names_the_constant_and_its_range():
    base = Calibration()
    odd = replace(base, elementwise=3.5, generation={**base.generation, "hopper": 1.163})
    bad = out_of_bounds(odd)
    assert any(b.startswith("elementwise=3.5 ") and "[1, 2]" in b for b in bad)
    assert any(b.startswith("generation.hopper=1.163") for b in bad) and len(bad) == 2


# ---------------------------------------------------------------------- the fit
def test_the_parametrisation_maps_any_value_into_the_range(fitting):
    for name, (fwd, back) in fitting.PARAMS:
        b = BOUNDS[name]
        for x in (-1e6, -50.0, -3.0, 0.0, 3.0, 50.0, 1e6):
            assert b.contains(back(x)), (name, x)
        # a start outside the range is projected just inside it, where the search has a slope
        for v in (b.low - 1.0, b.high * 10 + 1.0):
            assert b.contains(back(fwd(v))) and back(fwd(v)) not in (b.low, b.high), (name, v)
    # in range, the round trip keeps the value
    x = fitting.to_vector(CAL)
    again = fitting.from_vector(x)
    for name, _ in fitting.PARAMS:
        assert constant(again, name) == pytest.approx(constant(CAL, name), rel=1e-9), name


def test_a_fit_outside_the_range_is_refused(fitting):
    with pytest.raises(ValueError, match="attn_eff"):
        fitting.physical(replace(CAL, attn_eff=0.986))


def test_a_fit_on_impossibly_fast_rows_stays_at_the_bounds(fitting):
    """Rows claiming three times the published speed would need GEMMs beyond 100% of the peak:
    the bounded fit presses against the GEMM ceiling and the latency floor and stays there."""
    from calibration_rows import load_rows

    dense_fp8 = [r for r in load_rows() if r.precision == "fp8cs" and not r.arch.is_moe and r.tokens_per_sec][:6]
    assert len(dense_fp8) >= 4
    fast = [replace(r, tokens_per_sec=3.0 * r.tokens_per_sec) for r in dense_fp8]
    cal = fitting.fit(fast, start=Calibration(), rounds=1, iters=300)
    assert out_of_bounds(cal) == []
    b = BOUNDS["gemm_eff.fp8"]
    assert constant(cal, "gemm_eff.fp8") >= b.high - 0.05 * (b.high - b.low)  # at the ceiling, not past it
    # and the rows are still predicted slower than they claim: physics, not the rows, has the last word
    assert all(fitting.predict(r, L, cal) < r.tokens_per_sec for r, L in fitting.prepared(fast))


# ---------------------------------------------------------------------- the MFU ceiling
DENSE_MODELS = ("llama31_8b", "qwen3_8b", "qwen3_32b", "llama31_70b", "llama31_405b")
SYSTEMS = ("h100", "h200", "b200", "b300", "gb200", "gb300")
GPU_COUNTS = (64, 256)
SEQ_LENGTHS = (4096, 32768, 131072)


def test_no_dense_bf16_estimate_above_the_ceiling():
    """The planner's search over models x systems x GPU counts x sequence lengths: no candidate
    of any of them is estimated above 60% MFU (the ceiling of dense BF16)."""
    assert MFU_CEILING["bf16"] == 0.60
    configs = capped = 0
    for model, system, gpus, seq in itertools.product(DENSE_MODELS, SYSTEMS, GPU_COUNTS, SEQ_LENGTHS):
        res = search(load_arch(model), get_hardware(system), gpus, gbs=default_gbs(gpus), seq_length=seq,
                     precision="bf16", top=3)
        if not res.candidates:
            continue
        configs += 1
        for c in res.candidates:
            assert c.step.mfu <= MFU_CEILING["bf16"], (model, system, gpus, seq, c.step.mfu)
            capped += c.step.mfu_capped
    assert configs >= 120
    assert capped > 0  # the sweep reaches the ceiling (long sequences on Blackwell): the clamp is exercised


def test_a_clamped_estimate_says_so_and_keeps_its_figures_consistent():
    arch, hw = load_arch("qwen3_8b"), get_hardware("gb300")
    layout = Layout(tp=1, pp=1, cp=2, mbs=1, gbs=64, seq_length=131072, world=32, gpus_per_node=hw.gpus_per_node)
    fast = replace(CAL, gemm_eff={**CAL.gemm_eff, "bf16": 0.80}, attn_eff=0.75, elementwise=1.0, layer_latency_s=1e-5)
    est = estimate_step(arch, hw, layout, "bf16", cal=fast)
    assert est.mfu_capped and est.mfu == pytest.approx(MFU_CEILING["bf16"], rel=1e-6)
    assert est.breakdown["mfu_ceiling"] > 0 and est.mfu_uncapped > MFU_CEILING["bf16"]
    # tokens/s, TFLOP/s and step time describe the clamped step
    assert est.tokens_per_sec_per_gpu == pytest.approx(layout.gbs * layout.seq_length / est.step_time_s / 32)
    assert est.model_tflops_per_gpu == pytest.approx(est.mfu * hw.peak("bf16"))
    slow = estimate_step(arch, get_hardware("h100"), Layout(tp=1, pp=1, cp=1, mbs=1, gbs=64, seq_length=4096, world=8,
                                                             gpus_per_node=8), "bf16")
    assert not slow.mfu_capped and "mfu_ceiling" not in slow.breakdown and slow.mfu < MFU_CEILING["bf16"]
    assert slow.mfu_uncapped == slow.mfu
    assert ceiling_note(slow, "bf16") is None
    for lang in ("en", "zh"):
        note = ceiling_note(est, "bf16", lang=lang)
        assert note is not None and "60%" in note and f"{est.mfu_uncapped:.1%}" in note


def test_every_precision_has_a_ceiling_below_the_peak():
    from mbridge_launch.planner.throughput import _EFF_KEY

    for precision, key in _EFF_KEY.items():
        assert 0.0 < MFU_CEILING[key] < 1.0, precision
