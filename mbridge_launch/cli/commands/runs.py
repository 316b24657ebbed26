"""`mbridge-launch runs`: the runs recorded in the ledger (active ones refreshed from Slurm)."""

from __future__ import annotations

import argparse

from mbridge_launch.base.i18n import t
from mbridge_launch.cli.main import add_common

HELP = "help.runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument

    parser.add_argument("--active", action="store_true", help=t("help.runs.active"))
    parser.add_argument("--name", help=t("help.runs.name"))
    parser.add_argument("--limit", type=int, default=50, help=t("help.runs.limit"))
    parser.add_argument("--no-refresh", action="store_true", help=t("help.runs.no_refresh"))
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.output import print_json
    from mbridge_launch.runs import ledger as L
    from mbridge_launch.runs.operations import fmt_time, open_ledger, refresh

    with open_ledger(args.ledger, reconcile=not args.no_refresh) as ledger:
        runs = ledger.list_runs(limit=args.limit or None, name=args.name,
                                states=L.ACTIVE_STATES if args.active else None)
        if not args.no_refresh and any(r.active for r in runs):
            runs = refresh(ledger, runs, warn=True)
        if args.active:
            runs = [r for r in runs if r.active]
        if args.format == "json":
            print_json([r.summary() for r in runs])
            return 0
        if not runs:
            print(t("ledger.runs.none", path=ledger.path))
            return 0
        print(t("ledger.runs.header"))
        for r in runs:
            print(f"{r.id:>4}  {r.name}  {r.state}  {r.executor}  {','.join(r.job_ids) or '-'}  "
                  f"{fmt_time(r.submitted_at or r.created_at)}  {r.save_dir or '-'}")
    return 0
