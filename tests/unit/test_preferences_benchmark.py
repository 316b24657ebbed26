"""benchmarks/preferences.py re-ranks the kept variants of one search per request in Python: with
the committed terms its order must be search()'s own, and a term's value must move it."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import preferences as P  # noqa: E402
from calibration_rows import GRAD_BYTES, load_rows  # noqa: E402
from mbridge_launch.planner.search import MEMORY_COMFORT, MEMORY_PRESSURE, Options, search  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    wanted = {"llama3_8b", "qwen3_30b_a3b"}
    picked, seen = [], set()
    for r in load_rows():
        key = (r.model, r.system)
        if r.model in wanted and r.valid and key not in seen and r.layout.world <= 16:
            seen.add(key)
            picked.append(r)
    return picked[:4]


def test_committed_setting_reproduces_search_order(rows):
    assert rows
    for row in rows:
        L = row.layout
        found = search(row.arch, row.hw, L.world, gbs=L.gbs, seq_length=L.seq_length, precision=row.precision,
                       options=Options(mtp_layers=row.mtp_layers, moe_token_drop=row.token_drop, grad_bytes=GRAD_BYTES))
        assert P.ranked_grids(P.variants(row), P.committed()) == [c.grid for c in found.candidates], row.label


def test_committed_reads_search_values_and_zero_for_removed_terms():
    s = P.committed()
    assert (s.memory_pressure, s.memory_comfort) == (MEMORY_PRESSURE, MEMORY_COMFORT)
    assert s.ep_credit == 0.0 and s.cp_charge == 0.0  # removed from search.py by this benchmark


def test_choose_prefers_more_first_choices_then_the_smaller_value(rows):
    ids = [r.index for r in rows]
    ranks = {0.0: {i: 2 for i in ids}, 0.5: {i: 1 for i in ids}, 1.0: {i: 1 for i in ids}}
    assert P.choose(ranks, rows) == 0.5
    even = {0.0: {i: 1 for i in ids}, 0.5: {i: 1 for i in ids}}
    assert P.choose(even, rows) == 0.0


def test_a_large_memory_charge_changes_the_utility_of_a_near_full_variant(rows):
    v = next(v for row in rows for v in P.variants(row) if v.memory_fraction > MEMORY_COMFORT)
    base = P.committed()
    assert P.utility(v, replace(base, memory_pressure=2.0)) < P.utility(v, replace(base, memory_pressure=0.0))
