"""The submitit adapter: `submitit.AutoExecutor(folder)` with slurm_* parameters from the Plan,
running the trainer through `submitit.helpers.CommandFunction` on every task.

submitit quotes its #SBATCH and srun lines itself; its `slurm_setup` lines are raw shell by
design, so nothing from a Plan goes there. The Plan's environment values, setup commands and the
node check travel inside the CommandFunction's argv (an exec'd list, never parsed by a shell):
`env NAME=VALUE... bash -c WRAPPER ...` where WRAPPER is a code constant. submitit owns its own
preemption signal (USR2, requeue on timeout/preemption); the folder must be on shared storage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator, Optional

from mbridge_launch import __version__
from mbridge_launch.base import slurm_time
from mbridge_launch.base.errors import UserError
from mbridge_launch.base.quoting import sh, sh_join
from mbridge_launch.executors import Requirement, common, node_check, slurm_cli
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.plan.model import Plan

NAME = "submitit"
REQUIRES = (Requirement("submitit", package="submitit", extra="submitit"),)  # checked by the registry

# $1: node check program, $2..$6 its arguments, $7: number of setup commands, then the setup
# commands, then the trainer argv. Every task checks its node (a few ms) before exec'ing.
TASK_WRAPPER = r"""program=$1; shift
bash -c "$program" mbridge-node-check "$1" "$2" "$3" "$4" "$5" || exit 1
shift 5
n=$1; shift
while [ "$n" -gt 0 ]; do eval "$1"; shift; n=$((n - 1)); done
exec "$@"
"""

def slurm_time_minutes(value: str) -> int:
    """A Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) as whole minutes, rounded up; submitit
    has no unlimited timeout, so UNLIMITED is refused like a malformed time."""
    try:
        minutes = slurm_time.minutes(value)
    except ValueError:
        minutes = None
    if minutes is None:
        raise UserError("plan.invalid_field", field="cluster.time", path="<plan>",
                        reason="expected MM, HH:MM:SS or D-HH:MM:SS")
    return minutes


def folder_for(plan: Plan, submit_dir: Path) -> Path:
    """submitit's folder (pickles and logs): <log_dir>/submitit, else beside the checkpoints."""
    base = common.job_workdir(plan, submit_dir)
    if plan.launch.log_dir:
        return common.resolve_dir(plan.launch.log_dir, base) / "submitit"
    if plan.checkpoint.save:
        return common.resolve_dir(plan.checkpoint.save, base).parent / "submitit"
    raise UserError("executors.no_shared_folder")


def task_command(plan: Plan) -> list[str]:
    """The argv each task executes (pickled into the CommandFunction)."""
    argv = common.torchrun_argv(plan) if plan.launch.shape == "torchrun" else common.trainer_argv(plan)
    env = [f"{name}={value}" for name, value in common.perf_env(plan).items()]
    return [
        "env", *env, "bash", "-c", TASK_WRAPPER, "mbridge-launch-task",
        node_check.NODE_CHECK_PROGRAM, *node_check.node_check_args(plan),
        str(len(plan.launch.setup)), *plan.launch.setup,
        *argv,
    ]


def slurm_parameters(plan: Plan) -> dict[str, Any]:
    """update_parameters() arguments (AutoExecutor names)."""
    c = plan.cluster
    per_node = c.gpus_per_node if plan.launch.shape == "srun" else 1
    additional: dict[str, Any] = {"export": common.export_flag_value(plan)}
    additional["requeue" if c.requeue else "no-requeue"] = True
    seg = common.segment(plan)
    if seg:
        additional["segment"] = seg
    if plan.launch.workdir:
        additional["chdir"] = plan.launch.workdir
    additional.update(common.sbatch_args_as_parameters(plan))
    params: dict[str, Any] = {
        "name": plan.name,
        "nodes": c.nodes,
        "tasks_per_node": per_node,
        "gpus_per_node": c.gpus_per_node,
        "timeout_min": slurm_time_minutes(c.time),
        "slurm_additional_parameters": additional,
        "slurm_srun_args": ["--export=ALL", "--kill-on-bad-exit=1", *common.mpi_flags(plan),
                            *common.container_srun_flags(plan), *c.srun_args],
    }
    if c.partition:
        params["slurm_partition"] = c.partition
    if c.account:
        params["slurm_account"] = c.account
    if c.qos:
        params["slurm_qos"] = c.qos
    if c.exclusive:
        params["slurm_exclusive"] = True
    return params


def _command_function(plan: Plan) -> Any:
    from submitit.helpers import CommandFunction

    return CommandFunction(task_command(plan), verbose=True, cwd=plan.launch.workdir)


def _auto_executor(folder: Path, plan: Plan, job_token: Optional[str] = None) -> Any:
    import submitit

    if shutil.which("srun") is None:  # submitit refuses to build a Slurm executor without srun
        raise UserError("executors.slurm_missing", command="srun")
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params = slurm_parameters(plan)
    params["slurm_additional_parameters"].update(common.token_parameters(job_token))
    executor.update_parameters(**params)
    return executor


class SubmititExecutor:
    name = NAME

    def __init__(self, script_dir: Optional[Path] = None, folder: Optional[Path] = None) -> None:
        self.script_dir = Path(script_dir) if script_dir else None
        self.folder = Path(folder) if folder else None

    def _folder(self, plan: Plan, script_dir: Optional[Path] = None) -> Path:
        if self.folder:
            return self.folder.resolve()
        return folder_for(plan, Path(script_dir or self.script_dir or Path.cwd()).resolve())

    def render(self, plan: Plan) -> Rendered:
        """submitit's own sbatch text for this Plan, then the argv every task runs."""
        common.validate_plan(plan)
        folder = self._folder(plan)
        executor = _auto_executor(folder, plan)
        inner = executor._executor  # submitit's SlurmExecutor renders the script text
        script = inner._make_submission_file_text(inner._submitit_command_str, "render")
        task = "\n".join(f"#   {line}" for line in sh_join(task_command(plan)).splitlines())
        text = (
            f"{script.rstrip()}\n\n"
            f"# Generated by mbridge-launch {__version__} (executor: submitit) from plan "
            f"{plan.plan_hash()}: {sh(plan.name)}\n"
            f"# Each task runs this command (a pickled submitit.helpers.CommandFunction, "
            f"cwd={plan.launch.workdir or '.'}):\n{task}\n"
        )
        return Rendered(executor=NAME, text=text, submit_command=["sbatch", str(folder / "%j_submission.sh")],
                        files={str(folder / "submission.sh"): script})

    def submit(self, plan: Plan, script_dir: Path, job_token: Optional[str] = None) -> Submitted:
        import submitit

        common.validate_plan(plan)
        folder = self._folder(plan, script_dir)
        folder.mkdir(parents=True, exist_ok=True)
        executor = _auto_executor(folder, plan, job_token)
        with tempfile.TemporaryFile() as stderr_copy:
            try:
                with _stderr_to(stderr_copy):
                    job = executor.submit(_command_function(plan))
            except (submitit.core.utils.FailedSubmissionError, submitit.core.utils.FailedJobError,
                    subprocess.CalledProcessError, OSError) as exc:
                stderr_copy.seek(0)
                raise _submission_error(exc, stderr_copy.read().decode(errors="replace")) from None
        paths = job.paths
        return Submitted(executor=NAME, job_ids=[str(job.job_id)], script_path=paths.submission_file,
                         log_paths=[paths.stdout, paths.stderr], raw_output="")

    def status(self, job_ids: list[str]) -> dict[str, str]:
        return slurm_cli.job_states(job_ids)

    def cancel(self, job_ids: list[str]) -> None:
        slurm_cli.scancel(job_ids)

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]:
        folder = self._folder(plan)
        return [p for j in job_ids for p in sorted(folder.glob(f"{j}_*.out")) + sorted(folder.glob(f"{j}_*.err"))]


@contextlib.contextmanager
def _stderr_to(target: IO[bytes]) -> Iterator[None]:
    """submitit runs sbatch without capturing its stderr, which would print Slurm's raw message
    next to ours: send file descriptor 2 to `target` while it submits."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(target.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _submission_error(exc: BaseException, stderr: str = "") -> Exception:
    raw = stderr
    for attr in ("output", "stderr"):
        value = getattr(exc, attr, None) or getattr(exc.__cause__, attr, None)
        if value:
            raw += value.decode() if isinstance(value, bytes) else str(value)
    return slurm_cli.submission_error(raw or str(exc))


def create(**options: Any) -> SubmititExecutor:
    return SubmititExecutor(**options)
