"""The batch script of a Plan as template context: #SBATCH directives and steps. Shared by the
training script (sbatch adapter; the other adapters render their own) and the node-check job that
`preflight --on-nodes` submits alone, which differ only in purpose: job name, log, time limit,
tasks, and whether the training step follows the node check."""

from __future__ import annotations

from typing import Any, Optional

from mbridge_launch import __version__
from mbridge_launch.base.quoting import ShellExpr, ShellValue, sh_join
from mbridge_launch.executors import common, node_check
from mbridge_launch.executors.templating import render_template
from mbridge_launch.plan.model import Plan

# the node-check job's own limit: it runs nvidia-smi on each node, minutes at most
NODE_CHECK_TIME = "00:10:00"


def template_name(plan: Plan) -> str:
    return "torchrun.sh.j2" if plan.launch.shape == "torchrun" else "srun.sh.j2"


def _directives(plan: Plan, purpose: str, time: Optional[str] = None) -> list[tuple[str, Optional[Any]]]:
    """#SBATCH options as (flag, raw value); the template quotes every value. `time` replaces the
    Plan's limit (the node-check job needs minutes, not the training run's hours)."""
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
        ("--time", time or c.time),
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
    out.append(("--export", common.export_flag_value(plan) if training else node_check_export(plan)))
    seg = common.segment(plan)
    if seg:
        out.append(("--segment", seg))
    if plan.launch.workdir:
        out.append(("--chdir", plan.launch.workdir))
    return out


def node_check_env_names(plan: Plan) -> list[str]:
    """What the node-check job takes from the submitting shell: the Plan's plain variable names
    (PATH for nvidia-smi, ...), never its secrets: it runs nvidia-smi, not the trainer."""
    return list(dict.fromkeys(n for n in plan.cluster.env if n not in plan.cluster.secrets))


def node_check_export(plan: Plan) -> str:
    return ",".join(node_check_env_names(plan)) or "NONE"


def node_check_time(plan: Plan) -> str:
    """NODE_CHECK_TIME, or the Plan's limit when that is shorter (a partition's MaxTime may be)."""
    from mbridge_launch.base.slurm_time import parse_seconds

    own, plans = parse_seconds(NODE_CHECK_TIME), parse_seconds(plan.cluster.time)
    return plan.cluster.time if own is not None and plans is not None and plans < own else NODE_CHECK_TIME


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


def training_step(plan: Plan) -> str:
    """The training step exactly as the batch script runs it (one shell line): what a card shows
    as the command, so that it never differs from the script."""
    return sh_join(_train_command(plan))


def script_context(plan: Plan, submit_command: Optional[list[str]], purpose: str = "train",
                   time: Optional[str] = None) -> dict[str, Any]:
    common.validate_plan(plan)
    training = purpose == "train"
    template = template_name(plan) if training else "node_check.sh.j2"
    return {
        "version": __version__,
        "template": template,
        "plan_hash": plan.plan_hash(),
        "plan_name": plan.name,
        "submit_command": sh_join(submit_command or ["sbatch", "--parsable", "SCRIPT"]),
        "directives": _directives(plan, purpose, time),
        "sbatch_args": list(plan.cluster.sbatch_args),
        "start_message": common.sh_message(
            "executors.script.start",
            job=ShellExpr('"${SLURM_JOB_ID}"'),
            restart=common.RESTART_COUNT,
            nodes=ShellExpr('"${SLURM_JOB_NODELIST}"'),
        ),
        "forwarded_env": common.forwarded_env_names(plan) if training else node_check_env_names(plan),
        "perf_env": common.perf_env(plan),
        "setup": list(plan.launch.setup),
        "node_check_step": node_check.node_check_step(plan),
        "train_command": _train_command(plan) if training else [],
    }


def node_check_script(plan: Plan, time: Optional[str] = None) -> str:
    """A complete short batch script that runs only the node check (for preflight --on-nodes):
    the Plan's partition, account, nodes and GPUs, with its own job name, log, time limit
    (node_check_time) and environment (node_check_export)."""
    context = script_context(plan, submit_command=None, purpose="node-check", time=time or node_check_time(plan))
    return render_template("node_check.sh.j2", context)
