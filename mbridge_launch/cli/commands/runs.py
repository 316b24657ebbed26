"""`mbridge-launch runs`: the runs recorded in the ledger (active ones refreshed from Slurm), and
the repairs for what reconciliation cannot settle: `runs adopt RUN JOBID`, `runs mark-lost RUN`,
`runs forget RUN` (runs/repair.py), each confirmed like cancel and recorded with its reason; and
`runs recover`, which rebuilds a damaged ledger from its readable rows and Slurm's jobs
(runs/recover.py), confirmed the same way."""

from __future__ import annotations

import argparse

from mbridge_launch.base.i18n import t
from mbridge_launch.cli.main import add_common

HELP = "help.runs"
REPAIRS = ("adopt", "mark-lost", "forget")
RECOVER = "recover"
MAX_LIMIT = 10**9  # 0 means all; beyond 2**63 SQLite overflowed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument, int_arg, run_name_arg

    parser.add_argument("--active", action="store_true", help=t("help.runs.active"))
    parser.add_argument("--all", action="store_true", help=t("help.runs.all"))
    parser.add_argument("--name", type=run_name_arg, help=t("help.runs.name"))
    parser.add_argument("--limit", type=int_arg(0, MAX_LIMIT), default=50, help=t("help.runs.limit"))
    parser.add_argument("--no-refresh", action="store_true", help=t("help.runs.no_refresh"))
    add_ledger_argument(parser)
    add_common(parser)
    sub = parser.add_subparsers(dest="repair", metavar="REPAIR", parser_class=type(parser))
    for action in REPAIRS:
        _add_repair(sub.add_parser(action, help=t(f"help.runs.{action.replace('-', '_')}"),
                                   description=t(f"help.runs.{action.replace('-', '_')}")), action)
    _add_recover(sub.add_parser(RECOVER, help=t("help.runs.recover"), description=t("help.runs.recover")))


def _add_repair(parser: argparse.ArgumentParser, action: str) -> None:
    from mbridge_launch.cli.options import path_arg, run_arg
    from mbridge_launch.runs.ledger import default_ledger_path

    parser.add_argument("run", type=run_arg, metavar="RUN", help=t("help.common.run"))
    if action == "adopt":
        parser.add_argument("job", metavar="JOBID", help=t("help.runs.adopt.job"))
    parser.add_argument("--reason", required=True, help=t("help.runs.repair.reason"))
    parser.add_argument("--yes", action="store_true", help=t("help.runs.repair.yes"))
    # SUPPRESS: given after the action they apply, given before it (`runs --ledger X adopt ...`)
    # the parent's value is kept instead of being reset to a default here
    parser.add_argument("--ledger", metavar="PATH", default=argparse.SUPPRESS, type=path_arg,
                        help=t("ledger.arg.ledger", path=str(default_ledger_path())))
    parser.add_argument("--lang", choices=("en", "zh"), default=argparse.SUPPRESS, help=t("help.common.lang"))
    parser.add_argument("--format", choices=("text", "json"), default=argparse.SUPPRESS, help=t("help.common.format"))


def _add_recover(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli.options import path_arg
    from mbridge_launch.runs.ledger import default_ledger_path

    parser.add_argument("--reason", required=True, help=t("help.runs.repair.reason"))
    parser.add_argument("--yes", action="store_true", help=t("help.runs.repair.yes"))
    parser.add_argument("--no-slurm", action="store_true", help=t("help.runs.recover.no_slurm"))
    parser.add_argument("--ledger", metavar="PATH", default=argparse.SUPPRESS, type=path_arg,
                        help=t("ledger.arg.ledger", path=str(default_ledger_path())))
    parser.add_argument("--lang", choices=("en", "zh"), default=argparse.SUPPRESS, help=t("help.common.lang"))
    parser.add_argument("--format", choices=("text", "json"), default=argparse.SUPPRESS, help=t("help.common.format"))


def run(args: argparse.Namespace) -> int:
    if getattr(args, "repair", None) == RECOVER:
        return _recover(args)
    if getattr(args, "repair", None):
        return _repair(args)
    from mbridge_launch.base.escape import one_line, t_line
    from mbridge_launch.base.output import print_json
    from mbridge_launch.runs import ledger as L
    from mbridge_launch.runs.operations import fmt_time, open_ledger, refresh

    with open_ledger(args.ledger, reconcile=not args.no_refresh) as ledger:
        runs = ledger.list_runs(limit=args.limit or None, name=args.name,
                                states=L.ACTIVE_STATES if args.active else None)
        if not args.all:
            runs = [r for r in runs if r.state != L.FORGOTTEN]  # `runs forget`: hidden, kept
        if not args.no_refresh and any(r.active for r in runs):
            runs = refresh(ledger, runs, warn=True)
        if args.active:
            runs = [r for r in runs if r.active]
        if args.format == "json":
            print_json([r.summary() for r in runs])
            return 0
        if not runs:
            print(t_line("ledger.runs.none", path=ledger.path))
            return 0
        print(t("ledger.runs.header"))
        for r in runs:  # one line per run, whatever its fields hold (a ledger others can write)
            cells = (r.name, r.state, r.executor, ",".join(r.job_ids) or "-", fmt_time(r.submitted_at or r.created_at),
                     r.save_dir or "-")
            print(f"{r.id:>4}  " + "  ".join(one_line(cell) for cell in cells))
    return 0


def _repair(args: argparse.Namespace) -> int:
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.output import print_json
    from mbridge_launch.runs import repair
    from mbridge_launch.runs.operations import confirm, open_ledger, slurm_query

    reason = (args.reason or "").strip()
    if not reason:
        raise UserError("repair.reason_empty", action=args.repair)
    with open_ledger(args.ledger) as ledger:
        ledger.require_writable()  # before the prompt: a repair that cannot be recorded is not asked for
        record = ledger.get_run(args.run)
        method = confirm(record.name, yes=args.yes, action_key=f"repair.action.{args.repair.replace('-', '_')}")
        if args.repair == "adopt":
            record = repair.adopt(ledger, record, args.job, slurm_query(), reason=reason, method=method)
        elif args.repair == "mark-lost":
            record = repair.mark_lost(ledger, record, slurm_query(), reason=reason, method=method)
        else:
            record = repair.forget(ledger, record, reason=reason, method=method)
    if args.format == "json":
        print_json(record.summary())
    else:
        print(t_line(f"repair.done.{args.repair.replace('-', '_')}", run=record.name, id=record.id, state=record.state,
                     jobs=", ".join(record.job_ids) or "-"))
    return 0


def _recover(args: argparse.Namespace) -> int:
    """Rebuild the ledger: it is not opened as a ledger (a damaged one would be refused), only read."""
    import os
    import sys
    from pathlib import Path

    from mbridge_launch.base.errors import CheckFailed, UserError
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.output import print_json
    from mbridge_launch.runs import integrity
    from mbridge_launch.runs.ledger import default_ledger_path
    from mbridge_launch.runs.operations import confirm, slurm_query
    from mbridge_launch.runs.recover import recover

    reason = (args.reason or "").strip()
    if not reason:
        raise UserError("repair.reason_empty", action=RECOVER)
    path = Path(args.ledger).expanduser() if args.ledger else default_ledger_path()
    if not os.path.isfile(path):
        raise UserError("recover.no_ledger", path=str(path))
    if not integrity.writable(path):
        raise CheckFailed("ledger.read_only", path=str(path))
    method = confirm(path.name, yes=args.yes, action_key="repair.action.recover")
    report = recover(path, None if args.no_slurm else slurm_query())
    _record_recovery(path, report, reason, method)
    if args.format == "json":
        print_json({"ledger": str(path), "backup": str(report.backup), "rows_recovered": report.recovered,
                    "rows_lost": report.lost, "values_cleared": report.cleared, "runs_from_slurm": report.from_slurm,
                    "slurm_asked": report.slurm_asked, "tables_lost": report.tables_lost})
        return 0
    print(t_line("recover.done", path=path, count=report.recovered, lost=report.lost, cleared=report.cleared,
                 backup=report.backup))
    if args.no_slurm:
        print(t_line("recover.slurm_skipped"))
    elif report.slurm_asked:
        print(t_line("recover.from_slurm", count=report.from_slurm))
    else:
        print(t_line("warning.prefix", message=t("recover.slurm_unavailable", path=path)), file=sys.stderr)
    return 0


def _record_recovery(path, report, reason: str, method: str) -> None:
    """The recovery, in the new ledger's confirmations (who, when, how confirmed, what it found)."""
    from mbridge_launch.runs.ledger import Ledger

    with Ledger.open(path) as ledger:
        ledger.record_confirmation(None, RECOVER, method, {
            "reason": reason, "backup": str(report.backup), "rows_recovered": report.recovered,
            "rows_lost": report.lost, "values_cleared": report.cleared, "runs_from_slurm": report.from_slurm})
