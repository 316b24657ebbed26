"""`mbridge-launch submit PLAN --executor sbatch|nemo-run|submitit`: through the gate.

--dry-run runs preflight as a real submit would (with the Slurm queries unless
--no-cluster-checks), prints its verdict, then the exact script or experiment, and submits nothing
and writes no ledger row; a plan that a real submit would refuse exits 1 (the script is still
printed, to be read). Otherwise preflight runs, the plan card is shown, and the job is submitted
only after confirmation (typed, or --yes).

Two directories: `--script-dir` is where the rendered script (NeMo-Run home, submitit folder)
goes and the scheduler is called; the job's start directory is the plan's launch.workdir
(`recommend --workdir`). `submit --workdir` once meant the first while `recommend --workdir`
meant the second; it is refused with a pointer to both rather than silently meaning either: the
start directory belongs in the Plan, whose hash the ledger records for the submission.
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
    parser.add_argument("--verbose", action="store_true", help=t("help.preflight.verbose"))
    parser.add_argument("--script-dir", metavar="DIR", help=t("help.submit.script_dir"))
    parser.add_argument("--workdir", metavar="DIR", help=t("help.submit.workdir"))  # refused: see run()
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


def _verdict(report, force: bool) -> tuple[str, bool]:  # noqa: ANN001
    """(the verdict line, whether a real submit would go on past preflight)."""
    errors = len(report.errors)
    if not errors:
        return t("submit.dry_run.would_pass", count=len(report.warnings)), True
    from mbridge_launch.gate.submit import policy_errors

    if force and not policy_errors(report):  # a policy limit is not the submitter's to override
        return t("submit.dry_run.would_force", count=errors, codes=", ".join(report.codes("error"))), True
    return t("submit.dry_run.would_refuse", count=errors, codes=", ".join(report.codes("error"))), False


def _dry_run(plan, args, plan_text: str) -> int:  # noqa: ANN001
    """Preflight as the gate would run it (same submit directory, same cluster checks), its
    verdict, then the rendered script; no ledger, no submission."""
    import sys
    from pathlib import Path

    from mbridge_launch.base.output import print_json
    from mbridge_launch.base.quoting import sh_join
    from mbridge_launch.executors.launch import render_plan
    from mbridge_launch.preflight.render import render_text
    from mbridge_launch.preflight.runner import run_preflight

    script_dir = Path(args.script_dir or Path.cwd()).resolve()
    from mbridge_launch.runs.ownership import preflight_callback
    from mbridge_launch.runs.usage import usage_callback

    # whether another run writes the checkpoint directory, as the gate would refuse it
    report = run_preflight(plan, cluster=not args.no_cluster_checks, plan_text=plan_text, submit_dir=script_dir,
                           save_dir_ownership=preflight_callback(args.ledger, ask_slurm=not args.no_cluster_checks),
                           gpu_hours_used=usage_callback(args.ledger))
    verdict, would_submit = _verdict(report, bool(args.force and (args.reason or "").strip()))
    result = render_plan(plan, args.executor, script_dir)  # what the gate shows and schedules
    code = 0 if would_submit else 1
    if args.format == "json":
        print_json({"executor": result.executor, "submit_command": result.submit_command,
                    "text": result.text, "files": result.files, "plan_hash": plan.plan_hash(),
                    "preflight": report.to_json(), "would_submit": would_submit, "verdict": verdict})
        return code
    print(render_text(report, plan.name, verbose=args.verbose), file=sys.stderr)
    print(verdict, file=sys.stderr)
    sys.stderr.flush()
    print(t("executors.submit.dry_run_header", executor=result.executor, command=sh_join(result.submit_command)))
    print(t("submit.dry_run.verdict_comment", verdict=verdict))  # the script's reader sees it too
    print(result.text, end="" if result.text.endswith("\n") else "\n")
    return code


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.output import print_json
    from mbridge_launch.executors import load_executor
    from mbridge_launch.gate.submit import GateOptions, submit_gated
    from mbridge_launch.plan.model import load_plan, read_plan_text

    if args.workdir is not None:
        raise UserError("submit.workdir_removed", value=args.workdir)
    load_executor(args.executor)  # a missing extra (nemo-run, submitit) is one line now, not after preflight
    plan = load_plan(args.plan)
    plan_text = read_plan_text(args.plan)
    if args.dry_run:
        return _dry_run(plan, args, plan_text)
    options = GateOptions(executor=args.executor, yes=args.yes, force=args.force, reason=args.reason,
                          resubmit=args.resubmit, script_dir=Path(args.script_dir) if args.script_dir else None,
                          ledger_path=args.ledger, cluster_checks=not args.no_cluster_checks,
                          threshold_gpu_hours=args.confirm_threshold, watcher=not args.no_watcher)
    result = submit_gated(plan, options, plan_path=args.plan, plan_text=plan_text)
    if args.format == "json":
        print_json({"run_id": result.run_id, "name": plan.name, "executor": args.executor, "job_ids": result.job_ids,
                    "plan_hash": plan.plan_hash(), "script": result.script_path, "confirmation": result.confirmation,
                    "watcher_job_id": result.watcher_job_id})
        return 0
    print(t("gate.submitted", name=plan.name, id=result.run_id, jobs=", ".join(result.job_ids), count=len(result.job_ids),
            executor=args.executor, script=result.script_path))
    return 0
