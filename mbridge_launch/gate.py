"""The submission gate: preflight, the plan card, explicit confirmation, no duplicates, and the
ledger written before and after the scheduler call.

No path submits without a confirmation: typed interactively (the run name when the job is over
the GPU-hour threshold, else "yes" or the name), or `--yes` for scripts. Without a terminal and
without `--yes` the gate refuses.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.errors import CheckFailed, UserError
from mbridge_launch.i18n import t
from mbridge_launch.plan import Plan
from mbridge_launch.plan_card import gpu_hours, render_card

DEFAULT_THRESHOLD_GPU_HOURS = 100.0
THRESHOLD_ENV = "MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS"


@dataclass
class GateOptions:
    executor: str = "sbatch"
    yes: bool = False
    force: bool = False
    reason: Optional[str] = None
    resubmit: bool = False
    workdir: Optional[Path] = None
    ledger_path: Optional[str] = None
    cluster_checks: bool = True
    threshold_gpu_hours: Optional[float] = None
    parent_run_id: Optional[int] = None
    ask: Callable[[str], str] = input
    isatty: Callable[[], bool] = field(default=lambda: sys.stdin.isatty())
    out: Any = None  # where the card and the report go (default stderr)


@dataclass
class GateResult:
    run_id: int
    job_ids: list[str]
    script_path: Optional[str]
    confirmation: str


def confirmation_threshold(value: Optional[float]) -> float:
    if value is not None:
        return value
    text = os.environ.get(THRESHOLD_ENV)
    if not text:
        return DEFAULT_THRESHOLD_GPU_HOURS
    try:
        return float(text)
    except ValueError:
        raise UserError("gate.threshold_invalid", value=text) from None


def confirm_submission(plan: Plan, options: GateOptions) -> str:
    """How the submission was confirmed ('flag-yes', 'typed-yes', 'typed-name'), or CheckFailed."""
    if options.yes:
        return "flag-yes"
    if not options.isatty():
        raise CheckFailed("gate.no_tty", action=t("gate.action.submit"))
    hours = gpu_hours(plan)
    threshold = confirmation_threshold(options.threshold_gpu_hours)
    need_name = hours > threshold
    prompt = (t("gate.prompt_name", hours=hours, threshold=threshold, name=plan.name) if need_name
              else t("gate.prompt_yes", name=plan.name))
    try:
        answer = options.ask(prompt).strip()
    except EOFError:
        answer = ""
    if answer == plan.name:
        return "typed-name"
    if not need_name and answer.lower() in ("yes", "y"):
        return "typed-yes"
    raise CheckFailed("gate.aborted")


def _write_review_copy(plan: Plan, rendered: Any, workdir: Path) -> Path:
    """The exact script, on disk before confirmation so that the card can point at it. For sbatch
    it is the very file that is submitted; other executors get a preview copy beside it."""
    from mbridge_launch.atomic import atomic_write_text

    name, text = next(iter(rendered.files.items())) if rendered.files else (f"{plan.name}.{rendered.executor}.txt", rendered.text)
    if rendered.executor != "sbatch":
        name = f"{plan.name}-{plan.plan_hash()}.{rendered.executor}.preview.sh"
    return atomic_write_text(workdir / Path(name).name, text, mode=0o644)


def submit_gated(plan: Plan, options: GateOptions, *, plan_path: Optional[str] = None,
                 plan_text: Optional[str] = None) -> GateResult:
    from mbridge_launch import ledger as L
    from mbridge_launch.launch import submit_plan
    from mbridge_launch.ledger_cli import refresh
    from mbridge_launch.preflight.runner import run_preflight

    out = options.out or sys.stderr
    workdir = Path(options.workdir or Path.cwd()).resolve()
    if options.force and not (options.reason or "").strip():
        raise UserError("gate.force_needs_reason")
    ledger = _open_ledger(options.ledger_path)
    plan_hash = plan.plan_hash()
    active = ledger.active_runs_with_plan_hash(plan_hash)
    if active and not options.resubmit:
        active = [r for r in refresh(ledger, active) if r.active]
    if active and not options.resubmit:
        run = active[0]
        raise CheckFailed("gate.duplicate", hash=plan_hash, run=run.name, id=run.id, state=run.state,
                          jobs=", ".join(run.job_ids) or "-")

    report = run_preflight(plan, cluster=options.cluster_checks, plan_text=plan_text)
    from mbridge_launch.commands.preflight import render_text

    print(render_text(report, plan.name), file=out)
    if report.errors and not options.force:
        raise CheckFailed("gate.preflight_failed", count=len(report.errors))

    rendered = submit_plan(plan, options.executor, workdir, dry_run=True)
    workdir.mkdir(parents=True, exist_ok=True)
    script = _write_review_copy(plan, rendered, workdir)
    print(render_card(plan, executor=options.executor, script_path=str(script), report=report), file=out)
    method = confirm_submission(plan, options)

    fields = dict(name=plan.name, plan_hash=plan_hash, plan_yaml=plan.to_yaml(), executor=options.executor,
                  plan_path=os.path.abspath(plan_path) if plan_path else None,
                  cluster=plan.cluster.model_dump(mode="json"), script_path=str(script), script_text=rendered.text,
                  work_dir=str(workdir), save_dir=L.plan_save_dir(plan, workdir), parent_run_id=options.parent_run_id)
    with ledger.submission(**fields) as sub:
        ledger.record_confirmation(sub.record.id, "submit", method, {"gpu_hours": gpu_hours(plan)})
        if report.errors:
            ledger.record_override(sub.record.id, "preflight", options.reason or "",
                                   {"errors": report.codes("error")})
            print(t("warning.prefix", message=t("gate.forced", reason=options.reason)), file=out)
        result = submit_plan(plan, options.executor, workdir, dry_run=False)
        record = sub.done(result)
    return GateResult(record.id, list(result.job_ids), str(result.script_path or script), method)


def _open_ledger(path: Optional[str]) -> Any:
    """The ledger, with rows left `submitting` by a crashed submit reconciled first."""
    import argparse

    from mbridge_launch.ledger_cli import open_ledger

    return open_ledger(argparse.Namespace(ledger=path))
