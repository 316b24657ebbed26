"""Automatic rollback: follow a run's logs; on NaN/Inf or a loss spike (plan.auto_rollback), cancel
the job, roll the checkpoint directory back to the last complete checkpoint strictly before the
trigger iteration, and resubmit, at most `max_rollbacks` times over the run's resubmission chain.

Resubmission is a hook (`ResubmitHook`): the gate owns submissions. `mbridge-launch watch` uses
`gate.auto_resubmit`: the same plan plus `train.iterations_to_skip` holding the trigger iteration
(`plan.resubmission.auto_rollback_plan`; a convergence change, recorded as such), so the bad
batch is consumed without an update, loading from the rolled-back directory, submitted through the
gate (preflight, plan card, ledger) with the watcher's 'auto-rollback' confirmation. The cli wires
the hook: this module never imports the gate.

One watcher per run chain: a lock file next to the ledger (`watch-<first run id>.lock`).

The gate starts the watcher as a Slurm job of its own next to every run whose plan enables
auto_rollback (gate/watcher_job.py says why a dependent job and not a step of the training job). That
watcher (`follow_resubmissions=False`) handles one run: after resubmitting it stops, because the
gate has started a new watcher job for the new run; it leaves a run that someone else cancelled
alone (`act_on_cancelled=False`); a SIGTERM (its time limit) is deferred while it handles a trigger.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.base.locks import LockHeld, lock_file
from mbridge_launch.rollback.lossmon import LogFollower, LossWatcher, Trigger, parse_line, pick_rollback_target
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.ledger import AUTO_ROLLBACK_METHOD

ResubmitHook = Callable[[L.Ledger, L.RunRecord, int, Trigger], L.RunRecord]
DiagnoseHook = Callable[[L.Ledger, L.RunRecord], Any]  # -> a diagnosis.model.Diagnosis
RetryHook = Callable[[L.Ledger, L.RunRecord, Any], L.RunRecord]  # (ledger, run, diagnosis) -> new run

# Runs that ended like this are diagnosed; a diagnosis whose retry advice is one of RETRIED is
# resubmitted (gate/retry.py), anything else is recorded and left to a person.
FAILURE_STATES = (L.FAILED, L.TIMEOUT)
RETRIED = ("resubmit", "resubmit_excluding_node")
AUTO_RETRY_EVENT = "auto_retry"
# A loss trigger is the diagnosis' nan_loss or loss_spike: the one retry table (diagnosis.model
# RETRY_OF) says what follows, a rollback that skips the bad batch, never a plain resubmission.
TRIGGER_CAUSE = {"nan": "nan_loss", "inf": "nan_loss", "nan_iterations": "nan_loss", "spike": "loss_spike"}


class Terminated(Exception):
    """SIGTERM reached a watcher running as a Slurm job (its time limit, or a cancellation)."""


@dataclass
class WatchResult:
    run: L.RunRecord  # the last run watched
    # finished, triggered (not acting), max_rollbacks, no_checkpoint, rolled_back (no resubmit),
    # resubmitted (not following the new run), cancelled (by someone else: left alone),
    # not_retried (failed; the diagnosis says a retry would not help, or retries are off),
    # not_allowed (the policy forbids automatic cancel/resubmit)
    outcome: str
    trigger: Optional[Trigger] = None
    rollbacks: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: Any = None  # a diagnosis.model.Diagnosis of a run that failed without a trigger


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def auto_rollbacks_in_chain(ledger: L.Ledger, run: L.RunRecord) -> int:
    """The automatic actions taken so far over the run's resubmission chain: rollbacks on a
    trigger and resubmissions after a diagnosed failure. One budget for both (plan.auto_rollback
    max_rollbacks, capped by the policy's auto_rollback.max_per_run)."""
    chain = ledger.run_chain(run.id)
    ids = [r.id for r in chain]
    rollbacks = sum(1 for rb in ledger.rollbacks(run_ids=ids) if rb.trigger and rb.state in ("done", "started"))
    retries = sum(1 for r in chain for e in ledger.events(r.id) if e["kind"] == AUTO_RETRY_EVENT)
    return rollbacks + retries


@dataclass(eq=False)
class Watcher:
    ledger: L.Ledger
    _: KW_ONLY
    resubmit: Optional[ResubmitHook] = None
    cancel: Any = None  # None: the run's executor cancels it (runs.operations.executor_cancel)
    query: Any = None
    act: bool = True
    max_rollbacks: Optional[int] = None
    poll_s: float = 1.0
    refresh_s: float = 5.0
    cancel_timeout_s: float = 300.0
    say: Callable[[str], None] = _say
    follow_resubmissions: bool = True
    act_on_cancelled: bool = True
    # After a run that failed without a trigger: why (diagnosis), and the resubmission when the
    # diagnosis says a retry helps (None: failures are diagnosed and recorded, never retried).
    diagnose: Optional[DiagnoseHook] = None
    retry: Optional[RetryHook] = None
    policy: Any = None  # a policy.files.Policy; None: read for each run from its submit directory
    lock_wait_s: float = 0.0
    # While a trigger is handled (cancel, rollback, resubmit) a SIGTERM only sets term_pending:
    # stopping half-way would leave a cancelled run without its rollback or resubmission.
    critical: bool = field(default=False, init=False)
    term_pending: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not self.cancel:
            from mbridge_launch.runs.operations import executor_cancel

            self.cancel = executor_cancel

    def on_sigterm(self, signum: int = 15, frame: Any = None) -> None:
        """A signal handler for watchers running as Slurm jobs (see gate/watcher_job.py)."""
        if self.critical:
            self.term_pending = True
        else:
            raise Terminated()

    # ------------------------------------------------------------------ the loop
    def watch(self, run: L.RunRecord) -> WatchResult:
        root = self.ledger.run_chain(run.id)[0].id
        with _exclusive(self.ledger.path.parent / f"watch-{root}.lock", run.name, wait_s=self.lock_wait_s):
            rollbacks: list[dict[str, Any]] = []
            while True:
                result = self._watch_one(run)
                result.rollbacks = rollbacks
                failed = result.trigger is None and result.run.state in FAILURE_STATES and self.diagnose is not None
                if not failed and (result.trigger is None or not self.act):
                    return result
                self.critical = True
                try:
                    if result.trigger is None:
                        outcome = self._after_failure(result.run)
                    else:
                        outcome = self._handle(result.run, result.trigger)
                finally:
                    self.critical = False
                if isinstance(outcome, WatchResult):
                    outcome.rollbacks = rollbacks
                    return outcome
                if outcome.get("rollback"):
                    rollbacks.append(outcome["rollback"])
                run = outcome["next_run"]
                if run is None:
                    return WatchResult(result.run, "rolled_back", result.trigger, rollbacks)
                if not self.follow_resubmissions or self.term_pending:
                    return WatchResult(run, "resubmitted", result.trigger, rollbacks)

    def _watch_one(self, run: L.RunRecord) -> WatchResult:
        """Follow every log of `run` until a trigger, or until the run has ended and its logs are read."""
        from mbridge_launch.runs.operations import refresh, run_log_paths

        config = run.plan().auto_rollback
        followers: dict[str, tuple[LogFollower, LossWatcher]] = {}
        self.say(t("watch.watching", run=run.name, id=run.id, jobs=", ".join(run.job_ids) or "-"))
        last_refresh, finishing = 0.0, False
        while True:
            wrote = False
            for path in run_log_paths(run):
                key = str(path)
                if key not in followers:
                    if not path.exists():
                        continue
                    followers[key] = (LogFollower(path), LossWatcher.from_auto_rollback(config))
                follower, detector = followers[key]
                for line in follower.read_new():
                    wrote = True
                    trigger = detector.feed(parse_line(line))
                    if trigger:
                        self.ledger.add_event(run.id, "watch_trigger", trigger.as_dict())
                        self.say(t("watch.trigger", kind=trigger.kind, iteration=trigger.iteration,
                                   loss=trigger.loss, run=run.name))
                        return WatchResult(run, "triggered", trigger)
            if finishing and not wrote:
                return WatchResult(run, "finished")
            now = time.monotonic()
            if run.active and now - last_refresh >= self.refresh_s:
                last_refresh = now
                run = self.ledger.get_run(run.id)  # another command may have recorded job ids or a state
                run = refresh(self.ledger, [run], self.query)[0]
            finishing = not run.active
            if not wrote and not finishing:
                time.sleep(self.poll_s)

    # ------------------------------------------------------------------ acting on a trigger
    def _handle(self, run: L.RunRecord, trigger: Trigger):
        from mbridge_launch.diagnosis.model import RETRY_OF
        from mbridge_launch.rollback.checkpoints import list_checkpoints
        from mbridge_launch.rollback.engine import rollback
        from mbridge_launch.runs.operations import cancel_and_wait, refresh

        if RETRY_OF[TRIGGER_CAUSE.get(trigger.kind, "nan_loss")] != "rollback":
            return WatchResult(run, "not_retried", trigger)
        allowed, limit = self._allowance(run)
        if not allowed:
            return WatchResult(run, "not_allowed", trigger)
        if run.save_dir:  # checked before anything is cancelled
            policy = self.policy if self.policy is not None else _policy_for(run)
            dir_ok, source = policy.rollback_dir_allowed(Path(run.save_dir), Path(run.save_dir))
            if not dir_ok:
                self.say(t("watch.policy_dir_forbids", run=run.name, path=run.save_dir, file=source or "-"))
                return WatchResult(run, "not_allowed", trigger)
        if not self.act_on_cancelled:
            run = refresh(self.ledger, [self.ledger.get_run(run.id)], self.query)[0]
            if run.state == L.CANCELLED:  # not by this watcher: it has not cancelled anything yet
                self.say(t("watch.cancelled_by_someone", run=run.name, iteration=trigger.iteration))
                return WatchResult(run, "cancelled", trigger)
        if run.active:
            run = cancel_and_wait(self.ledger, run, cancel=self.cancel, query=self.query,
                                  timeout_s=self.cancel_timeout_s, poll_s=min(2.0, self.poll_s * 2))
        done = auto_rollbacks_in_chain(self.ledger, run)
        if done >= limit:
            self.say(t("watch.max_rollbacks", run=run.name, count=done, limit=limit))
            return WatchResult(run, "max_rollbacks", trigger)
        if not run.save_dir:
            raise UserError("ckpt.no_save_dir", run=run.name)
        target = pick_rollback_target(list_checkpoints(run.save_dir).checkpoints, trigger.iteration)
        if target is None:
            self.say(t("watch.no_checkpoint", run=run.name, iteration=trigger.iteration))
            return WatchResult(run, "no_checkpoint", trigger)
        self.ledger.record_confirmation(run.id, "rollback", AUTO_ROLLBACK_METHOD,
                                        {"reason": "plan.auto_rollback", "trigger": trigger.as_dict()})
        result = rollback(run.save_dir, target, ledger=self.ledger, run_id=run.id,
                          trigger={**trigger.as_dict(), "job_ids": run.job_ids})
        self.say(t("watch.rolled_back", run=run.name, iteration=target, trigger=trigger.iteration,
                   count=len(result.moved), stamp=result.stamp or "-"))
        record = {"run_id": run.id, "to_iter": target, "stamp": result.stamp, "trigger": trigger.as_dict()}
        next_run = None
        if self.resubmit is not None:
            next_run = self.resubmit(self.ledger, run, target, trigger)
            self.say(t("watch.resubmitted", run=next_run.name, id=next_run.id, jobs=", ".join(next_run.job_ids) or "-"))
        return {"rollback": record, "next_run": next_run}


    # ------------------------------------------------------------------ policy and failures
    def _allowance(self, run: L.RunRecord) -> tuple[bool, int]:
        """Whether this watcher may cancel and resubmit `run` on its own, and how many automatic
        actions the run chain may have: the Plan (or --act / --max-rollbacks) asks, the policy
        bounds it (strictest file wins; without a policy at most 3)."""
        policy = self.policy if self.policy is not None else _policy_for(run)
        allowed, source = policy.auto_rollback_allowed(self.act)
        if not allowed:
            if source:
                self.say(t("watch.policy_forbids", run=run.name, file=source))
            return False, 0
        asked = self.max_rollbacks if self.max_rollbacks is not None else run.plan().auto_rollback.max_rollbacks
        limit, _ = policy.max_auto_rollbacks(asked)
        return True, limit

    def _after_failure(self, run: L.RunRecord):
        """A run that ended failed (or at its time limit) without a loss trigger: diagnose it,
        record the diagnosis, and resubmit only what a retry can fix (gate/retry.py). The same
        classification as `diagnose` decides: a software error is not retried, a NaN or spike is
        for a rollback (never a blind retry), a hardware fault is resubmitted without its node."""
        if self.diagnose is None:
            return WatchResult(run, "finished")
        try:
            found = self.diagnose(self.ledger, run)
        except (UserError, OSError) as exc:
            self.say(t("watch.diagnosis_failed", run=run.name, reason=str(exc)))
            return WatchResult(run, "finished")
        from mbridge_launch.runs.run_diagnosis import record_diagnosis

        record_diagnosis(self.ledger, run, found)
        self.say(t("watch.diagnosed", run=run.name, diagnosis=found.one_line()))
        if found.retry not in RETRIED or self.retry is None or not self.act:
            self.say(t("watch.not_retried", run=run.name, cause=found.cause, retry=found.retry))
            return WatchResult(run, "not_retried", diagnosis=found)
        allowed, limit = self._allowance(run)
        if not allowed:
            return WatchResult(run, "not_allowed", diagnosis=found)
        done = auto_rollbacks_in_chain(self.ledger, run)
        if done >= limit:
            self.say(t("watch.max_rollbacks", run=run.name, count=done, limit=limit))
            return WatchResult(run, "max_rollbacks", diagnosis=found)
        self.ledger.record_confirmation(run.id, "resubmit", AUTO_ROLLBACK_METHOD,
                                        {"reason": "diagnosis", "cause": found.cause, "retry": found.retry})
        self.ledger.add_event(run.id, AUTO_RETRY_EVENT, {"cause": found.cause, "retry": found.retry,
                                                         "exclude_nodes": list(found.exclude_nodes)})
        next_run = self.retry(self.ledger, run, found)
        self.say(t("watch.retried", run=next_run.name, id=next_run.id, cause=found.cause,
                   nodes=", ".join(found.exclude_nodes) or "-", jobs=", ".join(next_run.job_ids) or "-"))
        return {"rollback": None, "next_run": next_run}


def _policy_for(run: L.RunRecord) -> Any:
    """The policy as the run's own submission saw it: site, user, and the project file of the
    directory it was submitted from."""
    from mbridge_launch.policy.files import load_policy

    return load_policy(cwd=Path(run.work_dir) if run.work_dir else None)


class _exclusive:
    """A flock: a second watcher of the same run chain is refused, at once or after `wait_s`
    (a watcher job may start while the one that resubmitted its run is still exiting)."""

    def __init__(self, path: Path, run_name: str, wait_s: float = 0.0) -> None:
        self.path, self.run_name, self.fd, self.wait_s = path, run_name, None, wait_s

    def __enter__(self):
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = lock_file(self.path, wait_s=self.wait_s)
        except LockHeld:
            raise CheckFailed("watch.already_watching", run=self.run_name) from None
        except OSError as exc:  # no flock on this file system (ENOLCK, EOPNOTSUPP), no permission
            raise UserError("watch.lock_failed", path=str(self.path), reason=exc.strerror or str(exc)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
