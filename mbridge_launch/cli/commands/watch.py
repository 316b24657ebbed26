"""`mbridge-launch watch RUN`: follow the run's logs and apply plan.auto_rollback.

Resubmissions go through the gate (`gate.auto_resubmit`: preflight, plan card, ledger, the
watcher's 'auto-rollback' confirmation). Exit code 0 when the (last) run completed; 1 when it
ended otherwise, when a trigger was only reported, when the watcher stopped (rollback limit, no
checkpoint to go back to) or when the gate refused the resubmission.

--in-job: the watcher job the gate starts for plans with auto_rollback (gate/watcher_job.py): handles
one run (after a resubmission the new run's own watcher job takes over), leaves a run cancelled by
someone else alone, waits a moment for the watch lock, and on SIGTERM submits its successor only
when that SIGTERM is its time limit (or a preemption) and the run is still active: never after
`cancel RUN` (which records a cancel request first) or a scancel. Exit 0 when it did its job (the
run ended, or it handed over after a resubmission).
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys

from mbridge_launch.base.escape import t_line  # run names and Slurm's states in one line each
from mbridge_launch.cli.main import add_common

LOCK_WAIT_S = 120.0  # a watcher job may start while the one that resubmitted its run is still exiting
# How Slurm shows a job it ends itself (its time limit, a preemption), as opposed to a scancel.
SUCCESSOR_STATES = frozenset({"TIMEOUT", "PREEMPTED"})
SUCCESSOR_REASONS = frozenset({"TimeLimit", "Preempted"})
# What `cancel RUN` records before it cancels the watcher job (cli/commands/cancel.py).
CANCEL_REQUEST_EVENT = "cancel_requested"
HELP = "help.watch"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument, int_arg, run_arg

    parser.add_argument("run", type=run_arg, metavar="RUN", help=t("help.common.run"))
    parser.add_argument("--act", action="store_true",
                        help=t("help.watch.act"))
    parser.add_argument("--no-resubmit", action="store_true", help=t("help.watch.no_resubmit"))
    parser.add_argument("--max-rollbacks", type=int_arg(0, 1000), default=None,
                        help=t("help.watch.max_rollbacks"))
    parser.add_argument("--poll", type=float, default=2.0, help=t("help.watch.poll"))
    parser.add_argument("--in-job", action="store_true",
                        help=t("help.watch.in_job"))
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.i18n import current_lang
    from mbridge_launch.base.output import print_json
    from mbridge_launch.cli.commands.logs import poll_seconds
    from mbridge_launch.gate.retry import auto_retry
    from mbridge_launch.gate.submit import auto_resubmit
    from mbridge_launch.runs.operations import open_ledger
    from mbridge_launch.runs.run_diagnosis import diagnose_run
    from mbridge_launch.watch.watcher import Terminated, Watcher

    poll_seconds(args.poll)
    with open_ledger(args.ledger) as ledger:
        record = ledger.get_run(args.run)
        act = args.act or record.plan().auto_rollback.enabled
        if not act:
            print(t_line("warning.prefix", message=t_line("watch.not_enabled", run=record.name)), file=sys.stderr)
        resubmit = None if args.no_resubmit else functools.partial(auto_resubmit, start_watcher=args.in_job)
        retry = None if args.no_resubmit else functools.partial(auto_retry, start_watcher=args.in_job)
        watcher = Watcher(ledger, resubmit=resubmit, retry=retry, diagnose=diagnose_run, act=act,
                          max_rollbacks=args.max_rollbacks, poll_s=args.poll,
                          refresh_s=max(args.poll * (6 if args.in_job else 1), 2.0), follow_resubmissions=not args.in_job,
                          act_on_cancelled=not args.in_job, lock_wait_s=LOCK_WAIT_S if args.in_job else 0.0)
        if not args.in_job:
            result = watcher.watch(record)
        else:
            previous = signal.signal(signal.SIGTERM, watcher.on_sigterm)
            try:
                result = watcher.watch(record)
            except Terminated:
                return _hand_over(ledger, record)
            finally:
                signal.signal(signal.SIGTERM, previous)
    if args.format == "json":
        print_json({"outcome": result.outcome, "run": result.run.summary(),
                    "trigger": result.trigger.as_dict() if result.trigger else None, "rollbacks": result.rollbacks,
                    "diagnosis": result.diagnosis.as_json(current_lang()) if result.diagnosis else None})
    elif result.outcome == "finished":
        print(t_line("watch.finished", run=result.run.name, id=result.run.id, state=result.run.state))
    elif result.outcome == "rolled_back":
        print(t_line("watch.rolled_back_no_resubmit", run=result.run.name))
    elif result.outcome == "resubmitted":
        print(t_line("watch.resubmitted_handover", run=result.run.name, id=result.run.id))
    elif result.outcome == "cancelled":
        print(t_line("watch.handled_cancelled", run=result.run.name, id=result.run.id))
    elif result.outcome == "not_retried":
        print(t_line("watch.not_retried_outcome", run=result.run.name, id=result.run.id,
                     cause=result.diagnosis.cause if result.diagnosis else "?"))
    if args.in_job:  # the watcher job did its job unless it had to stop short
        return 0 if result.outcome in ("finished", "resubmitted", "cancelled", "not_retried") else 1
    return 0 if result.outcome == "finished" and result.run.state == "completed" else 1


def _hand_over(ledger, record) -> int:
    """SIGTERM: only this job's time limit (or a preemption) while the run is still active makes
    a successor, submitted to start once this job has ended (so the two never hold the watch lock
    together). A `cancel RUN` (recorded in the ledger before it cancels this job), a scancel by
    hand, or a run that has ended: nothing follows."""
    import os

    from mbridge_launch.gate.watcher_job import submit_watcher_job
    from mbridge_launch.runs.operations import refresh

    own_job = os.environ.get("SLURM_JOB_ID")
    if cancel_requested(ledger, record.id):
        print(t_line("watch.terminated_cancel", run=record.name), file=sys.stderr)
        return 0
    own = _own_job(own_job)
    if own is not None and not _ended_by_slurm(own):
        state = f"{own.get('JobState', '?')}, Reason={own.get('Reason', '?')}"
        print(t_line("watch.terminated_not_limit", run=record.name, job=own_job, state=state), file=sys.stderr)
        return 0
    run = refresh(ledger, [ledger.get_run(record.id)])[0]
    if not run.active or not own_job or cancel_requested(ledger, record.id):
        print(t_line("watch.terminated_idle", run=run.name, state=run.state), file=sys.stderr)
        return 0
    successor = submit_watcher_job(ledger, run, after=own_job, kind="afterany")
    print(t_line("watch.terminated", run=run.name, job=successor or "-"), file=sys.stderr)
    return 0 if successor else 1


def cancel_requested(ledger, run_id: int) -> bool:
    return any(e["kind"] == CANCEL_REQUEST_EVENT for e in ledger.events(run_id))


def _own_job(job_id: str | None) -> dict[str, str] | None:
    """This watcher job as `scontrol show job` has it while it is being signalled; None when
    Slurm cannot say."""
    from mbridge_launch.preflight.slurm import parse_oneliner
    from mbridge_launch.slurm.commands import SlurmUnavailable, call

    if not job_id:
        return None
    try:
        result = call(["scontrol", "show", "job", "-o", job_id], timeout=20)
    except SlurmUnavailable:
        return None
    fields = parse_oneliner(result.stdout.strip()) if result.ok else {}
    return fields or None


def _ended_by_slurm(job: dict[str, str]) -> bool:
    """Its time limit or a preemption, not a scancel. While the SIGTERM is delivered Slurm 22.05
    shows JobState=COMPLETING with Reason=TimeLimit at the limit and Reason=None after a scancel
    (measured on the local cluster); later versions may show TIMEOUT / PREEMPTED."""
    return job.get("JobState") in SUCCESSOR_STATES or job.get("Reason") in SUCCESSOR_REASONS
