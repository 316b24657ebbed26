"""What the ledger-backed commands (runs, status, logs, checkpoints, rollback, watch) share:
opening the ledger with reconciliation, RUN|DIR resolution, typed confirmation, and a
small cancellation interface (the executors own cancellation; tests and the gate plug in theirs).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Protocol

from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.runs import ledger as L


def slurm_query():
    """The real Slurm query (squeue/sacct on PATH; tests put fakes there)."""
    from mbridge_launch.runs.reconcile import SacctQuery

    return SacctQuery()


def open_ledger(path: Optional[str] = None, *, reconcile: bool = True, query=None, create: bool = False) -> L.Ledger:
    """Open the ledger and resolve every run that may have a job the ledger does not know (left
    `submitting` by a crashed submit, or `submit_failed` after the scheduler was called), printing
    what was found, before the command does anything else. `path`: the --ledger option (default:
    the state directory's ledger). `create`: only commands that record something new (submit,
    a rollback that is not a dry run) create a missing ledger; the others read it as empty."""
    ledger = L.Ledger.open(path, create=create)
    if ledger.read_only:  # nothing can be recorded: no reconciliation (nor refresh, see refresh)
        if reconcile and ledger.reconcile_candidates():
            _note_read_only(ledger)
        return ledger
    if reconcile and ledger.reconcile_candidates():
        reconcile_now(ledger, query)
    return ledger


def _note_read_only(ledger: L.Ledger) -> None:
    """Once per ledger: the states shown could not be refreshed (a command that must write has
    refused the read-only ledger before it got here, with its own one line)."""
    if not ledger.read_only_noted:
        ledger.read_only_noted = True
        print(t("warning.prefix", message=t("ledger.read_only_note", path=ledger.path)), file=sys.stderr)


def reconcile_now(ledger: L.Ledger, query=None) -> None:
    """Reconcile the ledger's candidates with Slurm and say what was found (stderr)."""
    from mbridge_launch.runs.reconcile import reconcile_submitting

    for result in reconcile_submitting(ledger, query or slurm_query()):
        _report_reconciled(ledger, result)


def _report_reconciled(ledger: L.Ledger, result) -> None:
    run = ledger.get_run(result.run_id)
    if result.outcome == "submitted":
        print(t("ledger.reconciled_submitted", run=run.name, id=run.id, job=", ".join(result.job_ids)), file=sys.stderr)
    elif result.outcome == "lost":
        print(t("ledger.reconciled_lost", run=run.name, id=run.id), file=sys.stderr)
        _say_candidates(run, result.candidates)
    elif result.outcome == "no_job":
        print(t("ledger.reconciled_no_job", run=run.name, id=run.id), file=sys.stderr)
        _say_candidates(run, result.candidates)
    elif result.outcome == "unknown":
        print(t("warning.prefix", message=t("ledger.reconcile_unknown", run=run.name, id=run.id)), file=sys.stderr)
    elif result.outcome == "ambiguous":
        print(t("ledger.reconciled_ambiguous", run=run.name, id=run.id, jobs=", ".join(result.job_ids)), file=sys.stderr)


def _say_candidates(run: L.RunRecord, candidates: list[str]) -> None:
    if candidates:
        print(t("hint.prefix", message=t("ledger.reconcile_candidates", run=run.name, jobs=", ".join(candidates),
                                         job=candidates[-1])), file=sys.stderr)


@dataclass
class Target:
    """What a RUN|DIR argument names: a recorded run (with its save dir) or a bare directory
    (with the recorded runs that write into it, if any)."""

    save_dir: Optional[Path]
    run: Optional[L.RunRecord]
    label: str  # what the user types to confirm: the run name or the directory's basename


def resolve_target(ref: str, ledger: L.Ledger, *, need_save_dir: bool = True) -> Target:
    path = Path(ref).expanduser()
    if path.is_dir():
        runs = ledger.runs_for_save_dir(path)
        return Target(Path(os.path.abspath(path)), runs[0] if runs else None, Path(os.path.abspath(path)).name)
    run = ledger.find_run(ref)
    if run is None:
        if os.sep in ref or ref.startswith("."):
            raise UserError("ckpt.not_a_dir", path=ref)
        known = ", ".join(r.name for r in ledger.list_runs(limit=8)) or "-"
        raise UserError("ckpt.not_run_or_dir", ref=ref, known=known)
    if need_save_dir and not run.save_dir:
        raise UserError("ckpt.no_save_dir", run=run.name)
    return Target(Path(run.save_dir) if run.save_dir else None, run, run.name)


def confirm(expected: str, *, yes: bool, action_key: str,
            ask: Callable[[str], str] = input, isatty: Callable[[], bool] = lambda: sys.stdin.isatty()) -> str:
    """Typed confirmation: the user types `expected` (a run name or directory name; a plain
    'yes' is not enough). Returns how it was confirmed, for the ledger."""
    if yes:
        return "flag-yes"
    if not isatty():
        raise CheckFailed("rollback.no_tty", action=t(action_key))
    try:
        answer = ask(t("rollback.confirm_prompt", expected=expected))
    except EOFError:
        answer = ""
    if answer.strip() != expected:
        raise CheckFailed("rollback.aborted")
    return "typed-name"


class Canceller(Protocol):
    """Stops a run's jobs. The default goes through the run's executor."""

    def __call__(self, run: L.RunRecord) -> None: ...


def executor_for(run: L.RunRecord):
    """The run's executor, created the way launch.submit_plan created it (same work dir)."""
    from mbridge_launch.executors import get_executor
    from mbridge_launch.executors.launch import executor_options

    return get_executor(run.executor, **executor_options(run.executor, Path(run.work_dir) if run.work_dir else None))


def executor_cancel(run: L.RunRecord) -> None:
    try:
        executor = executor_for(run)
    except (ImportError, UserError) as exc:
        raise CheckFailed("rollback.cancel_unavailable", run=run.name, executor=run.executor, reason=str(exc)) from None
    executor.cancel(list(run.job_ids))


def refresh(ledger: L.Ledger, runs: list[L.RunRecord], query=None, *, warn: bool = False) -> list[L.RunRecord]:
    """Runs updated from Slurm; with `warn`, say so when Slurm could not be asked."""
    from mbridge_launch.runs.reconcile import SlurmUnavailable, refresh_runs

    if ledger.read_only:  # states shown as last recorded
        if any(r.active for r in runs):
            _note_read_only(ledger)
        return runs
    try:
        return refresh_runs(ledger, query or slurm_query(), runs, raise_unavailable=warn)
    except SlurmUnavailable as exc:
        from mbridge_launch.runs.slurm_outage import not_asked_line

        # one line: why Slurm gave no answer, and how old the states shown are
        asked = [r for r in runs if r.active and r.job_ids]
        print(t("warning.prefix", message=not_asked_line(exc, asked)), file=sys.stderr)
        return runs


def cancel_and_wait(ledger: L.Ledger, run: L.RunRecord, *, cancel: Canceller = executor_cancel, query=None,
                    timeout_s: float = 300.0, poll_s: float = 2.0) -> L.RunRecord:
    """Cancel and wait until Slurm reports the job finished: a cancelled trainer checkpoints on
    SIGTERM, so touching the trackers before it exits would race with its last save."""
    print(t("rollback.cancelling", run=run.name, jobs=", ".join(run.job_ids) or "-"), file=sys.stderr)
    cancel(run)
    ledger.add_event(run.id, "cancel", {"job_ids": run.job_ids})
    deadline = time.monotonic() + timeout_s
    while True:
        run = refresh(ledger, [run], query)[0]
        if not run.active:
            return run
        if time.monotonic() > deadline:
            raise CheckFailed("rollback.cancel_timeout", run=run.name, seconds=int(timeout_s), state=run.state)
        time.sleep(poll_s)


@contextmanager
def _cwd(path: Optional[str]) -> Iterator[None]:
    old = os.getcwd()
    if path and Path(path).is_dir():
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_log_paths(run: L.RunRecord) -> list[Path]:
    """The run's log files now: the recorded ones plus whatever the executor knows (per-restart
    logs appear after submission), asked from the directory the run was submitted from."""
    paths = [Path(p) for p in run.log_paths]
    if run.job_ids:
        try:
            with _cwd(run.work_dir):
                extra = executor_for(run).log_paths(run.plan(), list(run.job_ids))
            base = Path(run.work_dir or ".")
            paths.extend(p if Path(p).is_absolute() else base / p for p in extra)
        except Exception:  # noqa: BLE001 - an executor that is missing or broken: keep the recorded paths
            pass
    unique: dict[str, Path] = {}
    for p in paths:
        unique.setdefault(os.path.abspath(p), Path(os.path.abspath(p)))
    return list(unique.values())


def fmt_time(epoch: Optional[float]) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else "-"
