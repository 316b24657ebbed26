"""The submitit adapter: `submitit.AutoExecutor(folder)` with slurm_* parameters from the Plan,
running the trainer through `submitit.helpers.CommandFunction` on every task.

submitit quotes its #SBATCH and srun lines itself; its `slurm_setup` lines are raw shell by
design, so nothing from a Plan goes there. The Plan's environment values, setup commands and the
node check travel inside the CommandFunction's argv (an exec'd list, never parsed by a shell):
`env NAME=VALUE... bash -c WRAPPER ...` where WRAPPER is a code constant. The Plan's --signal
replaces submitit's own USR2 (delivered_signal); the folder must be on shared storage.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Optional

from mbridge_launch import __version__
from mbridge_launch.base import slurm_time
from mbridge_launch.base.atomic import atomic_write_text
from mbridge_launch.base.errors import SubmissionError, UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.base.quoting import sh, sh_join
from mbridge_launch.base.slurm_signal import WORKS, parse
from mbridge_launch.executors import Requirement, common, node_check
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.plan.model import Plan
from mbridge_launch.slurm import commands as slurm_cli

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


# What `python -m submitit.core._submit` imports (submitit 1.5's requirements); all pure Python,
# so a copy on shared storage works with any python3 of the image.
RUNNER_PACKAGES = ("submitit", "cloudpickle", "typing_extensions")
RUNNER_LIB = "pylib"


def in_container(plan: Plan) -> bool:
    return common.uses_container(plan)


def job_python(plan: Plan) -> str:
    """The interpreter the job runs submitit's task runner with: launch.python, else python3 of
    the image (the login node's venv does not exist there), else the submitting interpreter."""
    if plan.launch.python:
        return plan.launch.python
    return "python3" if in_container(plan) else sys.executable


def runner_lib(plan: Plan, folder: Path) -> Optional[Path]:
    """Where the job imports submitit from: a copy in the (shared) submitit folder whenever the
    job's python is not the submitting one; None: the submitting interpreter's own packages."""
    if not plan.launch.python and not in_container(plan):
        return None
    return folder / RUNNER_LIB


def python_command(plan: Plan, folder: Path) -> str:
    """submitit's `python` parameter (raw shell in its srun line, so quoted here)."""
    lib = runner_lib(plan, folder)
    if lib is None:
        return sh(job_python(plan))
    return sh_join(["env", f"PYTHONPATH={lib}", job_python(plan)])


def copy_runner_packages(lib: Path) -> None:
    """Copy RUNNER_PACKAGES from this interpreter into `lib`, built aside and renamed into place
    so a job never imports half a copy."""
    import importlib.util

    staging = lib.with_name(f".{lib.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in RUNNER_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise UserError("executors.submitit_package_missing", package=name)
        origin = Path(spec.origin)
        if spec.submodule_search_locations:
            shutil.copytree(origin.parent, staging / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, staging / origin.name)
    old = lib.with_name(f".{lib.name}.old.{os.getpid()}")
    if lib.exists():
        os.replace(lib, old)
    os.replace(staging, lib)
    shutil.rmtree(old, ignore_errors=True)


def check_folder_visible(plan: Plan, folder: Path) -> None:
    """In an image the task runner reads its pickle from, and writes results to, the folder at the
    host's path: refuse a Plan whose mounts do not show it there. Not mounted automatically: the
    Plan's mounts are all the image sees, and preflight checks only what the Plan says."""
    if in_container(plan) and not common.same_path_in_container(plan, str(folder)):
        raise UserError("executors.submitit_folder_unmounted", path=str(folder), image=plan.cluster.container_image,
                        mount=f"{folder.parent}:{folder.parent}")


def runner_note(plan: Plan, folder: Path) -> str:
    """The rendered text's line on which python runs the task runner and where submitit comes from."""
    lib = runner_lib(plan, folder)
    where = f"in the image {plan.cluster.container_image}" if in_container(plan) else "on the nodes"
    source = (f"submitit, cloudpickle, typing_extensions copied at submit to {lib} (PYTHONPATH)"
              if lib else "submitit from that interpreter's own site-packages")
    return f"# Task runner: {job_python(plan)} {where}; {source}\n"


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
    additional["signal"] = delivered_signal(plan)  # replaces submitit's own USR2@90 (see below)
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


# The trainer is the child of submitit's task process (python -m submitit.core._submit), and
# Slurm's --signal reaches every process of the step. That parent logs and ignores SIGTERM; on its
# own USR2 it requeues and exits (the step ends, killing the trainer mid-save); any other signal
# kills it. So only SIGTERM gets to a trainer that can still save.
NO_SIGNAL = "TERM@0"  # a Plan without a signal: nothing before the limit (Slurm sends TERM at it)


def delivered_signal(plan: Plan) -> str:
    """The --signal submitit writes: the Plan's SIGTERM, or nothing before the limit; any other
    signal is refused (one line), as submitit's task process would not survive it."""
    text = plan.cluster.signal
    if not text:
        return NO_SIGNAL
    sig = parse(text)
    if sig.signum != signal.SIGTERM or sig.batch_only:
        raise UserError("executors.submitit_signal", signal=text, works=WORKS)
    return text


def _signal_note(plan: Plan) -> str:
    """What the rendered script delivers, said in it."""
    if not plan.cluster.signal:
        return (f"# Signal: none before the limit (cluster.signal is null; submitit's own USR2@90 is replaced by "
                f"{NO_SIGNAL}); at the limit Slurm sends SIGTERM to every task\n")
    sig = parse(plan.cluster.signal)
    return (f"# Signal: Slurm sends SIGTERM {sig.lead_s} s before the limit to every task (cluster.signal "
            f"{plan.cluster.signal}, replacing submitit's USR2@90); submitit's task process only logs it, the "
            f"trainer saves a checkpoint and exits (train.exit_signal_handler=true)\n")


def _command_function(plan: Plan) -> Any:
    from submitit.helpers import CommandFunction

    return CommandFunction(task_command(plan), verbose=True, cwd=plan.launch.workdir)


def _auto_executor(folder: Path, plan: Plan, held: bool = False) -> Any:
    import submitit

    if shutil.which("srun") is None:  # submitit refuses to build a Slurm executor without srun
        raise UserError("executors.slurm_missing", command="srun")
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_python=python_command(plan, folder))
    params = slurm_parameters(plan)  # the ledger's token goes on sbatch's command line, not into the script
    if held:
        params["slurm_additional_parameters"]["hold"] = True
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

    def render(self, plan: Plan, script_dir: Optional[Path] = None) -> Rendered:
        """submitit's own sbatch text for this Plan, then, as comments, the argv every task runs:
        the whole text is the file `schedule` submits. The folder and the file's name are fixed
        here (submitit renames the file to <job id>_submission.sh once sbatch answers)."""
        common.validate_plan(plan)
        script_dir = Path(script_dir or self.script_dir or Path.cwd()).resolve()
        folder = self._folder(plan, script_dir)
        check_folder_visible(plan, folder)
        executor = _auto_executor(folder, plan, held=True)
        inner = executor._executor  # submitit's SlurmExecutor renders the script text
        script = inner._make_submission_file_text(inner._submitit_command_str, "render")
        task = "\n".join(f"#   {line}" for line in sh_join(task_command(plan)).splitlines())
        text = (
            f"{script.rstrip()}\n\n"
            f"# Generated by mbridge-launch {__version__} (executor: submitit) from plan "
            f"{plan.plan_hash()}: {sh(plan.name)}\n"
            f"{runner_note(plan, folder)}"
            f"# Each task runs this command (a pickled submitit.helpers.CommandFunction, "
            f"cwd={plan.launch.workdir or '.'}):\n{task}\n"
            f"{_signal_note(plan)}"
            f"# Submitted held (--hold) and released once submitit has put the job's pickle in place: a job whose\n"
            f"# submitting process died in between waits, holding no GPUs, until the next mbridge-launch command\n"
            f"# releases it or cancels it (it could not run without its pickle)\n"
        )
        path = _submission_path(folder, uuid.uuid4().hex)
        return Rendered(executor=NAME, plan=plan, script_dir=script_dir, text=text,
                        submit_command=["sbatch", "--parsable", str(path)], files={str(path): text},
                        script_path=path, choices={"folder": str(folder)})

    def schedule(self, rendered: Rendered, job_token: Optional[str] = None) -> Submitted:
        import submitit

        plan = rendered.plan
        folder = Path(str(rendered.choices["folder"]))
        check_folder_visible(plan, folder)
        folder.mkdir(parents=True, exist_ok=True)
        lib = runner_lib(plan, folder)
        if lib is not None:
            copy_runner_packages(lib)
        # Submitted held: submitit renames the job's pickle only after sbatch returns, and a job
        # that starts without it holds its GPUs for 60 s and fails with no hint. Held, a job whose
        # submitting process died in between waits, holding nothing, until reconciliation
        # (finish_interrupted) releases or cancels it; here it is released once the pickle is in place.
        executor = _auto_executor(folder, plan, held=True)
        _refused_by_slurm(folder, plan, rendered.script_dir)
        submission = _Submission(rendered, job_token)
        # submitit pickles the task and names the files as always; only its one sbatch call is
        # replaced (_submit_as_rendered: the rendered text, through the Slurm command layer)
        inner = executor._executor
        inner._submit_command = functools.partial(_submit_as_rendered, inner, submission)
        try:
            job = executor.submit(_command_function(plan))
        except UserError:  # the Slurm layer's own, classified (refused, indefinite, no answer)
            raise
        except (submitit.core.utils.FailedSubmissionError, submitit.core.utils.FailedJobError,
                subprocess.CalledProcessError, OSError, RuntimeError) as exc:
            raise _submission_error(exc, submission) from None
        paths = job.paths
        released = _release(str(job.job_id))
        return Submitted(executor=NAME, job_ids=[str(job.job_id)], script_path=paths.submission_file,
                         log_paths=[paths.stdout, paths.stderr], raw_output=submission.answer + released,
                         release_pending=bool(released))

    def finish_interrupted(self, plan: Plan, job_id: str, script_dir: Optional[Path] = None) -> Optional[str]:
        """Reconciliation found job `job_id` of a submission whose process died: release it when
        its pickle is in place, else cancel it (it could only fail) and say why (English text for
        the ledger's error), or None when the job can run. SlurmUnavailable when the release got no
        answer (the caller records that the release is still due and tries again later)."""
        folder = self._folder(plan, script_dir)
        if (folder / f"{job_id}_submitted.pkl").is_file():
            refused = _release(job_id)
            if refused:
                raise slurm_cli.SlurmUnavailable(refused)
            return None
        try:
            slurm_cli.scancel([job_id])
        except UserError:
            pass  # already gone: the reason below is still why it never ran
        return t("executors.submitit_interrupted", lang="en", job=job_id, folder=str(folder))

    def cancel(self, job_ids: list[str]) -> None:
        slurm_cli.scancel(job_ids)

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]:
        folder = self._folder(plan)
        return [p for j in job_ids for p in sorted(folder.glob(f"{j}_*.out")) + sorted(folder.glob(f"{j}_*.err"))]


def _submission_path(folder: Path, uid: str) -> Path:
    """Where submitit puts a submission file before sbatch answers (PicklingExecutor._submit_command)."""
    from submitit.core import utils

    return utils.JobPaths.get_first_id_independent_folder(folder) / f".submission_file_{uid}.sh"


@dataclasses.dataclass
class _Submission:
    rendered: Rendered
    job_token: Optional[str]
    called: bool = False  # sbatch was started: from here on a failure may leave a job
    answer: str = ""


def _submit_as_rendered(inner: Any, submission: _Submission, command: str) -> Any:
    """submitit's PicklingExecutor._submit_command (1.5), with the rendered text as the file and
    its sbatch call through the Slurm command layer: bounded by a timeout, stopped within seconds
    by a deferred interrupt, from the script directory (sbatch's cwd is where a Plan without
    launch.workdir starts), the ledger's token on the command line, the answer classified
    (refused or indefinite). `command` (submitit's task runner line) is already in the text."""
    rendered = submission.rendered
    path = rendered.script_path or _submission_path(inner.folder, uuid.uuid4().hex)
    atomic_write_text(path, rendered.text)
    argv = ["sbatch", "--parsable", *common.token_args(submission.job_token), str(path)]
    submission.called = True
    job_id, answer = slurm_cli.submit(argv, cwd=rendered.script_dir, executor=NAME)
    submission.answer = answer.output
    job = inner.job_class(folder=inner.folder, job_id=job_id, tasks=list(range(inner._num_tasks())))
    job.paths.move_temporary_file(path, "submission_file", keep_as_symlink=True)
    inner._set_job_permissions(job.paths.folder)
    return job


def _refused_by_slurm(folder: Path, plan: Plan, script_dir: Path) -> None:
    """`sbatch --test-only` of the job as submitit writes it, without the hold: Slurm accepts a held
    job whose request can never be met (it then pends for BadConstraints), so the refusal that
    sbatch gives an unheld job ("Requested node configuration is not available") is asked for
    first. A SubmissionError with Slurm's reason when it refuses."""
    inner = _auto_executor(folder, plan)._executor
    text = inner._make_submission_file_text(inner._submitit_command_str, "test-only")
    with tempfile.NamedTemporaryFile("w", dir=folder, prefix=".mbl-test-only-", suffix=".sh") as script:
        script.write(text)
        script.flush()
        try:
            proc = slurm_cli.call(["sbatch", "--test-only", script.name], cwd=script_dir)
        except slurm_cli.SlurmCommandError as exc:
            raise slurm_cli.no_answer_error(exc) from None
    if not proc.ok:
        raise slurm_cli.submission_error(proc.output, proc.returncode)


def _release(job_id: str) -> str:
    """scontrol release of a held job; Slurm's answer when it refuses (kept in the ledger), else ''."""
    try:
        proc = slurm_cli.run_slurm(["scontrol", "release", job_id])
    except UserError as exc:
        return exc.render("en")
    return "" if proc.ok else proc.output


def _submission_error(exc: BaseException, submission: _Submission, stderr: str = "") -> Exception:
    """submitit failed around the sbatch call (whose own failures are the Slurm layer's errors):
    before it nothing reached Slurm (one line with submitit's reason); after it the job exists
    (indefinite: reconciliation finds it by its token and releases or cancels it)."""
    raw = stderr
    for attr in ("output", "stderr"):
        value = getattr(exc, attr, None) or getattr(exc.__cause__, attr, None)
        if value:
            raw += value.decode() if isinstance(value, bytes) else str(value)
    raw = raw or str(exc) or type(exc).__name__
    reason = slurm_cli.slurm_reason(raw)
    if submission.called:
        return SubmissionError(slurm_cli.indefinite_key(raw), raw_output=raw, reason=reason)
    return SubmissionError("executors.command_failed", raw_output=raw, command="submitit", reason=reason)


def create(**options: Any) -> SubmititExecutor:
    return SubmititExecutor(**options)
