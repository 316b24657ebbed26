"""What every adapter derives from a Plan the same way: the trainer command line, the env it
forwards (by name) and sets (NVIDIA performance values), the Slurm segment, log locations, and
the refusal of values that no quoting can make safe.

Executors read a Plan and nothing else: nothing here chooses a training setting. The trainer
arguments come from mbridge_launch.plan.trainer_args, shared with `recommend`, so the command a user
is shown is the command that runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.quoting import ShellExpr, ShellValue, sh
from mbridge_launch.plan.model import Plan
from mbridge_launch.plan.trainer_args import trainer_args

# Control characters (newline included) cannot sit inside a #SBATCH line or a Slurm file name.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")

DEFAULT_LOG_DIR = "logs"
NVL72_GPUS_PER_NODE = 4
# the restart counter Slurm sets in a requeued job; unset (first start) reads as 0
RESTART_COUNT = ShellExpr('"${SLURM_RESTART_COUNT:-0}"')


# ------------------------------------------------------------------ refusing what cannot be made safe
def reject_control_chars(field: str, value: Optional[str]) -> None:
    if value is not None and _CONTROL.search(value):
        raise UserError("executors.control_char", field=field, value=repr(value))


def validate_plan(plan: Plan) -> None:
    """Refuse values that no quoting makes safe. Everything else is quoted where it is written.
    The Plan itself guarantees a safe name, a Slurm time, a known GPU type and env-variable names
    (plan.model); what is checked here is what a valid Plan may still hold."""
    c = plan.cluster
    # values that land on #SBATCH lines or in Slurm file names
    for field, value in (
        ("cluster.account", c.account),
        ("cluster.partition", c.partition),
        ("cluster.qos", c.qos),
        ("cluster.signal", c.signal),
        ("cluster.container_image", c.container_image),
        ("launch.workdir", plan.launch.workdir),
        ("launch.log_dir", plan.launch.log_dir),
    ):
        reject_control_chars(field, value)
    for i, arg in enumerate(c.sbatch_args):
        reject_control_chars(f"cluster.sbatch_args[{i}]", arg)
        if not arg.startswith("-"):
            raise UserError("executors.sbatch_arg_not_option", value=arg)
    if plan.launch.log_dir and "\\" in plan.launch.log_dir:
        raise UserError("executors.log_dir_backslash", value=plan.launch.log_dir)
    for i, mount in enumerate(c.container_mounts):
        for part, value in (("source", mount.source), ("target", mount.target)):
            field = f"cluster.container_mounts[{i}].{part}"
            reject_control_chars(field, value)
            if "," in value or ":" in value:
                raise UserError("executors.mount_separator", field=field, value=value)
    for name in plan.env_vars:
        if name in c.secrets:
            raise UserError("executors.secret_value_in_env", name=name)
    if not plan.launch.entry:
        raise UserError("executors.empty_entry")
    if plan.launch.shape == "torchrun":
        if c.nodes != 1:
            raise UserError("executors.torchrun_multi_node", nodes=c.nodes)
        if len(plan.launch.entry) < 2:
            raise UserError("executors.torchrun_entry", entry=" ".join(plan.launch.entry))


# ------------------------------------------------------------------ the ledger's token
def token_args(job_token: Optional[str]) -> list[str]:
    """sbatch options carrying the ledger's submission token: the job's comment, which squeue and
    sacct report, so that a submission whose job id never reached the ledger (Ctrl-C, kill -9 right
    after sbatch) is matched to its job by token, never guessed by name. Every executor puts it on
    sbatch's command line, never into the script: the script submitted is the one rendered."""
    return [f"--comment={job_token}"] if job_token else []


# ------------------------------------------------------------------ names and paths
def file_slug(plan: Plan) -> str:
    """The run name reduced to file-name characters (the job name itself stays verbatim)."""
    slug = _UNSAFE_FILE_CHARS.sub("_", plan.name).strip("._")
    return slug or "run"


def script_file_name(plan: Plan) -> str:
    return f"{file_slug(plan)}-{plan.plan_hash()}.sbatch"


def log_dir(plan: Plan) -> str:
    """Where Slurm output goes; relative paths are relative to the job's working directory."""
    return plan.launch.log_dir or DEFAULT_LOG_DIR


def slurm_filename(path: str) -> str:
    """A literal path inside a Slurm file name pattern: '%' must be doubled."""
    return path.replace("%", "%%")


def batch_log_pattern(plan: Plan) -> str:
    """#SBATCH --output pattern (appended to across requeues)."""
    return slurm_filename(f"{log_dir(plan).rstrip('/')}/{file_slug(plan)}") + "-%j.out"


def step_log_parts(plan: Plan) -> list[ShellValue]:
    """The training step's own log, one per job id and restart: parts joined by sh_concat."""
    prefix = slurm_filename(f"{log_dir(plan).rstrip('/')}/{file_slug(plan)}") + "-%j-restart"
    return [prefix, RESTART_COUNT, ".log"]


def resolve_dir(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def job_workdir(plan: Plan, submit_dir: Path) -> Path:
    """The directory the job starts in: launch.workdir, else where sbatch runs."""
    return resolve_dir(plan.launch.workdir, submit_dir) if plan.launch.workdir else submit_dir


def log_files(plan: Plan, job_ids: list[str], submit_dir: Path) -> list[Path]:
    """Batch logs of the given jobs plus every per-restart step log that exists."""
    base = resolve_dir(log_dir(plan), job_workdir(plan, submit_dir))
    slug = file_slug(plan)
    found: list[Path] = []
    for job_id in job_ids:
        found.append(base / f"{slug}-{job_id}.out")
        found.extend(sorted(base.glob(f"{slug}-{job_id}-restart*.log")))
    return found


# ------------------------------------------------------------------ the trainer and its environment
def trainer_argv(plan: Plan) -> list[str]:
    """argv of every rank: launch.entry, then --recipe/--mode/--dataset and KEY=VALUE overrides."""
    return [*plan.launch.entry, *trainer_args(plan)]


def torchrun_argv(plan: Plan) -> list[str]:
    """Single-node torchrun shape: PYTHON... -m torch.distributed.run --standalone ... SCRIPT ARGS.
    --standalone uses a local rendezvous, so the rendering holds no random rendezvous id."""
    *python, script = plan.launch.entry
    return [
        *python, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={plan.cluster.gpus_per_node}", script, *trainer_args(plan),
    ]


def forwarded_env_names(plan: Plan) -> list[str]:
    """Variables the job takes from the submitting shell, by NAME (never their values)."""
    names: list[str] = []
    for name in [*plan.cluster.env, *plan.cluster.secrets]:
        if name not in names:
            names.append(name)
    return names


def export_flag_value(plan: Plan) -> str:
    """sbatch --export: only the named variables (Slurm adds SLURM_*); NONE when there are none."""
    names = forwarded_env_names(plan)
    return ",".join(names) if names else "NONE"


def perf_env(plan: Plan) -> dict[str, str]:
    """The NVIDIA performance environment the Plan selected (its env_vars), in a stable order."""
    return dict(sorted(plan.env_vars.items()))


def segment(plan: Plan) -> Optional[int]:
    """sbatch --segment, only where the site supports it (profile.segment): the Plan's value,
    else NVIDIA's rule for 4-GPU NVL72 nodes (the node count up to 18, else its largest divisor
    up to 18, so that a job's nodes sit inside NVLink domains)."""
    c = plan.cluster
    if not c.profile.segment:
        return None
    if c.segment is not None:
        return c.segment
    if c.gpus_per_node != NVL72_GPUS_PER_NODE:
        return None
    from mbridge_launch.knowledge.perf_env import nvl72_segment

    return nvl72_segment(c.nodes)


def container_mounts_value(plan: Plan) -> Optional[str]:
    mounts = plan.cluster.container_mounts
    return ",".join(f"{m.source}:{m.target}" for m in mounts) if mounts else None


def container_srun_flags(plan: Plan) -> list[str]:
    """Pyxis flags for the training step, only when the site has Pyxis and the Plan an image."""
    c = plan.cluster
    if not (c.profile.pyxis and c.container_image):
        return []
    flags = [f"--container-image={c.container_image}"]
    mounts = container_mounts_value(plan)
    if mounts:
        flags.append(f"--container-mounts={mounts}")
    flags.append("--no-container-mount-home")
    names = forwarded_env_names(plan) + list(perf_env(plan))
    if names:
        flags.append(f"--container-env={','.join(names)}")
    if plan.launch.workdir:
        flags.append(f"--container-workdir={plan.launch.workdir}")
    return flags


def uses_container(plan: Plan) -> bool:
    """The training step runs in the image only where the site has Pyxis."""
    return bool(plan.cluster.profile.pyxis and plan.cluster.container_image)


def _inside(path: str, root: str) -> bool:
    path, root = path.rstrip("/") or "/", root.rstrip("/") or "/"
    return root == "/" or path == root or path.startswith(root + "/")


def mount_covering(plan: Plan, container_path: str) -> Optional[str]:
    """The `SOURCE:TARGET` of the declared mount a container path lies in (the last one wins, as
    later mounts sit on top), else None: the path is then the image's own."""
    found = None
    for m in plan.cluster.container_mounts:
        if _inside(container_path, m.target):
            found = f"{m.source}:{m.target}"
    return found


def same_path_in_container(plan: Plan, host_path: str) -> bool:
    """A host path the job also uses at the same path inside the image (submitit's folder): it
    must lie in a mount whose target equals its source."""
    return any(_inside(host_path, m.source) and m.source.rstrip("/") == m.target.rstrip("/")
               for m in plan.cluster.container_mounts)


def sbatch_args_as_parameters(plan: Plan) -> dict[str, object]:
    """cluster.sbatch_args as {option: value} for libraries that take #SBATCH options as a dict
    (NeMo-Run, submitit); they need the long form --name[=value]."""
    params: dict[str, object] = {}
    for arg in plan.cluster.sbatch_args:
        if not arg.startswith("--") or len(arg) < 3:
            raise UserError("executors.sbatch_arg_long_form", value=arg)
        key, _, value = arg[2:].partition("=")
        params[key] = value if value else True
    return params


def mpi_flags(plan: Plan) -> list[str]:
    mpi = plan.cluster.profile.mpi
    return [f"--mpi={mpi}"] if mpi else []


# ------------------------------------------------------------------ shell text
def sh_concat(parts: Iterable[ShellValue]) -> str:
    """One shell word from quoted literals and deliberate expansions: 'a'"${X}"'b'."""
    return "".join(sh(p) for p in parts)


def sh_message(key: str, **expansions: ShellExpr) -> str:
    """A translated message as one shell word in which the named placeholders are deliberate
    expansions ("${SLURM_JOB_ID}") and all the translated text is quoted by sh()."""
    from mbridge_launch.base.i18n import t

    marks = {name: f"\x00{name}\x00" for name in expansions}
    text = "mbridge-launch: " + t(key, **marks)
    parts: list[ShellValue] = []
    for i, piece in enumerate(text.split("\x00")):
        if i % 2:
            parts.append(expansions[piece])
        elif piece:
            parts.append(piece)
    return sh_concat(parts)
