"""`mbridge-launch preflight PLAN`: prove a Plan can run before a GPU-hour is spent.

Exit 0: every check passed (warnings allowed); 1: an error was found; 2: the Plan itself is
invalid (unparseable, unknown or mistyped fields).
"""

from __future__ import annotations

import argparse
import sys

from mbridge_launch.cli.main import add_common

HELP = "help.preflight"

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    parser.add_argument("plan", metavar="PLAN", help=t("help.preflight.plan"))
    # --on-nodes submits a job: it cannot go with --no-cluster (which would still have called sbatch)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--no-cluster", action="store_true", help=t("help.preflight.no_cluster"))
    where.add_argument("--on-nodes", action="store_true", help=t("help.preflight.on_nodes"))
    from mbridge_launch.cli.options import add_ledger_argument

    parser.add_argument("--verbose", action="store_true", help=t("help.preflight.verbose"))
    add_ledger_argument(parser)  # whose runs own the checkpoint directory
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.output import print_json
    from mbridge_launch.plan.model import load_plan, read_plan_text
    from mbridge_launch.preflight.render import render_text
    from mbridge_launch.preflight.runner import default_progress_stream, run_preflight

    plan = load_plan(args.plan)  # UserError (exit 2) for an unreadable or invalid Plan
    plan_text = read_plan_text(args.plan)
    from mbridge_launch.runs.ownership import preflight_callback
    from mbridge_launch.runs.usage import usage_callback

    report = run_preflight(
        plan, cluster=not args.no_cluster, on_nodes=args.on_nodes,
        plan_text=plan_text, progress_stream=default_progress_stream(),
        save_dir_ownership=preflight_callback(args.ledger, ask_slurm=not args.no_cluster),
        gpu_hours_used=usage_callback(args.ledger),  # the policy's per-day GPU-hours
    )
    if args.format == "json":
        print_json(report.to_json())
    else:
        title = t_line("preflight.title", name=plan.name, hash=plan.plan_hash(), path=args.plan)
        sys.stdout.write(render_text(report, title, verbose=args.verbose) + "\n")
    return report.exit_code
