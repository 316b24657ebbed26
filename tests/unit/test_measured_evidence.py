"""Measured evidence (planner.measured): published rows of the request's configuration correct the
estimates and rank the layouts they ran first; other configurations are untouched."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.calibration_rows import GRAD_BYTES, load_rows, with_fitting_recompute
from mbridge_launch.planner.measured import correct, evidence, matching, scaled, shipped_for, twin_for
from mbridge_launch.planner.search import Options, estimate_layout, search
from mbridge_launch.planner.throughput import estimate_step, mfu_ceiling

ROWS = load_rows()


def _rows(model: str, system: str, world: int, precision: str):
    arch = load_arch(model)
    return matching(ROWS, arch.name, system, world, precision)


def test_shipped_for_reads_the_rows_of_one_configuration():
    rows = shipped_for("llama3_8b", "h100", 8, "fp8cs")
    assert {r.release for r in rows} >= {"25.09", "25.11"}
    assert all((r.model, r.system, r.layout.world, r.precision) == ("llama3_8b", "h100", 8, "fp8cs") for r in rows)
    assert shipped_for("llama3_8b", "h100", 16, "fp8cs") == ()  # no row at 16 GPUs
    assert shipped_for("no_such_model", "h100", 8, "fp8cs") == ()


def test_twin_prefers_the_same_grid_then_the_newest_release():
    rows = _rows("qwen3_30b_a3b", "h100", 16, "fp8cs")
    matches = evidence(rows)
    # 25.09 published this configuration with token drop: another variant, not evidence here
    assert {m.row.release for m in matches} == {"25.11", "26.02", "26.02.01"}
    published = rows[0].layout
    newest = twin_for(published, matches)
    # "26.02.01" is newer than "26.02" (a patch release), not a shorter tuple that sorts first
    assert newest.row.release == "26.02.01" and newest.ran(published)
    assert twin_for(published, [m for m in matches if m.row.release != "26.02.01"]).row.release == "26.02"
    # the same grid outranks a newer release that ran another grid
    older = next(m for m in matches if m.row.release == "25.11")
    moved = replace(newest, row=replace(newest.row, layout=replace(newest.row.layout, tp=2)))
    assert twin_for(older.row.layout, [older, moved]) is older
    # a grid no row ran still gets a twin (the newest release), but is not "measured"
    other = replace(published, tp=2, ep=4)
    twin = twin_for(other, matches)
    assert twin is not None and not twin.ran(other)


def test_scaled_keeps_the_step_parts_adding_up():
    row = _rows("llama3_70b", "h100", 64, "fp8cs")[0]
    step = estimate_step(row.arch, row.hw, with_fitting_recompute(row), row.precision, grad_bytes=GRAD_BYTES)
    up = scaled(step, 1.25)
    assert up.tokens_per_sec_per_gpu == pytest.approx(step.tokens_per_sec_per_gpu * 1.25)
    assert up.step_time_s == pytest.approx(step.step_time_s / 1.25)
    assert up.mfu == pytest.approx(step.mfu * 1.25)
    assert sum(up.breakdown.values()) == pytest.approx(up.step_time_s, rel=1e-6)
    assert up.measured_ratio == pytest.approx(1.25)


def test_a_correction_never_lifts_an_estimate_above_the_mfu_ceiling():
    row = _rows("llama3_70b", "h100", 64, "fp8cs")[0]
    step = estimate_step(row.arch, row.hw, with_fitting_recompute(row), row.precision, grad_bytes=GRAD_BYTES)
    ceiling = mfu_ceiling(row.precision)
    up = scaled(step, 2 * ceiling / step.mfu, ceiling)
    assert up.mfu == pytest.approx(ceiling) and up.mfu_capped
    assert up.mfu_uncapped == pytest.approx(2 * ceiling)  # what the correction alone would give
    assert sum(up.breakdown.values()) == pytest.approx(up.step_time_s, rel=1e-6)


def test_correct_gives_the_measured_figure_for_the_row_itself():
    for row in ROWS:
        if not row.tokens_per_sec or not row.valid:
            continue
        layout = with_fitting_recompute(row)
        step = estimate_step(row.arch, row.hw, layout, row.precision, mtp_layers=row.mtp_layers,
                             moe_token_drop=row.token_drop, grad_bytes=GRAD_BYTES)
        got, twin = correct(step, layout, evidence([row]))
        assert twin is not None and twin.row is row
        assert got.tokens_per_sec_per_gpu == pytest.approx(row.tokens_per_sec, rel=1e-9)


def _plan(model, system, world, gbs, seq, precision, measured, top=10):
    arch, hw = load_arch(model), get_hardware(system)
    return search(arch, hw, world, gbs=gbs, seq_length=seq, precision=precision,
                  options=Options(grad_bytes=GRAD_BYTES, measured=measured), top=top)


@pytest.mark.parametrize("model,system,world,gbs,seq,precision", [
    ("llama3_70b", "h100", 64, 128, 8192, "fp8cs"),
    ("qwen3_30b_a3b", "h100", 16, 1024, 4096, "fp8cs"),
    ("llama31_405b", "gb200", 128, 64, 8192, "fp8cs"),
])
def test_a_measured_layout_ranks_first_with_its_measured_speed(model, system, world, gbs, seq, precision):
    rows = [r for r in _rows(model, system, world, precision) if r.layout.gbs == gbs and r.valid]
    assert rows, "the published rows of this configuration"
    newest = max(rows, key=lambda r: tuple(int(p) for p in r.release.split(".")))
    plain = _plan(model, system, world, gbs, seq, precision, ())
    found = _plan(model, system, world, gbs, seq, precision, tuple(rows))
    first = found.candidates[0]
    assert first.measured is not None
    L, P = first.layout, newest.layout
    assert (L.tp, L.pp, L.cp, L.ep, L.fsdp) == (P.tp, P.pp, P.cp, P.ep, P.fsdp)
    # the row's own micro-batch and virtual pipeline size, and (same layout) its own measured speed
    if (L.mbs, L.vp_size) == (P.mbs, P.vp_size) and L.recompute == with_fitting_recompute(newest).recompute:
        assert first.tokens_per_sec_per_gpu == pytest.approx(newest.tokens_per_sec, rel=0.02)
    # every candidate is corrected by a row of the configuration; without rows, none is
    assert all(c.twin is not None and c.step.measured_ratio != 1.0 for c in found.candidates)
    assert all(c.twin is None and c.step.measured_ratio == 1.0 for c in plain.candidates)
    # the model's ranking of the other layouts is kept: same order up to the measured one moved first
    rest = [c.grid for c in found.candidates if c.measured is None]
    plain_grids = [c.grid for c in plain.candidates]
    assert [g for g in rest if g in plain_grids] == [g for g in plain_grids if g in rest]


def test_rows_of_other_configurations_change_nothing():
    rows = tuple(_rows("llama3_70b", "h100", 64, "fp8cs"))
    plain = _plan("llama3_70b", "b200", 64, 128, 8192, "fp8cs", ())
    other = _plan("llama3_70b", "b200", 64, 128, 8192, "fp8cs", rows)  # rows of H100, request on B200
    assert [(c.grid, c.tokens_per_sec_per_gpu) for c in plain.candidates] == \
           [(c.grid, c.tokens_per_sec_per_gpu) for c in other.candidates]


def test_estimate_layout_agrees_with_search():
    rows = tuple(r for r in _rows("llama3_70b", "h100", 64, "fp8cs") if r.layout.gbs == 128)
    found = _plan("llama3_70b", "h100", 64, 128, 8192, "fp8cs", rows, top=3)
    for c in found.candidates:
        again = estimate_layout(c.layout, load_arch("llama3_70b"), get_hardware("h100"), precision="fp8cs",
                                grad_bytes=GRAD_BYTES, measured=rows)
        assert again.tokens_per_sec_per_gpu == pytest.approx(c.tokens_per_sec_per_gpu, rel=1e-9)
        assert (again.measured is None) == (c.measured is None)
    assert math.isclose(found.candidates[0].step.measured_ratio,
                        found.candidates[1].step.measured_ratio) or found.candidates[1].measured is not None


def test_every_measured_layout_is_in_the_near_tie_set():
    """Two releases published two grids of one configuration (llama31_405b, 256 GB300, FP8-CS):
    both rank first and both are in the near-tie set, even with no tolerance at all (speeds of
    different releases do not compare), and a layout no row ran is in it only within the band."""
    from mbridge_launch.planner.near_tie import near_tie_set

    rows = _rows("llama31_405b", "gb300", 256, "fp8cs")
    grids = {(r.layout.tp, r.layout.pp, r.layout.cp, r.layout.ep) for r in rows}
    assert len(grids) >= 2
    found = _plan("llama31_405b", "gb300", 256, rows[0].layout.gbs, rows[0].layout.seq_length, "fp8cs", tuple(rows))
    measured = [i for i, c in enumerate(found.candidates, 1) if c.measured is not None]
    assert measured == list(range(1, len(measured) + 1)) and len(measured) >= 2
    assert [rank for rank, _ in near_tie_set(found.candidates, 0.0)] == measured
    wide = [rank for rank, _ in near_tie_set(found.candidates, 0.5)]
    assert set(measured) < set(wide)


@pytest.mark.parametrize("within", [0.0, 0.01, 0.03, 0.1, 0.5])
def test_the_tie_distance_is_the_sets_own_criterion(within):
    """A candidate is in the near-tie set exactly when its tie distance is within the tolerance (the
    benchmarks derive the tolerance from published layouts' distances, so the two must agree),
    with the first and every measured layout at distance 0, faster and slower ones alike."""
    from mbridge_launch.planner.near_tie import near_tie_set, tie_distance

    rows = _rows("llama31_405b", "gb300", 256, "fp8cs")
    found = _plan("llama31_405b", "gb300", 256, rows[0].layout.gbs, rows[0].layout.seq_length, "fp8cs", tuple(rows))
    cands = found.candidates
    first = cands[0]
    held = {rank for rank, _ in near_tie_set(cands, within)}
    assert held == {i for i, c in enumerate(cands, 1) if tie_distance(first, c) <= within}
    assert all(tie_distance(first, c) == 0.0 for c in cands if c.measured is not None)
    for c in cands:
        if c.measured is None:
            assert tie_distance(first, c) == pytest.approx(abs(c.tokens_per_sec_per_gpu / first.tokens_per_sec_per_gpu - 1))


def test_the_users_own_row_corrects_before_nvidias_row_of_the_same_grid():
    """A row of the user's cluster (a calibration file's measured_rows, Measured.own) is the twin of
    its grid ahead of NVIDIA's newer row of that grid; NVIDIA's rows still correct other grids."""
    rows = _rows("qwen3_30b_a3b", "h100", 16, "fp8cs")
    nvidia = evidence(rows)
    published = rows[0].layout
    theirs = twin_for(published, nvidia)
    mine_row = replace(theirs.row, release="run:my-trial", tokens_per_sec=theirs.row.tokens_per_sec * 0.8)
    mine = evidence([mine_row], own=True)
    assert mine[0].own and mine[0].as_json()["source"] == "yours" and theirs.as_json()["source"] == "nvidia"
    assert twin_for(published, nvidia + mine) is mine[0]
    found = search(load_arch("qwen3_30b_a3b"), get_hardware("h100"), 16, gbs=published.gbs,
                   seq_length=published.seq_length, precision="fp8cs",
                   options=Options(grad_bytes=GRAD_BYTES, measured=tuple(rows), own_measured=(mine_row,)), top=3)
    first = found.candidates[0]
    assert first.measured is not None and first.measured.own
    # corrected by the user's measured / predicted (its own MBS and VP may differ from the row's)
    assert first.step.measured_ratio == pytest.approx(mine[0].ratio)
