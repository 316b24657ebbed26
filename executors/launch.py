"""Turning a Plan into a Slurm job through an executor. `submit_plan` is the one entry point, so
that the gate (confirmation, preflight, ledger) can wrap it without knowing the executors."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from mbridge_launch.base.errors import writable
from mbridge_launch.executors import get_executor
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.plan.model import Plan


def executor_options(executor_name: str, workdir: Optional[Path]) -> dict[str, object]:
    # every adapter takes its defaults from the submit directory except sbatch, which needs none
    return {} if executor_name == "sbatch" else {"workdir": workdir}


def submit_plan(
    plan: Plan,
    executor_name: str,
    workdir: Optional[Union[str, Path]] = None,
    dry_run: bool = False,
) -> Union[Submitted, Rendered]:
    """Render (dry_run) or submit `plan` with the named executor. `workdir` holds the rendered
    script (sbatch), the NeMo-Run home (nemo-run) or resolves relative paths; default: cwd."""
    directory = Path(workdir).resolve() if workdir else Path.cwd()
    executor = get_executor(executor_name, **executor_options(executor_name, directory))
    if dry_run:
        return executor.render(plan)
    with writable(directory):
        directory.mkdir(parents=True, exist_ok=True)
    return executor.submit(plan, directory)
