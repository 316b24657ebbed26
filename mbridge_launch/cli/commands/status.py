"""`mbridge-launch status RUN`: one run's state, reconciled with Slurm, and its history."""

from __future__ import annotations

import argparse

from mbridge_launch.cli.main import add_common

HELP = "help.status"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument, run_arg

    parser.add_argument("run", type=run_arg, metavar="RUN", help=t("help.common.run"))
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.escape import t_line  # every value on its own line, escaped (a ledger others can write)
    from mbridge_launch.base.i18n import current_lang
    from mbridge_launch.base.output import print_json
    from mbridge_launch.runs.operations import fmt_time, open_ledger, refresh

    with open_ledger(args.ledger) as ledger:
        record = ledger.get_run(args.run)
        if record.active:
            record = refresh(ledger, [record], warn=True)[0]
        details = slurm_details(record)
        rollbacks = ledger.rollbacks(run_ids=[r.id for r in ledger.run_chain(record.id)])
        diagnosis = failed_run_diagnosis(ledger, record)
        if args.format == "json":
            data = record.summary()
            data.update(details)
            data["events"] = ledger.events(record.id)
            data["rollbacks"] = [
                {"stamp": rb.stamp, "to_iter": rb.to_iter, "from_iter": rb.from_iter, "state": rb.state,
                 "trigger": rb.trigger, "created_at": rb.created_at} for rb in rollbacks]
            data["confirmations"] = ledger.confirmations(record.id)
            data["overrides"] = ledger.overrides(record.id)
            data["diagnosis"] = diagnosis.as_json(args.lang or current_lang()) if diagnosis is not None else None
            print_json(data)
            return 0
        print(t_line("ledger.status.run", name=record.name, id=record.id))
        print("  " + t_line("ledger.status.state", state=record.state, slurm=record.slurm_state or "-"))
        print("  " + t_line("ledger.status.jobs", jobs=", ".join(record.job_ids) or "-", executor=record.executor))
        if details["pending_reason"]:
            print("  " + t_line("ledger.status.pending_reason", reason=details["pending_reason"]))
        if details["restarts"] is not None:
            print("  " + t_line("ledger.status.restarts", count=details["restarts"]))
        if record.watcher_job_id and details["watcher_state"]:
            print("  " + t_line("ledger.status.watcher_state", job=record.watcher_job_id, state=details["watcher_state"]))
        elif record.watcher_job_id:
            print("  " + t_line("ledger.status.watcher", job=record.watcher_job_id))
        print("  " + t_line("ledger.status.plan", hash=record.plan_hash, path=record.plan_path or ""))
        print("  " + t_line("ledger.status.submitted", when=fmt_time(record.submitted_at or record.created_at)))
        if record.save_dir:
            print("  " + t_line("ledger.status.save_dir", path=record.save_dir))
        if record.log_paths:
            print("  " + t_line("ledger.status.logs", paths=", ".join(record.log_paths)))
        if record.error:
            # the ledger keeps the message and, on the lines below it, the scheduler's raw output:
            # each line printed as a line (escaping the joined text printed a literal \n)
            first, *raw = [line for line in record.error.splitlines() if line.strip()]
            print("  " + t_line("ledger.status.error", error=first))
            for line in raw[:MAX_ERROR_LINES]:
                print("    " + t_line("ledger.status.error_line", line=line.strip()))
        if diagnosis is not None:
            print("  " + t_line("diagnose.cli.status_line", line=diagnosis.one_line(args.lang or current_lang())))
        if rollbacks:
            last = rollbacks[-1]
            print("  " + t_line("ledger.status.rollbacks", count=len(rollbacks), to_iter=last.to_iter, state=last.state))
    return 0


MAX_ERROR_LINES = 20  # lines of the scheduler's raw output shown under the error (all are in --format json)
# The ledger states of a run that ended in a failure worth explaining (a cancel is the user's own).
FAILED_STATES = ("failed", "timeout")


def failed_run_diagnosis(ledger, record):
    """The diagnosis of a run that ended failed (None for any other run: cheap for the rest).
    A diagnosis that cannot be made (the engine missing, a log unreadable) is None, never an error
    of `status`."""
    if record.state not in FAILED_STATES:
        return None
    from mbridge_launch.runs.run_diagnosis import diagnose_run

    try:
        return diagnose_run(ledger, record)
    except (ImportError, OSError, ValueError):
        return None


def slurm_details(record) -> dict:
    """What Slurm says beyond the state, for the run's main job and its watcher job: the pending
    reason (None while not pending), the restart (requeue) count (None when Slurm does not report
    it: squeue knows it for live jobs only) and the watcher job's state (None: not asked or
    unknown). Slurm unreachable: all None (the state line already warned)."""
    from mbridge_launch.runs.operations import slurm_query
    from mbridge_launch.runs.reconcile import SlurmUnavailable

    out: dict = {"pending_reason": None, "restarts": None, "watcher_state": None}
    ids = [j for j in (record.job_ids[:1] + [record.watcher_job_id]) if j]
    if not ids:
        return out
    try:
        jobs = slurm_query().job_states(ids)
    except SlurmUnavailable:
        return out
    main = jobs.get(record.job_ids[0]) if record.job_ids else None
    if main is not None:
        pending = main.state.upper().startswith("PENDING")
        out["pending_reason"] = main.reason if pending and main.reason not in ("", "None") else None
        out["restarts"] = main.restarts
    watcher = jobs.get(record.watcher_job_id) if record.watcher_job_id else None
    out["watcher_state"] = watcher.state if watcher is not None else None
    return out
