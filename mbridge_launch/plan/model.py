"""The Plan: the single contract between the core and the executors (DESIGN.md).

A Plan is saved as YAML that people read, edit, diff and commit. Loading rejects unknown or
mistyped fields with a message naming the field and the valid ones. Its hash identifies it.

The constraints of every field live here (positive sizes, Slurm times, env-variable names, the run
name, the GPU type, auto-rollback bounds, ...), so that every command that loads a Plan refuses a
bad one the same way, with every error at once (`PlanInvalid`), and the consumers trust it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.functional_validators import AfterValidator
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import ValidationInfo

from mbridge_launch import __version__
from mbridge_launch.base import slurm_signal, slurm_time
from mbridge_launch.base.errors import UserError, printable_value
from mbridge_launch.base.i18n import Msg
from mbridge_launch.base.names import MAX_RUN_NAME, run_name_problem
from mbridge_launch.base.numbers import MAX_ITERATION
from mbridge_launch.base.numbers import is_number as _is_number
from mbridge_launch.base.quoting import is_env_name
from mbridge_launch.knowledge.vocabulary import GPU_TYPES, goal_or_none, gpu_type_or_none
from mbridge_launch.plan.overrides import KEY_PATTERN
from mbridge_launch.plan.settings import override_text
from mbridge_launch.planner.rules import DEFAULT_SIZE_LIMIT, LayoutFields, size_limit

PLAN_SCHEMA_VERSION = 1

Mode = Literal["pretrain", "sft", "lora", "dora"]  # vocabulary.GOALS (a test keeps them equal)
RecipeKind = Literal["library", "benchmark"]
ChangeClass = Literal["convergence", "execution", "benchmark_only"]
ChangeSource = Literal["user", "resize", "planner", "launcher", "dataset", "repair", "tune"]  # planner: `plan -o`'s layout; repair: plan.recipe_repairs; tune: the layout `tune` measured fastest
Recompute = Literal["none", "selective", "full"]
LaunchShape = Literal["srun", "torchrun"]
Severity = Literal["error", "warning", "info"]

# The Slurm time forms (sbatch --time), listed when a Plan's time is not one of them.
TIME_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"

# Control characters (C0 and DEL) are refused in every string of a Plan: a NUL crashes the file
# system calls that receive the value, the others reach terminals and job scripts. A line break or
# tab only in the free-text fields, whose text is meant to span lines: FREE_TEXT below.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_EXCEPT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# (model class name, field): launch.setup holds shell commands (a multi-line command is theirs to
# write), env_vars values are environment values (rendered quoted), an accepted check's reason is
# prose. Override reasons and warnings are messages (key and parameters), not plain strings.
FREE_TEXT = {("Launch", "setup"), ("Plan", "env_vars"), ("AcceptedCheck", "reason")}


# ---------------------------------------------------------------------- field constraints
# Each raises a PydanticCustomError whose type names its message (plan.error.<type>) and whose
# context fills it, so that every error of a Plan is reported in the user's language.
def _at_least(minimum: int) -> Any:
    def check(value: Optional[int]) -> Optional[int]:
        if value is not None and value < minimum:
            raise PydanticCustomError("at_least", "must be at least {min}", {"min": minimum})
        return value
    return check


def _env_name(value: str) -> str:
    if not is_env_name(value):
        raise PydanticCustomError("env_name", "not an environment variable name")
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise PydanticCustomError("absolute", "not an absolute path")
    return value


# The file system's limits (Linux PATH_MAX and NAME_MAX, in bytes): a longer path cannot be
# stat'ed, made or opened at all (ENAMETOOLONG), so it is refused where it is written, by name.
PATH_MAX_BYTES = 4095
NAME_MAX_BYTES = 255


def _path_length(value: str) -> str:
    encoded = value.encode("utf-8", "surrogateescape")
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if len(encoded) > PATH_MAX_BYTES or longest > NAME_MAX_BYTES:
        raise PydanticCustomError("path_too_long", "a path beyond the file system's limits",
                                  {"length": len(encoded), "longest": longest,
                                   "path_max": PATH_MAX_BYTES, "name_max": NAME_MAX_BYTES})
    return value


def mount_path(value: str) -> str:
    """One side of a Pyxis mount. Pyxis splits --container-mounts at ',' (between mounts) and ':'
    (SRC:DST[:FLAGS]), so neither may appear inside a path; mount flags are not supported (every
    executor renders SRC:DST). Absolute, as a relative source would be relative to wherever srun
    starts on the node, not to where the Plan was written."""
    if "," in value or ":" in value:
        raise PydanticCustomError("mount_separator", "contains ',' or ':'")
    return _absolute(value)


# Characters Hydra's override grammar gives a meaning in a list item (dataset.data_path=[W,P,...]):
# ',' and brackets are the list itself, quotes and '\\' escapes, '$' an interpolation, '=' and
# parentheses other syntax; ':' is the WEIGHT:PREFIX separator of --data-path.
_HYDRA_SPECIAL = frozenset(",[]{}()='\"\\$:")


def data_path_problem(value: str) -> str | None:
    """None for a usable megatron-indexed prefix, else the suffix of its message."""
    if not value.strip():
        return "data_path_empty"
    if value != value.strip() or any(ch in _HYDRA_SPECIAL for ch in value):
        return "data_path_syntax"
    if value.startswith("-") and not _is_number(value):
        # `--data-path=--`: a flag typed where the prefix belongs. A number is a weight of
        # Megatron's flat form [W, P, W, P] (a negative one is preflight's data.weights error)
        return "data_path_dash"
    return None


def _data_path(value: str) -> str:
    problem = data_path_problem(value)
    if problem:
        raise PydanticCustomError(problem, "not a data path prefix", {"special": DATA_PATH_SPECIAL})
    return value


DATA_PATH_SPECIAL = " ".join(sorted(_HYDRA_SPECIAL))
_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")  # dataset.<this>


def _override_key(value: str) -> str:
    """A ConfigContainer path as run_recipe.py's KEY=VALUE takes it (the parser of the trailing
    KEY=VALUE arguments uses the same pattern)."""
    if not KEY_PATTERN.fullmatch(value):
        raise PydanticCustomError("override_key", "not a setting path")
    return value


def _setting_name(value: str) -> str:
    if not _SETTING_NAME.fullmatch(value):
        raise PydanticCustomError("override_key", "not a setting name")
    return value


def _at_most(maximum: int) -> Any:
    def check(value: Optional[int]) -> Optional[int]:
        if value is not None and value > maximum:
            raise PydanticCustomError("at_most", "must be at most {max}", {"max": maximum})
        return value
    return check


def _scalar_text(value: Any) -> Any:
    """A YAML scalar as the text run_recipe.py's KEY=VALUE takes (`4`, `true`, `null` written
    unquoted by hand); lists and mappings are left for the str type to refuse."""
    if isinstance(value, (dict, list, str)):
        return value
    return override_text(value)


def _number_text(value: Any) -> Any:
    """An environment value written as a bare number (`CUDA_DEVICE_MAX_CONNECTIONS: 1`) is its
    text; true/false are refused (is it 1, true or yes?) by the str type."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_number_text)]
ScalarText = Annotated[str, BeforeValidator(_scalar_text)]
FsPath = Annotated[str, AfterValidator(_path_length)]  # every path the tool or the job opens
MountPath = Annotated[str, AfterValidator(_path_length), AfterValidator(mount_path)]
DataPath = Annotated[str, AfterValidator(_path_length), AfterValidator(_data_path)]
BlendWeight = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Figure = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # an estimate: finite, not negative


def _strings(value: Any) -> Any:
    """Every str inside a field's value (list items, mapping keys and values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True,
                              arbitrary_types_allowed=True)

    @model_validator(mode="after")
    def _no_control_characters(self) -> Any:
        """Every string field of every section, in one place (nested sections check their own):
        the error names the field and shows the value escaped."""
        for name in type(self).model_fields:
            free = (type(self).__name__, name) in FREE_TEXT
            pattern = _CONTROL_EXCEPT_LINES if free else _CONTROL
            for text in _strings(getattr(self, name)):
                if pattern.search(text):
                    raise PydanticCustomError("control_char", "control character", {"field": name, "text": text})
        return self


def _message(value: Any) -> Msg:
    from mbridge_launch.base.i18n import check_msg

    try:
        message = Msg.from_data(value)
        check_msg(message)  # a hand-edited key or parameter is refused here, not by a crash when shown
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return message


# A message stored in a Plan: its key and parameters, never rendered text, so that a Plan (and its
# hash) is the same in every language; rendered when shown. A plain string (a hand-written reason,
# or a Plan written before messages were data) is kept as literal text.
StoredMessage = Annotated[Msg, BeforeValidator(_message), PlainSerializer(lambda m: m.as_data())]


class CatalogRef(_Strict):
    source: str = Field(description="catalog file the recipe came from")
    version: str = Field(description="Megatron Bridge release of the catalog")


class RecipeRef(_Strict):
    name: str = Field(description="canonical recipe function name")
    alias: Optional[str] = Field(default=None, description="legacy short name, if any")
    kind: RecipeKind
    family: Optional[str] = None
    model: str = Field(description="recipe model token, e.g. llama3_8b")


class DatasetSpec(_Strict):
    selector: str = Field(description="run_recipe.py --dataset selector (mock, megatron-indexed, squad, ...)")
    data_paths: list[DataPath] = Field(default_factory=list, description="megatron-indexed prefixes (a blend)")
    weights: Optional[list[BlendWeight]] = Field(default=None, description="blend weights, one per prefix")
    fields: dict[Annotated[str, AfterValidator(_setting_name)], ScalarText] = Field(
        default_factory=dict, description="other dataset.* settings, e.g. dataset_root")

    @field_validator("weights")
    @classmethod
    def _one_positive_weight_per_path(cls, value: Optional[list[float]], info: ValidationInfo) -> Optional[list[float]]:
        if value is None:
            return value
        if any(not w > 0 for w in value):  # `not >` also refuses nan
            raise PydanticCustomError("weights_positive", "every blend weight must be above 0")
        paths = info.data.get("data_paths")  # absent when data_paths itself is invalid (reported there)
        if paths is not None and len(value) != len(paths):
            raise PydanticCustomError("weights_count", "{weights} weights for {paths} data paths",
                                      {"weights": len(value), "paths": len(paths)})
        return value


# mypy counts a pydantic model as a non-frozen dataclass, which it does not let inherit from a frozen
# one; pydantic itself reads the fields of a dataclass base as its own (validated, assignable).
class Parallelism(_Strict, LayoutFields):  # type: ignore[misc]
    """The planner's LayoutFields (planner.rules), the recompute level checked against its names,
    and the data-parallel size."""

    recompute: Recompute = "none"
    dp: int = 1

    # sizes and counts are at least 1; vp and etp when set (vp 1 is no interleaving, as Megatron
    # reads it; the planner writes None or >= 2, and rules.RULE_VP_PP says when VP needs PP > 1)
    _positive = field_validator("tp", "pp", "cp", "ep", "mbs", "gbs", "seq_length", "dp", "vp", "etp")(
        _at_least(1))
    # beyond any real job (planner.rules.size_limit): the rules would spend hours on the divisors
    _tp_bound = field_validator("tp", "pp", "cp", "ep", "vp", "etp", "dp")(_at_most(DEFAULT_SIZE_LIMIT))
    _mbs_bound = field_validator("mbs")(_at_most(size_limit("mbs")))
    _gbs_bound = field_validator("gbs")(_at_most(size_limit("gbs")))
    _seq_bound = field_validator("seq_length")(_at_most(size_limit("seq_length")))

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def grad_accum(self) -> int:
        denominator = self.mbs * self.dp
        return self.gbs // denominator if denominator else 0


class Override(_Strict):
    """One ConfigContainer setting that differs from the recipe's default, with its class."""

    key: Annotated[str, AfterValidator(_override_key)] = Field(description="ConfigContainer path, e.g. model.tensor_model_parallel_size")
    value: str = Field(description="value as written after KEY= on the run_recipe.py line")
    from_: Optional[str] = Field(default=None, alias="from", description="the recipe's default, if known")
    change_class: ChangeClass = Field(alias="class")
    # default: empty literal text, which is stored as "" (plans without a reason keep their hash)
    reason: StoredMessage = Field(default_factory=lambda: Msg.from_data(""), description="why (a message key and parameters)")
    source: ChangeSource = "user"


class Mount(_Strict):
    source: MountPath = Field(description="absolute path on the node")
    target: MountPath = Field(description="absolute path inside the container")


# Options the executors set from the Plan's own fields (executors/batch_script.py, common.py): the
# same option in sbatch_args / srun_args would contradict the field (or silently win over it, in
# one executor and not another), so it is refused with the field to edit instead.
SBATCH_OPTIONS = {
    "--job-name": "name", "-J": "name", "--account": "cluster.account", "-A": "cluster.account",
    "--partition": "cluster.partition", "-p": "cluster.partition", "--qos": "cluster.qos", "-q": "cluster.qos",
    "--nodes": "cluster.nodes", "-N": "cluster.nodes", "--ntasks-per-node": "cluster.gpus_per_node",
    "--ntasks": "cluster.nodes", "-n": "cluster.nodes",
    "--gpus-per-node": "cluster.gpus_per_node", "--gpus": "cluster.gpus_per_node", "-G": "cluster.gpus_per_node",
    "--time": "cluster.time", "-t": "cluster.time",
    "--exclusive": "cluster.exclusive", "--requeue": "cluster.requeue", "--no-requeue": "cluster.requeue",
    "--signal": "cluster.signal", "--segment": "cluster.segment", "--output": "launch.log_dir", "-o": "launch.log_dir",
    "--error": "launch.log_dir", "-e": "launch.log_dir", "--open-mode": "launch.log_dir",
    "--export": "cluster.env", "--chdir": "launch.workdir", "-D": "launch.workdir", "--comment": "name",
}
SRUN_OPTIONS = {
    "--nodes": "cluster.nodes", "-N": "cluster.nodes", "--ntasks": "cluster.nodes", "-n": "cluster.nodes",
    "--ntasks-per-node": "cluster.gpus_per_node", "--gpus-per-node": "cluster.gpus_per_node",
    "--export": "cluster.env", "--mpi": "cluster.profile.mpi", "--output": "launch.log_dir", "-o": "launch.log_dir",
    "--container-image": "cluster.container_image", "--container-mounts": "cluster.container_mounts",
    "--container-env": "cluster.env", "--container-workdir": "launch.workdir",
}


def _option_name(arg: str) -> str:
    """The option an argument sets: `--nodes=4` and `--nodes` are --nodes, `-N4` is -N."""
    if arg.startswith("--"):
        return arg.partition("=")[0]
    return arg[:2] if arg.startswith("-") else ""


def _own_options(args: list[str], own: dict[str, str]) -> list[str]:
    for arg in args:
        field = own.get(_option_name(arg))
        if field:
            raise PydanticCustomError("tool_option", "set by the tool", {"option": _option_name(arg), "field": field})
    return args


class ClusterProfile(_Strict):
    """What the site's Slurm supports; options that need a feature are rendered only if present."""

    slurm_version: Optional[str] = None
    pyxis: bool = False
    segment: bool = Field(default=False, description="Slurm 24.11+ with topology/block (--segment)")
    mpi: Optional[str] = Field(default="pmix", description="srun --mpi value, or null for none")


class Cluster(_Strict):
    account: Optional[str] = None
    partition: Optional[str] = None
    qos: Optional[str] = None
    nodes: int = 1
    gpus_per_node: int = 8
    gpu_type: str = Field(default="h100", description="one of vocabulary.GPU_TYPES (an alias is read as its type)")
    time: str = Field(default="04:00:00", description="sbatch --time, a finite Slurm time")
    exclusive: bool = True
    requeue: bool = True
    # SIGTERM is the signal Megatron Bridge's exit handler catches (train.exit_signal's default),
    # 60 s before the limit as Bridge's own PreemptionPlugin sends it; recommend turns the handler
    # on (plan.signals), preflight refuses a signal the trainer would die of
    signal: Optional[str] = Field(default="TERM@60", description="sbatch --signal: the trainer saves and exits on it")
    segment: Optional[int] = None
    container_image: Optional[str] = None
    container_mounts: list[Mount] = Field(default_factory=list)
    env: list[EnvName] = Field(default_factory=list, description="environment variable NAMES forwarded to the job")
    secrets: list[EnvName] = Field(default_factory=list, description="secret NAMES (HF_TOKEN...) forwarded, never values")
    srun_args: list[str] = Field(default_factory=list)
    sbatch_args: list[str] = Field(default_factory=list)
    profile: ClusterProfile = Field(default_factory=ClusterProfile)

    _positive = field_validator("nodes", "gpus_per_node", "segment")(_at_least(1))
    _bounded = field_validator("nodes", "gpus_per_node", "segment")(_at_most(DEFAULT_SIZE_LIMIT))

    @field_validator("sbatch_args")
    @classmethod
    def _sbatch_args_not_the_tools(cls, value: list[str]) -> list[str]:
        return _own_options(value, SBATCH_OPTIONS)

    @field_validator("srun_args")
    @classmethod
    def _srun_args_not_the_tools(cls, value: list[str]) -> list[str]:
        return _own_options(value, SRUN_OPTIONS)

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _known_gpu_type(cls, value: Any) -> Any:
        """Every spelling the commands accept (GB200, h100-sxm, "H100 SXM") is read as its type."""
        if not isinstance(value, str):
            return value  # the str type refuses it
        found = gpu_type_or_none(value)
        if found is None:
            raise PydanticCustomError("choice", "not one of {choices}", {"choices": ", ".join(GPU_TYPES)})
        return found

    @field_validator("signal")
    @classmethod
    def _slurm_signal(cls, value: Optional[str]) -> Optional[str]:
        """sbatch's --signal grammar ([R|B:]SIG[@SECONDS]), so preflight can read what it sends."""
        if value is None:
            return value
        try:
            slurm_signal.parse(value)
        except ValueError:
            raise PydanticCustomError("slurm_signal", "not a Slurm --signal", {"works": slurm_signal.WORKS}) from None
        return value

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str) -> str:
        """The grammar of base.slurm_time; finite and above 0, as `recommend --time` requires (0
        asks Slurm for no limit, and GPU-hours and the card need a bound)."""
        try:
            seconds = slurm_time.parse_seconds(value)
        except slurm_time.TimeOutOfRange:
            raise PydanticCustomError("time_range", "a Slurm time field out of range", {"forms": TIME_FORMS}) from None
        except ValueError:
            raise PydanticCustomError("time", "not a Slurm time ({forms})", {"forms": TIME_FORMS}) from None
        if not seconds:
            raise PydanticCustomError("time_finite", "a time limit above 0 ({forms})", {"forms": TIME_FORMS})
        return value

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class CheckpointPaths(_Strict):
    save: Optional[FsPath] = None
    load: Optional[FsPath] = None
    save_interval: Optional[int] = None
    pretrained_checkpoint: Optional[FsPath] = None
    # SFT/LoRA/DoRA without pretrained_checkpoint start from random weights (and Megatron Bridge
    # 0.6.2 stops PEFT at validation): preflight refuses that unless the Plan says so here, with why
    from_scratch: Optional[StoredMessage] = Field(
        default=None, description="why this fine-tuning run starts from random weights (recommend --from-scratch)")

    _positive = field_validator("save_interval")(_at_least(1))
    _bounded = field_validator("save_interval")(_at_most(MAX_ITERATION))


class Launch(_Strict):
    shape: LaunchShape = "srun"
    entry: list[str] = Field(
        default_factory=lambda: ["python", "scripts/training/run_recipe.py"],
        description="program + script run on every rank (the stand-in trainer in tests)",
    )
    workdir: Optional[FsPath] = Field(default=None, description="directory the job starts in (Megatron Bridge checkout)")
    log_dir: Optional[FsPath] = Field(default=None, description="where Slurm output files go")
    setup: list[str] = Field(default_factory=list, description="commands run before training (site modules)")
    python: Optional[str] = Field(
        default=None, min_length=1,
        description="python the job runs executor code with (submitit's task runner): default python3 in a "
                    "container image, else the interpreter that submits",
    )


class EstimateDomain(_Strict):
    inside: bool
    outside: list[str] = Field(default_factory=list)


class EstimateBand(_Strict):
    median: Figure
    p90: Figure
    held_out: str
    rows: int = Field(ge=0)


class Estimates(_Strict):
    """What recommend estimated, for the card: shown, never trusted by a check (preflight
    recomputes memory from the architecture)."""

    memory_gb_per_gpu: Optional[Figure] = None
    memory_breakdown_gb: dict[str, Figure] = Field(default_factory=dict)
    hbm_gb: Optional[Figure] = None
    step_time_s: Optional[Figure] = None
    tokens_per_sec_per_gpu: Optional[Figure] = None
    model_tflops_per_gpu: Optional[Figure] = None
    mfu: Optional[Figure] = None
    gpu_hours_at_time_limit: Optional[Figure] = None
    # planner.domain: inside the calibrated domain (and the dimensions outside it), and the
    # leave-one-out error band of the throughput estimate (fractions, and what it was held out on)
    domain: Optional[EstimateDomain] = None
    error_band: Optional[EstimateBand] = None


class PlanWarning(_Strict):
    code: str
    message: StoredMessage = Field(description="a message key and parameters, rendered when shown")
    severity: Severity = "warning"


class AutoRollback(_Strict):
    enabled: bool = False
    on_nan: bool = True
    # the bounds of rollback.lossmon.LossWatcher: a factor of 1 or less would fire on every step
    spike_factor: Optional[float] = Field(default=3.0, gt=1, allow_inf_nan=False,
                                          description="loss > factor x moving median triggers")
    window: int = Field(default=20, ge=1, le=MAX_ITERATION, description="iterations in the moving median")
    max_rollbacks: int = Field(default=3, ge=0, le=1000)  # as watch --max-rollbacks
    # Where the watcher job runs (gate/watcher_job.py): it must start WHILE training runs, so a
    # site whose GPU nodes are allocated whole sends it to a CPU partition. null: the training
    # job's partition / account (preflight warns when that cannot start during training).
    watcher_partition: Optional[str] = Field(default=None, min_length=1, description="partition of the watcher job")
    watcher_account: Optional[str] = Field(default=None, min_length=1, description="account of the watcher job")

    @model_serializer(mode="wrap")
    def _without_unset_watcher(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An unset watcher placement is left out, so that every Plan written before it existed
        keeps its hash (the ledger's duplicate checks compare hashes)."""
        data = handler(self)
        for name in ("watcher_partition", "watcher_account"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class AcceptedCheck(_Strict):
    """A preflight error the user accepts for this plan (only checks that rest on an estimate,
    see preflight.acceptance.ACCEPTABLE); it then counts as a warning, with the reason shown."""

    code: str = Field(description="preflight check code, e.g. plan.memory_oom")
    reason: str = Field(min_length=1, description="why it is safe here (shown on every preflight and plan card)")


class TuneTrial(_Strict):
    """One trial of `tune` (mbridge_launch/tune): its layout, its job and what it measured."""

    name: str
    layout: str = Field(description="the layout, one line (TP= PP= VP= CP= EP= MBS= recompute=)")
    planner_rank: Optional[int] = Field(default=None, description="its rank in the planner's order")
    predicted_tokens_per_sec_per_gpu: Optional[Figure] = None
    job_id: Optional[str] = None
    state: str = Field(description="the ledger's final state of the trial run")
    step_time_s: Optional[Figure] = None
    tokens_per_sec_per_gpu: Optional[Figure] = None
    peak_memory_gb: Optional[Figure] = None
    diagnosis: Optional[str] = Field(default=None, description="why it failed, one line")
    won: bool = False


class TuneRecord(_Strict):
    """What `tune` measured for this Plan's layout, and which trial won (its layout is the Plan's)."""

    at: str = Field(description="when (UTC, ISO 8601)")
    steps: int = Field(ge=1, le=MAX_ITERATION)
    trials: list[TuneTrial] = Field(default_factory=list)
    winner: Optional[str] = Field(default=None, description="name of the winning trial")


class Plan(_Strict):
    schema_version: int = PLAN_SCHEMA_VERSION
    name: str = Field(description="run name; job name and checkpoint folder")
    tool_version: str = __version__
    catalog: CatalogRef
    recipe: RecipeRef
    mode: Mode
    dataset: DatasetSpec
    parallelism: Parallelism
    overrides: list[Override] = Field(default_factory=list)
    cluster: Cluster = Field(default_factory=Cluster)
    checkpoint: CheckpointPaths = Field(default_factory=CheckpointPaths)
    launch: Launch = Field(default_factory=Launch)
    env_vars: dict[EnvName, EnvValue] = Field(default_factory=dict, description="non-secret env values (NVIDIA perf settings)")
    estimates: Estimates = Field(default_factory=Estimates)
    warnings: list[PlanWarning] = Field(default_factory=list)
    auto_rollback: AutoRollback = Field(default_factory=AutoRollback)
    accepted_checks: list[AcceptedCheck] = Field(default_factory=list)
    tune: Optional[TuneRecord] = Field(default=None, description="the measurements of `tune`, if it ran")

    @field_validator("mode", mode="before")
    @classmethod
    def _canonical_mode(cls, value: Any) -> Any:
        """Every spelling of a goal the commands accept (peft, LoRA, finetune) is read as its
        canonical mode; an unknown word is left for the Literal to refuse with the valid ones."""
        return (goal_or_none(value) or value) if isinstance(value, str) else value

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value != PLAN_SCHEMA_VERSION:
            raise PydanticCustomError("choice", "not one of {choices}", {"choices": str(PLAN_SCHEMA_VERSION)})
        return value

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        """Job name, checkpoint folder and NeMo-Run title, unquoted: base/names.py's rule, the
        one `recommend --name` and every RUN argument take."""
        problem = run_name_problem(value)
        if problem:
            raise PydanticCustomError(problem, "not a run name", {"max": MAX_RUN_NAME})
        return value

    @field_validator("overrides")
    @classmethod
    def _overrides_keep_the_layout(cls, value: list[Override], info: ValidationInfo) -> list[Override]:
        """An override of a layout setting must say what `parallelism` says: the memory check,
        the rules and the card read `parallelism`, the job runs the override."""
        parallelism = info.data.get("parallelism")  # absent when it is invalid itself (reported there)
        if parallelism is None:
            return value
        from mbridge_launch.plan.overrides import layout_contradiction

        found = layout_contradiction(parallelism, [(o.key, o.value) for o in value])
        if found:
            raise PydanticCustomError("layout_override", "contradicts parallelism", found)
        return value

    @field_validator("overrides", mode="before")
    @classmethod
    def _override_values_as_text(cls, value: Any) -> Any:
        """A hand-written `value: 4`, `value: true` or `value: null` is the text the trainer line
        writes ("4", "true", "null"); a list or mapping is left for the str type to refuse."""
        if not isinstance(value, list):
            return value
        return [{**item, "value": _scalar_text(item["value"])} if isinstance(item, dict) and "value" in item else item
                for item in value]

    # ------------------------------------------------------------------ identity
    def canonical_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True)
        if not data.get("accepted_checks"):
            data.pop("accepted_checks", None)  # plans without acceptances keep the hash they always had
        if data.get("tune") is None:
            data.pop("tune", None)  # likewise plans never tuned
        estimates = data.get("estimates") or {}
        for name in ("domain", "error_band"):  # likewise plans written before estimates said their domain
            if estimates.get(name) is None:
                estimates.pop(name, None)
        if data.get("launch", {}).get("python") is None:
            data.get("launch", {}).pop("python", None)  # likewise plans that keep the default interpreter
        if data.get("checkpoint", {}).get("from_scratch") is None:
            data.get("checkpoint", {}).pop("from_scratch", None)  # likewise plans that load their weights
        return data

    def plan_hash(self) -> str:
        """sha256 of the canonical JSON, first 16 hex digits. tool_version is excluded so that
        upgrading the tool does not turn the same plan into a new one."""
        data = self.canonical_dict()
        data.pop("tool_version", None)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_yaml(self) -> str:
        import yaml

        header = f"{PLAN_HEADER} {self.plan_hash()} (edit freely; validated on load)\n"
        # never `&id001`/`*id001` for a value that occurs twice: the reader refuses aliases
        return header + yaml.dump(self.canonical_dict(), Dumper=_no_alias_dumper(), sort_keys=False, allow_unicode=True)


def _no_alias_dumper() -> type:
    import yaml

    class NoAliasDumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return NoAliasDumper


PLAN_HEADER = "# mbridge-launch plan"
PLAN_MAX_BYTES = 4 * 1024 * 1024  # a Plan is a few KB; anything near this is not one


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write `plan` to `path` (a new Plan, as recommend/plan -o write it); a different file
    already there is kept beside it as PATH.~N~ (base.atomic.keep_backup), never lost."""
    from mbridge_launch.base.atomic import replace_keeping_backup
    from mbridge_launch.base.errors import writable

    with writable(path):
        replace_keeping_backup(Path(path), plan.to_yaml().encode("utf-8"), "plan", PLAN_MAX_BYTES)
    return Path(path)


@dataclass(frozen=True)
class Rewritten:
    """A Plan file rewritten in place: its path, the backup of its previous bytes (None when
    nothing changed) and whether the user's comments and key order were kept (False only when
    the file could not be edited in place and was written whole; its old text is the backup)."""

    path: Path
    backup: Optional[Path]
    kept_layout: bool


def rewrite_plan(path: str | Path, before: Plan, after: Plan) -> Rewritten:
    """Rewrite the user's Plan file at `path`, which held `before`, so that it holds `after`:
    a round-trip edit of the values that changed (base.yaml_edit: comments, key order and every
    untouched line kept), the previous file kept as PATH.~N~, the new one written atomically.
    The edited text must read back as `after` (the same plan_hash) before it is written; when it
    cannot be (the file changed meanwhile, or is not a mapping), the Plan is written whole."""
    from mbridge_launch.base.atomic import replace_keeping_backup
    from mbridge_launch.base.errors import writable

    target = Path(path)
    edited = _edited_plan_text(target, before, after)
    text = edited if edited is not None else after.to_yaml()
    with writable(target):
        backup = replace_keeping_backup(target, text.encode("utf-8"), "plan", PLAN_MAX_BYTES)
    return Rewritten(path=target, backup=backup, kept_layout=edited is not None)


def _edited_plan_text(path: Path, before: Plan, after: Plan) -> Optional[str]:
    """The file's text with before -> after applied round-trip, checked to read back as `after`;
    None when that cannot be done (the caller writes the Plan whole)."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.user_yaml import load_user_yaml
    from mbridge_launch.base.yaml_edit import NotEditable, edit_yaml_text

    try:
        original = read_plan_text(path)
        edited = edit_yaml_text(original, str(path), before.canonical_dict(), after.canonical_dict())
        got = plan_from_dict(load_user_yaml(edited, str(path)), str(path))
    except (UserError, NotEditable, FileNotFoundError):
        return None
    if got.plan_hash() != after.plan_hash():
        return None  # the file no longer held `before` (edited meanwhile): written whole, old kept
    # the header line the tool wrote names the Plan's hash (wherever the user's comments put it)
    header = re.compile(r"^" + re.escape(f"{PLAN_HEADER} {before.plan_hash()} "), re.MULTILINE)
    return header.sub(f"{PLAN_HEADER} {after.plan_hash()} ", edited, count=1)


def load_plan(path: str | Path) -> Plan:
    """A Plan file: a bounded read (a FIFO, device or huge file is one line, never a hang) and
    the YAML loader for user files (libyaml; duplicate keys and deep nesting refused)."""
    from mbridge_launch.base.user_yaml import load_user_yaml

    text = read_plan_text(path)
    return plan_from_dict(load_user_yaml(text, str(path)), str(path))


def read_plan_text(path: str | Path) -> str:
    """The Plan file's text (for its hash and card), read as boundedly as load_plan reads it."""
    from mbridge_launch.base.files import read_bounded_text

    return read_bounded_text(path, PLAN_MAX_BYTES, "plan")


def plan_from_dict(data: Any, where: str = "<plan>") -> Plan:
    if not isinstance(data, dict):
        # the file's content is never echoed: a path given as a Plan may be a secret (a token file
        # reads as one YAML string); its YAML kind is enough to say what is wrong
        raise PlanInvalid(where, [("(top level)", "plan.error.mapping", {"value": _yaml_kind(data)})])
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise plan_invalid(where, exc) from None


def _yaml_kind(data: Any) -> str:
    """The YAML tag of a document that is not a mapping (!!seq, !!str, ...): the same in every
    language, and nothing of the content."""
    if data is None:
        return "!!null"
    if isinstance(data, bool):
        return "!!bool"
    if isinstance(data, int):
        return "!!int"
    if isinstance(data, float):
        return "!!float"
    return "!!seq" if isinstance(data, list) else "!!str"


def plan_invalid(where: str, exc: ValidationError) -> "PlanInvalid":
    """A Plan's validation errors as the one-line-each PlanInvalid (also for a Plan built in code
    from the user's flags and overrides, e.g. by recommend)."""
    return PlanInvalid(where, [_problem(err) for err in exc.errors()])


class PlanInvalid(UserError):
    """Every error of a Plan at once: one line each (field, bad value, what is valid), after a
    count line; a single error is one line. Exit 2 like any bad input."""

    def __init__(self, path: str, problems: list[tuple[str, str, dict[str, object]]]) -> None:
        self.path = path
        self.problems = problems  # (dotted field, message key, its parameters)
        super().__init__("plan.invalid_many", path=path, count=len(problems))

    def render(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import t

        def line(field: str, key: str, params: dict[str, object]) -> str:
            shown = {k: (t("plan.error.hidden", lang=lang) if v is _HIDDEN else v) for k, v in params.items()}
            return t("plan.error.line", lang=lang, field=field, problem=t(key, lang=lang, **shown))

        lines = [line(*problem) for problem in self.problems]
        if len(lines) == 1:
            return t("plan.invalid_one", lang=lang, path=printable_value(self.path), error=lines[0])
        head = t("plan.invalid_many", lang=lang, path=printable_value(self.path), count=len(lines))
        return "\n".join([head, *("  - " + text for text in lines)])


# pydantic's own error types -> the suffix of their message (plan.error.<suffix>); the custom
# errors of the validators above are named after their message already.
_PYDANTIC_ERRORS = {
    "greater_than_equal": "at_least", "greater_than": "above", "less_than_equal": "at_most", "less_than": "below",
    "literal_error": "choice", "missing": "missing", "extra_forbidden": "unknown",
    "int_type": "integer", "int_parsing": "integer", "int_from_float": "integer",
    "float_type": "number", "float_parsing": "number", "finite_number": "finite",
    "bool_type": "boolean", "bool_parsing": "boolean", "string_type": "text", "string_too_short": "empty",
    "list_type": "list", "dict_type": "mapping", "model_type": "mapping", "model_attributes_type": "mapping",
    "dataclass_type": "mapping",
}
_CUSTOM_ERRORS = ("at_least", "env_name", "absolute", "weights_positive", "weights_count", "choice", "time",
                  "time_finite", "slurm_signal", "at_most")
# the validators of issue 14 pass their context through as the message's parameters
_CONTEXT_ERRORS = ("name_empty", "name_too_long", "name_characters", "name_dots", "name_dash", "control_char",
                   "mount_separator", "data_path_empty", "data_path_syntax", "data_path_dash", "override_key", "layout_override",
                   "tool_option", "time_range", "path_too_long")
_HIDDEN = object()  # a value never echoed (what stands under env_vars, cluster.env, cluster.secrets)
_VALUE_LIMIT = 80


def _dotted(loc: tuple) -> tuple[str, bool]:
    """The field as the Plan file names it (cluster.container_mounts[0].target), and whether the
    error is about a mapping's key rather than its value."""
    text, is_key = "", False
    for part in loc:
        if part == "[key]":
            is_key = True
        elif isinstance(part, int):
            text += f"[{part}]"
        else:
            name = str(part)
            if not (name.replace("_", "").isalnum() and name.isascii()):
                name = _shown(name)  # a mapping key the user wrote: quoted, escaped, bounded
            text += ("." if text else "") + name
    return text or "(top level)", is_key


def _shown(value: Any) -> str:
    """A bad value as the user wrote it: JSON-quoted (control characters escaped), bounded."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    text = str(printable_value(text))
    return text if len(text) <= _VALUE_LIMIT else text[:_VALUE_LIMIT - 3] + "..."


def _secret_place(loc: tuple, is_key: bool) -> bool:
    """Values there may be secrets (a token pasted where a name belongs): shown as hidden."""
    if loc[:1] == ("env_vars",):
        return not is_key
    return loc[:2] in (("cluster", "env"), ("cluster", "secrets"))


def _problem(err: Any) -> tuple[str, str, dict[str, object]]:
    """One pydantic error as (dotted field, message key, parameters)."""
    loc = tuple(err.get("loc", ()))
    kind = err.get("type", "")
    field, is_key = _dotted(loc)
    ctx = dict(err.get("ctx") or {})
    suffix = kind if kind in _CUSTOM_ERRORS + _CONTEXT_ERRORS else _PYDANTIC_ERRORS.get(kind, "other")
    if kind == "control_char":  # raised by the section: the field is in the context
        loc = (*loc, str(ctx.pop("field")))
        field, is_key = _dotted(loc)
        err = {**err, "input": ctx.pop("text")}
    value: object = _HIDDEN if _secret_place(loc, is_key) else _shown(err.get("input"))
    params: dict[str, object] = {"value": value}
    if suffix in _CONTEXT_ERRORS:
        params.update({k: v for k, v in ctx.items() if k != "value"})
    elif suffix == "unknown":
        owner = _model_at(loc)
        valid = ", ".join((f.alias or name) for name, f in owner.model_fields.items()) if owner else "?"
        params = {"valid": valid}
    elif suffix == "missing":
        params = {}
    elif suffix in ("at_least", "above", "at_most", "below"):
        bound = next((ctx[k] for k in ("min", "max", "ge", "gt", "le", "lt") if k in ctx), "?")
        params["bound"] = bound
    elif suffix == "choice":
        expected = str(ctx.get("choices") or ctx.get("expected", ""))
        params["choices"] = ", ".join(re.findall(r"'([^']*)'", expected)) or expected
    elif suffix in ("time", "time_finite"):
        params["forms"] = ctx.get("forms", TIME_FORMS)
    elif suffix == "slurm_signal":
        params["works"] = ctx.get("works", "TERM@60")
    elif suffix == "weights_count":
        params = {"weights": ctx.get("weights", "?"), "paths": ctx.get("paths", "?")}
    elif suffix == "other":
        params["reason"] = str(err.get("msg", "")).removeprefix("Value error, ")  # pydantic's prefix for a ValueError
    return field, f"plan.error.{suffix}", params


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at `loc` (for listing valid field names)."""
    model: Any = Plan
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        nested = None
        for cand in candidates:
            for inner in [cand, *getattr(cand, "__args__", ())]:
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    nested = inner
        if nested is None:
            return None
        model = nested
    return model if isinstance(model, type) else None
