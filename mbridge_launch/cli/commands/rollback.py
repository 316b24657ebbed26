"""`mbridge-launch rollback RUN|DIR --to ITER [--dry-run] [--yes] [--cancel]
[--resubmit [--seed N] [--skip-iters ITERS] [--force --reason TEXT]]`, `--undo`, `--recover`.

Confirmation like submit: the user types the run name (or the directory's basename); `--yes`
for scripts; no terminal and no --yes is a refusal. A recorded run that is still active is
refused unless --cancel, which cancels it through its executor and waits until Slurm reports it
stopped (its trainer checkpoints on SIGTERM) before anything is touched.

--resubmit (a recorded run only: a bare directory has no plan) then submits the run again through
the gate (preflight, plan card, confirmation; --yes and --force --reason pass through), loading
from the rolled-back iteration, optionally with a new `rng.seed` (--seed) and skipped batches
(`train.iterations_to_skip`, --skip-iters): convergence changes, recorded as such in the plan and
the ledger; the new run is a child of the rolled-back one. Nothing is changed when the run has no
plan or the resubmission would duplicate an active run.
"""

from __future__ import annotations

import argparse
import sys

from mbridge_launch.base.escape import t_line  # save directories and run names in one line each
from mbridge_launch.base.i18n import msg, t
from mbridge_launch.cli.main import add_common

HELP = "help.rollback"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument, target_arg

    parser.add_argument("target", metavar="RUN|DIR", type=target_arg, help=t("help.common.target"))
    parser.add_argument("--to", metavar="ITER", help=t("help.rollback.to"))
    parser.add_argument("--dry-run", action="store_true", help=t("help.rollback.dry_run"))
    parser.add_argument("--yes", action="store_true", help=t("help.rollback.yes"))
    parser.add_argument("--undo", nargs="?", const="", metavar="STAMP",
                        help=t("help.rollback.undo"))
    parser.add_argument("--recover", action="store_true", help=t("help.rollback.recover"))
    parser.add_argument("--cancel", action="store_true", help=t("help.rollback.cancel"))
    parser.add_argument("--resubmit", action="store_true",
                        help=t("help.rollback.resubmit"))
    parser.add_argument("--seed", metavar="N", help=t("help.rollback.seed"))
    parser.add_argument("--skip-iters", metavar="ITERS",
                        help=t("help.rollback.skip_iters"))
    parser.add_argument("--force", action="store_true",
                        help=t("help.rollback.force"))
    parser.add_argument("--reason", help=t("help.rollback.reason"))
    add_ledger_argument(parser)
    add_common(parser)


def _print_plan(plan, file=None) -> None:
    if plan.pending_recovery:
        print(t_line("rollback.plan_recover", stamps=", ".join(plan.pending_recovery)), file=file)
    print(t_line("rollback.plan_header", path=plan.save_dir, iteration=plan.to_iter), file=file)
    for name, (before, after) in plan.tracker_changes.items():
        print("  " + t_line("rollback.plan_tracker", file=name, before=before or t("ckpt.tracker_absent"), after=after),
              file=file)
    for name in plan.moved:
        print("  " + t_line("rollback.plan_move", name=name, stamp="<stamp>"), file=file)


def _parse_iter(value: str | None) -> int:
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.numbers import MAX_ITERATION, field_whole

    if value is None:
        raise UserError("rollback.need_to")
    return field_whole("--to", value, 0, MAX_ITERATION)


MAX_SKIPPED = 100_000  # a typo such as 1-10000000 must not build a ten-million-entry override


def _parse_skip_iters(value: str | None) -> list[int]:
    """'25,30-32' -> [25, 30, 31, 32]."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.numbers import MAX_ITERATION, whole_or_none

    if value is None:
        return []
    found: set[int] = set()
    for part in value.split(","):
        text = part.strip()
        low, dash, high = text.partition("-")
        first = whole_or_none(low, MAX_ITERATION)
        last = whole_or_none(high, MAX_ITERATION) if dash else first
        if first is None or last is None:
            raise UserError("rollback.bad_skip_iters", value=value, part=text)
        if last < first or len(found) + last - first + 1 > MAX_SKIPPED:
            raise UserError("rollback.bad_skip_iters", value=value, part=text)
        found.update(range(first, last + 1))
    return sorted(found)


def _parse_seed(value: str | None) -> int | None:
    from mbridge_launch.base.numbers import MAX_SEED, field_whole

    if value is None:
        return None
    return field_whole("--seed", value, 0, MAX_SEED)


# pairs of flags that ask for two different operations (the first one given would silently win)
CONFLICTS = (("--undo", "--to"), ("--recover", "--to"), ("--undo", "--recover"))


def _check_conflicts(args) -> None:
    from mbridge_launch.base.errors import UserError

    given = {"--undo": args.undo is not None, "--to": args.to is not None, "--recover": args.recover}
    for first, second in CONFLICTS:
        if given[first] and given[second]:
            raise UserError("rollback.flags_conflict", first=first, second=second)


def _check_resubmit_args(args) -> tuple[list[int], int | None]:
    from mbridge_launch.base.errors import UserError

    skips, seed = _parse_skip_iters(args.skip_iters), _parse_seed(args.seed)
    given = [flag for flag, value in (("--seed", args.seed), ("--skip-iters", args.skip_iters),
                                      ("--force", args.force or None), ("--reason", args.reason)) if value is not None]
    if not args.resubmit and given:
        raise UserError("rollback.resubmit_only", flag=given[0])
    if args.force and not (args.reason or "").strip():
        raise UserError("gate.force_needs_reason")
    if args.resubmit and (args.undo is not None or args.recover):
        raise UserError("rollback.resubmit_conflict", flag="--undo" if args.undo is not None else "--recover")
    return skips, seed


def _resubmission(ledger, target, to_iter: int, skips: list[int], seed: int | None):
    """The plan to submit after the rollback, and a refusal now (before anything is changed) when
    the run has no plan or the same plan is already running under another run."""
    from mbridge_launch.base.errors import CheckFailed, UserError
    from mbridge_launch.plan.resubmission import resubmission_plan
    from mbridge_launch.runs.operations import refresh

    if target.run is None:
        raise UserError("rollback.resubmit_needs_run", path=str(target.save_dir))
    changes = ([f"rng.seed={seed}"] if seed is not None else []) + \
        ([f"train.iterations_to_skip={','.join(map(str, skips))}"] if skips else [])
    reason = msg("rollback.resubmit_reason", run=target.run.name, id=target.run.id, iteration=to_iter,
               changes="; ".join(changes) or "-")
    plan = resubmission_plan(target.run.plan(), reason=reason, skip_iters=skips, seed=seed)
    replaced = {r.id for r in _active_runs(ledger, target)} | {target.run.id}
    others = [r for r in ledger.active_runs_with_plan_hash(plan.plan_hash()) if r.id not in replaced]
    others = [r for r in refresh(ledger, others) if r.active] if others else []
    if others:
        run = others[0]
        raise CheckFailed("gate.duplicate", hash=plan.plan_hash(), run=run.name, id=run.id, state=run.state,
                          jobs=", ".join(run.job_ids) or "-")
    _refuse_if_policy_refuses(ledger, plan)
    return plan


def _refuse_if_policy_refuses(ledger, plan) -> None:
    """The permission policy's checks of the resubmission, before the rollback changes anything:
    the gate would refuse it after the rollback (even with --force), leaving a rolled-back
    directory and no new run."""
    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.policy.files import load_policy
    from mbridge_launch.preflight.context import PreflightContext
    from mbridge_launch.preflight.policy_checks import run_policy_checks
    from mbridge_launch.runs.usage import open_ledger_callback

    policy = load_policy()
    ctx = PreflightContext(plan=plan, policy=policy, gpu_hours_used=open_ledger_callback(ledger))
    errors = [c for c in run_policy_checks(ctx) if c.severity == "error"]
    for check in errors:
        print(t_line("error.prefix", message=check.message()), file=sys.stderr)
    if errors:
        raise CheckFailed("gate.policy_refused", codes=", ".join(c.code for c in errors), files=", ".join(policy.files))


def _resubmit(ledger, target, plan, args):
    from mbridge_launch.gate.submit import resubmit_options, submit_gated

    print(t_line("rollback.resubmitting", run=target.run.name, id=target.run.id), file=sys.stderr)
    options = resubmit_options(ledger, target.run, yes=args.yes)
    if args.force:  # the user's own override replaces one carried over from the run
        options.force, options.reason, options.force_covers = True, args.reason, None
    return submit_gated(plan, options)


def _active_runs(ledger, target):
    from mbridge_launch.runs.operations import refresh

    runs = [target.run] if target.run else []
    if target.save_dir is not None:
        runs += [r for r in ledger.runs_for_save_dir(target.save_dir) if not target.run or r.id != target.run.id]
    runs = [r for r in runs if r.active]
    return [r for r in refresh(ledger, runs) if r.active] if runs else []


def _ensure_stopped(ledger, target, args, confirm_method_holder: list) -> None:
    """Refuse (or, with --cancel, cancel after confirmation) while a recorded run writes here."""
    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.runs.operations import cancel_and_wait, confirm

    active = _active_runs(ledger, target)
    if not active:
        if target.run is None:
            print(t_line("warning.prefix", message=t_line("rollback.unrecorded_dir", path=target.save_dir)), file=sys.stderr)
        return
    first = active[0]
    if not args.cancel:
        raise CheckFailed("rollback.run_active", run=first.name, jobs=", ".join(first.job_ids) or "-", state=first.state)
    method = confirm(target.label, yes=args.yes, action_key="rollback.action_rollback")
    confirm_method_holder.append(method)
    for run in active:
        ledger.record_confirmation(run.id, "cancel", method, {"reason": "rollback", "job_ids": run.job_ids})
        cancel_and_wait(ledger, run)


def _check_policy(target) -> None:
    """The permission policy's rollback_dirs (policy/files.py): a directory outside them, or by
    default another directory than the run's own save dir (from the ledger), is refused."""
    from pathlib import Path

    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.policy.files import load_policy

    if target.save_dir is None:
        return
    policy = load_policy()
    own = Path(target.run.save_dir) if target.run and target.run.save_dir else None
    allowed, source = policy.rollback_dir_allowed(Path(target.save_dir), own)
    if allowed:
        return
    if source is None:
        raise CheckFailed("policy.rollback_dirs_own", path=str(target.save_dir), own=str(own))
    dirs = [d for lim in policy.per_file.get("rollback_dirs", []) if lim.source == source for d in lim.value]
    raise CheckFailed("policy.rollback_dirs", path=str(target.save_dir), source=source, allowed=", ".join(dirs))


def _warn_if_pinned(target) -> None:
    """Bridge resolves `load` at an iter dir and checkpoint.ckpt_step before the trackers: a plan
    with either would not resume from the rollback."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.rollback.checkpoints import parse_iter_dirname

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
        print(t_line("warning.prefix", message=t_line("rollback.pinned", run=target.run.name, settings=", ".join(pinned))),
              file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.output import print_json
    from mbridge_launch.rollback import engine as rb
    from mbridge_launch.runs.operations import confirm, open_ledger, resolve_target

    _check_conflicts(args)
    skips, seed = _check_resubmit_args(args)
    with open_ledger(args.ledger, create=not args.dry_run) as ledger:
        target = resolve_target(args.target, ledger)
        _check_policy(target)  # before anything is previewed or touched
        run_id = target.run.id if target.run else None
        from mbridge_launch.base.quoting import sh

        ref = sh(target.run.name if target.run else str(target.save_dir))  # copy-pasteable in the hint

        if args.recover and args.dry_run:  # what would be finished; nothing (not even the lock) is touched
            pending = rb.interrupted_stamps(str(target.save_dir))  # resolve_target needs one
            print(t_line("rollback.recover_dry_run", stamps=", ".join(pending), count=len(pending), path=target.save_dir)
                  if pending else t_line("rollback.nothing_to_recover", path=target.save_dir))
            return 0
        if args.recover:
            handled = rb.recover(target.save_dir, ledger)
            print(t_line("rollback.recovered", stamps=", ".join(handled), count=len(handled)) if handled
                  else t_line("rollback.nothing_to_recover", path=target.save_dir))
            return 0

        if args.undo is not None:
            preview = rb.undo(target.save_dir, stamp=args.undo or None, dry_run=True, ledger=ledger)
            print(t_line("rollback.undo_plan", stamp=preview.stamp, path=preview.save_dir, names=", ".join(preview.restored) or "-"))
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
                print(t_line("rollback.recovered", stamps=", ".join(result.recovered), count=len(result.recovered)))
            print(t_line("rollback.undone", stamp=result.stamp, path=result.save_dir))
            return 0

        to_iter = _parse_iter(args.to)
        new_plan = _resubmission(ledger, target, to_iter, skips, seed) if args.resubmit else None
        plan = rb.rollback(target.save_dir, to_iter, dry_run=True)
        if plan.nothing_to_do and not plan.pending_recovery and new_plan is None:
            print(t_line("rollback.nothing_to_do", path=plan.save_dir, iteration=to_iter))
            return 0
        if args.format == "json" and args.dry_run:
            print_json({**plan.__dict__, "resubmit_overrides": _changed_overrides(target, new_plan)})
            return 0
        # with --format json stdout carries only the JSON document; the preview goes to stderr
        preview_to = sys.stderr if args.format == "json" else sys.stdout
        if not plan.nothing_to_do or plan.pending_recovery:
            _print_plan(plan, file=preview_to)
        _warn_if_pinned(target)
        if new_plan is not None:
            print(t_line("rollback.resubmit_preview", run=target.run.name,
                    overrides=", ".join(f"{o['key']}={o['value']}" for o in _changed_overrides(target, new_plan)) or "-"),
                  file=preview_to)
        if args.dry_run:
            print(t("rollback.dry_run_done"))
            return 0
        held = []
        _ensure_stopped(ledger, target, args, held)
        if plan.nothing_to_do and not plan.pending_recovery:
            result = None  # --resubmit of a directory that is already at --to: only the resubmission
            print(t_line("rollback.nothing_to_do", path=plan.save_dir, iteration=to_iter), file=preview_to)
        else:
            method = held[0] if held else confirm(target.label, yes=args.yes, action_key="rollback.action_rollback")
            ledger.record_confirmation(run_id, "rollback", method, {"save_dir": str(target.save_dir), "to_iter": to_iter})
            result = rb.rollback(target.save_dir, to_iter, ledger=ledger, run_id=run_id)
            _report(result, to_iter, ref, args.format, text_only=new_plan is not None)
        if new_plan is None:
            return 0
        gated = _resubmit(ledger, target, new_plan, args)
        child = ledger.get_run(gated.run_id)
    if args.format == "json":
        print_json({"rollback": result.__dict__ if result else None,
                    "resubmitted": {**child.summary(), "confirmation": gated.confirmation, "script": gated.script_path}})
    else:
        print(t_line("rollback.resubmitted", run=child.name, id=child.id, parent=child.parent_run_id,
                jobs=", ".join(child.job_ids) or "-", count=len(child.job_ids), iteration=to_iter))
    return 0


def _changed_overrides(target, new_plan) -> list[dict]:
    """The overrides the resubmission adds or changes (shown before anything is done)."""
    if new_plan is None:
        return []
    before = {(o.key, o.value) for o in target.run.plan().overrides}
    return [{"key": o.key, "value": o.value, "class": o.change_class, "reason": str(o.reason)}
            for o in new_plan.overrides if (o.key, o.value) not in before]


def _report(result, to_iter: int, ref: str, fmt: str, *, text_only: bool) -> None:
    """What the rollback did; with --format json only the JSON document goes to stdout (and with
    --resubmit the JSON comes after the resubmission, so this is text on stderr)."""
    text_to = sys.stderr if fmt == "json" else sys.stdout
    if result.recovered:
        print(t_line("rollback.recovered", stamps=", ".join(result.recovered), count=len(result.recovered)), file=text_to)
    if result.nothing_to_do:
        print(t_line("rollback.nothing_to_do", path=result.save_dir, iteration=to_iter), file=text_to)
    elif fmt == "json" and not text_only:
        from mbridge_launch.base.output import print_json

        print_json(result.__dict__)
    else:
        print(t_line("rollback.done", path=result.save_dir, iteration=to_iter, count=len(result.moved),
                stamp=result.stamp, ref=ref), file=text_to)
