"""`calibrate` on releases it was given, scored on a release it was not: the closed-form correction
the wheel ships (mbridge_launch/planner/calibration_correction.py) against the optimizer calibrate
ran before (fitting.py fit_for_calibrate: Nelder-Mead, priors, ranking term).

    nice -n 10 python benchmarks/calibrate_heldout.py [--jobs N] [--quick]

The published rows carry their container release (25.09, 25.11, 26.02, 26.02.01). Three protocols:

1. time-ordered: calibrate on the rows of every release before R, predict R's rows;
2. leave-one-release-out: calibrate on the rows of every other release, predict R's rows;
3. new release, half given (calibrate's own use: constants fitted before, a user's measurements on
   new software): start from constants the research fit (fitting.fit_ranked, FIT_STRENGTH) fitted
   on the releases before R, calibrate on every other measured row of R, predict the rest of R.

Protocols 1 and 2 start from the physical defaults Calibration(), never fitted on any row, so
no held-out row shapes the constants that predict it (the shipped throughput.CAL was fitted on
every release, so starting from it would leak R); protocol 3 from the fit on the releases before
R. For each split: the held-out rows' median
|tokens/s error| and share within 15% with the start, the closed-form correction and the
optimizer, the seconds each took, and the in-sample median on the rows given. Each row is
estimated with its published layout and the lightest recompute the memory model lets fit
(calibration_correction.prepared), as the rest of the benchmarks.

table() returns the markdown the `## Calibrate` section of RESULTS.md holds (calibrate_speed.py
--write writes it with the timing of the real command).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_rows import load_rows  # noqa: E402
from fitting import CALIBRATE_ITERS, CALIBRATE_RANK_ITERS, CALIBRATE_ROUNDS, fit_for_calibrate, fit_ranked  # noqa: E402
from mbridge_launch.planner.calibration_correction import calibrate, prepared  # noqa: E402
from mbridge_launch.planner.measured import release_key  # noqa: E402
from mbridge_launch.planner.throughput import Calibration  # noqa: E402

TIME = "time-ordered"
LORO = "leave-one-release-out"
HALF = "new release, half given"
FIT_STRENGTH = (300, 2, 1)  # protocol 3's start: fit_ranked iterations, ranking rounds, starts (generalisation.py --quick)
QUICK = (60, 1, 20)  # --quick: the optimizer's regression iterations, ranking rounds, iterations per round


@dataclass(frozen=True)
class Outcome:
    protocol: str
    train: tuple[str, ...]
    test: str
    rows_given: int
    rows_held_out: int
    start: tuple[float, float]  # (median |error|, within 15%) on the held-out rows
    closed: tuple[float, float]
    optimizer: tuple[float, float]
    closed_in_fit: float  # median |error| on the rows given, after the correction
    optimizer_in_fit: float
    closed_s: float
    optimizer_s: float
    moved: int  # constants the correction changed
    errors: dict  # method -> the held-out rows' |errors| (pooled in the table)


def splits(releases: list[str]) -> list[tuple[str, tuple[str, ...], str]]:
    out = [(TIME, tuple(releases[:i]), releases[i]) for i in range(1, len(releases))]
    out += [(LORO, tuple(r for r in releases if r != test), test) for test in releases]
    out += [(HALF, tuple(releases[:i]), releases[i]) for i in range(1, len(releases))]
    return out


def errors(items, cal) -> list[float]:  # noqa: ANN001
    from mbridge_launch.planner.calibration_correction import predict

    return [abs(predict(r, L, cal) / r.tokens_per_sec - 1) for r, L in items]


def run(jobs: int, strength: tuple[int, int, int], log=print) -> list[Outcome]:  # noqa: ANN001
    rows = load_rows()
    releases = sorted({r.release for r in rows}, key=release_key)
    out = []
    for protocol, train, test in splits(releases):
        start = Calibration()
        given = [r for r in rows if r.release in train]
        held = prepared([r for r in rows if r.release == test])
        if protocol == HALF:
            iters, rounds, restarts = FIT_STRENGTH
            began = time.monotonic()
            start = fit_ranked(given, start=start, rounds=rounds, iters=iters, restarts=restarts)
            log(f"  fit on {'+'.join(train)}: {time.monotonic() - began:.0f} s")
            measured = [r for r in rows if r.release == test and r.tokens_per_sec]
            given, held = measured[::2], prepared(measured[1::2])
        began = time.monotonic()
        closed = calibrate(given, start)
        closed_s = time.monotonic() - began
        began = time.monotonic()
        iters, rounds, rank_iters = strength
        opt = fit_for_calibrate(given, start, iters=iters, rounds=rounds, rank_iters=rank_iters, jobs=jobs,
                                time_limit=None)
        opt_s = time.monotonic() - began
        errs = {"start": errors(held, start), "closed": errors(held, closed.cal), "optimizer": errors(held, opt.cal)}

        def summary(e: list[float]) -> tuple[float, float]:
            return statistics.median(e), sum(x <= 0.15 for x in e) / len(e)

        o = Outcome(protocol, train, test, len(prepared(given)), len(held), summary(errs["start"]),
                    summary(errs["closed"]), summary(errs["optimizer"]), closed.after.median, opt.after.median,
                    closed_s, opt_s, len(closed.moved), errs)
        log(f"{protocol} {'+'.join(train)} -> {test}: start {pct(o.start[0])}, closed-form {pct(o.closed[0])} "
            f"({o.closed_s:.1f} s, {o.moved} constants moved), optimizer {pct(o.optimizer[0])} ({o.optimizer_s:.0f} s)")
        out.append(o)
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def table(outcomes: list[Outcome], strength: tuple[int, int, int], jobs: int) -> str:
    lines = [
        ("Held out by release (`python benchmarks/calibrate_heldout.py`, run by `calibrate_speed.py --write`): "
         "calibrate on the rows of some releases, predict the rows of one it was not given. The time-ordered and "
         "leave-one-release-out calibrations start from the physical defaults `Calibration()` (the shipped "
         "constants were fitted on every release, so starting from them would leak the held-out rows). "
         "\"closed-form\" is what the wheel's `calibrate` "
         "now runs (planner/calibration_correction.py: one ridge-regularised weighted least squares step on "
         "the log errors, bounded to BOUNDS); \"optimizer\" is the search `calibrate` ran before "
         f"(benchmarks/fitting.py fit_for_calibrate: {strength[0]} regression iterations, {strength[1]} rounds "
         f"of {strength[2]} with the ranking term, no time limit, {jobs} processes). Figures: median |tokens/s "
         "error| on the held-out release (within 15% in brackets); in-fit: median on the rows given."),
        "",
        ("| protocol | given -> predicted | rows given / held out | start | closed-form | optimizer "
         "| in-fit closed-form / optimizer | seconds closed-form / optimizer |"),
        "|---|---|---|---|---|---|---|---|",
    ]
    note = (f"\"{HALF}\": the start is fitting.fit_ranked on the releases before R ({FIT_STRENGTH[0]} iterations, "
            f"{FIT_STRENGTH[1]} ranking rounds, {FIT_STRENGTH[2]} start), calibrate is given every other measured "
            "row of R (in the CSV's order) and predicts the others; \"given\" names the releases of the start.")
    for o in outcomes:
        lines.append(
            f"| {o.protocol} | {'+'.join(o.train)} -> {o.test} | {o.rows_given} / {o.rows_held_out} "
            f"| {pct(o.start[0])} ({pct(o.start[1])}) | {pct(o.closed[0])} ({pct(o.closed[1])}) "
            f"| {pct(o.optimizer[0])} ({pct(o.optimizer[1])}) | {pct(o.closed_in_fit)} / {pct(o.optimizer_in_fit)} "
            f"| {o.closed_s:.1f} / {o.optimizer_s:.0f} |")
    reading = []
    for protocol in (TIME, LORO, HALF):
        chosen = [o for o in outcomes if o.protocol == protocol]
        if not chosen:
            continue
        pooled = {m: [e for o in chosen for e in o.errors[m]] for m in ("start", "closed", "optimizer")}
        cells = [f"{pct(statistics.median(e))} ({pct(sum(x <= 0.15 for x in e) / len(e))})" for e in pooled.values()]
        lines.append(f"| {protocol}, all held-out rows | | {len(pooled['start'])} held out | {cells[0]} | {cells[1]} "
                     f"| {cells[2]} | | |")
        start, closed, opt = (statistics.median(pooled[m]) for m in ("start", "closed", "optimizer"))
        gap = closed - opt
        reading.append(f"{protocol}: the closed-form correction takes the start's {pct(start)} to {pct(closed)}, the "
                       f"optimizer to {pct(opt)} (closed-form {'worse' if gap > 0 else 'better'} by "
                       f"{100 * abs(gap):.1f} points), in {sum(o.closed_s for o in chosen):.0f} s against "
                       f"{sum(o.optimizer_s for o in chosen):.0f} s.")
    lines += ["", "Reading (median |error| of all held-out rows of a protocol): " + " ".join(reading)]
    return "\n".join([*lines, "", note])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2, help="processes of the optimizer (default 2)")
    parser.add_argument("--quick", action="store_true", help=f"a short optimizer run {QUICK} (a smoke test)")
    args = parser.parse_args()
    strength = QUICK if args.quick else (CALIBRATE_ITERS, CALIBRATE_ROUNDS, CALIBRATE_RANK_ITERS)
    outcomes = run(args.jobs, strength)
    print(table(outcomes, strength, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
