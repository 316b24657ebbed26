"""`mbridge-launch watch RUN`: follow the run's logs and apply plan.auto_rollback.

Resubmissions go through the gate (`gate.auto_resubmit`: preflight, plan card, ledger, the
watcher's 'auto-rollback' confirmation). Exit code 0 when the (last) run completed; 1 when it
ended otherwise, when a trigger was only reported, when the watcher stopped (rollback limit, no
checkpoint to go back to) or when the gate refused the resubmission.
"""

from __future__ import annotations

import argparse
import sys

from mbridge_launch.cli import add_common
from mbridge_launch.i18n import t

HELP = "follow a run's log; on NaN/Inf or a loss spike cancel, roll back and resubmit (plan.auto_rollback)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.ledger_cli import add_ledger_argument

    parser.add_argument("run", metavar="RUN", help="run name or id in the ledger")
    parser.add_argument("--act", action="store_true",
                        help="roll back even if the plan's auto_rollback.enabled is false")
    parser.add_argument("--no-resubmit", action="store_true", help="roll back but do not resubmit")
    parser.add_argument("--max-rollbacks", type=int, default=None,
                        help="override plan.auto_rollback.max_rollbacks")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between log reads")
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.gate import auto_resubmit
    from mbridge_launch.ledger_cli import open_ledger
    from mbridge_launch.output import print_json
    from mbridge_launch.watch import Watcher

    with open_ledger(args) as ledger:
        record = ledger.get_run(args.run)
        act = args.act or record.plan().auto_rollback.enabled
        if not act:
            print(t("warning.prefix", message=t("watch.not_enabled", run=record.name)), file=sys.stderr)
        watcher = Watcher(ledger, resubmit=None if args.no_resubmit else auto_resubmit, act=act,
                          max_rollbacks=args.max_rollbacks, poll_s=args.poll, refresh_s=max(args.poll, 2.0))
        result = watcher.watch(record)
    if args.format == "json":
        print_json({"outcome": result.outcome, "run": result.run.summary(),
                    "trigger": result.trigger.as_dict() if result.trigger else None, "rollbacks": result.rollbacks})
    elif result.outcome == "finished":
        print(t("watch.finished", run=result.run.name, id=result.run.id, state=result.run.state))
    elif result.outcome == "rolled_back":
        print(t("watch.rolled_back_no_resubmit", run=result.run.name))
    return 0 if result.outcome == "finished" and result.run.state == "completed" else 1
