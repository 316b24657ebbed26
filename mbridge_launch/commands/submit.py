"""`mbridge-launch submit PLAN --executor sbatch|nemo-run|submitit [--dry-run] [--workdir DIR]`."""

from __future__ import annotations

import argparse

from mbridge_launch.i18n import t

HELP = "render a plan for an executor and submit it to Slurm (--dry-run prints the exact script and submits nothing)"
EXECUTORS = ("sbatch", "nemo-run", "submitit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.cli import add_common

    parser.add_argument("plan", help="plan file (YAML) written by `mbridge-launch plan`")
    parser.add_argument("--executor", choices=EXECUTORS, default="sbatch", help="how to submit (default: sbatch)")
    parser.add_argument("--dry-run", action="store_true", help="print the exact script or experiment; submit nothing")
    parser.add_argument("--workdir", help="directory for the rendered script / NeMo-Run home (default: current directory)")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.executors.base import Rendered
    from mbridge_launch.launch import submit_plan
    from mbridge_launch.output import print_json
    from mbridge_launch.plan import load_plan
    from mbridge_launch.quoting import sh_join

    plan = load_plan(args.plan)
    result = submit_plan(plan, args.executor, args.workdir, dry_run=args.dry_run)
    if isinstance(result, Rendered):
        if args.format == "json":
            print_json({"executor": result.executor, "submit_command": result.submit_command,
                        "text": result.text, "files": result.files, "plan_hash": plan.plan_hash()})
            return 0
        print(t("executors.submit.dry_run_header", executor=result.executor,
                command=sh_join(result.submit_command)))
        print(result.text, end="" if result.text.endswith("\n") else "\n")
        return 0
    if args.format == "json":
        print_json({"executor": result.executor, "job_ids": result.job_ids, "plan_hash": plan.plan_hash(),
                    "script": str(result.script_path) if result.script_path else None,
                    "logs": [str(p) for p in result.log_paths]})
        return 0
    print(t("executors.submit.submitted", name=plan.name, executor=result.executor,
            job_ids=", ".join(result.job_ids), script=result.script_path or "-",
            logs=", ".join(str(p) for p in result.log_paths) or "-"))
    return 0
