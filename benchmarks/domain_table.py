"""Write catalog/calibration-domain.json: the calibrated domain of the throughput model and, per
published row, the leave-one-system-out and leave-one-model-out relative error of its tokens/s
estimate (mbridge_launch/planner/domain.py reads it to say whether an estimate is inside the
domain and how far to trust it).

    python benchmarks/domain_table.py [--quick] [--iters N] [--rounds N] [--restarts N] [--jobs N] [--check]

The held-out errors come from accuracy.py's own refits (accuracy.leave_one_out: the whole fitting
procedure of fit_constants.py without the held-out system or model, then a prediction of its
rows); the defaults are accuracy.py's. Run it again whenever the constants, the fitting or the
memory model change (the JSON records a digest of the constants it was computed with, and
`estimate`/`plan` report `"current": false` when they no longer match). Fewer --restarts or
--iters make it faster and the errors rougher (--quick: one start, 300 iterations, about 10 min on
2 cores where accuracy.py's five starts of 800 take hours): the settings are recorded in the file.
--check compares the domain part (not the refit errors) with the committed file and exits 1 if
they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import errors_with  # noqa: E402
from calibration_rows import GRAD_BYTES, ROOT, Row, load_rows  # noqa: E402
from fitting import RESTARTS, fit_ranked, prepared, rank_problems  # noqa: E402
from mbridge_launch.base.atomic import atomic_write_text  # noqa: E402
from mbridge_launch.knowledge.vocabulary import normalize_goal  # noqa: E402
from mbridge_launch.planner.domain import DOMAIN_FILE, architecture_kind, constants_digest, model_family  # noqa: E402
from mbridge_launch.planner.search import Options, search  # noqa: E402
from mbridge_launch.planner.throughput import CAL, Calibration  # noqa: E402

TARGET = ROOT / "catalog" / DOMAIN_FILE
QUICK = (300, 2, 1)  # --quick: iterations, ranking rounds, starts per refit


GAP_TOP = 20  # candidates listed per request when the published layout's shortfall is measured
NOT_LISTED = 1.0  # its shortfall when the published grid is not among them: no tolerance holds it


def published_gap(row: Row, cal: Calibration, cache: dict, evidence_rows: tuple[Row, ...] = ()) -> float | None:
    """The published (TP, PP, CP, EP) grid's tie distance from the first choice with constants `cal`
    (gap_among the first GAP_TOP candidates); None for a row whose published layout breaks the
    rules (it is left out of every ranking figure). `evidence_rows`: measured rows that correct
    the estimates and rank their layouts first, as `plan` uses them (planner.measured; one `cache`
    per set of evidence rows)."""
    if not row.valid:
        return None
    L = row.layout
    key = (row.model, row.system, L.world, L.gbs, L.seq_length, row.precision, row.mtp_layers, row.token_drop)
    if key not in cache:
        cache[key] = search(row.arch, row.hw, L.world, gbs=L.gbs, seq_length=L.seq_length, precision=row.precision,
                            options=Options(mtp_layers=row.mtp_layers, moe_token_drop=row.token_drop,
                                            grad_bytes=GRAD_BYTES, cal=cal, measured=evidence_rows),
                            top=GAP_TOP).candidates
    return gap_among(row, cache[key])


def gap_among(row: Row, cands: list) -> float:
    """The published grid's tie distance among `cands` (planner.near_tie.tie_distance: the smallest
    near-tie tolerance that holds it; 0: first or measured; NOT_LISTED: not among them)."""
    from mbridge_launch.planner.near_tie import tie_distance

    L = row.layout
    match = next((c for c in cands if (c.layout.tp, c.layout.pp, c.layout.cp, c.layout.ep) == (L.tp, L.pp, L.cp, L.ep)),
                 None)
    return NOT_LISTED if match is None else tie_distance(cands[0], match)


def _held_out(task: tuple) -> tuple[str, str, list[float], list[float | None]]:
    """One leave-one-out refit (accuracy.py's procedure: fit_ranked from the physical defaults,
    regression plus ranking term) without group `g` of `attr`; the held-out rows' tokens/s errors
    (the measured rows, in order) and published-layout shortfalls (every held-out row, in order)."""
    attr, g, iters, rounds, restarts = task
    rows = load_rows()
    train = [r for r in rows if getattr(r, attr) != g]
    held = [r for r in rows if getattr(r, attr) == g]
    cal = fit_ranked(train, start=Calibration(), rounds=rounds, iters=iters, problems=rank_problems(train),
                     restarts=restarts)
    cache: dict = {}
    return attr, g, errors_with(prepared(held), cal), [published_gap(r, cal, cache) for r in held]


def leave_one_out_with_gaps(rows: list[Row], iters: int, rounds: int, restarts: int, jobs: int) -> tuple[dict, dict]:
    """accuracy.leave_one_out's refits (system and model held out in turn, `jobs` processes),
    returning the errors and, per held-out group, the published layouts' shortfalls."""
    tasks = [(attr, g, iters, rounds, restarts) for attr in ("system", "model")
             for g in sorted({getattr(r, attr) for r in rows})]
    errors: dict[str, dict[str, list[float]]] = {"system": {}, "model": {}}
    gaps: dict[str, dict[str, list[float | None]]] = {"system": {}, "model": {}}
    if jobs <= 1:
        results = map(_held_out, tasks)
    else:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=jobs)
        results = pool.map(_held_out, tasks)
    for attr, g, errs, held_gaps in results:
        errors[attr][g], gaps[attr][g] = errs, held_gaps
        print(f"  held out {attr}={g}: {len(errs)} rows", flush=True)
    return errors, gaps


def _row_entry(row: Row, loso: float | None, lomo: float | None, in_sample: float | None,
               gap_loso: float | None = None, gap_lomo: float | None = None) -> dict:
    L = row.layout

    def rounded(v: float | None) -> float | None:
        return None if v is None else round(v, 4)

    return {"model": row.model, "family": model_family(row.model), "kind": architecture_kind(row.arch),
            "system": row.hw.name, "precision": row.precision, "goal": normalize_goal("pretrain"),  # every row pretrains
            "seq_length": L.seq_length, "gpus": L.world, "release": row.release, "variant": row.variant,
            "layout": f"TP{L.tp} PP{L.pp} CP{L.cp} EP{L.ep} VP{L.vp or 1} MBS{L.mbs}",
            "loso": rounded(loso), "lomo": rounded(lomo), "in_sample": rounded(in_sample),
            "gap_loso": rounded(gap_loso), "gap_lomo": rounded(gap_lomo)}


# the columns that name a row of the table across rewrites: generalisation.py adds its
# leave-one-release-out errors of corrected estimates (loro_measured) and the published layouts'
# tie distances under them (gap_measured) to the rows it matches
ROW_KEY = ("release", "model", "system", "precision", "gpus", "seq_length", "variant", "layout")
MEASURED_FIELD = "loro_measured"
GAP_FIELD = "gap_measured"
MEASURED_FIELDS = (MEASURED_FIELD, GAP_FIELD)


def row_key(entry: dict) -> tuple:
    return tuple(entry.get(k) for k in ROW_KEY)


def key_of_row(row: Row) -> tuple:
    """row_key of the table entry a published row gets."""
    return row_key(_row_entry(row, None, None, None))


def carry_measured(doc: dict, previous: dict | None) -> dict:
    """`doc` with the loro_measured errors and gap_measured distances (and their settings) of
    `previous` (the file it replaces) on the rows they were computed for, and its per-regime bands
    of external runs: this script's refits do not compute them."""
    if not previous:
        return doc
    for name in MEASURED_FIELDS:
        kept = {row_key(e): e.get(name) for e in previous.get("rows", []) if e.get(name) is not None}
        for entry in doc["rows"]:  # None written out, as generalisation.py writes it: one file either way
            entry[name] = kept.get(row_key(entry))
    # the per-regime bands of external runs (benchmarks/external_throughput.py writes them): kept
    # as they are; run that script again after a refit, as RESULTS.md says
    for name in ("measured_settings", "regimes", "regimes_settings"):
        if name in previous:
            doc[name] = previous[name]
    return doc


def summary_of(entries: list[dict]) -> dict:
    """What the rows cover: the domain dimensions (domain.domain_of reads the rows themselves;
    this copy is for a reader of the file and for --check)."""
    def values(name: str) -> list:
        return sorted({e[name] for e in entries})

    by_kind: dict[str, list[str]] = {}
    for e in entries:
        by_kind.setdefault(e["kind"], [])
        if e["precision"] not in by_kind[e["kind"]]:
            by_kind[e["kind"]].append(e["precision"])
    return {"systems": values("system"), "precisions_by_kind": {k: sorted(v) for k, v in sorted(by_kind.items())},
            "families": sorted({f"{e['family']} {e['kind']}" for e in entries}), "models": values("model"),
            "goals": values("goal"), "seq_length": [min(values("seq_length")), max(values("seq_length"))],
            "gpus": [min(values("gpus")), max(values("gpus"))]}


def build(rows: list[Row], held: dict[str, dict[str, list[float]]], settings: dict,
          gaps: dict[str, dict[str, list[float | None]]] | None = None) -> dict:
    """The JSON document: rows with a measured tokens/s, each with its held-out errors (the refits
    predict the rows of `prepared`, in order, so errors pair with rows by position) and the
    published layout's held-out shortfall (`gaps`: every row of the group, in order)."""
    measured = [r for r in rows if r.tokens_per_sec]
    in_sample = dict(zip((r.index for r in measured), errors_with(prepared(measured), CAL)))
    held_out: dict[tuple[str, int], float] = {}
    for attr, groups in held.items():
        for group, errors in groups.items():
            members = [r for r in measured if getattr(r, attr) == group]
            held_out.update({(attr, r.index): e for r, e in zip(members, errors)})
    shortfall: dict[tuple[str, int], float | None] = {}
    for attr, groups in (gaps or {}).items():
        for group, values in groups.items():
            members = [r for r in rows if getattr(r, attr) == group]
            shortfall.update({(attr, r.index): v for r, v in zip(members, values)})
    entries = [_row_entry(r, held_out.get(("system", r.index)), held_out.get(("model", r.index)), in_sample.get(r.index),
                          shortfall.get(("system", r.index)), shortfall.get(("model", r.index)))
               for r in measured]
    return {"comment": "generated by python benchmarks/domain_table.py; do not edit by hand",
            "schema": 1, "constants": constants_digest(), "settings": settings,
            "domain": summary_of(entries), "rows": entries}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=800, help="Nelder-Mead iterations per refit round (accuracy.py: 800)")
    parser.add_argument("--rounds", type=int, default=2, help="ranking-term rounds per refit (accuracy.py: 2)")
    parser.add_argument("--restarts", type=int, default=RESTARTS, help=f"starts per refit (accuracy.py: {RESTARTS})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for the refits")
    parser.add_argument("--quick", action="store_true",
                        help="one start and 300 iterations per refit (about 10 min on 2 cores instead of hours)")
    parser.add_argument("--check", action="store_true", help="compare the domain with the committed file, write nothing")
    parser.add_argument("-o", "--output", type=Path, default=TARGET, help=f"where to write (default catalog/{DOMAIN_FILE})")
    args = parser.parse_args()
    if args.quick:
        args.iters, args.rounds, args.restarts = QUICK
    rows = load_rows()
    if args.check:
        committed = json.loads(args.output.read_text(encoding="utf-8"))
        now = summary_of([_row_entry(r, None, None, None) for r in rows if r.tokens_per_sec])
        same = committed.get("domain") == now and committed.get("constants") == constants_digest()
        print("calibration domain is current" if same else "calibration domain is stale: run python benchmarks/domain_table.py")
        return 0 if same else 1
    start = time.time()
    held, gaps = leave_one_out_with_gaps(rows, args.iters, args.rounds, args.restarts, args.jobs)
    settings = {"iters": args.iters, "rounds": args.rounds, "restarts": args.restarts,
                "seconds": round(time.time() - start)}
    previous = json.loads(args.output.read_text(encoding="utf-8")) if args.output.exists() else None
    doc = carry_measured(build(rows, held, settings, gaps), previous)
    atomic_write_text(args.output, json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output} ({len(doc['rows'])} rows, {settings['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
