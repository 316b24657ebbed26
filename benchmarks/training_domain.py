"""The calibration-domain table of a split's training releases alone: the near-tie tolerance
generalisation.py scores a held-out release with, computed without that release.

`plan` takes its near-tie tolerance (and error band) from catalog/calibration-domain.json, whose
figures are computed over every published release. Scoring a held-out release with that file
would let the held-out rows shape the tolerance they are scored with: its `loro_measured` errors
were computed with the held-out release's rows as evidence, and its leave-one-system/model-out
refits were fitted on them. So, per split, the table is written again from the training releases'
rows only, by the procedures that write the shipped file:

- `loso`, `lomo`, `gap_loso`, `gap_lomo`: domain_table.py's refits, one per system and one per
  model of the training rows, each fitted without it and predicting its training rows, at the
  shipped table's settings (domain_fits);
- `loro_measured`, `gap_measured`: leave-one-release-out within the training releases, at the
  run's settings: for each training release A, constants fitted on the other training releases,
  and A's rows predicted and ranked as `plan` does, with the other training releases' measured
  rows of the same configuration as evidence (inner_fits, corrected_predict, published_gap): the
  corrected estimate's error and the published layout's tie distance.
"""

from __future__ import annotations

from typing import Any, Sequence

from accuracy import errors_with
from calibration_rows import GRAD_BYTES, Row, with_fitting_recompute
from domain_table import GAP_FIELD, MEASURED_FIELD, build, key_of_row, published_gap, row_key
from fitting import prepared
from refits import Fit

HELD_OUT = ("system", "model")  # domain_table.py's leave-one-out refits


def corrected_predict(r: Row, cal: Any, evidence_rows: Sequence[Row]) -> tuple[float, bool]:
    """The published layout's tokens/s as `plan` and `estimate` give it: the model's (constants
    `cal`, the lightest recompute that fits), corrected by the nearest measured row of the same
    configuration among `evidence_rows` (none: the model's); and whether such a row corrected it."""
    from mbridge_launch.planner.measured import correct, evidence, matching
    from mbridge_launch.planner.throughput import estimate_step, mfu_ceiling

    layout = with_fitting_recompute(r)
    est = estimate_step(r.arch, r.hw, layout, r.precision, mtp_layers=r.mtp_layers, moe_token_drop=r.token_drop,
                        cal=cal, grad_bytes=GRAD_BYTES)
    matches = evidence(matching(evidence_rows, r.arch.name, r.hw.name, r.layout.world or 0, r.precision, r.mtp_layers,
                                r.token_drop), cal)
    return correct(est, layout, matches, mfu_ceiling(r.precision))[0].tokens_per_sec_per_gpu, bool(matches)


def inner_trains(train: Sequence[str]) -> list[tuple[str, ...]]:
    """The training releases less one, for each of them (none with a single training release:
    nothing else measured its rows)."""
    return [tuple(x for x in train if x != held) for held in train] if len(train) > 1 else []


def inner_fits(train: Sequence[str], iters: int, rounds: int, restarts: int) -> list[Fit]:
    return [Fit(inner, iters, rounds, restarts) for inner in inner_trains(train)]


def domain_fits(train: Sequence[str], rows: Sequence[Row], settings: dict[str, Any]) -> list[Fit]:
    """domain_table.py's refits over the training rows: one per system and one per model, each
    without it (the shipped table's iterations, rounds and starts)."""
    train_rows = [r for r in rows if r.release in train]
    return [Fit(tuple(train), settings["iters"], settings["rounds"], settings["restarts"], (attr, group))
            for attr in HELD_OUT for group in sorted({getattr(r, attr) for r in train_rows})]


def table_doc(train: Sequence[str], rows: Sequence[Row], cals: dict[Fit, Any], settings: dict[str, Any],
              iters: int, rounds: int, restarts: int) -> dict[str, Any]:
    """The calibration-domain document of the training releases `train` (domain_table.build, then
    loro_measured and gap_measured as generalisation.py writes them), from the constants `cals` of
    domain_fits and inner_fits."""
    train_rows = [r for r in rows if r.release in train]
    held: dict[str, dict[str, list[float]]] = {attr: {} for attr in HELD_OUT}
    gaps: dict[str, dict[str, list[float | None]]] = {attr: {} for attr in HELD_OUT}
    for fit in domain_fits(train, rows, settings):
        assert fit.drop is not None  # domain_fits drops one group each
        attr, group = fit.drop
        members = [r for r in train_rows if getattr(r, attr) == group]
        cache: dict = {}
        held[attr][group] = errors_with(prepared(members), cals[fit])
        gaps[attr][group] = [published_gap(r, cals[fit], cache) for r in members]
    doc = build(train_rows, held, dict(settings), gaps)
    errors, distances = {}, {}
    for fit in inner_fits(train, iters, rounds, restarts):
        evidence_rows = tuple(fit.rows(rows))
        searched: dict = {}  # published_gap's searches with this fold's constants and evidence
        for r in train_rows:
            if r.release in fit.train or not r.tokens_per_sec:
                continue
            predicted, corrected = corrected_predict(r, cals[fit], evidence_rows)
            errors[key_of_row(r)] = round(predicted / r.tokens_per_sec - 1, 4) if corrected else None
            gap = published_gap(r, cals[fit], searched, evidence_rows) if corrected else None
            distances[key_of_row(r)] = None if gap is None else round(gap, 4)
    for entry in doc["rows"]:
        entry[MEASURED_FIELD] = errors.get(row_key(entry))
        entry[GAP_FIELD] = distances.get(row_key(entry))
    return doc


def training_table(train: Sequence[str], rows: Sequence[Row], cals: dict[Fit, Any], settings: dict[str, Any],
                   iters: int, rounds: int, restarts: int):
    """planner.domain's Table of table_doc."""
    from mbridge_launch.planner.domain import table_of

    return table_of(table_doc(train, rows, cals, settings, iters, rounds, restarts))
