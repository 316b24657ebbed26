"""The narrow executor interface, in TorchX's shape: `render(plan, script_dir) -> Rendered` (the
dry run) and `schedule(rendered, job_token) -> Submitted` (the submission of exactly that dry run).

The gate renders once, shows the Rendered (its review copy, the card), stores its text in the
ledger and schedules that same object: whatever an executor chooses while rendering (NeMo-Run's
experiment id, submitit's folder) is fixed in the Rendered, so the job that reaches Slurm is the
one that was confirmed. An executor reads a Plan and nothing else; it never decides training
settings. Directories are passed (`script_dir`), never set with `chdir`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, runtime_checkable

from mbridge_launch.plan.model import Plan


@dataclass(frozen=True)
class Rendered:
    """What `schedule` submits, with no side effects yet.

    `text`: the batch script Slurm receives, byte for byte (the ledger's script_text);
    `script_path`: where `schedule` puts it (None where the scheduler library names it after the
    job id, as submitit does); `submit_command`: the sbatch call, without the ledger's token (added
    on the command line at schedule, so that it changes nothing that was shown); `files`: every
    file the executor writes, absolute path -> text; `script_dir`: where the files go and the
    scheduler is called (the job starts there when the Plan has no launch.workdir); `choices`:
    what the executor fixed while rendering and reuses when it schedules (NeMo-Run: its home and
    experiment id)."""

    executor: str
    plan: Plan
    script_dir: Path
    text: str
    submit_command: list[str]
    files: dict[str, str] = field(default_factory=dict)
    script_path: Optional[Path] = None
    choices: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Submitted:
    executor: str
    job_ids: list[str]
    script_path: Path | None = None
    log_paths: list[Path] = field(default_factory=list)
    raw_output: str = ""
    # The job was submitted held and the step that releases it did not go through (submitit: its
    # `scontrol release` got no answer, or was cut by Ctrl-C): the ledger records it, and the next
    # look at the run releases the job (runs/reconcile.refresh_runs), so it is never held forever.
    release_pending: bool = False


@runtime_checkable
class Executor(Protocol):
    name: str

    # script_dir: where the executor writes its files and calls the scheduler (`submit
    # --script-dir`); the job itself starts in plan.launch.workdir, or there when that is unset
    def render(self, plan: Plan, script_dir: Optional[Path] = None) -> Rendered: ...

    # job_token: the ledger's submission token, given to Slurm as the job's comment
    # (common.token_args), by which reconciliation finds a job whose id was never recorded
    def schedule(self, rendered: Rendered, job_token: Optional[str] = None) -> Submitted: ...

    def cancel(self, job_ids: list[str]) -> None: ...

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]: ...
