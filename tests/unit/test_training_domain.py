"""benchmarks/training_domain.py: the calibration-domain table a held-out release is scored with is
computed from the training releases' rows alone. Real published rows, the committed constants
standing in for every refit (no fit runs here)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import training_domain as td  # noqa: E402
from domain_table import key_of_row, row_key  # noqa: E402
from mbridge_launch.planner.throughput import CAL  # noqa: E402

TRAIN = ("25.09", "25.11")
STRENGTH = (1, 1, 1)  # iterations, rounds, starts: only names the refits here
DOMAIN = {"iters": 1, "rounds": 1, "restarts": 1}


@pytest.fixture(scope="module")
def rows():
    from calibration_rows import load_rows

    return load_rows()


@pytest.fixture(scope="module")
def cals(rows):
    fits = td.inner_fits(TRAIN, *STRENGTH) + td.domain_fits(TRAIN, rows, DOMAIN)
    return {f: CAL for f in fits}


@pytest.fixture(scope="module")
def doc(rows, cals):
    return td.table_doc(TRAIN, rows, cals, DOMAIN, *STRENGTH)


def test_the_table_holds_the_training_releases_measured_rows_only(rows, doc):
    assert {e["release"] for e in doc["rows"]} == set(TRAIN)
    assert len(doc["rows"]) == sum(1 for r in rows if r.release in TRAIN and r.tokens_per_sec)


def test_the_held_out_releases_rows_change_nothing(rows, cals, doc):
    """Another speed for every row of the other releases: the same table, to the last figure."""
    changed = [replace(r, tokens_per_sec=r.tokens_per_sec * 3) if r.release not in TRAIN and r.tokens_per_sec else r
               for r in rows]
    assert td.table_doc(TRAIN, changed, cals, DOMAIN, *STRENGTH) == doc


def test_loro_measured_is_the_other_training_releases_correction(rows, doc):
    """A 25.09 row is corrected by 25.11's measured rows of its configuration (and only those),
    and its published layout's tie distance is taken in the ranking those rows correct; a row no
    other training release measured has neither figure."""
    from domain_table import published_gap
    from mbridge_launch.planner.measured import evidence as evidence_of
    from mbridge_launch.planner.measured import matching

    by_key = {key_of_row(r): r for r in rows if r.release in TRAIN and r.tokens_per_sec}
    evidence = {release: tuple(r for r in rows if r.release == release) for release in TRAIN}
    searched: dict = {release: {} for release in TRAIN}
    corrected = uncorrected = measured_first = 0
    for entry in doc["rows"]:
        r = by_key[row_key(entry)]
        other = TRAIN[1] if r.release == TRAIN[0] else TRAIN[0]
        predicted, was_corrected = td.corrected_predict(r, CAL, evidence[other])
        if was_corrected:
            corrected += 1
            assert entry["loro_measured"] == pytest.approx(predicted / r.tokens_per_sec - 1, abs=1e-4)
            gap = published_gap(r, CAL, searched[other], evidence[other])
            assert entry["gap_measured"] == (None if gap is None else pytest.approx(gap, abs=1e-4))
            # a published layout the other release ran is a measured candidate: distance 0
            ran = evidence_of(matching(evidence[other], r.arch.name, r.hw.name, r.layout.world or 0, r.precision,
                                       r.mtp_layers, r.token_drop), CAL)
            if r.valid and any(m.ran(r.layout) for m in ran):
                measured_first += 1
                assert entry["gap_measured"] == 0.0
        else:
            uncorrected += 1
            assert entry["loro_measured"] is None and entry["gap_measured"] is None
    assert corrected and uncorrected and measured_first  # every case occurs in these releases


def test_held_out_errors_and_gaps_come_from_the_refit_without_the_rows_group(rows):
    """Every row gets the leave-one-system-out figures of the refit that left its system out and
    the leave-one-model-out figures of the one that left its model out: each refit has constants of
    its own here, so a row scored with another group's refit, or the two kinds swapped, differs."""
    from accuracy import errors_with
    from domain_table import published_gap
    from fitting import perturbed, prepared

    fits = td.domain_fits(TRAIN, rows, DOMAIN)
    own = {f: perturbed(CAL, seed, spread=0.2) for seed, f in enumerate(fits, 1)}
    cals = {**{f: CAL for f in td.inner_fits(TRAIN, *STRENGTH)}, **own}
    entries = {row_key(e): e for e in td.table_doc(TRAIN, rows, cals, DOMAIN, *STRENGTH)["rows"]}
    by_drop = {f.drop: own[f] for f in fits}
    searched: dict = {f.drop: {} for f in fits}  # published_gap's search cache, one per refit
    measured = [r for r in rows if r.release in TRAIN and r.tokens_per_sec]
    for r in measured:
        entry = entries[key_of_row(r)]
        for attr, field, gap_field in (("system", "loso", "gap_loso"), ("model", "lomo", "gap_lomo")):
            drop = (attr, getattr(r, attr))
            cal = by_drop[drop]
            assert entry[field] == pytest.approx(errors_with(prepared([r]), cal)[0], abs=1e-4), (r.index, field)
            gap = published_gap(r, cal, searched[drop]) if r.valid else None
            assert entry[gap_field] == (None if gap is None else pytest.approx(gap, abs=1e-4)), (r.index, gap_field)
    assert any(entry["loso"] != pytest.approx(entry["lomo"], abs=1e-3) for entry in entries.values())


def test_the_document_reads_as_the_planner_table(rows, cals):
    table = td.training_table(TRAIN, rows, cals, DOMAIN, *STRENGTH)
    assert {r.release for r in table.rows} == set(TRAIN)
    assert any(r.loro_measured is not None for r in table.rows)
