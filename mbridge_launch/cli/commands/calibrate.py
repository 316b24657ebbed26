"""mbridge-launch calibrate: correct the throughput constants to calibration rows (the shipped
published rows, the user's CSV files in the same columns, the ledger's completed runs) and write
a calibration file that `plan` and `estimate` then use (planner/calibration_file.py).

No optimizer runs here (the wheel has none; the constants' fit is research code in benchmarks/).
The correction is closed-form (planner/calibration_correction.py): from the calibration in use,
the log errors of the rows, weighted pseudo-Huber, are regressed on the model's own sensitivity
to each fitted constant in one ridge-regularised linear least squares; each constant moves by the
solution, clamped to its physical range (throughput.BOUNDS). The correction, half or a quarter of
it, whichever lowers the robust loss on the rows most, is written; the start when none does.
Constants the rows do not exercise stay (the ridge). Seconds on 300 rows, not a minute.
--iters and --time-limit (the old search's) are still accepted, with a warning, so that scripts
keep working; they change nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = "help.calibrate"
MAX_ITERS = 100_000  # far past convergence; the fit's time limit ends it sooner anyway
MAX_TIME_LIMIT = 86_400


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import int_arg, path_arg

    parser.add_argument("--rows", action="append", default=[], metavar="FILE.csv", help=t("help.calibrate.rows"))
    parser.add_argument("--from-runs", action="store_true", help=t("help.calibrate.from_runs"))
    parser.add_argument("--no-shipped-rows", action="store_true", help=t("help.calibrate.no_shipped_rows"))
    parser.add_argument("-o", "--output", type=path_arg, metavar="FILE", help=t("help.calibrate.output"))
    parser.add_argument("--iters", type=int_arg(1, MAX_ITERS), metavar="N", help=t("help.calibrate.iters"))
    parser.add_argument("--time-limit", type=int_arg(0, MAX_TIME_LIMIT), metavar="SECONDS",
                        help=t("help.calibrate.time_limit"))
    add_common(parser)


def _gather(args: argparse.Namespace) -> tuple[list, list, dict[str, Any], list]:
    """(rows, skipped, sources, own) from the shipped rows, every --rows file and the ledger; `own`:
    the rows of the files and the ledger (the user's measurements, kept in the calibration file)."""
    from mbridge_launch.planner import calibration_rows as cr

    rows: list = []
    own: list = []
    skipped: list = []
    sources: dict[str, Any] = {"shipped": 0, "files": [], "ledger_runs": []}
    if not args.no_shipped_rows:
        got, skip = cr.read_rows(cr.csv_path())
        rows += got
        skipped += skip
        sources["shipped"] = len(got)
    for path in args.rows:
        got, skip = cr.read_rows(path)
        rows += got
        own += got
        skipped += skip
        sources["files"].append({"path": str(path), "rows": len(got)})
    if args.from_runs:
        # the ledger's measured runs (runs/measured_rows.py), imported only when asked
        from mbridge_launch.runs.measured_rows import ledger_rows

        records, reasons = ledger_rows()
        got, skip = cr.rows_of_records(records, "ledger", first_line=1, strict=False)
        rows += got
        own += got
        skipped += skip + [cr.Skipped("ledger", reason) for reason in reasons]
        sources["ledger_runs"] = [r.release for r in got]  # "run:NAME" (runs/measured_rows.py)
    return rows, skipped, sources, own


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.planner import calibration_correction as correction
    from mbridge_launch.planner import calibration_file as cf

    rows, skipped, sources, own = _gather(args)
    usable = [r for r in rows if r.tokens_per_sec]
    for s in skipped:
        # warnings: the fit goes on without them (no usable row at all is the error below)
        print(t("warning.prefix", message=t_line("calibrate.skipped", where=s.where, reason=s.reason)), file=sys.stderr)
    if not usable:
        raise UserError("calibrate.no_rows", skipped=len(skipped))
    start, source = cf.resolve(None)
    for given, option in ((args.iters, "--iters"), (args.time_limit, "--time-limit")):
        if given is not None:  # the old search's options: accepted so that scripts keep running
            print(t("warning.prefix", message=t("calibrate.option_ignored", option=option)), file=sys.stderr)
    if args.format != "json":
        shown = source.path or t("planner.calibration.shipped")  # a path is escaped by t_line
        print(t_line("calibrate.fitting", rows=len(usable), source=shown), flush=True)  # the fit takes a while
    result = correction.calibrate(rows, start)
    # the user's measured rows travel with the constants: plan and estimate use them as evidence
    # of the user's cluster (planner.measured), the newest last: a file keeps the last ones
    given = [r for r in own if r.tokens_per_sec and r.valid]
    measured = tuple(given[-cf.MAX_MEASURED_ROWS:])
    meta = cf.Meta(rows=result.after.rows, sources=sources, median_error=result.after.median,
                   within_15=result.after.within_15, measured=measured)
    target = args.output or cf.state_path()
    path = cf.save(target, result.cal, meta)
    pressed = correction.at_bounds(result.cal)
    if args.format == "json":
        print_json({
            "written": str(path), "rows": result.after.rows, "skipped": [{"where": s.where, "reason": s.reason}
                                                                         for s in skipped],
            "sources": sources, "started_from": source.as_json(), "kept_start": result.kept_start,
            "before": {"median_error": result.before.median, "within_15": result.before.within_15,
                       "objective": result.objective_before},
            "after": {"median_error": result.after.median, "within_15": result.after.within_15,
                      "objective": result.objective_after},
            "at_bounds": pressed, "seconds": round(result.seconds, 1), "method": "closed-form",
            "moved": list(result.moved),
            "measured_rows": {"kept": len(measured), "given": len(given)},
        })
        return 0
    lines = [
        t("calibrate.before", median=result.before.median, within=result.before.within_15, rows=result.before.rows),
        t("calibrate.after", median=result.after.median, within=result.after.within_15, rows=result.after.rows),
    ]
    if result.kept_start:
        lines.append(t("calibrate.kept_start"))
    if pressed:
        lines.append(t("calibrate.at_bounds", constants=", ".join(pressed)))
    if given:
        lines.append(t("calibrate.measured_kept", kept=len(measured), given=len(given), limit=cf.MAX_MEASURED_ROWS))
    lines.append(t_line("calibrate.written", path=str(path), seconds=result.seconds))
    print("\n".join(lines))
    return 0
