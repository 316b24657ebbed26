"""`mbridge-launch watch RUN`: follow the run's logs and apply plan.auto_rollback.

Resubmissions go through the gate (`gate.auto_resubmit`: preflight, plan card, ledger, the
watcher's 'auto-rollback' confirmation). Exit code 0 when the (last) run completed; 1 when it
ended otherwise, when a trigger was only reported, when the watcher stopped (rollback limit, no
checkpoint to go back to) or when the gate refused the resubmission.

--in-job: the watcher job the gate starts for plans with auto_rollback (gate/watcher_job.py): handles
one run (after a resubmission the new run's own watcher job takes over), leaves a run cancelled by
someone else alone, waits a moment for the watch lock, and on SIGTERM (its time limit) submits its
successor while the run is still active. Exit 0 when it did its job (the run ended, or it handed
over after a resubmission).
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys

from mbridge_launch.base.i18n import t
from mbridge_launch.cli.main import add_common

LOCK_WAIT_S = 120.0  # a watcher job may start while the one that resubmitted its run is still exiting
HELP = "help.watch"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument

    parser.add_argument("run", metavar="RUN", help=t("help.common.run"))
    parser.add_argument("--act", action="store_true",
                        help=t("help.watch.act"))
    parser.add_argument("--no-resubmit", action="store_true", help=t("help.watch.no_resubmit"))
    parser.add_argument("--max-rollbacks", type=int, default=None,
                        help=t("help.watch.max_rollbacks"))
    parser.add_argument("--poll", type=float, default=2.0, help=t("help.watch.poll"))
    parser.add_argument("--in-job", action="store_true",
                        help=t("help.watch.in_job"))
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.output import print_json
    from mbridge_launch.gate.submit import auto_resubmit
    from mbridge_launch.runs.operations import open_ledger
    from mbridge_launch.watch.watcher import Terminated, Watcher

    with open_ledger(args.ledger) as ledger:
        record = ledger.get_run(args.run)
        act = args.act or record.plan().auto_rollback.enabled
        if not act:
            print(t("warning.prefix", message=t("watch.not_enabled", run=record.name)), file=sys.stderr)
        resubmit = None if args.no_resubmit else functools.partial(auto_resubmit, start_watcher=args.in_job)
        watcher = Watcher(ledger, resubmit=resubmit, act=act, max_rollbacks=args.max_rollbacks, poll_s=args.poll,
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
                    "trigger": result.trigger.as_dict() if result.trigger else None, "rollbacks": result.rollbacks})
    elif result.outcome == "finished":
        print(t("watch.finished", run=result.run.name, id=result.run.id, state=result.run.state))
    elif result.outcome == "rolled_back":
        print(t("watch.rolled_back_no_resubmit", run=result.run.name))
    elif result.outcome == "resubmitted":
        print(t("watch.resubmitted_handover", run=result.run.name, id=result.run.id))
    elif result.outcome == "cancelled":
        print(t("watch.handled_cancelled", run=result.run.name, id=result.run.id))
    if args.in_job:  # the watcher job did its job unless it had to stop short
        return 0 if result.outcome in ("finished", "resubmitted", "cancelled") else 1
    return 0 if result.outcome == "finished" and result.run.state == "completed" else 1


def _hand_over(ledger, record) -> int:
    """SIGTERM (the watcher job's time limit): while the run is still active, submit the next
    watcher job, to start once this one has ended (so the two never hold the watch lock together)."""
    import os

    from mbridge_launch.gate.watcher_job import submit_watcher_job
    from mbridge_launch.runs.operations import refresh

    run = refresh(ledger, [ledger.get_run(record.id)])[0]
    own_job = os.environ.get("SLURM_JOB_ID")
    if not run.active or not own_job:
        print(t("watch.terminated_idle", run=run.name, state=run.state), file=sys.stderr)
        return 0
    successor = submit_watcher_job(ledger, run, after=own_job, kind="afterany")
    print(t("watch.terminated", run=run.name, job=successor or "-"), file=sys.stderr)
    return 0 if successor else 1
