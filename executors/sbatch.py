"""The sbatch adapter: a Plan becomes one batch script (templates/sbatch/*.j2) submitted with
`sbatch --parsable`. Multi-node plans use the srun-native shape (one task per GPU); single-node
plans whose launch.shape is torchrun use torchrun.sh.j2."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from mbridge_launch import __version__
from mbridge_launch.base.atomic import atomic_write_text
from mbridge_launch.executors import common, node_check, slurm_cli
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.executors.templating import render_template
from mbridge_launch.plan.model import Plan
from mbridge_launch.base.quoting import ShellExpr, ShellValue, sh_join

NAME = "sbatch"


def submit_argv(plan: Plan) -> list[str]:
    """The exact submit command; sbatch runs in the submit directory, where the script lies."""
    return ["sbatch", "--parsable", common.script_file_name(plan)]


def template_name(plan: Plan) -> str:
    return "torchrun.sh.j2" if plan.launch.shape == "torchrun" else "srun.sh.j2"


def _directives(plan: Plan, purpose: str) -> list[tuple[str, Optional[Any]]]:
    """#SBATCH options as (flag, raw value); the template quotes every value."""
    c = plan.cluster
    training = purpose == "train"
    name = plan.name if training else f"{plan.name}-node-check"
    tasks_per_node = c.gpus_per_node if (training and plan.launch.shape == "srun") else 1
    output = common.batch_log_pattern(plan)
    if not training:
        output = output[: -len("-%j.out")] + "-node-check-%j.out"
    out: list[tuple[str, Optional[Any]]] = [("--job-name", name)]
    for flag, value in (("--account", c.account), ("--partition", c.partition), ("--qos", c.qos)):
        if value:
            out.append((flag, value))
    out += [
        ("--nodes", c.nodes),
        ("--ntasks-per-node", tasks_per_node),
        ("--gpus-per-node", c.gpus_per_node),
        ("--time", c.time),
    ]
    if c.exclusive:
        out.append(("--exclusive", None))
    if training:
        out.append(("--requeue", None) if c.requeue else ("--no-requeue", None))
        if c.signal:
            out.append(("--signal", c.signal))
    # requeued jobs append to their log instead of truncating the first attempt's output
    out.append(("--open-mode", "append"))
    out.append(("--output", output))
    out.append(("--export", common.export_flag_value(plan)))
    seg = common.segment(plan)
    if seg:
        out.append(("--segment", seg))
    if plan.launch.workdir:
        out.append(("--chdir", plan.launch.workdir))
    return out


def _train_command(plan: Plan) -> list[ShellValue]:
    c = plan.cluster
    log_parts = common.step_log_parts(plan)
    step_log = ShellExpr(common.sh_concat(["--output=" + str(log_parts[0]), *log_parts[1:]]))
    if plan.launch.shape == "torchrun":
        shape = ["--nodes=1", "--ntasks=1", "--ntasks-per-node=1"]
        argv = common.torchrun_argv(plan)
        mpi: list[str] = []
    else:
        shape = [f"--nodes={c.nodes}", f"--ntasks-per-node={c.gpus_per_node}"]
        argv = common.trainer_argv(plan)
        mpi = common.mpi_flags(plan)
    return [
        "srun", "--export=ALL", *shape, "--kill-on-bad-exit=1", *mpi,
        *common.container_srun_flags(plan), *c.srun_args, step_log, *argv,
    ]


def script_context(plan: Plan, submit_command: Optional[list[str]], purpose: str = "train") -> dict[str, Any]:
    common.validate_plan(plan)
    training = purpose == "train"
    template = template_name(plan) if training else "node_check.sh.j2"
    return {
        "version": __version__,
        "template": template,
        "plan_hash": plan.plan_hash(),
        "plan_name": plan.name,
        "submit_command": sh_join(submit_command or ["sbatch", "--parsable", "SCRIPT"]),
        "directives": _directives(plan, purpose),
        "sbatch_args": list(plan.cluster.sbatch_args),
        "start_message": common.sh_message(
            "executors.script.start",
            job=ShellExpr('"${SLURM_JOB_ID}"'),
            restart=common.RESTART_COUNT,
            nodes=ShellExpr('"${SLURM_JOB_NODELIST}"'),
        ),
        "forwarded_env": common.forwarded_env_names(plan),
        "perf_env": common.perf_env(plan),
        "setup": list(plan.launch.setup),
        "node_check_step": node_check.node_check_step(plan),
        "train_command": _train_command(plan) if training else [],
    }


def render_script(plan: Plan) -> str:
    context = script_context(plan, submit_argv(plan))
    return render_template(context["template"], context)


class SbatchExecutor:
    name = NAME

    def render(self, plan: Plan) -> Rendered:
        text = render_script(plan)
        return Rendered(
            executor=NAME,
            text=text,
            submit_command=submit_argv(plan),
            files={common.script_file_name(plan): text},
        )

    def submit(self, plan: Plan, workdir: Path) -> Submitted:
        workdir = Path(workdir).resolve()
        rendered = self.render(plan)
        script = atomic_write_text(workdir / common.script_file_name(plan), rendered.text, mode=0o755)
        # Slurm does not create the directory of --output; a missing one fails the job at launch
        log_base = common.resolve_dir(common.log_dir(plan), common.job_workdir(plan, workdir))
        log_base.mkdir(parents=True, exist_ok=True)
        # exactly the command in the script's header: the file name, run from the submit directory
        job_id, raw = slurm_cli.sbatch(Path(script.name), cwd=workdir)
        return Submitted(
            executor=NAME,
            job_ids=[job_id],
            script_path=script,
            log_paths=common.log_files(plan, [job_id], workdir),
            raw_output=raw,
        )

    def status(self, job_ids: list[str]) -> dict[str, str]:
        return slurm_cli.job_states(job_ids)

    def cancel(self, job_ids: list[str]) -> None:
        slurm_cli.scancel(job_ids)

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]:
        return common.log_files(plan, job_ids, Path.cwd())


def create(**options: object) -> SbatchExecutor:
    return SbatchExecutor()
