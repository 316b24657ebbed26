"""`mbridge-launch rollback RUN|DIR --to ITER [--dry-run] [--yes] [--cancel]`, `--undo`, `--recover`.

Confirmation like submit: the user types the run name (or the directory's basename); `--yes`
for scripts; no terminal and no --yes is a refusal. A recorded run that is still active is
refused unless --cancel, which cancels it through its executor and waits until Slurm reports it
stopped (its trainer checkpoints on SIGTERM) before anything is touched.
"""

from __future__ import annotations

import argparse
import sys

from mbridge_launch.cli import add_common
from mbridge_launch.i18n import t

HELP = "roll a run or checkpoint directory back to an earlier iteration (or --undo the last rollback)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.ledger_cli import add_ledger_argument

    parser.add_argument("target", metavar="RUN|DIR", help="run name or id in the ledger, or a checkpoint directory")
    parser.add_argument("--to", metavar="ITER", help="iteration to roll back to (a complete checkpoint)")
    parser.add_argument("--dry-run", action="store_true", help="show what would happen; change nothing")
    parser.add_argument("--yes", action="store_true", help="confirm without asking (for scripts)")
    parser.add_argument("--undo", nargs="?", const="", metavar="STAMP",
                        help="undo the newest rollback (or the one named STAMP, which must be the newest)")
    parser.add_argument("--recover", action="store_true", help="only finish an interrupted rollback or undo")
    parser.add_argument("--cancel", action="store_true", help="cancel the run first if it is still active")
    add_ledger_argument(parser)
    add_common(parser)


def _print_plan(plan) -> None:
    if plan.pending_recovery:
        print(t("rollback.plan_recover", stamps=", ".join(plan.pending_recovery)))
    print(t("rollback.plan_header", path=plan.save_dir, iteration=plan.to_iter))
    for name, (before, after) in plan.tracker_changes.items():
        print("  " + t("rollback.plan_tracker", file=name, before=before or t("ckpt.tracker_absent"), after=after))
    for name in plan.moved:
        print("  " + t("rollback.plan_move", name=name, stamp="<stamp>"))


def _parse_iter(value: str | None) -> int:
    from mbridge_launch.errors import UserError

    if value is None:
        raise UserError("rollback.need_to")
    text = value.strip()
    if not text.isdigit():
        raise UserError("rollback.bad_iter", value=value)
    return int(text)


def _active_runs(ledger, target):
    from mbridge_launch.ledger_cli import refresh

    runs = [target.run] if target.run else []
    if target.save_dir is not None:
        runs += [r for r in ledger.runs_for_save_dir(target.save_dir) if not target.run or r.id != target.run.id]
    runs = [r for r in runs if r.active]
    return [r for r in refresh(ledger, runs) if r.active] if runs else []


def _ensure_stopped(ledger, target, args, confirm_method_holder: list) -> None:
    """Refuse (or, with --cancel, cancel after confirmation) while a recorded run writes here."""
    from mbridge_launch.errors import CheckFailed
    from mbridge_launch.ledger_cli import cancel_and_wait, confirm

    active = _active_runs(ledger, target)
    if not active:
        if target.run is None:
            print(t("warning.prefix", message=t("rollback.unrecorded_dir", path=target.save_dir)), file=sys.stderr)
        return
    first = active[0]
    if not args.cancel:
        raise CheckFailed("rollback.run_active", run=first.name, jobs=", ".join(first.job_ids) or "-", state=first.state)
    method = confirm(target.label, yes=args.yes, action_key="rollback.action_rollback")
    confirm_method_holder.append(method)
    for run in active:
        ledger.record_confirmation(run.id, "cancel", method, {"reason": "rollback", "job_ids": run.job_ids})
        cancel_and_wait(ledger, run)


def _warn_if_pinned(target) -> None:
    """Bridge resolves `load` at an iter dir and checkpoint.ckpt_step before the trackers: a plan
    with either would not resume from the rollback."""
    from mbridge_launch.checkpoints import parse_iter_dirname
    from mbridge_launch.errors import UserError

    if target.run is None:
        return
    try:
        plan = target.run.plan()
    except UserError:
        return
    pinned = [f"checkpoint.{o.key.split('.', 1)[1]}={o.value}" for o in plan.overrides if o.key == "checkpoint.ckpt_step"]
    if plan.checkpoint.load and parse_iter_dirname(plan.checkpoint.load.rstrip("/").rsplit("/", 1)[-1]) is not None:
        pinned.append(f"checkpoint.load={plan.checkpoint.load}")
    if pinned:
        print(t("warning.prefix", message=t("rollback.pinned", run=target.run.name, settings=", ".join(pinned))),
              file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch import rollback as rb
    from mbridge_launch.ledger_cli import confirm, open_ledger, resolve_target
    from mbridge_launch.output import print_json

    with open_ledger(args) as ledger:
        target = resolve_target(args.target, ledger)
        run_id = target.run.id if target.run else None
        from mbridge_launch.quoting import sh

        ref = sh(target.run.name if target.run else str(target.save_dir))  # copy-pasteable in the hint

        if args.recover:
            handled = rb.recover(target.save_dir, ledger)
            print(t("rollback.recovered", stamps=", ".join(handled)) if handled
                  else t("rollback.nothing_to_recover", path=target.save_dir))
            return 0

        if args.undo is not None:
            preview = rb.undo(target.save_dir, stamp=args.undo or None, dry_run=True, ledger=ledger)
            print(t("rollback.undo_plan", stamp=preview.stamp, path=preview.save_dir, names=", ".join(preview.restored) or "-"))
            if args.dry_run:
                print(t("rollback.dry_run_done"))
                return 0
            held: list = []
            _ensure_stopped(ledger, target, args, held)
            method = held[0] if held else confirm(target.label, yes=args.yes, action_key="rollback.action_undo")
            ledger.record_confirmation(run_id, "undo", method, {"save_dir": str(target.save_dir), "stamp": preview.stamp})
            # undo exactly what was shown and confirmed (refused if a recovery made another one newest)
            result = rb.undo(target.save_dir, stamp=preview.stamp, ledger=ledger)
            if result.recovered:
                print(t("rollback.recovered", stamps=", ".join(result.recovered)))
            print(t("rollback.undone", stamp=result.stamp, path=result.save_dir))
            return 0

        to_iter = _parse_iter(args.to)
        plan = rb.rollback(target.save_dir, to_iter, dry_run=True)
        if plan.nothing_to_do and not plan.pending_recovery:
            print(t("rollback.nothing_to_do", path=plan.save_dir, iteration=to_iter))
            return 0
        if args.format == "json" and args.dry_run:
            print_json(plan.__dict__)
            return 0
        _print_plan(plan)
        _warn_if_pinned(target)
        if args.dry_run:
            print(t("rollback.dry_run_done"))
            return 0
        held = []
        _ensure_stopped(ledger, target, args, held)
        method = held[0] if held else confirm(target.label, yes=args.yes, action_key="rollback.action_rollback")
        ledger.record_confirmation(run_id, "rollback", method, {"save_dir": str(target.save_dir), "to_iter": to_iter})
        result = rb.rollback(target.save_dir, to_iter, ledger=ledger, run_id=run_id)
    if result.recovered:
        print(t("rollback.recovered", stamps=", ".join(result.recovered)))
    if result.nothing_to_do:
        print(t("rollback.nothing_to_do", path=result.save_dir, iteration=to_iter))
    elif args.format == "json":
        print_json(result.__dict__)
    else:
        print(t("rollback.done", path=result.save_dir, iteration=to_iter, count=len(result.moved),
                stamp=result.stamp, ref=ref))
    return 0
