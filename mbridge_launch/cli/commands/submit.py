"""`mbridge-launch submit PLAN --executor sbatch|nemo-run|submitit`: through the gate.

--dry-run prints the exact script or experiment and submits nothing. Otherwise preflight runs,
the plan card is shown, and the job is submitted only after confirmation (typed, or --yes).
"""

from __future__ import annotations

import argparse

from mbridge_launch.base.i18n import t

HELP = "help.submit"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import add_ledger_argument
    from mbridge_launch.executors import ExecutorNames

    executors = ExecutorNames()  # the registry's names; the metavar keeps building the parser free of metadata reads
    parser.add_argument("plan", help=t("help.submit.plan"))
    parser.add_argument("--executor", choices=executors, metavar=executors.metavar(), default="sbatch",
                        help=t("help.submit.executor"))
    parser.add_argument("--dry-run", action="store_true", help=t("help.submit.dry_run"))
    parser.add_argument("--workdir", help=t("help.submit.workdir"))
    parser.add_argument("--yes", action="store_true", help=t("help.submit.yes"))
    parser.add_argument("--force", action="store_true", help=t("help.submit.force"))
    parser.add_argument("--reason", help=t("help.submit.reason"))
    parser.add_argument("--resubmit", action="store_true", help=t("help.submit.resubmit"))
    parser.add_argument("--no-watcher", action="store_true",
                        help=t("help.submit.no_watcher"))
    parser.add_argument("--no-cluster-checks", action="store_true", help=t("help.submit.no_cluster_checks"))
    parser.add_argument("--confirm-threshold", type=float, metavar="GPU_HOURS",
                        help=t("help.submit.confirm_threshold"))
    add_ledger_argument(parser)
    add_common(parser)


def _print_dry_run(plan, result, fmt: str) -> int:  # noqa: ANN001
    from mbridge_launch.base.output import print_json
    from mbridge_launch.base.quoting import sh_join

    if fmt == "json":
        print_json({"executor": result.executor, "submit_command": result.submit_command,
                    "text": result.text, "files": result.files, "plan_hash": plan.plan_hash()})
        return 0
    print(t("executors.submit.dry_run_header", executor=result.executor, command=sh_join(result.submit_command)))
    print(result.text, end="" if result.text.endswith("\n") else "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mbridge_launch.base.output import print_json
    from mbridge_launch.executors import load_executor
    from mbridge_launch.executors.launch import submit_plan
    from mbridge_launch.gate.submit import GateOptions, submit_gated
    from mbridge_launch.plan.model import load_plan

    load_executor(args.executor)  # a missing extra (nemo-run, submitit) is one line now, not after preflight
    plan = load_plan(args.plan)
    if args.dry_run:
        return _print_dry_run(plan, submit_plan(plan, args.executor, args.workdir, dry_run=True), args.format)
    options = GateOptions(executor=args.executor, yes=args.yes, force=args.force, reason=args.reason,
                          resubmit=args.resubmit, workdir=Path(args.workdir) if args.workdir else None,
                          ledger_path=args.ledger, cluster_checks=not args.no_cluster_checks,
                          threshold_gpu_hours=args.confirm_threshold, watcher=not args.no_watcher)
    result = submit_gated(plan, options, plan_path=args.plan, plan_text=Path(args.plan).read_text(encoding="utf-8"))
    if args.format == "json":
        print_json({"run_id": result.run_id, "name": plan.name, "executor": args.executor, "job_ids": result.job_ids,
                    "plan_hash": plan.plan_hash(), "script": result.script_path, "confirmation": result.confirmation,
                    "watcher_job_id": result.watcher_job_id})
        return 0
    print(t("gate.submitted", name=plan.name, id=result.run_id, jobs=", ".join(result.job_ids), count=len(result.job_ids),
            executor=args.executor, script=result.script_path))
    return 0
