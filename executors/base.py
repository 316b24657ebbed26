"""The narrow executor interface (after submitit's Executor and TorchX's dry-run info).

An executor reads a Plan and nothing else; it never decides training settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from mbridge_launch.plan.model import Plan


@dataclass
class Rendered:
    """What would be submitted, with no side effects: the script or experiment text and the
    command that submits it. `files` maps a relative path to text for multi-file renderings."""

    executor: str
    text: str
    submit_command: list[str]
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class Submitted:
    executor: str
    job_ids: list[str]
    script_path: Path | None = None
    log_paths: list[Path] = field(default_factory=list)
    raw_output: str = ""


@runtime_checkable
class Executor(Protocol):
    name: str

    def render(self, plan: Plan) -> Rendered: ...

    # script_dir: where the executor writes its files and calls the scheduler (`submit
    # --script-dir`); the job itself starts in plan.launch.workdir, or there when that is unset
    # job_token: the ledger's submission token, given to Slurm as the job's comment
    # (common.token_args), by which reconciliation finds a job whose id was never recorded
    def submit(self, plan: Plan, script_dir: Path, job_token: str | None = None) -> Submitted: ...

    def status(self, job_ids: list[str]) -> dict[str, str]: ...

    def cancel(self, job_ids: list[str]) -> None: ...

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]: ...
