"""The auto-rollback watcher as a Slurm job of its own, started by the gate for every run whose plan
enables `auto_rollback` (`mbridge-launch watch RUN --in-job`).

Why a separate, dependent job and not a companion step inside the training job's script:
- the watcher's answer to a trigger is to CANCEL the training job, then roll back and resubmit. A
  process inside the job's allocation (a background `mbridge-launch watch &` in the batch script,
  or an `srun --overlap` step) is killed by that very cancellation (Slurm's proctrack kills every
  process of the job), so it could never do the rollback or the resubmission;
- a job of its own survives the cancellation, and a requeue of the training job (preemption, node
  failure, `scontrol requeue`) does not touch it: it keeps following the run, sees the job pending
  and running again, reads the new log and, with no trigger, does nothing: the requeued job
  resumes from its latest checkpoint without a rollback.

How it is tied to the training job:
- `--dependency=after:MAIN` (start once MAIN has started, or was cancelled before starting) and
  `--kill-on-invalid-dep=yes`: it never runs before there is anything to read;
- one CPU, no GPUs, the plan's partition and account (or $MBRIDGE_LAUNCH_WATCHER_PARTITION, e.g.
  a CPU partition, on sites whose GPU nodes are allocated whole: with `--exclusive` training jobs
  a watcher in the same partition needs a node of its own);
- the plan's time limit: it starts after the training job, so it outlives that job's first run.
  When it reaches its own limit while the run is still active (a requeue restarted the clock), the
  SIGTERM Slurm sends first makes it submit its successor (`--dependency=afterany:ITSELF`, so the
  two never hold the watch lock together) and exit;
- when the run ends (completed, failed, cancelled) the watcher reads the last lines and exits; a run
  cancelled by someone else is not rolled back or resubmitted; `mbridge-launch cancel RUN` cancels
  the watcher job too. After a trigger it resubmits through the gate, which starts a new watcher
  job for the new run, and exits.

It needs the ledger (given as an absolute --ledger path) and the Python that runs mbridge-launch on
the node it lands on: on clusters both are normally on shared storage (home, a shared venv).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.i18n import t

PARTITION_ENV = "MBRIDGE_LAUNCH_WATCHER_PARTITION"
POLL_ENV = "MBRIDGE_LAUNCH_WATCHER_POLL"  # seconds between log reads (Slurm is asked every 6 polls)
DEFAULT_POLL_S = 5.0
JOB_SUFFIX = "-watch"


def watcher_command(run_id: int, ledger_path: str | Path) -> list[str]:
    try:
        poll = float(os.environ.get(POLL_ENV) or DEFAULT_POLL_S)
    except ValueError:
        poll = DEFAULT_POLL_S
    return [sys.executable, "-m", "mbridge_launch", "watch", str(run_id), "--ledger", str(ledger_path), "--in-job",
            "--poll", f"{max(poll, 0.05):g}"]


def watcher_sbatch_argv(plan: Any, run: Any, ledger_path: str | Path, *, after: str, kind: str = "after") -> list[str]:
    """The sbatch command line of the watcher job of `run` (every value passes through quoting
    in --wrap; the rest are separate argv items, no shell involved)."""
    from mbridge_launch.base.quoting import sh_join

    cluster = plan.cluster
    work_dir = Path(run.work_dir or os.getcwd())
    partition = os.environ.get(PARTITION_ENV) or cluster.partition
    argv = ["sbatch", "--parsable", f"--job-name={run.job_name or run.name}{JOB_SUFFIX}",
            f"--dependency={kind}:{after}", "--kill-on-invalid-dep=yes", "--nodes=1", "--ntasks=1",
            "--cpus-per-task=1", f"--time={cluster.time}", f"--chdir={work_dir}",
            f"--output={work_dir / (plan.name + JOB_SUFFIX + '-%j.out')}", "--open-mode=append", "--export=ALL"]
    if partition:
        argv.append(f"--partition={partition}")
    if cluster.account:
        argv.append(f"--account={cluster.account}")
    argv += ["--wrap", "exec " + sh_join(watcher_command(run.id, os.path.abspath(ledger_path)))]
    return argv


def submit_watcher_job(ledger: Any, run: Any, *, after: Optional[str] = None, kind: str = "after",
                       out: Any = None) -> Optional[str]:
    """Submit the watcher job of `run` (after its main job unless `after` names another job) and
    record it in the ledger. A refusal is a warning, not a failure: the training job is already
    submitted, and `mbridge-launch watch RUN` does the same from a login node."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.executors.slurm_cli import parse_job_id, run_slurm, slurm_reason

    out = out or sys.stderr
    after = after or (run.job_ids[0] if run.job_ids else None)
    if after is None:
        return None
    argv = watcher_sbatch_argv(run.plan(), run, ledger.path, after=after, kind=kind)
    try:
        proc = run_slurm(argv, cwd=Path(run.work_dir) if run.work_dir and Path(run.work_dir).is_dir() else None)
        if proc.returncode != 0:
            raise UserError("executors.submit_refused", reason=slurm_reason((proc.stdout or "") + (proc.stderr or "")))
        job_id = parse_job_id(proc.stdout)
    except UserError as exc:
        ledger.add_event(run.id, "watcher_job_failed", {"after": after, "reason": exc.render("en")})
        print(t("warning.prefix", message=t("watch.job_refused", run=run.name, reason=exc.render())), file=out)
        return None
    ledger.set_watcher_job(run.id, job_id, {"after": after, "dependency": kind})
    print(t("watch.job_started", run=run.name, id=run.id, job=job_id, after=after), file=out)
    return job_id
