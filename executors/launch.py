"""Turning a Plan into a Slurm job through an executor. `submit_plan` is the one entry point, so
that the gate (confirmation, preflight, ledger) can wrap it without knowing the executors.

Two directories, never confused:
- the job's start directory is the Plan's `launch.workdir` (`recommend --workdir`), the Megatron
  Bridge checkout that holds the training entry;
- the script directory (`submit --script-dir`, default: the current directory) holds what the
  executor writes (the sbatch script, the NeMo-Run home, submitit's defaults) and is where the
  submit command runs, so a Plan without `launch.workdir` starts its job there, for every executor.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from mbridge_launch.base.errors import writable
from mbridge_launch.executors import get_executor
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.plan.model import Plan


def executor_options(executor_name: str, script_dir: Optional[Path]) -> dict[str, object]:
    # every adapter takes its defaults from the script directory except sbatch, which needs none
    return {} if executor_name == "sbatch" else {"script_dir": script_dir}


def submit_plan(
    plan: Plan,
    executor_name: str,
    script_dir: Optional[Union[str, Path]] = None,
    dry_run: bool = False,
    job_token: Optional[str] = None,
) -> Union[Submitted, Rendered]:
    """Render (dry_run) or submit `plan` with the named executor. `script_dir` holds the rendered
    script (sbatch), the NeMo-Run home (nemo-run) or submitit's folder default; the scheduler is
    called from it (default: cwd). `job_token`: the ledger's token, passed to Slurm as the job's
    comment by every executor that accepts it (an executor of another package that does not is
    called without it, and its lost submissions are matched by job name and time instead)."""
    directory = Path(script_dir).resolve() if script_dir else Path.cwd()
    executor = get_executor(executor_name, **executor_options(executor_name, directory))
    if dry_run:
        return executor.render(plan)
    with writable(directory):
        directory.mkdir(parents=True, exist_ok=True)
    # sbatch runs from the script directory (its own cwd argument); NeMo-Run and submitit call
    # sbatch from the process's cwd: the same directory for them too, so that a Plan without
    # launch.workdir starts where the ledger says it was submitted, whatever the executor
    previous = os.getcwd()
    os.chdir(directory)
    try:
        if job_token and _takes_token(executor):
            return executor.submit(plan, directory, job_token=job_token)
        return executor.submit(plan, directory)
    finally:
        os.chdir(previous)


def _takes_token(executor: object) -> bool:
    import inspect

    try:
        return "job_token" in inspect.signature(executor.submit).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
