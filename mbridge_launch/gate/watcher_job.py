"""The auto-rollback watcher as a Slurm job of its own, started by the gate for every run whose plan
enables `auto_rollback` (`mbridge-launch watch RUN --in-job`).

Why a separate, dependent job on a partition recorded in the Plan, and not a companion step inside
the training job's allocation:
- the watcher's answer to a trigger is to CANCEL the training job, then roll back and resubmit. A
  process inside the job's allocation (a background `mbridge-launch watch &` in the batch script,
  or an `srun --overlap` step) is killed by that very cancellation (Slurm's proctrack kills every
  process of the job), so it could never do the rollback or the resubmission; stopping only the
  training step and restarting it in the same allocation would need the trainer's whole launch
  (container, srun shape, requeue accounting) repeated inside the script, for one executor only;
- a job of its own survives the cancellation, and a requeue of the training job (preemption, node
  failure, `scontrol requeue`) does not touch it: it keeps following the run, sees the job pending
  and running again, reads the new log and, with no trigger, does nothing: the requeued job
  resumes from its latest checkpoint without a rollback;
- it must RUN while training runs, or a NaN is acted on after the last iteration: a training job
  with --exclusive (the default) or on every node of its partition leaves no CPU there for it. So
  its place is part of the Plan (`auto_rollback.watcher_partition` / `watcher_account`, set by
  `recommend --watcher-partition`, whose default is $MBRIDGE_LAUNCH_WATCHER_PARTITION read at
  recommend time only), shown on the plan card, and preflight warns when the watcher could not
  start while training runs (preflight/watcher_checks.py). Unset: the training partition.

How it is tied to the training job:
- `--dependency=after:MAIN` (start once MAIN has started, or was cancelled before starting) and
  `--kill-on-invalid-dep=yes`: it never runs before there is anything to read;
- one CPU, no GPUs, the Plan's watcher partition and account (else the training job's);
- the plan's time limit: it starts after the training job, so it outlives that job's first run.
  When it reaches its own limit while the run is still active (a requeue restarted the clock), the
  SIGTERM Slurm sends first makes it submit its successor (`--dependency=afterany:ITSELF`, so the
  two never hold the watch lock together) and exit. Only a real time limit does: `cancel RUN`
  records a cancel request in the ledger before it cancels the watcher job, and the watcher also
  asks Slurm whether its own job timed out (cli/commands/watch.py);
- when the run ends (completed, failed, cancelled) the watcher reads the last lines and exits; a run
  cancelled by someone else is not rolled back or resubmitted. After a trigger it resubmits through
  the gate, which starts a new watcher job for the new run, and exits.

Latency, log line -> scancel: a log read every DEFAULT_POLL_S (5 s), then one squeue/sacct (is the
run still ours to act on?) and the scancel; Slurm is asked every 6 polls otherwise. The job's end
follows after Slurm's KillWait (30 s by default) at the latest: well inside a minute.

Its environment is not the submitter's whole one (--export=ALL would hand every secret of the
login shell to the job): only what running mbridge-launch needs, by NAME (watcher_export_names),
plus the Plan's cluster.env, plus the Plan's secret NAMES only when it may resubmit
(max_rollbacks > 0): the new training job's sbatch --export takes their values from the watcher's
environment, so without them the resubmitted job would run without its tokens.

Its log is `<launch.log_dir>/<file slug of the run name>-watch-<job id>.out`, resolved like the
training job's (executors/common.py) from the directory the run was submitted from, and created
before sbatch: Slurm does not create missing directories, and a job whose output cannot be opened
fails at launch.

It needs the ledger (given as an absolute --ledger path) and the Python that runs mbridge-launch on
the node it lands on: on clusters both are normally on shared storage (home, a shared venv).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.i18n import t

PARTITION_ENV = "MBRIDGE_LAUNCH_WATCHER_PARTITION"  # recommend's default for --watcher-partition
POLL_ENV = "MBRIDGE_LAUNCH_WATCHER_POLL"  # seconds between log reads (Slurm is asked every 6 polls)
DEFAULT_POLL_S = 5.0
JOB_SUFFIX = "-watch"
# Every variable `mbridge-launch watch --in-job` (and the gate, preflight and executor it
# resubmits through) reads, by name; nothing is taken by a name family (a fault-injection knob or
# a token that happens to start like the tool's own names stays on the login node):
# - running Python and Slurm's clients: PATH, VIRTUAL_ENV, PYTHONPATH, HOME, USER, LOGNAME, TMPDIR,
#   TZ, SLURM_CONF;
# - the language (base/i18n.py): MBRIDGE_LAUNCH_LANG, LC_ALL, LC_MESSAGES, LANG, LANGUAGE;
#   MBRIDGE_LAUNCH_STRICT_MESSAGES;
# - where the tool keeps its files (base/paths.py, policy/files.py, runs/ledger.py):
#   XDG_STATE_HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME, MBRIDGE_LAUNCH_STATE_DIR, MBRIDGE_LAUNCH_CACHE_DIR,
#   MBRIDGE_LAUNCH_LEDGER_BUSY_MS;
# - where the catalogs are (base/data_dirs.py): a resubmission's preflight and entry command load the
#   catalog the Plan names, which may be one the user synced: XDG_DATA_HOME, MBRIDGE_LAUNCH_CATALOGS;
# - what a resubmission checks and obeys as a submission from the login node would:
#   MBRIDGE_LAUNCH_SITE_POLICY (policy/files.py), MBRIDGE_LAUNCH_SHARED_PREFIXES (preflight/storage.py),
#   MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS (gate/submit.py), NEMORUN_HOME (executors/nemo_run.py);
# - the successor watcher's poll interval (watcher_command): MBRIDGE_LAUNCH_WATCHER_POLL;
# - MBRIDGE_LAUNCH_DEBUG: a traceback in the watcher's log when asked for.
# Not taken: MBRIDGE_LAUNCH_LEDGER (the job is given --ledger), MBRIDGE_LAUNCH_WATCHER_PARTITION
# (read by recommend only).
WATCHER_ENV_NAMES = ("PATH", "VIRTUAL_ENV", "PYTHONPATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "SLURM_CONF",
                     "MBRIDGE_LAUNCH_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE",
                     "MBRIDGE_LAUNCH_STRICT_MESSAGES",
                     "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MBRIDGE_LAUNCH_STATE_DIR",
                     "MBRIDGE_LAUNCH_CACHE_DIR", "MBRIDGE_LAUNCH_LEDGER_BUSY_MS", "XDG_DATA_HOME", "MBRIDGE_LAUNCH_CATALOGS",
                     "MBRIDGE_LAUNCH_SITE_POLICY", "MBRIDGE_LAUNCH_SHARED_PREFIXES", "MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS",
                     "NEMORUN_HOME", POLL_ENV, "MBRIDGE_LAUNCH_DEBUG")

def watcher_command(run_id: int, ledger_path: str | Path) -> list[str]:
    try:
        poll = float(os.environ.get(POLL_ENV) or DEFAULT_POLL_S)
    except ValueError:
        poll = DEFAULT_POLL_S
    return [sys.executable, "-m", "mbridge_launch", "watch", str(run_id), "--ledger", str(ledger_path), "--in-job",
            "--poll", f"{max(poll, 0.05):g}"]


def may_resubmit(plan: Any) -> bool:
    """Whether the watcher job of `plan` may submit a training job (after a rollback)."""
    return plan.auto_rollback.enabled and plan.auto_rollback.max_rollbacks > 0


def watcher_export_names(plan: Any) -> list[str]:
    """The --export list of the watcher job: NAMES only (sbatch copies their values): the fixed
    WATCHER_ENV_NAMES, whatever else the submitter's shell holds, and the Plan's own."""
    from mbridge_launch.executors.common import forwarded_env_names

    names = list(WATCHER_ENV_NAMES) + list(plan.cluster.env)  # names only: sbatch skips those unset
    # a secret is never taken in by a fixed name: only by resubmission
    names = [n for n in names if n not in plan.cluster.secrets]
    if may_resubmit(plan):
        names += forwarded_env_names(plan)
    return list(dict.fromkeys(n for n in names if "," not in n and "=" not in n))


def _log_dir(plan: Any, work_dir: Path) -> Path:
    """The plan's log directory as the training job resolves it (launch.log_dir relative to the
    job's working directory: launch.workdir, else `work_dir`, where the run was submitted)."""
    from mbridge_launch.executors import common

    return common.resolve_dir(common.log_dir(plan), common.job_workdir(plan, work_dir))


def watcher_log_pattern(plan: Any, work_dir: Path) -> str:
    """The watcher job's --output: the log directory, the run's file slug, Slurm's %j (a literal
    % of the path doubled)."""
    from mbridge_launch.executors import common

    return common.slurm_filename(str(_log_dir(plan, work_dir) / common.file_slug(plan))) + JOB_SUFFIX + "-%j.out"


def watcher_log_file(plan: Any, work_dir: Path, job_id: str) -> Path:
    """The log file of watcher job `job_id`."""
    from mbridge_launch.executors import common

    return _log_dir(plan, work_dir) / f"{common.file_slug(plan)}{JOB_SUFFIX}-{job_id}.out"


def watcher_sbatch_argv(plan: Any, run: Any, ledger_path: str | Path, *, after: str, kind: str = "after") -> list[str]:
    """The sbatch command line of the watcher job of `run` (every value passes through quoting
    in --wrap; the rest are separate argv items, no shell involved)."""
    from mbridge_launch.base.quoting import sh_join
    from mbridge_launch.executors.common import reject_control_chars
    from mbridge_launch.preflight.watcher_checks import watcher_placement

    cluster = plan.cluster
    work_dir = Path(run.work_dir or os.getcwd())
    partition, account = watcher_placement(plan)
    reject_control_chars("auto_rollback.watcher_partition", partition)
    reject_control_chars("auto_rollback.watcher_account", account)
    argv = ["sbatch", "--parsable", f"--job-name={run.job_name or run.name}{JOB_SUFFIX}",
            f"--dependency={kind}:{after}", "--kill-on-invalid-dep=yes", "--nodes=1", "--ntasks=1",
            "--cpus-per-task=1", f"--time={cluster.time}", f"--chdir={work_dir}",
            f"--output={watcher_log_pattern(plan, work_dir)}", "--open-mode=append",
            f"--export={','.join(watcher_export_names(plan))}"]
    if partition:
        argv.append(f"--partition={partition}")
    if account:
        argv.append(f"--account={account}")
    argv += ["--wrap", "exec " + sh_join(watcher_command(run.id, os.path.abspath(ledger_path)))]
    return argv


def _make_log_dir(plan: Any, work_dir: Path) -> None:
    """Slurm opens --output on the node and does not create its directory: make it first."""
    from mbridge_launch.base.errors import UserError

    directory = _log_dir(plan, work_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError("watch.log_dir_failed", path=str(directory), reason=exc.strerror or str(exc)) from None


def submit_watcher_job(ledger: Any, run: Any, *, after: Optional[str] = None, kind: str = "after",
                       out: Any = None) -> Optional[str]:
    """Submit the watcher job of `run` (after its main job unless `after` names another job) and
    record it in the ledger. A refusal is a warning, not a failure: the training job is already
    submitted, and `mbridge-launch watch RUN` does the same from a login node."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.signals import deferred_signals
    from mbridge_launch.slurm.commands import parse_job_id, run_slurm, submission_error

    out = out or sys.stderr
    after = after or (run.job_ids[0] if run.job_ids else None)
    if after is None:
        return None
    plan = run.plan()
    work_dir = Path(run.work_dir or os.getcwd())
    # like the training job's (gate/submit.py): an interrupt waits until the watcher job's id is
    # recorded, so `cancel RUN` always knows the job it must cancel
    with deferred_signals():
        try:
            argv = watcher_sbatch_argv(plan, run, ledger.path, after=after, kind=kind)
            _make_log_dir(plan, work_dir)
            proc = run_slurm(argv, cwd=work_dir if work_dir.is_dir() else None)
            if proc.returncode != 0:  # worded as Slurm answered: refused, unreachable, or no answer
                raise submission_error(proc.output, proc.returncode)
            job_id = parse_job_id(proc.stdout)
        except UserError as exc:
            ledger.add_event(run.id, "watcher_job_failed", {"after": after, "reason": exc.render("en")})
            print(t("warning.prefix", message=t("watch.job_refused", run=run.name, reason=exc.render())), file=out)
            return None
        ledger.set_watcher_job(run.id, job_id, {"after": after, "dependency": kind,
                                                "log": str(watcher_log_file(plan, work_dir, job_id))})
    print(t("watch.job_started", run=run.name, id=run.id, job=job_id, after=after), file=out)
    return job_id
