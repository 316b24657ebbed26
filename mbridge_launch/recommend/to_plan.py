"""Turn a Recommendation plus the user's cluster flags into a Plan (the contract for later steps)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from mbridge_launch.base import slurm_time
from mbridge_launch.base.errors import UserError
from mbridge_launch.base.i18n import msg, t
from mbridge_launch.base.names import MAX_RUN_NAME, run_name_problem
from mbridge_launch.base.numbers import shown
from mbridge_launch.base.quoting import is_env_name
from mbridge_launch.knowledge.perf_env import nvl72_segment, perf_env
from mbridge_launch.knowledge.vocabulary import NVL72, task_goal
from mbridge_launch.plan.layout import parallelism_of
from mbridge_launch.plan.model import (
    DATA_PATH_SPECIAL,
    TIME_FORMS,
    AutoRollback,
    CatalogRef,
    CheckpointPaths,
    Cluster,
    ClusterProfile,
    DatasetSpec,
    Estimates,
    Launch,
    Mount,
    Override,
    Plan,
    PlanWarning,
    RecipeRef,
    data_path_problem,
    mount_path,
    plan_invalid,
)
from mbridge_launch.plan.settings import RECIPE_DEFAULT_CHECKPOINT_DIR, override_text
from mbridge_launch.plan.signals import KEYS as SIGNAL_KEYS
from mbridge_launch.plan.signals import handler_overrides


@dataclass
class ClusterFlags:
    name: str | None = None
    account: str | None = None
    partition: str | None = None
    time: str = "04:00:00"
    container_image: str | None = None
    mounts: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    save_dir: str | None = None
    data_paths: list[str] = field(default_factory=list)
    segment_support: bool = False
    entry: list[str] | None = None
    workdir: str | None = None
    watcher_partition: str | None = None  # auto_rollback.watcher_partition


_SECRET_NAMES = ("TOKEN", "KEY", "SECRET", "PASSWORD")


def default_run_name(rec: Any) -> str:
    goal = rec.request.goal
    return f"{rec.model}-{goal}-{rec.nodes * rec.gpus_per_node}g".replace("_", "-")


def _refused(flag: str, error: PydanticCustomError, value: str) -> UserError:
    """A flag value refused by the Plan's own rule for its field (plan.model), in its words."""
    return UserError("arg.invalid", flag=flag, reason=t(f"plan.error.{error.type}", value=shown(value),
                                                        **(error.context or {})))


def _mounts(items: list[str]) -> list[Mount]:
    """--mount SRC[:DST]: the Plan's Mount rule (absolute paths, no ',' or ':' inside them, no
    Pyxis mount flags), checked on each side."""
    mounts = []
    for item in items:
        parts = item.split(":")
        if len(parts) > 2 or "," in item:
            raise UserError("arg.invalid", flag="--mount", reason=t("plan.error.mount_separator", value=shown(item)))
        source, target = parts[0], parts[-1]
        if not source or not target:
            raise UserError("arg.invalid", flag="--mount", reason=t("recommend.reason.mount_syntax", value=item))
        for side in (source, target):
            try:
                mount_path(side)
            except PydanticCustomError as exc:
                raise _refused("--mount", exc, side) from None
        mounts.append(Mount(source=source, target=target))
    return mounts


def _blend(items: list[str]) -> tuple[list[str], list[float] | None]:
    """--data-path [WEIGHT:]PREFIX, repeated: a weight is a finite number above 0, a prefix the
    Plan's data path rule (non-empty, nothing Hydra's list syntax reads)."""
    paths: list[str] = []
    weights: list[float] = []
    for item in items:
        head, sep, prefix = item.partition(":")
        if sep:
            weights.append(_blend_weight(head, item))
        else:
            prefix = item
        problem = data_path_problem(prefix)
        if problem:
            raise UserError("arg.invalid", flag="--data-path",
                            reason=t(f"plan.error.{problem}", value=shown(prefix), special=DATA_PATH_SPECIAL))
        paths.append(prefix)
    if weights and len(weights) != len(paths):
        raise UserError("arg.invalid", flag="--data-path", reason=t("recommend.reason.blend_weights"))
    return paths, (weights or None)


def _blend_weight(text: str, item: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        weight = float("nan")
    if not (math.isfinite(weight) and weight > 0):  # as a Plan's dataset.weights (plan.model)
        raise UserError("arg.invalid", flag="--data-path", reason=t("recommend.reason.blend_weight_invalid",
                                                                    value=shown(item), weight=shown(text)))
    return weight


def _run_name(name: str) -> str:
    problem = run_name_problem(name)
    if problem:
        raise UserError("arg.invalid", flag="--name", reason=t(f"plan.error.{problem}", value=shown(name),
                                                               max=MAX_RUN_NAME))
    return name


def _time_seconds(text: str) -> int | None:
    try:
        return slurm_time.parse_seconds(text)
    except slurm_time.TimeOutOfRange:
        raise UserError("arg.invalid", flag="--time", reason=t("plan.error.time_range", value=shown(text),
                                                               forms=TIME_FORMS)) from None
    except ValueError:
        raise UserError("arg.invalid", flag="--time", reason=t("recommend.reason.time_syntax", value=text)) from None


def _env_names(names: list[str]) -> tuple[list[str], list[str]]:
    env, secrets = [], []
    for name in names:
        if not is_env_name(name):
            raise UserError("arg.invalid", flag="--env", reason=t("recommend.reason.env_name", value=name))
        (secrets if any(s in name.upper() for s in _SECRET_NAMES) else env).append(name)
    return env, secrets


def build_plan(rec: Any, flags: ClusterFlags) -> Plan:
    """The Plan of a recommendation; a value the Plan refuses (an override that contradicts the
    layout, a control character in --account, ...) is the Plan's own one-line error."""
    try:
        return _build_plan(rec, flags)
    except ValidationError as exc:
        raise plan_invalid("recommend", exc) from None


def _domain_fields(assessment: Any) -> dict[str, Any]:
    """The Plan's record of planner.domain's assessment (none without one)."""
    if assessment is None:
        return {}
    band = assessment.band
    return {"domain": {"inside": assessment.domain.inside, "outside": list(assessment.domain.outside)},
            "error_band": {"median": round(band.median, 4), "p90": round(band.p90, 4), "held_out": band.loo,
                           "rows": band.rows}}


def _build_plan(rec: Any, flags: ClusterFlags) -> Plan:
    layout = rec.layout
    name = _run_name(flags.name if flags.name is not None else default_run_name(rec))
    seconds = _time_seconds(flags.time)
    if not seconds:  # None is UNLIMITED; 0 asks Slurm for no limit at all
        raise UserError("arg.invalid", flag="--time", reason=t("recommend.reason.time_finite", value=flags.time))
    recipe = rec.recipe
    paths, weights = _blend(flags.data_paths)
    if paths and rec.dataset != "megatron-indexed":
        raise UserError("arg.invalid", flag="--data-path", reason=t("recommend.reason.data_path_dataset", dataset=rec.dataset))
    _warn_missing_dataset_fields(rec, paths)
    env, secrets = _env_names(flags.env)
    world = rec.nodes * rec.gpus_per_node
    save = f"{flags.save_dir.rstrip('/')}/{name}" if flags.save_dir else f"nemo_experiments/{name}/checkpoints"
    # changes carried by other Plan fields (--mode, --dataset) are not KEY=VALUE overrides
    overrides = [
        Override(key=c.field, value=override_text(c.to), **{"from": None if c.from_ is None else override_text(c.from_)},
                 **{"class": c.change_class}, reason=c.reason, source=c.source)
        for c in rec.changes if c.as_override
    ]
    est = rec.estimate
    estimates = Estimates()
    if est is not None:
        estimates = Estimates(
            memory_gb_per_gpu=_round(getattr(est, "memory_total_gb", None)),
            memory_breakdown_gb={k: round(v, 2) for k, v in (getattr(est, "memory_gb", None) or {}).items()},
            hbm_gb=rec.hardware.hbm_gb,
            step_time_s=_round(getattr(est, "step_time_s", None), 3),
            tokens_per_sec_per_gpu=_round(getattr(est, "tokens_per_sec_per_gpu", None), 0),
            model_tflops_per_gpu=_round(getattr(est, "model_tflops_per_gpu", None), 1),
            mfu=_round(getattr(est, "mfu", None), 3),
            gpu_hours_at_time_limit=round(world * slurm_time.hours(flags.time), 1),
            **_domain_fields(rec.assessment),
        )
    else:
        estimates = Estimates(hbm_gb=rec.hardware.hbm_gb, gpu_hours_at_time_limit=round(world * slurm_time.hours(flags.time), 1))
    gpu_type = rec.hardware.name
    cluster = Cluster(
        account=flags.account, partition=flags.partition, nodes=rec.nodes, gpus_per_node=rec.gpus_per_node,
        gpu_type=gpu_type, time=flags.time, container_image=flags.container_image,
        container_mounts=_mounts(flags.mounts), env=env, secrets=secrets,
        # --segment only where the site has it (Slurm 24.11+ topology/block); elsewhere preflight
        # notes the NVL72 placement instead of failing on an option the executors do not render
        segment=nvl72_segment(rec.nodes) if gpu_type in NVL72 and flags.segment_support else None,
        profile=ClusterProfile(pyxis=bool(flags.container_image), segment=flags.segment_support),
    )
    # the trainer saves on the Plan's signal only with its exit handler on (plan.signals)
    overrides += handler_overrides(cluster.signal, {o.key for o in overrides})
    launch = Launch(entry=flags.entry or ["python", "scripts/training/run_recipe.py"], workdir=flags.workdir)
    mode = rec.request.goal if recipe.kind == "library" else task_goal(recipe.mode)
    return Plan(
        name=name,
        catalog=CatalogRef(source=rec.catalog.source, version=rec.catalog.version),
        recipe=RecipeRef(name=recipe.name, alias=(recipe.aliases or [None])[0], kind=recipe.kind,
                         family=recipe.family, model=recipe.model),
        mode=mode,
        dataset=DatasetSpec(selector=rec.dataset, data_paths=paths, weights=weights),
        parallelism=parallelism_of(layout),
        overrides=overrides,
        cluster=cluster,
        checkpoint=CheckpointPaths(save=save, load=save, **starting_weights(rec)),
        launch=launch,
        env_vars=perf_env(gpu_type, layout.tp, layout.cp),
        estimates=estimates,
        warnings=[PlanWarning(code=code, message=message) for code, message in rec.warnings],
        auto_rollback=AutoRollback(watcher_partition=flags.watcher_partition or None),
    )


def starting_weights(rec: Any) -> dict[str, Any]:
    """checkpoint.pretrained_checkpoint from --pretrained-checkpoint, or from_scratch with its
    reason when --from-scratch asks a fine-tuning goal to start from random weights."""
    from mbridge_launch.recommend.starting_weights import plan_fields

    return plan_fields(rec.request)


def _warn_missing_dataset_fields(rec: Any, paths: list[str]) -> None:
    """A selector's required fields (megatron-indexed: dataset.data_path) that neither a flag nor
    an override gives: the run would fail at start, so the answer says so (added to its warnings)."""
    from mbridge_launch.knowledge import datasets

    selector = datasets.load_datasets().get(rec.dataset)
    if selector is None or rec.recipe.kind != "library":
        return
    given = {o.path for o in rec.request.overrides} | ({"dataset.data_path"} if paths else set())
    missing = [key for key in selector.required if key not in given]
    if missing and not any(code == "DATASET_FIELDS_MISSING" for code, _ in rec.warnings):
        rec.warnings.append(("DATASET_FIELDS_MISSING", msg("pitfall.dataset_fields_missing", dataset=rec.dataset,
                                                          fields=", ".join(missing))))


def launcher_changes(rec: Any, plan: Plan) -> list[Any]:
    """The KEY=VALUE settings the launcher adds from the Plan's own fields (explicit per-run
    checkpoint paths, dataset.data_path and other dataset fields), as changes: read back from the
    trainer arguments, so the list shows exactly what the command sets."""
    from mbridge_launch.plan.changecontrol import classify
    from mbridge_launch.plan.settings import recipe_default
    from mbridge_launch.plan.trainer_args import checkpoint_overrides, dataset_overrides
    from mbridge_launch.recommend.changes import Change

    found = []
    for source, args in (("dataset", dataset_overrides(plan)), ("launcher", checkpoint_overrides(plan))):
        for arg in args:
            key, _, value = arg.partition("=")
            cls = classify(key)
            if key in ("checkpoint.save", "checkpoint.load"):
                old, reason = RECIPE_DEFAULT_CHECKPOINT_DIR, msg("change.reason.launcher_paths")
            else:
                old, reason = recipe_default(rec.recipe, key), msg(cls.reason_key)
            found.append(Change(key, old, value, cls.change_class, reason, source, as_override=False))
    # the signal settings are Plan overrides made here, not recommendation changes: shown with these
    found += [Change(o.key, o.from_, o.value, o.change_class, o.reason, "launcher", as_override=False)
              for o in plan.overrides if o.source == "launcher" and o.key in SIGNAL_KEYS]
    return found


def _round(value: Any, digits: int = 2) -> float | None:
    return None if value is None else round(float(value), digits)

