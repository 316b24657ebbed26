"""`mbridge-launch cancel RUN`: cancel a recorded run's jobs, gated like submit."""

from __future__ import annotations

import argparse

HELP = "help.cancel"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import add_ledger_argument, run_arg

    parser.add_argument("run", type=run_arg, metavar="RUN", help=t("help.common.run"))
    parser.add_argument("--yes", action="store_true", help=t("help.cancel.yes"))
    parser.add_argument("--wait", action="store_true", help=t("help.cancel.wait"))
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.gate.submit import confirm_cancel
    from mbridge_launch.runs.operations import cancel_and_wait, executor_cancel, open_ledger, refresh

    with open_ledger(args.ledger) as ledger:  # reconciles first: a lost job id is found by its token
        ledger.require_writable()  # a cancel that could not be recorded is not sent
        record = refresh(ledger, [ledger.get_run(args.run)])[0]
        if not record.job_ids and (record.active or record.may_have_job):
            # a run that may have a job nobody could find: "cancelled" would be a lie
            raise CheckFailed("gate.cancel_no_job", name=record.name, id=record.id, state=record.state)
        if not record.active:
            print(t_line("gate.not_active", name=record.name, id=record.id, state=record.state))
            return 0
        method = confirm_cancel(record, yes=args.yes)
        ledger.record_confirmation(record.id, "cancel", method, {"job_ids": record.job_ids})
        # the auto-rollback watcher job first: a cancelled run leaves it nothing to do
        ledger.add_event(record.id, "cancel_requested", {"watcher_job": record.watcher_job_id})  # read by watch --in-job
        if record.watcher_job_id:
            from mbridge_launch.slurm.commands import run_slurm

            run_slurm(["scancel", record.watcher_job_id])
            ledger.add_event(record.id, "cancel", {"job_ids": [record.watcher_job_id], "watcher": True})
        if args.wait:
            record = cancel_and_wait(ledger, record)
        else:
            executor_cancel(record)
            ledger.add_event(record.id, "cancel", {"job_ids": record.job_ids})
    print(t_line("gate.cancelled", name=record.name, id=record.id, jobs=", ".join(record.job_ids) or "-", count=len(record.job_ids)))
    return 0
