"""The submission gate: preflight, the plan card, explicit confirmation, no duplicates, and the
ledger written before and after the scheduler call.

No path submits without a confirmation: typed interactively (the run name when the job is over
the GPU-hour threshold, else "yes" or the name), or `--yes` for scripts. Without a terminal and
without `--yes` the gate refuses. The one confirmation given elsewhere is the watcher's
(`auto_resubmit`): the plan's auto_rollback consent, recorded as method 'auto-rollback' with the
trigger.

Resubmissions (`rollback --resubmit`, the watcher) go through `submit_gated` too, as children of
the run they replace (`parent_run_id`); the convergence changes they add are recorded in the
ledger's overrides table, and a preflight override of the parent is carried over with its reason.

The permission policy (mbridge_launch/policy: site, user and project files, strictest wins) is
checked by preflight; its `policy.*` errors refuse the submission even with --force, its
typed-confirmation level lowers the threshold, and the plan card lists the limits and their files.

A plan with `auto_rollback.enabled` gets its watcher started as a dependent Slurm job right after
the training job is accepted (gate/watcher_job.py; `--no-watcher` / GateOptions.watcher=False to skip, e.g.
when a watcher already follows the run chain from a login node).

From the scheduler call until the job id is recorded, SIGINT/SIGTERM/SIGHUP are deferred
(base/signals.py) and the ledger knows the scheduler was called, so a Ctrl-C stops the command
only once the job is recorded and a kill -9 leaves a row that the next command reconciles by
the job's token (runs.operations.open_ledger).

Crash-safety tests install hooks at the fault points gate.ledger, gate.call and gate.sbatch
(base/faults.py; no environment variable of the product reaches them): right after the
`submitting` row is written, right before the scheduler call, right after the scheduler accepted
the job; their hooks die like `kill -9` or send a SIGINT there.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.base.errors import CheckFailed, UserError, writable
from mbridge_launch.base.faults import fault_point
from mbridge_launch.base.i18n import t
from mbridge_launch.base.signals import deferred_signals
from mbridge_launch.gate.card import gpu_hours, render_card
from mbridge_launch.plan.model import Plan
from mbridge_launch.runs.exclusive import directory_lock, holds, refuse_held, refuse_plan_holder
from mbridge_launch.runs.ledger import AUTO_ROLLBACK_METHOD

DEFAULT_THRESHOLD_GPU_HOURS = 100.0
THRESHOLD_ENV = "MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS"


@dataclass
class GateOptions:
    executor: str = "sbatch"
    yes: bool = False
    force: bool = False
    reason: Optional[str] = None
    resubmit: bool = False
    # where the rendered script / NeMo-Run home go and the scheduler is called (`submit
    # --script-dir`); the job starts in plan.launch.workdir, or here when that is unset
    script_dir: Optional[Path] = None
    ledger_path: Optional[str] = None
    cluster_checks: bool = True
    threshold_gpu_hours: Optional[float] = None
    parent_run_id: Optional[int] = None
    ask: Callable[[str], str] = input
    isatty: Callable[[], bool] = field(default=lambda: sys.stdin.isatty())
    out: Any = None  # where the card and the report go (default stderr)
    ledger: Any = None  # an open Ledger to use (the caller's); else opened from ledger_path
    action: str = "submit"  # what the ledger's confirmation row says: submit | resubmit
    # A confirmation given before the gate, by code not by a flag: only the watcher sets it
    # (method 'auto-rollback'; the consent is the plan's auto_rollback, detail names the trigger).
    confirmed_by: Optional[str] = None
    confirmation_detail: dict[str, Any] = field(default_factory=dict)
    # With `force`: the preflight error codes the reason was given for (None: any). A carried-over
    # override covers the parent's errors, not new ones.
    force_covers: Optional[frozenset[str]] = None
    # Start the auto-rollback watcher job when the plan enables auto_rollback (gate/watcher_job.py).
    watcher: bool = True


@dataclass
class GateResult:
    run_id: int
    job_ids: list[str]
    script_path: Optional[str]
    confirmation: str
    watcher_job_id: Optional[str] = None


def confirmation_threshold(value: Optional[float]) -> float:
    """--confirm-threshold, else $MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS, else the default: a finite number
    of GPU-hours from 0 (NaN would make every comparison false: no run would need its name typed)."""
    if value is None:
        text = os.environ.get(THRESHOLD_ENV)
        if not text:
            return DEFAULT_THRESHOLD_GPU_HOURS
        try:
            value = float(text)
        except ValueError:
            raise UserError("gate.threshold_invalid", value=text) from None
    if not math.isfinite(value) or value < 0:
        raise UserError("gate.threshold_invalid", value=str(value))
    return value


def policy_errors(report: Any) -> list[Any]:
    """The preflight errors that come from the permission policy (`policy.*`): no --force, no
    carried-over override covers them (a policy bounds the submitter, it is not theirs to lift)."""
    return [c for c in report.errors if c.code.startswith("policy.")]


def effective_threshold(value: Optional[float], policy: Any = None) -> float:
    """The typed-confirmation level: the lower of the option/env/default and the policy's
    typed_confirmation_above_gpu_hours."""
    threshold = confirmation_threshold(value)
    limit = policy.get("typed_confirmation_above_gpu_hours") if policy is not None else None
    return threshold if limit is None else min(threshold, float(limit.value))


def confirm_submission(plan: Plan, options: GateOptions, policy: Any = None) -> str:
    """How the submission was confirmed ('flag-yes', 'typed-yes', 'typed-name', or the caller's
    `confirmed_by`), or CheckFailed. `policy` may lower the GPU-hour level above which the run name
    must be typed."""
    if options.confirmed_by:
        return options.confirmed_by
    if options.yes:
        return "flag-yes"
    if not options.isatty():
        raise CheckFailed("gate.no_tty", action=t(f"gate.action.{options.action}"))
    hours = gpu_hours(plan)
    threshold = effective_threshold(options.threshold_gpu_hours, policy)
    need_name = hours > threshold
    prompt = (t("gate.prompt_name", hours=hours, threshold=threshold, name=plan.name) if need_name
              else t("gate.prompt_yes", name=plan.name))
    return typed_confirmation(options.ask, prompt, plan.name, need_name)


def typed_confirmation(ask: Callable[[str], str], prompt: str, name: str, need_name: bool) -> str:
    """Ask `prompt`: the run name always confirms ('typed-name'), "yes" only below the GPU-hour
    level (`need_name` false: 'typed-yes'); anything else (or end of input) aborts."""
    try:
        answer = ask(prompt).strip()
    except EOFError:
        answer = ""
    if answer == name:
        return "typed-name"
    if not need_name and answer.lower() in ("yes", "y"):
        return "typed-yes"
    raise CheckFailed("gate.aborted")


def confirm_cancel(run: Any, *, yes: bool, ask: Callable[[str], str] = input,
                   isatty: Callable[[], bool] = lambda: sys.stdin.isatty()) -> str:
    """`cancel RUN` is gated like submit, stricter: only the typed run name (or --yes) stops a job."""
    if yes:
        return "flag-yes"
    if not isatty():
        raise CheckFailed("gate.no_tty", action=t("gate.action.cancel"))
    try:
        answer = ask(t("gate.prompt_cancel", name=run.name, jobs=", ".join(run.job_ids) or "-"))
    except EOFError:
        answer = ""
    if answer.strip() != run.name:
        raise CheckFailed("gate.cancel_aborted")
    return "typed-name"


def _write_review_copy(plan: Plan, rendered: Any, script_dir: Path) -> Path:
    """The exact text that is submitted (rendered.text), on disk before confirmation so that the
    card can point at it. For sbatch it is the very file that is submitted; the other executors
    write theirs where their library keeps them (NeMo-Run's home, submitit's folder), so they get
    a copy here, byte for byte the same."""
    from mbridge_launch.base.atomic import EXECUTABLE_MODE, atomic_write_text

    text = rendered.text
    name = f"{plan.name}-{plan.plan_hash()}.{rendered.executor}.review.sh"
    if rendered.executor == "sbatch" and getattr(rendered, "script_path", None):
        name = rendered.script_path.name
    # modes follow the umask; the sbatch script is the file submitted, executable as the executor writes it
    mode = EXECUTABLE_MODE if rendered.executor == "sbatch" else None
    return atomic_write_text(script_dir / Path(name).name, text, mode=mode)


def submit_gated(plan: Plan, options: GateOptions, *, plan_path: Optional[str] = None,
                 plan_text: Optional[str] = None) -> GateResult:
    from mbridge_launch.executors import launch
    from mbridge_launch.preflight.render import render_text
    from mbridge_launch.preflight.runner import run_preflight
    from mbridge_launch.runs import ledger as L
    from mbridge_launch.runs.operations import refresh
    from mbridge_launch.runs.usage import open_ledger_callback

    out = options.out or sys.stderr
    script_dir = Path(options.script_dir or Path.cwd()).resolve()
    if options.force and not (options.reason or "").strip():
        raise UserError("gate.force_needs_reason")
    if options.threshold_gpu_hours is not None:
        confirmation_threshold(options.threshold_gpu_hours)  # a bad value is bad input even with --yes
    ledger = options.ledger if options.ledger is not None else _open_ledger(options.ledger_path)
    try:
        plan_hash = plan.plan_hash()
        # the early checks (a quick answer before preflight); the authoritative ones follow the
        # confirmation, under the locks (runs/exclusive.py)
        active = ledger.active_runs_with_plan_hash(plan_hash)
        if active and not options.resubmit:
            active = [r for r in refresh(ledger, active) if holds(r)]
        if active and not options.resubmit:
            refuse_plan_holder(active[0], plan_hash)
        ownership = _save_dir_ownership(ledger, plan, script_dir, options)  # one run per checkpoint directory
        policy = _load_policy()

        report = run_preflight(plan, cluster=options.cluster_checks, plan_text=plan_text, submit_dir=script_dir,
                               save_dir_ownership=_fixed_ownership(ownership), policy=policy,
                               gpu_hours_used=open_ledger_callback(ledger))
        print(render_text(report, plan.name), file=out)
        refused = policy_errors(report)
        if refused:  # before --force is looked at: it does not apply to a policy
            raise CheckFailed("gate.policy_refused", codes=", ".join(c.code for c in refused),
                              files=", ".join(policy.files))
        if report.errors and not options.force:
            raise CheckFailed("gate.preflight_failed", count=len(report.errors))
        uncovered = sorted(set(report.codes("error")) - options.force_covers) if options.force_covers is not None else []
        if report.errors and uncovered:
            raise CheckFailed("gate.preflight_failed_uncovered", codes=", ".join(uncovered))

        # rendered once: the review copy, the card, the ledger's script_text and the scheduler
        # call all use this object (executors/base.py), so what is confirmed is what is submitted
        rendered = launch.render_plan(plan, options.executor, script_dir)
        with writable(script_dir):
            script_dir.mkdir(parents=True, exist_ok=True)
            script = _write_review_copy(plan, rendered, script_dir)
        print(render_card(plan, executor=options.executor, script_path=str(script), report=report,
                          parent_run_id=options.parent_run_id, watcher=options.watcher, policy=policy,
                          resubmission=options.confirmation_detail), file=out)
        method = confirm_submission(plan, options, policy)
        changes = _convergence_changes(ledger, options.parent_run_id, plan)

        save_dir = L.plan_save_dir(plan, script_dir)
        fields = dict(name=plan.name, plan_hash=plan_hash, plan_yaml=plan.to_yaml(), executor=options.executor,
                      plan_path=os.path.abspath(plan_path) if plan_path else None,
                      cluster=plan.cluster.model_dump(mode="json"), script_path=str(script),
                      script_text=rendered.text, work_dir=str(script_dir), save_dir=save_dir,
                      parent_run_id=options.parent_run_id)
        # Serialised (runs/exclusive.py): under the directory's lock the claims of other ledgers and
        # users are checked again, then the ledger's runs and the insert of this one happen in one
        # write transaction; the lock is let go once this run's claim is on disk.
        guard = partial(refuse_held, ledger, None if options.resubmit else plan_hash, save_dir)
        with directory_lock(save_dir, out) as lock:
            ownership = _save_dir_ownership(ledger, plan, script_dir, options)  # claims, again, under the lock
            with ledger.submission(guard=guard, **fields) as sub:
                ledger.record_confirmation(sub.record.id, options.action, method,
                                           {"gpu_hours": gpu_hours(plan), **options.confirmation_detail})
                if report.errors:
                    ledger.record_override(sub.record.id, "preflight", options.reason or "",
                                           {"errors": report.codes("error")})
                    print(t("warning.prefix", message=t("gate.forced", reason=options.reason)), file=out)
                for check in report.find("plan.check_accepted"):  # estimates the plan accepts, with why
                    ledger.record_override(sub.record.id, "accepted", str(check.params["reason"]),
                                           {"code": check.params["code"]})
                for change in changes:
                    ledger.record_override(sub.record.id, "convergence", change["reason"], change)
                claims = _claim_writer(ledger, ownership, plan_hash, out)
                claims.before(sub.record, options.reason)  # the claim file, with the token, before the scheduler
                lock.release()  # the directory is this run's now: other submissions see its row and claim
                _crash_point("ledger")
                # the window from the scheduler call to the recorded job id: interrupts wait for its
                # end (base/signals.py), and whatever still cuts it leaves the run for reconciliation
                try:
                    with deferred_signals():
                        record = sub.call_scheduler(lambda: _scheduler_call(rendered, sub.token))
                except BaseException:
                    _say_if_may_have_job(sub.record, out)
                    raise
                claims.after(record)  # and with the job ids once known
        watcher_job = None
        if plan.auto_rollback.enabled and options.watcher and record.job_ids:
            from mbridge_launch.gate.watcher_job import submit_watcher_job

            watcher_job = submit_watcher_job(ledger, record, out=out)
        return GateResult(record.id, list(record.job_ids), str(record.script_path or script), method, watcher_job)
    finally:
        if options.ledger is None:
            ledger.close()


def _load_policy() -> Any:
    """The permission policy of the site, this user and the working directory (policy/files.py);
    a bad policy file stops the submission (UserError, exit 2)."""
    from mbridge_launch.policy.files import load_policy

    return load_policy()


def _scheduler_call(rendered: Any, token: str) -> Any:
    """Schedule exactly `rendered` (the object shown and confirmed). Every Slurm call in it is
    bounded (slurm/commands.call: a timeout, and a deferred Ctrl-C stops it within seconds)."""
    from mbridge_launch.executors import launch

    _crash_point("call")
    result = launch.schedule(rendered, token)
    _crash_point("sbatch")
    return result


def _save_dir_ownership(ledger: Any, plan: Plan, script_dir: Path, options: GateOptions) -> Any:
    """Refuse a plan whose checkpoint directory an active run (this ledger) or a live claim (any
    ledger or user) writes; an unverifiable claim only with --force and its reason. A
    resubmission's parent is no exception: it must have ended (runs/ownership.py)."""
    from mbridge_launch.runs.ledger import plan_save_dir
    from mbridge_launch.runs.ownership import refuse_if_owned, save_dir_ownership

    save_dir = plan_save_dir(plan, script_dir)
    if save_dir is None:
        return None
    ownership = save_dir_ownership(ledger, save_dir)
    refuse_if_owned(ownership, force=options.force)
    return ownership


def _say_if_may_have_job(record: Any, out: Any) -> None:
    """After a scheduler call that ended without an answer (a timeout, a lost connection, an
    interrupt): the run may have a job, and it holds its plan and directory until the next command
    that reaches Slurm finds the job by its token or settles that there is none."""
    from mbridge_launch.runs.exclusive import unresolved

    if unresolved(record):
        print(t("warning.prefix", message=t("gate.may_have_job", run=record.name, id=record.id)), file=out)


def _fixed_ownership(ownership: Any) -> Any:
    from mbridge_launch.runs.ownership import fixed_callback

    return fixed_callback(ownership)


def _claim_writer(ledger: Any, ownership: Any, plan_hash: str, out: Any) -> Any:
    from mbridge_launch.runs.ownership import ClaimWriter

    return ClaimWriter(ledger, ownership, plan_hash, out)


def _crash_point(where: str) -> None:
    """The fault point `gate.<where>` (ledger, call: the scheduler is about to be called, sbatch: it
    accepted the job): nothing, unless a test installed a hook there (base/faults.py)."""
    fault_point(f"gate.{where}")


def _convergence_changes(ledger: Any, parent_run_id: Optional[int], plan: Plan) -> list[dict[str, Any]]:
    """The convergence-class overrides a resubmission adds or changes relative to its parent run
    (a new seed, skipped iterations, ...): each is recorded in the ledger's overrides table."""
    if parent_run_id is None:
        return []
    try:
        before = {o.key: o.value for o in ledger.get_run(parent_run_id).plan().overrides}
    except UserError:
        before = {}
    # the ledger keeps the reason as English text (the Plan itself keeps the message key)
    return [{"key": o.key, "value": o.value, "previous": before.get(o.key),
             "reason": o.reason.render("en"),
             "parent_run_id": parent_run_id}
            for o in plan.overrides if o.change_class == "convergence" and before.get(o.key) != o.value]


def _open_ledger(path: Optional[str]) -> Any:
    """The ledger, with rows left `submitting` by a crashed submit reconciled first."""
    from mbridge_launch.runs.operations import open_ledger

    return open_ledger(path, create=True)


# ---------------------------------------------------------------------- resubmissions
def resubmit_options(ledger: Any, run: Any, **changes: Any) -> GateOptions:
    """Gate options for submitting `run` again after a rollback: its executor and submit directory,
    the open ledger, the run as parent. A preflight override recorded for the run is carried over
    (with its reason) for the errors it was given for, so a run that needed --force does not stop
    at its own resubmission, while a new error still does."""
    options = GateOptions(executor=run.executor, script_dir=Path(run.work_dir) if run.work_dir else None,
                          ledger=ledger, parent_run_id=run.id, action="resubmit")
    inherited = [o for o in ledger.overrides(run.id) if o["kind"] == "preflight"]
    if inherited:
        options.force = True
        options.reason = t("gate.inherited_reason", lang="en", id=run.id, reason=inherited[-1]["reason"])
        options.force_covers = frozenset(inherited[-1]["detail"].get("errors", []))
    for key, value in changes.items():
        setattr(options, key, value)
    return options


def auto_resubmit(ledger: Any, run: Any, to_iter: int, trigger: Any, *, start_watcher: bool = False) -> Any:
    """The watcher's resubmission (a `watch.ResubmitHook`), through the gate: the plan with the
    trigger's batch skipped, non-interactive, confirmed by the plan's auto_rollback (recorded as
    'auto-rollback' with the trigger); no duplicate check, the previous run was just cancelled.
    `start_watcher`: a watcher job for the new run (the watcher that calls this is a job that
    stops after one run); a watcher on a login node follows the new run itself."""
    from mbridge_launch.plan.resubmission import auto_rollback_plan

    detail = {"reason": "plan.auto_rollback", "trigger": trigger.as_dict(), "to_iter": to_iter,
              "parent_run_id": run.id}
    options = resubmit_options(ledger, run, resubmit=True, confirmed_by=AUTO_ROLLBACK_METHOD,
                               confirmation_detail=detail, watcher=start_watcher)
    try:
        result = submit_gated(auto_rollback_plan(run.plan(), to_iter, trigger), options)
    except CheckFailed as exc:
        raise CheckFailed("gate.auto_resubmit_refused", run=run.name, iteration=to_iter,
                          reason=exc.render()) from None
    return ledger.get_run(result.run_id)
