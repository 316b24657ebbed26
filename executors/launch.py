"""Turning a Plan into a Slurm job through an executor, in two stages with one entry point each:
`render_plan` (the dry run: `submit --dry-run` prints it, the gate shows it) and `schedule` (the
submission of exactly that Rendered). The gate (confirmation, preflight, ledger) wraps them
without knowing the executors.

Two directories, never confused:
- the job's start directory is the Plan's `launch.workdir` (`recommend --workdir`), the Megatron
  Bridge checkout that holds the training entry;
- the script directory (`submit --script-dir`, default: the current directory) holds what the
  executor writes (the sbatch script, the NeMo-Run home, submitit's defaults) and is where the
  scheduler is called (sbatch's cwd, for every executor), so a Plan without `launch.workdir`
  starts its job there. It is passed to the executors, never set with chdir: the process's
  working directory is never changed.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Optional, Union

from mbridge_launch.base.errors import writable
from mbridge_launch.executors import get_executor
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.plan.model import Plan


def executor_options(executor_name: str, script_dir: Optional[Path]) -> dict[str, object]:
    # every adapter takes its defaults from the script directory except sbatch, which needs none
    return {} if executor_name == "sbatch" else {"script_dir": script_dir}


def render_plan(plan: Plan, executor_name: str, script_dir: Optional[Union[str, Path]] = None) -> Rendered:
    """The Rendered of `plan` with the named executor, for `script_dir` (default: cwd): no side
    effects; `schedule` submits it unchanged."""
    directory = Path(script_dir).resolve() if script_dir else Path.cwd()
    executor = get_executor(executor_name, **executor_options(executor_name, directory))
    return executor.render(plan, directory)


def schedule(rendered: Rendered, job_token: Optional[str] = None) -> Submitted:
    """Submit exactly `rendered`. `job_token`: the ledger's token, passed to Slurm as the job's
    comment by every executor that accepts it (an executor of another package that does not is
    called without it, and its lost submissions are matched by job name and time instead)."""
    directory = rendered.script_dir
    with writable(directory):
        directory.mkdir(parents=True, exist_ok=True)
    executor = get_executor(rendered.executor, **executor_options(rendered.executor, directory))
    if job_token and _takes_token(executor):
        return executor.schedule(rendered, job_token=job_token)
    return executor.schedule(rendered)


def _takes_token(executor: object) -> bool:
    try:
        return "job_token" in inspect.signature(executor.schedule).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False
