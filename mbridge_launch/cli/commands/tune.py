"""`mbridge-launch tune PLAN`: short trials of the layouts the planner cannot tell apart (its
near-tie set), the fastest one that ran written into the Plan as an execution change with the
measurements (mbridge_launch/tune).

Exit codes: 0 tuned (the Plan rewritten, or only its tune record added when its own layout won;
--dry-run: the trials printed), 1 no trial completed with a step time (the Plan is unchanged) or
the gate refused (preflight or policy error, no confirmation), 2 bad input.
"""

from __future__ import annotations

import argparse

HELP = "help.tune"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.cli.options import add_ledger_argument, int_arg
    from mbridge_launch.tune import DEFAULT_MAX_LAYOUTS, DEFAULT_STEPS, DEFAULT_TIME_LIMIT

    parser.add_argument("plan", help=t("help.tune.plan"))
    parser.add_argument("--steps", type=int_arg(), default=DEFAULT_STEPS, help=t("help.tune.steps"))
    parser.add_argument("--max-layouts", type=int_arg(), default=DEFAULT_MAX_LAYOUTS, help=t("help.tune.max_layouts"))
    parser.add_argument("--time-limit", default=DEFAULT_TIME_LIMIT, metavar="HH:MM:SS", help=t("help.tune.time_limit"))
    parser.add_argument("--yes", action="store_true", help=t("help.submit.yes"))
    parser.add_argument("--dry-run", action="store_true", help=t("help.tune.dry_run"))
    parser.add_argument("--script-dir", metavar="DIR", help=t("help.submit.script_dir"))
    add_ledger_argument(parser)
    add_common(parser)


def _time_limit(text: str) -> str:
    from mbridge_launch.base import slurm_time
    from mbridge_launch.base.errors import UserError

    try:
        seconds = slurm_time.parse_seconds(text)
    except ValueError:
        seconds = None
    if not seconds:
        raise UserError("tune.time_limit", value=text)
    return text


def _trial_json(trial, outcome=None) -> dict:  # noqa: ANN001
    item, cand = trial.layout, trial.layout.candidate
    data = {"index": trial.index, "name": trial.plan.name, "layout": item.label, "planner_rank": item.rank,
            "own": item.own, "predicted_tokens_per_sec_per_gpu": cand.tokens_per_sec_per_gpu if cand else None,
            "gpus": trial.plan.cluster.total_gpus, "time_limit": trial.plan.cluster.time,
            "save_dir": trial.plan.checkpoint.save}
    if outcome is not None:
        data.update({"run_id": outcome.run_id, "job_id": outcome.job_id, "state": outcome.state,
                     "step_time_s": outcome.step_time_s, "tokens_per_sec_per_gpu": outcome.tokens_per_sec_per_gpu,
                     "peak_memory_gb": outcome.peak_memory_gb, "left_out": outcome.problem})
    return data


def run(args: argparse.Namespace) -> int:
    import sys

    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.plan.model import load_plan
    from mbridge_launch.tune import session as S
    from mbridge_launch.tune.trials import gpu_hours_total, near_tie_layouts, trial_plans, trial_root

    plan = load_plan(args.plan)
    time_limit = _time_limit(args.time_limit)
    layouts = near_tie_layouts(plan, args.max_layouts)
    root = trial_root(plan)
    trials = trial_plans(plan, layouts, root, steps=args.steps, time_limit=time_limit)
    hours = gpu_hours_total(trials)
    card = S.card_lines(plan, trials, args.steps, root)
    as_json = args.format == "json"
    if args.dry_run:
        if as_json:
            print_json({"plan": plan.name, "dry_run": True, "gpu_hours": hours, "steps": args.steps,
                        "trials": [_trial_json(trial) for trial in trials]})
        else:
            print("\n".join([*card, t("tune.dry_run")]))
        return 0
    out = sys.stderr
    from pathlib import Path

    options = S.SessionOptions(yes=args.yes, ledger_path=args.ledger, out=out,
                               script_dir=Path(args.script_dir) if args.script_dir else None)
    policy = S.precheck(trials, options)
    print("\n".join(card), file=out)
    method = S.confirm(plan, trials, options, policy)

    from mbridge_launch.runs.operations import open_ledger

    ledger = open_ledger(args.ledger, create=True)
    try:
        outcomes = S.submit_all(trials, method, options, ledger, plan)
        runs = {r.id: r for r in S.wait_for(outcomes, ledger, options)}
        for outcome in outcomes:
            if outcome.run_id in runs:
                S.measure(outcome, runs[outcome.run_id], ledger)
    finally:
        ledger.close()
    winner = S.fastest(outcomes)
    lines = [t("tune.results")]
    for o in outcomes:
        lines.append(_result_line(o, o is winner))
    print("\n".join(lines), file=out)
    if winner is None:
        raise CheckFailed("tune.none_completed", path=args.plan)

    from mbridge_launch.tune.result import tune_record, tuned_plan, write_tuned

    record = tune_record(outcomes, winner, args.steps)
    new = tuned_plan(plan, winner, record)
    rewritten = write_tuned(plan, new, args.plan)
    written = rewritten.path
    key = "tune.kept" if winner.trial.layout.own else "tune.written"
    p = new.parallelism
    if as_json:
        print_json({"plan": str(written), "plan_hash": new.plan_hash(), "changed": not winner.trial.layout.own,
                    "backup": str(rewritten.backup) if rewritten.backup is not None else None,
                    "winner": winner.trial.plan.name, "layout": winner.trial.layout.label, "gbs": p.gbs,
                    "gpu_hours": hours, "trials": [_trial_json(o.trial, o) for o in outcomes]})
    else:
        print(t(key, path=str(written), layout=winner.trial.layout.label, gbs=p.gbs, hash=new.plan_hash()))
    if rewritten.backup is not None:  # where the user's previous file is (plan.model.rewrite_plan)
        backup_key = "plan.backup_kept" if rewritten.kept_layout else "plan.backup_kept_rewritten"
        print(t(backup_key, path=str(written), backup=str(rewritten.backup)), file=out)
    print(t("hint.prefix", message=t("tune.calibrate_hint")), file=out)
    return 0


def _result_line(o, won: bool) -> str:  # noqa: ANN001
    from mbridge_launch.base.i18n import t

    label = o.trial.layout.label
    if o.problem is not None or o.step_time_s is None:
        return t("tune.result.left_out", index=o.trial.index, layout=label, state=o.state, reason=o.problem or "-")
    memory = f"{o.peak_memory_gb:.1f}" if o.peak_memory_gb is not None else "-"
    tps = f"{o.tokens_per_sec_per_gpu:,.0f}" if o.tokens_per_sec_per_gpu else "-"
    return t("tune.result.measured", index=o.trial.index, layout=label, step=o.step_time_s, tps=tps, memory=memory,
             job=o.job_id or "-", won=t("tune.result.won") if won else "")
