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
    """Only what happened is recorded: Slurm is asked first (bounded; a silent controller refuses
    the cancel before anything is written), the run's jobs are cancelled, and only then is the
    cancel request recorded (read by the watcher job, which is cancelled last)."""
    from mbridge_launch.base.errors import CheckFailed, UserError
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.gate.submit import confirm_cancel
    from mbridge_launch.runs.operations import cancel_and_wait, executor_cancel, open_ledger, slurm_query
    from mbridge_launch.runs.reconcile import SlurmUnavailable, refresh_runs

    with open_ledger(args.ledger) as ledger:  # reconciles first: a lost job id is found by its token
        ledger.require_writable()  # a cancel that could not be recorded is not sent (read-only ledger)
        record = ledger.get_run(args.run)
        try:
            record = refresh_runs(ledger, slurm_query(), [record], raise_unavailable=True)[0]
        except SlurmUnavailable as exc:
            raise CheckFailed("gate.cancel_not_asked", name=record.name, id=record.id,
                              reason=getattr(exc, "reason", "") or str(exc)) from None
        if not record.job_ids and (record.active or record.may_have_job):
            # a run that may have a job nobody could find: "cancelled" would be a lie
            raise CheckFailed("gate.cancel_no_job", name=record.name, id=record.id, state=record.state)
        if not record.active:
            print(t_line("gate.not_active", name=record.name, id=record.id, state=record.state))
            return 0
        method = confirm_cancel(record, yes=args.yes)
        ledger.record_confirmation(record.id, "cancel", method, {"job_ids": record.job_ids})
        try:
            if args.wait:
                record = cancel_and_wait(ledger, record)  # records the `cancel` event once scancel succeeded
            else:
                executor_cancel(record)
                ledger.add_event(record.id, "cancel", {"job_ids": record.job_ids})
        except CheckFailed:
            raise
        except UserError as exc:  # scancel failed or got no answer: nothing was cancelled
            raise CheckFailed("gate.cancel_failed", name=record.name, id=record.id, reason=exc.render()) from None
        # read by the watcher job (watch --in-job) when its SIGTERM comes: a user's cancel, not its time limit
        ledger.add_event(record.id, "cancel_requested", {"watcher_job": record.watcher_job_id})
        if record.watcher_job_id:
            _cancel_watcher(ledger, record)
    print(t_line("gate.cancelled", name=record.name, id=record.id, jobs=", ".join(record.job_ids) or "-", count=len(record.job_ids)))
    return 0


def _cancel_watcher(ledger, record) -> None:
    """The auto-rollback watcher job: cancelled after the run's jobs. If that fails it is only
    said: the watcher sees the run ended and exits by itself."""
    import sys

    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.i18n import t
    from mbridge_launch.slurm.commands import run_slurm

    try:
        proc = run_slurm(["scancel", record.watcher_job_id])
        reason = None if proc.ok else proc.reason
    except UserError as exc:
        reason = exc.render()
    if reason is None:
        ledger.add_event(record.id, "cancel", {"job_ids": [record.watcher_job_id], "watcher": True})
    else:
        print(t("warning.prefix", message=t("gate.cancel_watcher_failed", job=record.watcher_job_id, name=record.name,
                                            reason=reason)), file=sys.stderr)
