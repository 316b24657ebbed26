"""One `tune` session: every trial checked by preflight, shown on one card, confirmed once, then
submitted through the gate, waited for, measured from its logs, and the fastest picked.

The one confirmation covers all trials (their total GPU-hours: GPUs x time limit, summed): typed
as the gate asks (the Plan's name above the GPU-hour level, else "yes"), or `--yes`. Each trial is
then submitted by gate.submit.submit_gated with that confirmation (recorded per trial as
`tune-<method>`, with the session in its detail), so every trial is a ledger run with its own
preflight, duplicate and checkpoint-ownership checks. A permission-policy error of any trial
refuses the whole session before anything is submitted, as `submit` refuses.

Waiting polls the ledger's runs through runs.operations.refresh (the Slurm status source `status`
and the watcher use), with a bounded total wait; a trial still going after it is left out (not
cancelled: the user confirmed it). A completed trial is measured with runs.step_metrics (median
step time after the warm-up iterations, peak memory); a failed one gets its diagnosis in one line
(runs.run_diagnosis) and is left out. The fastest measured trial wins; equal step times go to the
planner's order.
"""

from __future__ import annotations

import io
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.base import slurm_time
from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.base.i18n import current_lang, t
from mbridge_launch.plan.model import Plan
from mbridge_launch.tune.trials import Trial, gpu_hours_total

POLL_S = 5.0
WAIT_MARGIN_S = 600.0  # beyond the trials' time limits: queueing and start-up
WARM_UP_STEPS = 3


@dataclass
class SessionOptions:
    executor: str = "sbatch"
    # where the trials' scripts go and the scheduler is called, as `submit --script-dir` (default:
    # the current directory, as submit's): a job whose Plan has no launch.workdir starts there,
    # so a relative entry (scripts/training/run_recipe.py) resolves as it would for the Plan itself
    script_dir: Optional[Path] = None
    yes: bool = False
    ledger_path: Optional[str] = None
    cluster_checks: bool = True
    threshold_gpu_hours: Optional[float] = None
    wait_s: Optional[float] = None  # the bounded total wait (default: the time limits + a margin)
    poll_s: float = POLL_S
    ask: Callable[[str], str] = input
    isatty: Callable[[], bool] = field(default=lambda: sys.stdin.isatty())
    out: Any = None


@dataclass
class Outcome:
    """What one trial came to."""

    trial: Trial
    run_id: Optional[int] = None
    job_id: Optional[str] = None
    state: str = "not_submitted"
    step_time_s: Optional[float] = None
    tokens_per_sec_per_gpu: Optional[float] = None
    peak_memory_gb: Optional[float] = None
    problem: Optional[str] = None  # why it is left out, one line

    @property
    def measured(self) -> bool:
        return self.step_time_s is not None and self.problem is None


# ---------------------------------------------------------------------- the card
def card_lines(plan: Plan, trials: list[Trial], steps: int, root: Path) -> list[str]:
    first = trials[0].plan.cluster
    lines = [t("tune.card.title", name=plan.name, count=len(trials), steps=steps, hours=gpu_hours_total(trials)),
             t("tune.card.where", gpus=first.total_gpus, gpu_type=first.gpu_type.upper(), time=first.time,
               data=trials[0].plan.dataset.selector, root=str(root))]
    for trial in trials:
        item = trial.layout
        cand = item.candidate
        predicted = cand.tokens_per_sec_per_gpu if cand is not None else None
        lines.append(t("tune.card.trial", index=trial.index, run=trial.plan.name, layout=item.label,
                       rank=item.rank if item.rank is not None else "-",
                       predicted=f"{predicted:,.0f}" if predicted else "-",
                       own=t("tune.card.own") if item.own else ""))
    return lines


def confirm(plan: Plan, trials: list[Trial], options: SessionOptions, policy: Any = None) -> str:
    """The one confirmation of all trials, as gate.submit.confirm_submission asks for one job."""
    from mbridge_launch.gate.submit import effective_threshold, typed_confirmation

    if options.yes:
        return "flag-yes"
    if not options.isatty():
        raise CheckFailed("gate.no_tty", action=t("tune.action"))
    hours = gpu_hours_total(trials)
    threshold = effective_threshold(options.threshold_gpu_hours, policy)
    need_name = hours > threshold
    prompt = (t("tune.prompt_name", hours=hours, threshold=threshold, name=plan.name) if need_name
              else t("tune.prompt_yes", count=len(trials), name=plan.name))
    return typed_confirmation(options.ask, prompt, plan.name, need_name)


# ---------------------------------------------------------------------- before confirming
def script_dir(options: SessionOptions) -> Path:
    return Path(options.script_dir or Path.cwd()).resolve()


def precheck(trials: list[Trial], options: SessionOptions) -> Any:
    """Preflight of every trial as the gate will run it; a policy error of any refuses the
    session, another error names the trial. Returns the policy."""
    from mbridge_launch.gate.submit import _load_policy, policy_errors
    from mbridge_launch.preflight.runner import run_preflight

    policy = _load_policy()
    for trial in trials:
        report = run_preflight(trial.plan, cluster=options.cluster_checks, submit_dir=script_dir(options),
                               policy=policy)
        refused = policy_errors(report)
        if refused:
            raise CheckFailed("gate.policy_refused", codes=", ".join(c.code for c in refused),
                              files=", ".join(policy.files))
        if report.errors:
            raise CheckFailed("tune.preflight_failed", run=trial.plan.name, layout=trial.layout.label,
                              codes=", ".join(report.codes("error")))
    return policy


# ---------------------------------------------------------------------- submit, wait, measure
def submit_all(trials: list[Trial], method: str, options: SessionOptions, ledger: Any, plan: Plan) -> list[Outcome]:
    from mbridge_launch.gate.submit import GateOptions, submit_gated

    out = options.out or sys.stderr
    detail = {"tune": plan.name, "trials": len(trials), "gpu_hours_total": round(gpu_hours_total(trials), 3)}
    outcomes = []
    for trial in trials:
        outcome = Outcome(trial)
        gate_out = io.StringIO()  # the session's card stood for every trial's: their reports only on refusal
        gate = GateOptions(executor=options.executor, yes=True, script_dir=script_dir(options), ledger=ledger,
                           cluster_checks=options.cluster_checks, confirmed_by=f"tune-{method}",
                           confirmation_detail=dict(detail, index=trial.index), watcher=False, out=gate_out)
        try:
            result = submit_gated(trial.plan, gate)
        except UserError as exc:
            outcome.problem = exc.render()
            print(gate_out.getvalue(), file=out)
            print(t("tune.submit_failed", index=trial.index, run=trial.plan.name, reason=outcome.problem), file=out)
        else:
            outcome.run_id, outcome.state = result.run_id, "submitted"
            outcome.job_id = result.job_ids[-1] if result.job_ids else None
            print(t("tune.submitted", index=trial.index, run=trial.plan.name, id=result.run_id,
                    jobs=", ".join(result.job_ids) or "-"), file=out)
        outcomes.append(outcome)
    return outcomes


def wait_limit(trials: list[Trial], options: SessionOptions) -> float:
    if options.wait_s is not None:
        return options.wait_s
    return sum(slurm_time.parse_seconds(trial.plan.cluster.time) or 0 for trial in trials) + WAIT_MARGIN_S


def wait_for(outcomes: list[Outcome], ledger: Any, options: SessionOptions) -> list[Any]:
    """The trials' ledger runs once none is active, or when the bounded wait is over."""
    from mbridge_launch.runs.operations import refresh

    out = options.out or sys.stderr
    runs = [ledger.get_run(o.run_id) for o in outcomes if o.run_id is not None]
    limit = wait_limit([o.trial for o in outcomes], options)
    print(t("tune.waiting", count=len(runs), minutes=limit / 60), file=out)
    deadline = time.monotonic() + limit
    while runs:
        runs = refresh(ledger, runs)
        if not any(r.active for r in runs) or time.monotonic() > deadline:
            break
        time.sleep(options.poll_s)
    still = [r.name for r in runs if r.active]
    if still:
        print(t("warning.prefix", message=t("tune.wait_over", minutes=limit / 60, runs=", ".join(still))), file=out)
    return runs


def measure(outcome: Outcome, run: Any, ledger: Any) -> Outcome:
    """The trial's step time, tokens/s/GPU and peak memory, or why it is left out."""
    from mbridge_launch.runs.operations import run_log_paths
    from mbridge_launch.runs.records import COMPLETED
    from mbridge_launch.runs.step_metrics import read_step_metrics, tokens_per_sec_per_gpu

    outcome.state = run.state
    outcome.job_id = run.job_ids[-1] if run.job_ids else outcome.job_id
    plan = outcome.trial.plan
    if run.active:
        outcome.problem = t("tune.still_running", state=run.slurm_state or run.state)
        return outcome
    if run.state != COMPLETED:
        outcome.problem = _diagnosis_line(ledger, run)
        return outcome
    metrics = read_step_metrics(run_log_paths(run), skip=WARM_UP_STEPS)
    if metrics.step_time_s is None:
        outcome.problem = t("tune.no_step_time", iterations=metrics.iterations, skip=WARM_UP_STEPS)
        return outcome
    p = plan.parallelism
    outcome.step_time_s = metrics.step_time_s
    outcome.tokens_per_sec_per_gpu = tokens_per_sec_per_gpu(metrics.step_time_s, p.gbs, p.seq_length,
                                                            plan.cluster.total_gpus)
    outcome.peak_memory_gb = metrics.peak_memory_gb
    return outcome


def _diagnosis_line(ledger: Any, run: Any) -> str:
    from mbridge_launch.base.escape import one_line
    from mbridge_launch.runs.run_diagnosis import diagnose_run, record_diagnosis

    try:
        found = diagnose_run(ledger, run)
    except Exception as exc:  # noqa: BLE001 - a diagnosis that cannot be made still leaves the trial out
        return t("tune.failed_undiagnosed", state=run.state, reason=one_line(str(exc)))
    record_diagnosis(ledger, run, found)
    if not found.failed:
        return t("tune.failed_undiagnosed", state=run.state, reason="-")
    return one_line(found.one_line(current_lang()))


def fastest(outcomes: list[Outcome]) -> Optional[Outcome]:
    """The measured trial with the shortest step time; equal times: the planner's order (the
    trials' order)."""
    measured = [(o.step_time_s, i, o) for i, o in enumerate(outcomes) if o.measured]
    return min(measured, key=lambda item: (item[0], item[1]))[2] if measured else None
