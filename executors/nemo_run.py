"""The NeMo-Run adapter: a Plan becomes a `run.Experiment` with one `run.Script` task on a
`run.SlurmExecutor` whose `run.LocalTunnel` submits from this host, detached.

NeMo-Run 0.11 does not shell-quote what it writes into srun and export lines, and its
LocalTunnel joins mkdir/sbatch command lines unquoted (measured on a real Slurm: `$(cmd)` and
`;cmd` in arguments, env values, mounts, titles and task names executed), so this adapter quotes
every script argument, env value, mount and srun argument itself, and accepts only safe names for
the experiment title, task name and NeMo-Run home. `nemo_run` is imported lazily (1-2 s), after
NEMORUN_HOME is set, because NeMo-Run reads it at import time.

`MBridgePlugin` (a `run.Plugin`) applies a Plan's environment, mounts and node-check step to any
SlurmExecutor, for NeMo-Run users who build their own experiments.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from mbridge_launch.base.errors import SubmissionError, UserError
from mbridge_launch.base.quoting import is_safe_name, sh
from mbridge_launch.executors import Requirement, common, node_check
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.plan.model import Plan
from mbridge_launch.plan.signals import KEYS as SIGNAL_KEYS
from mbridge_launch.slurm import commands as slurm_cli

NAME = "nemo-run"
REQUIRES = (Requirement("nemo_run", package="nemo-run", extra="nemo-run"),)  # checked by the registry
TASK_NAME = "train"
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/-]*$")
_ID_SUFFIX = re.compile(r"^[A-Za-z0-9.-]+$")
_RUNDIR = "nemo_run"  # NeMo-Run's RUNDIR_NAME


# ------------------------------------------------------------------ importing nemo_run
@contextlib.contextmanager
def _no_stdin() -> Iterator[None]:
    """NeMo-Run runs mkdir/sbatch through invoke, which forwards our stdin to them; under pytest,
    CI (no stdin) or a pipe that would read or fail, so they get an empty stdin instead."""
    saved = sys.stdin
    with open(os.devnull, encoding="utf-8") as devnull:
        sys.stdin = devnull
        try:
            yield
        finally:
            sys.stdin = saved


def _import_nemo_run(home: str) -> Any:
    """nemo_run with `home` as NEMORUN_HOME, also when it was imported earlier with another one
    (set_nemorun_home, and the Slurm scheduler's job-dir index path fixed at its import)."""
    if "nemo_run" not in sys.modules:
        # NeMo-Run reads NEMORUN_HOME at import; restore the user's value afterwards so that
        # later plans in this process still see their own default
        previous = os.environ.get("NEMORUN_HOME")
        os.environ["NEMORUN_HOME"] = home
        try:
            import nemo_run  # noqa: F401
        finally:
            if previous is None:
                os.environ.pop("NEMORUN_HOME", None)
            else:
                os.environ["NEMORUN_HOME"] = previous
    import nemo_run as run
    from nemo_run.config import set_nemorun_home
    from nemo_run.run.torchx_backend.schedulers import slurm as slurm_scheduler

    set_nemorun_home(home)
    slurm_scheduler.SLURM_JOB_DIRS = os.path.join(home, ".slurm_jobs")
    _wrap_materialize()
    _wrap_tunnel_run()
    return run


# ------------------------------------------------------------------ the training step's srun line
# NeMo-Run 0.11 hard-codes the step's `--container-workdir /nemo_run/code` and `--output
# <job dir>/log-...` inside SlurmBatchRequest.materialize (a nested function, no option): a
# relative entry then runs in /nemo_run/code, and the step log misses launch.log_dir. The only
# hook is the text it returns: while this adapter renders or submits a Plan, that text is
# rewritten (step_rewrites) and NeMo-Run writes and submits the rewritten script.
_CURRENT_PLAN: contextvars.ContextVar[Optional[Plan]] = contextvars.ContextVar("mbl_nemo_run_plan", default=None)
_STEP_OUTPUT = re.compile(r"^(srun --output )(\S+)( )", re.M)
_NEMO_WORKDIR = f" --container-workdir /{_RUNDIR}/code"


def step_rewrites(text: str, plan: Plan) -> str:
    """NeMo-Run's script with the training step's log in launch.log_dir (as the sbatch adapter's,
    common.step_log_parts) and, in a container, launch.workdir as the container's working
    directory (none given: the image's own, as pyxis does without --container-workdir)."""
    text = _STEP_OUTPUT.sub(lambda m: m.group(1) + common.sh_concat(common.step_log_parts(plan)) + m.group(3), text)
    workdir = f" --container-workdir {sh(plan.launch.workdir)}" if plan.launch.workdir else ""
    return text.replace(_NEMO_WORKDIR, workdir)


def _wrap_materialize() -> None:
    from nemo_run.core.execution.slurm import SlurmBatchRequest

    original = SlurmBatchRequest.materialize
    if getattr(original, "_mbridge_launch", False):
        return

    def materialize(self: Any) -> str:
        text = original(self)
        plan = _CURRENT_PLAN.get()
        return step_rewrites(text, plan) if plan is not None else text

    materialize._mbridge_launch = True  # type: ignore[attr-defined]
    SlurmBatchRequest.materialize = materialize  # type: ignore[method-assign]


@contextlib.contextmanager
def _rewriting_for(plan: Plan) -> Iterator[None]:
    token = _CURRENT_PLAN.set(plan)
    try:
        yield
    finally:
        _CURRENT_PLAN.reset(token)


# ------------------------------------------------------------------ the sbatch call
# NeMo-Run runs `sbatch --requeue --parsable SCRIPT` through its LocalTunnel (invoke, a shell, no
# timeout, our cwd): a stopped controller kept it, and a deferred Ctrl-C with it, waiting for
# sbatch's own timeouts, and its answer could not be classified. While this adapter schedules a
# Rendered, LocalTunnel.run hands that one command to the Slurm command layer instead
# (slurm.commands.submit: a timeout, a deferred interrupt stops it within seconds, a refused or
# indefinite SubmissionError, cwd = the script directory), with the ledger's token on the command
# line, and only after checking that the script NeMo-Run wrote is the rendered one, byte for
# byte. Every other command (mkdir) and every NeMo-Run use outside `schedule` runs unchanged.
@dataclasses.dataclass
class _Submission:
    rendered: Rendered
    job_token: Optional[str]
    called: bool = False  # sbatch was started: from here on a failure may leave a job
    answers: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Answer:
    """What NeMo-Run reads from a tunnel's result (invoke's Result: stdout, stderr, return_code)."""

    stdout: str
    stderr: str = ""
    return_code: int = 0
    exited: int = 0


_CURRENT_SUBMISSION: contextvars.ContextVar[Optional[_Submission]] = contextvars.ContextVar(
    "mbl_nemo_run_submission", default=None)


@contextlib.contextmanager
def _submitting(submission: _Submission) -> Iterator[None]:
    token = _CURRENT_SUBMISSION.set(submission)
    try:
        yield
    finally:
        _CURRENT_SUBMISSION.reset(token)


def _wrap_tunnel_run() -> None:
    from nemo_run.core.tunnel.client import LocalTunnel

    original = LocalTunnel.run
    if getattr(original, "_mbridge_launch", False):
        return

    def run(self: Any, command: str, hide: bool = True, warn: bool = False, **kwargs: Any) -> Any:
        submission = _CURRENT_SUBMISSION.get()
        if submission is None or not command.startswith("sbatch "):
            return original(self, command, hide=hide, warn=warn, **kwargs)
        return _sbatch_as_rendered(command, submission)

    run._mbridge_launch = True  # type: ignore[attr-defined]
    LocalTunnel.run = run  # type: ignore[method-assign]


def _sbatch_as_rendered(command: str, submission: _Submission) -> _Answer:
    # NeMo-Run joins the words unquoted; they are its flags and a script path under a home that
    # check_home allows only safe characters in, so splitting them gives them back exactly
    argv = shlex.split(command)
    script = argv[-1]
    expected = submission.rendered.files.get(script)
    try:
        written = Path(script).read_text()
    except OSError:
        written = None
    if expected is None or written != expected:
        raise UserError("executors.render_changed", executor=NAME, path=script)
    argv = [argv[0], *common.token_args(submission.job_token), *argv[1:]]
    submission.called = True
    _job_id, answer = slurm_cli.submit(argv, cwd=submission.rendered.script_dir, executor=NAME)
    submission.answers.append(answer.output)
    return _Answer(stdout=answer.stdout, stderr=answer.stderr)


def check_home(home: str) -> str:
    # Without a container NeMo-Run rewrites every "/nemo_run" in its script to the job directory
    # (its in-container mount point), which would corrupt a home path that contains it.
    if not _SAFE_PATH.match(home) or f"/{_RUNDIR}" in home:
        raise UserError("executors.nemo_run_home_unsafe", value=home)
    return home.rstrip("/") or "/"


def default_home(script_dir: Optional[Path]) -> str:
    """NEMORUN_HOME when the user set it (their NeMo-Run convention), else <script dir>/.nemo_run."""
    env = os.environ.get("NEMORUN_HOME")
    if env:
        return env
    return str(Path(script_dir or Path.cwd()).resolve() / ".nemo_run")


def experiment_title(plan: Plan) -> str:
    if not is_safe_name(plan.name) or plan.name.startswith(_RUNDIR):
        raise UserError("shell.unsafe_name", what="name (NeMo-Run experiment title)", value=plan.name)
    return plan.name


def default_experiment_id(plan: Plan) -> str:
    # LocalTunnel takes the title as everything before the LAST '_' of the id: no '_' in the suffix
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{experiment_title(plan)}_{plan.plan_hash()}-{stamp}"


def check_experiment_id(plan: Plan, experiment_id: str) -> str:
    title = experiment_title(plan)
    prefix = title + "_"
    if not (experiment_id.startswith(prefix) and _ID_SUFFIX.match(experiment_id[len(prefix):])):
        raise UserError("executors.experiment_id", value=experiment_id, title=title)
    return experiment_id


# ------------------------------------------------------------------ what the plan contributes
def quoted_env(plan: Plan) -> dict[str, str]:
    """NeMo-Run writes `export NAME=VALUE` unquoted: the values arrive already quoted."""
    return {name: sh(value) for name, value in common.perf_env(plan).items()}


def quoted_mounts(plan: Plan) -> list[str]:
    # NeMo-Run joins mounts with ',' into one unquoted word; quoted pieces still form one word
    return [sh(f"{m.source}:{m.target}") for m in plan.cluster.container_mounts]


def plan_setup_lines(plan: Plan) -> str:
    """Setup commands (each eval'ed from a quoted string) and the node check step."""
    lines = [f"eval {sh(cmd)}" for cmd in plan.launch.setup]
    lines.append(node_check.node_check_step(plan))
    return "\n".join(lines)


def plan_srun_args(plan: Plan) -> list[str]:
    args = ["--export=ALL", *common.mpi_flags(plan)]
    if plan.launch.workdir and not _uses_container(plan):
        args.append(f"--chdir={plan.launch.workdir}")
    args.extend(plan.cluster.srun_args)
    return [sh(a) for a in args]


def _uses_container(plan: Plan) -> bool:
    return bool(plan.cluster.profile.pyxis and plan.cluster.container_image)


def _task_argv(plan: Plan) -> list[str]:
    return common.torchrun_argv(plan) if plan.launch.shape == "torchrun" else common.trainer_argv(plan)


def build_script(run: Any, plan: Plan) -> Any:
    """run.Script(entrypoint PATH ARGS...), every word quoted here (NeMo-Run joins them raw).
    A one-word entry runs through `env`, which executes its arguments."""
    argv = _task_argv(plan)
    if len(argv) == 1:
        argv = ["env", *argv]
    return run.Script(path=sh(argv[1]), entrypoint=sh(argv[0]), args=[sh(a) for a in argv[2:]])


def build_executor(run: Any, plan: Plan, home: str) -> Any:
    c = plan.cluster
    from nemo_run.core.execution.slurm import SlurmJobDetails

    container = _uses_container(plan)
    per_node = c.gpus_per_node if plan.launch.shape == "srun" else 1
    executor = run.SlurmExecutor(
        account=c.account or "",
        partition=c.partition,
        qos=c.qos,
        nodes=c.nodes,
        ntasks_per_node=per_node,
        gpus_per_node=c.gpus_per_node,
        time=c.time,
        exclusive=True if c.exclusive else None,
        signal=c.signal,
        segment=common.segment(plan),
        container_image=sh(c.container_image) if container else None,
        container_mounts=quoted_mounts(plan) if container else [],
        container_env=(common.forwarded_env_names(plan) + list(common.perf_env(plan))) if container else None,
        env_vars=quoted_env(plan),
        srun_args=plan_srun_args(plan),
        setup_lines=plan_setup_lines(plan),
        additional_parameters=_additional_parameters(plan),
        tunnel=run.LocalTunnel(job_dir=os.path.join(home, "experiments")),
        packager=run.Packager(),
        retries=0,
        poll_estimated_start_time=False,
    )
    # the job name is the plan's name, not NeMo-Run's "<account>-<account>.<task>"
    executor.job_details = SlurmJobDetails(job_name=experiment_title(plan))
    return executor


def _additional_parameters(plan: Plan) -> dict[str, Any]:
    """#SBATCH options NeMo-Run has no field for (it quotes #SBATCH values itself)."""
    params: dict[str, Any] = {"export": common.export_flag_value(plan)}
    if plan.launch.workdir:
        params["chdir"] = plan.launch.workdir
    params.update(common.sbatch_args_as_parameters(plan))
    return params


# ------------------------------------------------------------------ the adapter
class NemoRunExecutor:
    name = NAME

    def __init__(self, script_dir: Optional[Path] = None, nemorun_home: Optional[str] = None,
                 experiment_id: Optional[str] = None) -> None:
        self.script_dir = Path(script_dir) if script_dir else None
        self.nemorun_home = nemorun_home
        self.experiment_id = experiment_id

    def _home(self, script_dir: Optional[Path] = None) -> str:
        return check_home(self.nemorun_home or default_home(script_dir or self.script_dir))

    def _experiment_id(self, plan: Plan) -> str:
        if self.experiment_id is None:
            self.experiment_id = default_experiment_id(plan)
        return check_experiment_id(plan, self.experiment_id)

    def render(self, plan: Plan, script_dir: Optional[Path] = None) -> Rendered:
        """The exact files NeMo-Run writes, produced by its own dry run in a scratch home and
        shown with the real home's paths (the scratch path is unique, so replacing it is exact).
        The home and the experiment id chosen here are the Rendered's: `schedule` submits under
        the same ones (the id is in every path of the script: --output, --chdir, the job dir)."""
        common.validate_plan(plan)
        script_dir = Path(script_dir or self.script_dir or Path.cwd()).resolve()
        home = self._home(script_dir)
        experiment_id = self._experiment_id(plan)
        scratch = tempfile.mkdtemp(prefix="mbl-nemo-run-")
        scratch_home = os.path.join(scratch, "h")
        try:
            run = _import_nemo_run(scratch_home)
            exp = _experiment(run, plan, scratch_home, experiment_id)
            with _no_stdin(), _rewriting_for(plan), exp:
                exp.add(build_script(run, plan), executor=build_executor(run, plan, scratch_home), name=TASK_NAME)
                exp.dryrun(log=False, delete_exp_dir=False)
            exp_dir = Path(scratch_home, "experiments", experiment_title(plan), exp._id)
            files = {}
            for path in sorted(exp_dir.rglob("*_sbatch.sh")):
                rel = str(path.relative_to(scratch_home))
                files[os.path.join(home, rel)] = path.read_text().replace(scratch_home, home)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            _import_nemo_run(home)
        text = "\n".join(files.values())
        first = next(iter(files), None)
        return Rendered(executor=NAME, plan=plan, script_dir=script_dir, text=text,
                        submit_command=["sbatch", "--requeue", "--parsable", *files.keys()], files=files,
                        script_path=Path(first) if first else None,
                        choices={"nemorun_home": home, "experiment_id": experiment_id})

    def schedule(self, rendered: Rendered, job_token: Optional[str] = None) -> Submitted:
        """NeMo-Run submits the experiment `rendered` shows (same home, same id), its own way
        (its job dirs, config and index are written), except for the sbatch call itself: that goes
        through the Slurm command layer (_sbatch_as_rendered), bounded, interruptible, from the
        script directory, with the token on the command line, and only for a script that is
        byte for byte the one rendered."""
        plan, script_dir = rendered.plan, rendered.script_dir
        home = check_home(str(rendered.choices["nemorun_home"]))
        experiment_id = check_experiment_id(plan, str(rendered.choices["experiment_id"]))
        log_base = common.resolve_dir(common.log_dir(plan), common.job_workdir(plan, script_dir))
        log_base.mkdir(parents=True, exist_ok=True)
        run = _import_nemo_run(home)
        exp = _experiment(run, plan, home, experiment_id)
        submission = _Submission(rendered, job_token)
        try:
            # NeMo-Run logs "Launched app: ..." on stdout, which is the command's answer (submit
            # --format json): its chatter goes to stderr, with the card
            with _no_stdin(), contextlib.redirect_stdout(sys.stderr), _rewriting_for(plan), _submitting(submission), exp:
                exp.add(build_script(run, plan), executor=build_executor(run, plan, home), name=TASK_NAME)
                exp.run(detach=True)
        except UserError:  # the Slurm layer's own, classified (refused, indefinite, no answer)
            raise
        except Exception as exc:  # noqa: BLE001 - whatever NeMo-Run raised around it
            raise _submission_error(exc, submission) from None
        job_ids = [_job_id_of(job) for job in exp.jobs]
        if not submission.answers or not all(job_ids):
            raise SubmissionError("executors.submit_no_job_id", executor=NAME, output=str(exp.jobs))
        return Submitted(executor=NAME, job_ids=job_ids, script_path=rendered.script_path,
                         log_paths=self._logs(Path(home, "experiments", experiment_title(plan), experiment_id))
                         + step_logs(plan, job_ids, script_dir), raw_output="".join(submission.answers))

    @staticmethod
    def _logs(exp_dir: Path) -> list[Path]:
        return sorted(exp_dir.rglob("*.out")) + sorted(exp_dir.rglob("log-*"))

    def cancel(self, job_ids: list[str]) -> None:
        slurm_cli.scancel(job_ids)

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]:
        home = self._home()
        title = experiment_title(plan)
        base = Path(home, "experiments", title)
        own = [p for p in sorted(base.rglob("*")) if p.is_file() and any(j in p.name for j in job_ids)]
        return own + [p for p in step_logs(plan, job_ids, Path.cwd()) if p.exists()]


def _experiment(run: Any, plan: Plan, home: str, experiment_id: str) -> Any:
    return run.Experiment(experiment_title(plan), id=experiment_id, base_dir=home, clean_mode=True,
                          enable_goodbye_message=False, skip_status_at_exit=True)


def step_logs(plan: Plan, job_ids: list[str], submit_dir: Path) -> list[Path]:
    """The training step's logs in launch.log_dir (step_rewrites): the first start's, then every
    restart's that exists."""
    base = common.resolve_dir(common.log_dir(plan), common.job_workdir(plan, submit_dir))
    slug = common.file_slug(plan)
    found: list[Path] = []
    for job_id in job_ids:
        first = base / f"{slug}-{job_id}-restart0.log"
        found.append(first)
        found.extend(p for p in sorted(base.glob(f"{slug}-{job_id}-restart*.log")) if p != first)
    return found


def _job_id_of(job: Any) -> str:
    handle = getattr(job, "handle", "") or ""
    # handle: "<scheduler>://<session>/<job id>"
    tail = handle.rstrip("/").rsplit("/", 1)[-1]
    return tail if tail.isdigit() else ""


def _submission_error(exc: Exception, submission: _Submission) -> UserError:
    """NeMo-Run failed around the sbatch call (whose own failures are the Slurm layer's errors):
    before it, nothing reached Slurm (one line naming NeMo-Run's reason); after it, the job exists
    and its id may not be recorded: indefinite, reconciliation finds it by its token."""
    result = getattr(exc, "result", None)
    raw = ""
    if result is not None:
        raw = (getattr(result, "stderr", "") or "") + (getattr(result, "stdout", "") or "")
    raw = raw or str(exc) or type(exc).__name__
    reason = slurm_cli.slurm_reason(raw)
    if submission.called:
        return SubmissionError(slurm_cli.indefinite_key(raw), raw_output=raw, reason=reason)
    return SubmissionError("executors.command_failed", raw_output=raw, command="nemo-run", reason=reason)


# ------------------------------------------------------------------ the plugin
def _make_plugin_class() -> type:
    from dataclasses import dataclass, field

    import nemo_run as run

    @dataclass(kw_only=True)
    class MBridgePlugin(run.Plugin):
        """Applies a Plan's environment (quoted), container mounts and env names, the node check
        step and its --signal to a task's SlurmExecutor, and the trainer's exit-signal settings to
        a run.Script's arguments (as Bridge's PreemptionPlugin pairs TERM@60 with the handler).
        Build it with MBridgePlugin.from_plan(plan)."""

        env_vars: dict[str, str] = field(default_factory=dict)
        container_mounts: list[str] = field(default_factory=list)
        container_env: list[str] = field(default_factory=list)
        srun_args: list[str] = field(default_factory=list)
        setup_lines: str = ""
        signal: Optional[str] = None
        signal_args: list[str] = field(default_factory=list)

        @classmethod
        def from_plan(cls, plan: "Plan | str | os.PathLike[str]") -> "MBridgePlugin":
            """`plan`: a Plan, or the path of a Plan file (read and validated as `submit` reads it:
            a bad file is one UserError line)."""
            if isinstance(plan, (str, os.PathLike)):
                from mbridge_launch.plan.model import load_plan

                plan = load_plan(Path(plan))
            if not isinstance(plan, Plan):
                raise TypeError(f"MBridgePlugin.from_plan takes a Plan or the path of a Plan file, "
                                f"not {type(plan).__name__}")
            common.validate_plan(plan)
            container = _uses_container(plan)
            return cls(
                env_vars=quoted_env(plan),
                container_mounts=quoted_mounts(plan) if container else [],
                container_env=common.forwarded_env_names(plan) + list(common.perf_env(plan)) if container else [],
                srun_args=["--export=ALL"],
                setup_lines=plan_setup_lines(plan),
                signal=plan.cluster.signal,
                signal_args=[f"{o.key}={o.value}" for o in plan.overrides if o.key in SIGNAL_KEYS],
            )

        def setup(self, task: Any, executor: Any) -> None:
            executor.env_vars = {**(executor.env_vars or {}), **self.env_vars}
            if hasattr(executor, "container_mounts") and self.container_mounts:
                executor.container_mounts = [*executor.container_mounts, *self.container_mounts]
            if hasattr(executor, "container_env") and self.container_env:
                executor.container_env = [*(executor.container_env or []), *self.container_env]
            if hasattr(executor, "srun_args"):
                executor.srun_args = [*(executor.srun_args or []), *self.srun_args]
            if hasattr(executor, "setup_lines"):
                executor.setup_lines = "\n".join(x for x in (executor.setup_lines, self.setup_lines) if x)
            if self.signal and hasattr(executor, "signal"):
                executor.signal = self.signal
            if self.signal_args and isinstance(task, run.Script):
                task.args = [*(task.args or []), *self.signal_args]

    # NeMo-Run serializes an experiment's plugins by import path (fiddle): the class must be
    # importable as mbridge_launch.executors.nemo_run.MBridgePlugin (the module __getattr__
    # below), not as the local class of this factory
    MBridgePlugin.__qualname__ = "MBridgePlugin"
    MBridgePlugin.__module__ = __name__
    return MBridgePlugin


_plugin_class: Optional[type] = None


def __getattr__(name: str) -> Any:
    """`MBridgePlugin` subclasses run.Plugin, so it is built on first use (importing nemo_run)."""
    global _plugin_class
    if name == "MBridgePlugin":
        if _plugin_class is None:
            _plugin_class = _make_plugin_class()
        return _plugin_class
    raise AttributeError(name)


def create(**options: Any) -> NemoRunExecutor:
    return NemoRunExecutor(**options)
