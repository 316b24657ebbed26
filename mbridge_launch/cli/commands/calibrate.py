"""mbridge-launch calibrate: fit the throughput constants on calibration rows (the shipped
published rows, the user's CSV files in the same columns, the ledger's completed runs) and write
a calibration file that `plan` and `estimate` then use (planner/calibration_file.py).

The fit is benchmarks/fit_constants.py's procedure (planner/fitting.py: regression with physical
priors plus the ranking term, every constant inside throughput.BOUNDS) started from the
calibration in use, sized to finish 300 rows within a minute on 2 cores; it keeps the start when
it cannot lower the objective on the rows.
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
    from mbridge_launch.planner import calibration_file as cf
    from mbridge_launch.planner import fitting

    rows, skipped, sources, own = _gather(args)
    usable = [r for r in rows if r.tokens_per_sec]
    for s in skipped:
        # warnings: the fit goes on without them (no usable row at all is the error below)
        print(t("warning.prefix", message=t_line("calibrate.skipped", where=s.where, reason=s.reason)), file=sys.stderr)
    if not usable:
        raise UserError("calibrate.no_rows", skipped=len(skipped))
    start, source = cf.resolve(None)
    kwargs: dict[str, Any] = {}
    if args.iters is not None:
        kwargs.update(iters=args.iters, rank_iters=args.iters)
    if args.time_limit is not None:
        kwargs["time_limit"] = float(args.time_limit) or None  # 0: no limit
    if args.format != "json":
        shown = source.path or t("planner.calibration.shipped")  # a path is escaped by t_line
        print(t_line("calibrate.fitting", rows=len(usable), source=shown), flush=True)  # the fit takes a while
    result = fitting.fit_for_calibrate(rows, start, **kwargs)
    # the user's measured rows travel with the constants: plan and estimate use them as evidence
    # of the user's cluster (planner.measured), the newest last: a file keeps the last ones
    given = [r for r in own if r.tokens_per_sec and r.valid]
    measured = tuple(given[-cf.MAX_MEASURED_ROWS:])
    meta = cf.Meta(rows=result.after.rows, sources=sources, median_error=result.after.median,
                   within_15=result.after.within_15, measured=measured)
    target = args.output or cf.state_path()
    path = cf.save(target, result.cal, meta)
    pressed = fitting.at_bounds(result.cal)
    if args.format == "json":
        print_json({
            "written": str(path), "rows": result.after.rows, "skipped": [{"where": s.where, "reason": s.reason}
                                                                         for s in skipped],
            "sources": sources, "started_from": source.as_json(), "kept_start": result.kept_start,
            "before": {"median_error": result.before.median, "within_15": result.before.within_15,
                       "objective": result.objective_before},
            "after": {"median_error": result.after.median, "within_15": result.after.within_15,
                      "objective": result.objective_after},
            "at_bounds": pressed, "seconds": round(result.seconds, 1),
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
