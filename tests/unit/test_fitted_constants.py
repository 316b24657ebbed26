"""The fitted throughput constants stay physical: benchmarks/fit_constants.py fits them on the
published rows, and a fit that lands in an odd basin (dense BF16 GEMMs at a third of the peak, or
at 97% of it) would mislead every library-recipe estimate, which the rows do not cover."""

from __future__ import annotations

from mbridge_launch.planner.throughput import CAL


def test_sustained_gemm_rates_are_plausible_fractions_of_the_peak():
    # the step model runs GEMMs at peak x min(generation factor, 1 / best efficiency) x efficiency;
    # issue 17: at most the GEMM ceiling of throughput.BOUNDS (80% of the peak; was 92%, which let
    # Hopper BF16 GEMMs reach 91% of the peak through a generation factor of 1.163)
    from mbridge_launch.planner.throughput import BOUNDS

    cap = 1.0 / max(CAL.gemm_eff.values())
    for generation, factor in CAL.generation.items():
        for precision, eff in CAL.gemm_eff.items():
            rate = eff * min(factor, cap)
            assert 0.2 <= rate <= BOUNDS[f"gemm_eff.{precision}"].high, (generation, precision, rate)
    assert 0.6 <= CAL.gemm_eff["bf16"] <= 0.8  # no dense BF16 row to fit it: the prior holds it


def test_latencies_and_overlaps_are_physical():
    assert 1e-6 <= CAL.p2p_latency_s <= 1e-3  # a pipeline send/receive: microseconds, not milliseconds
    assert 1e-6 <= CAL.ring_step_s <= 2e-4  # one ring step across the network
    assert 0.3 <= CAL.host_latency["grace"] <= 1.0 == CAL.host_latency["x86"]
    for name in ("tp_exposed", "cp_exposed", "ep_exposed", "dp_exposed", "fsdp_exposed"):
        assert 0.0 < getattr(CAL, name) <= 1.0, name


def test_the_writer_renders_every_constant(monkeypatch):
    # fit_constants.py --write replaces the fitted block with render(cal): a field it forgot
    # would silently fall back to its default in the committed model
    from dataclasses import fields, replace
    from pathlib import Path

    from mbridge_launch.planner.throughput import Calibration

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from fit_constants import render

    odd = replace(CAL, **{f.name: 0.123 for f in fields(Calibration) if isinstance(getattr(CAL, f.name), float)})
    namespace = {"Calibration": Calibration}
    exec(render(odd), namespace)
    assert namespace["CAL"] == odd and namespace["CAL"].gemm_eff == odd.gemm_eff
    assert namespace["CAL"].host_latency == odd.host_latency and namespace["CAL"].generation == odd.generation
