"""The Plan: the single contract between the core and the executors (DESIGN.md).

A Plan is saved as YAML that people read, edit, diff and commit. Loading rejects unknown or
mistyped fields with a message naming the field and the valid ones. Its hash identifies it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mbridge_launch import __version__
from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.vocabulary import goal_or_none
from mbridge_launch.planner.rules import LayoutFields

PLAN_SCHEMA_VERSION = 1

Mode = Literal["pretrain", "sft", "lora", "dora"]  # vocabulary.GOALS (a test keeps them equal)
RecipeKind = Literal["library", "benchmark"]
ChangeClass = Literal["convergence", "execution", "benchmark_only"]
ChangeSource = Literal["user", "resize", "launcher", "dataset"]
Recompute = Literal["none", "selective", "full"]
LaunchShape = Literal["srun", "torchrun"]
Severity = Literal["error", "warning", "info"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)


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
    data_paths: list[str] = Field(default_factory=list, description="megatron-indexed prefixes (a blend)")
    weights: Optional[list[float]] = Field(default=None, description="blend weights, one per prefix")
    fields: dict[str, str] = Field(default_factory=dict, description="other dataset.* settings, e.g. dataset_root")


# mypy counts a pydantic model as a non-frozen dataclass, which it does not let inherit from a frozen
# one; pydantic itself reads the fields of a dataclass base as its own (validated, assignable).
class Parallelism(_Strict, LayoutFields):  # type: ignore[misc]
    """The planner's LayoutFields (planner.rules), the recompute level checked against its names,
    and the data-parallel size."""

    recompute: Recompute = "none"
    dp: int = 1

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def grad_accum(self) -> int:
        denominator = self.mbs * self.dp
        return self.gbs // denominator if denominator else 0


class Override(_Strict):
    """One ConfigContainer setting that differs from the recipe's default, with its class."""

    key: str = Field(description="ConfigContainer path, e.g. model.tensor_model_parallel_size")
    value: str = Field(description="value as written after KEY= on the run_recipe.py line")
    from_: Optional[str] = Field(default=None, alias="from", description="the recipe's default, if known")
    change_class: ChangeClass = Field(alias="class")
    reason: str = ""
    source: ChangeSource = "user"


class Mount(_Strict):
    source: str
    target: str


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
    gpu_type: str = "h100"
    time: str = "04:00:00"
    exclusive: bool = True
    requeue: bool = True
    signal: Optional[str] = Field(default="USR1@300", description="sbatch --signal for graceful preemption")
    segment: Optional[int] = None
    container_image: Optional[str] = None
    container_mounts: list[Mount] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list, description="environment variable NAMES forwarded to the job")
    secrets: list[str] = Field(default_factory=list, description="secret NAMES (HF_TOKEN...) forwarded, never values")
    srun_args: list[str] = Field(default_factory=list)
    sbatch_args: list[str] = Field(default_factory=list)
    profile: ClusterProfile = Field(default_factory=ClusterProfile)

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class CheckpointPaths(_Strict):
    save: Optional[str] = None
    load: Optional[str] = None
    save_interval: Optional[int] = None
    pretrained_checkpoint: Optional[str] = None


class Launch(_Strict):
    shape: LaunchShape = "srun"
    entry: list[str] = Field(
        default_factory=lambda: ["python", "scripts/training/run_recipe.py"],
        description="program + script run on every rank (the stand-in trainer in tests)",
    )
    workdir: Optional[str] = Field(default=None, description="directory the job starts in (Megatron Bridge checkout)")
    log_dir: Optional[str] = Field(default=None, description="where Slurm output files go")
    setup: list[str] = Field(default_factory=list, description="commands run before training (site modules)")


class Estimates(_Strict):
    memory_gb_per_gpu: Optional[float] = None
    memory_breakdown_gb: dict[str, float] = Field(default_factory=dict)
    hbm_gb: Optional[float] = None
    step_time_s: Optional[float] = None
    tokens_per_sec_per_gpu: Optional[float] = None
    model_tflops_per_gpu: Optional[float] = None
    mfu: Optional[float] = None
    gpu_hours_at_time_limit: Optional[float] = None


class PlanWarning(_Strict):
    code: str
    message: str
    severity: Severity = "warning"


class AutoRollback(_Strict):
    enabled: bool = False
    on_nan: bool = True
    spike_factor: Optional[float] = Field(default=3.0, description="loss > factor x moving median triggers")
    window: int = Field(default=20, description="iterations in the moving median")
    max_rollbacks: int = 3


class AcceptedCheck(_Strict):
    """A preflight error the user accepts for this plan (only checks that rest on an estimate,
    see preflight.acceptance.ACCEPTABLE); it then counts as a warning, with the reason shown."""

    code: str = Field(description="preflight check code, e.g. plan.memory_oom")
    reason: str = Field(min_length=1, description="why it is safe here (shown on every preflight and plan card)")


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
    env_vars: dict[str, str] = Field(default_factory=dict, description="non-secret env values (NVIDIA perf settings)")
    estimates: Estimates = Field(default_factory=Estimates)
    warnings: list[PlanWarning] = Field(default_factory=list)
    auto_rollback: AutoRollback = Field(default_factory=AutoRollback)
    accepted_checks: list[AcceptedCheck] = Field(default_factory=list)

    @field_validator("mode", mode="before")
    @classmethod
    def _canonical_mode(cls, value: Any) -> Any:
        """Every spelling of a goal the commands accept (peft, LoRA, finetune) is read as its
        canonical mode; an unknown word is left for the Literal to refuse with the valid ones."""
        return (goal_or_none(value) or value) if isinstance(value, str) else value

    # ------------------------------------------------------------------ identity
    def canonical_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True)
        if not data.get("accepted_checks"):
            data.pop("accepted_checks", None)  # plans without acceptances keep the hash they always had
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

        header = f"# mbridge-launch plan {self.plan_hash()} (edit freely; validated on load)\n"
        return header + yaml.safe_dump(self.canonical_dict(), sort_keys=False, allow_unicode=True)


def save_plan(plan: Plan, path: str | Path) -> Path:
    from mbridge_launch.base.atomic import atomic_write_text
    from mbridge_launch.base.errors import writable

    with writable(path):
        return atomic_write_text(Path(path), plan.to_yaml())


def load_plan(path: str | Path) -> Plan:
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("file.not_found", path=str(path)) from None
    except OSError as exc:
        raise UserError("file.unreadable", path=str(path), reason=exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        from mbridge_launch.base.i18n import t

        reason = t("file.not_utf8", byte=f"{exc.object[exc.start]:02x}", offset=exc.start)
        raise UserError("file.unreadable", path=str(path), reason=reason) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError("yaml.invalid", path=str(path), reason=str(exc).splitlines()[0]) from None
    return plan_from_dict(data, str(path))


def plan_from_dict(data: Any, where: str = "<plan>") -> Plan:
    if not isinstance(data, dict):
        raise UserError("plan.invalid_field", field="(top level)", path=where, reason="expected a mapping")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise _plan_error(exc, where) from None


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


def _plan_error(exc: ValidationError, where: str) -> UserError:
    err = exc.errors()[0]
    loc = tuple(err.get("loc", ()))
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    if err.get("type") == "extra_forbidden":
        owner = _model_at(loc)
        valid = ", ".join(
            (f.alias or name) for name, f in owner.model_fields.items()
        ) if owner else "?"
        parent = ".".join(str(p) for p in loc[:-1]) or "the plan"
        return UserError("plan.unknown_field", field=str(loc[-1]), where=parent, path=where, valid=valid)
    if err.get("type") == "missing":
        return UserError("plan.missing_field", field=dotted, path=where)
    return UserError("plan.invalid_field", field=dotted, path=where, reason=err.get("msg", "invalid"))
