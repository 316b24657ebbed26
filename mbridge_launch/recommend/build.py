"""recommend(): request -> Recommendation (recipe, dataset, layout, changes, warnings, command)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mbridge_launch.changecontrol import LAYOUT_KEYS, classify
from mbridge_launch.errors import NoLayoutError, UserError
from mbridge_launch.i18n import t
from mbridge_launch.recommend import select
from mbridge_launch.recommend.dataset_choice import choose_dataset, selector_is_vlm, vlm_selectors
from mbridge_launch.recommend.pitfalls import find_pitfalls
from mbridge_launch.recommend.request import Request
from mbridge_launch.recommend.resize import Resized, resize_layout

SMOKE_TEST_MODEL = "llama3_8b"


@dataclass
class Change:
    field: str
    from_: Any
    to: Any
    change_class: str
    reason: str
    source: str  # resize | user | dataset | launcher

    def as_json(self) -> dict[str, Any]:
        return {"field": self.field, "from": self.from_, "to": self.to, "class": self.change_class,
                "reason": self.reason, "source": self.source}


@dataclass
class Recommendation:
    request: Request
    model: str
    recipe: Any
    catalog: Any
    hardware: Any
    arch: Any
    dataset: str
    layout: Any
    nodes: int
    gpus_per_node: int
    changes: list[Change] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    estimate: Any = None
    notes: list[str] = field(default_factory=list)


def _recipe_layout(recipe: Any, world: int) -> Any:
    from mbridge_launch.planner.rules import Layout

    return Layout(tp=recipe.tp or 1, pp=recipe.pp or 1, vp=recipe.vp or None, cp=recipe.cp or 1,
                  ep=recipe.ep or 1, etp=recipe.etp, sp=bool(recipe.sp), mbs=recipe.mbs or 1,
                  gbs=recipe.gbs or 1, seq_length=recipe.seq_length or recipe.dataset_seq_length or 4096,
                  world=world, recompute=_recompute(recipe), fsdp=bool((recipe.features or {}).get("use_megatron_fsdp")),
                  cp_comm_type=(recipe.features or {}).get("cp_comm_type"))


def _recompute(recipe: Any) -> str:
    granularity = (recipe.features or {}).get("recompute_granularity")
    return granularity if granularity in ("selective", "full") else "none"


def _nodes_for(gpus: int, per_node: int, gpu_type: str) -> tuple[int, int]:
    if gpus <= per_node:
        return 1, gpus
    if gpus % per_node:
        raise UserError("recommend.gpus_per_node_split", gpus=gpus, gpu_type=gpu_type, per_node=per_node)
    return gpus // per_node, per_node


def _weak_scale(recipe: Any, world: int) -> tuple[Any, int | None]:
    layout = _recipe_layout(recipe, world)
    mp = layout.tp * layout.pp * layout.cp
    if world % mp:
        raise NoLayoutError("recommend.weak_scale_impossible", recipe=recipe.name, from_gpus=recipe.gpus,
                            to_gpus=world, reason=f"world size {world} not divisible by TP x PP x CP = {mp}")
    if world == recipe.gpus:
        return layout, None
    scaled = layout.gbs * world / recipe.gpus
    if scaled != int(scaled):
        raise NoLayoutError("recommend.weak_scale_impossible", recipe=recipe.name, from_gpus=recipe.gpus,
                            to_gpus=world, reason=f"GBS {layout.gbs} x {world}/{recipe.gpus} is not an integer")
    return replace(layout, gbs=int(scaled)), layout.gbs


def _apply_user_layout(layout: Any, request: Request) -> Any:
    names = {v: k for k, v in LAYOUT_KEYS.items()}
    updates: dict[str, Any] = {}
    for o in request.overrides:
        attr = names.get(o.path)
        if attr is None or o.value is None:
            continue
        if attr == "sp":
            updates[attr] = o.value.lower() in ("1", "true", "yes")
            continue
        try:
            value = int(o.value)
        except ValueError:
            raise UserError("recommend.override_int", setting=o.key, value=o.value) from None
        if value <= 0:
            raise UserError("recommend.override_int", setting=o.key, value=o.value)
        updates[attr] = value
    return replace(layout, **updates) if updates else layout


def recommend(request: Request) -> Recommendation:
    from mbridge_launch.catalog import load_catalog
    from mbridge_launch.hardware import get_hardware
    from mbridge_launch.models import arch_from_hf_config, load_arch, resolve_model
    from mbridge_launch.planner import rules

    hardware = get_hardware(request.gpu_type)
    gpu_type = hardware.name
    catalog = load_catalog(request.catalog_version)
    model = resolve_model(request.model)
    arch = arch_from_hf_config(request.hf_config) if request.hf_config else load_arch(model)
    if request.benchmark:
        recipe = select.select_benchmark(catalog, model, request.recipe_mode, gpu_type=gpu_type,
                                         precision=request.precision, gpus=request.gpus, seq_length=request.seq_length)
    else:
        recipe = select.select_library(catalog, model, request.goal, request.recipe_mode,
                                       seq_length=request.seq_length, gpu_type=gpu_type,
                                       precision=request.precision, gpus=request.gpus)
    dataset, notes = choose_dataset(request.goal, recipe, request.dataset)
    precision = recipe.precision or "bf16"
    world, resized, raised_from = _fit_world(request, recipe, arch, hardware, precision)
    nodes, per_node = _nodes_for(world, hardware.gpus_per_node, gpu_type)
    rec = Recommendation(request, model, recipe, catalog, hardware, arch, dataset, None, nodes, per_node, notes=notes)
    if raised_from is not None:
        rec.notes.append(t("recommend.gpus_raised", recipe=recipe.name, from_gpus=raised_from, to_gpus=world))

    if recipe.kind == "benchmark":
        layout, old_gbs = _weak_scale(recipe, world)
        resized = Resized(layout, None, old_gbs)
        if old_gbs is not None:
            rec.changes.append(Change("train.global_batch_size", old_gbs, layout.gbs, "benchmark_only",
                                      t("change.reason.weak_scale", from_gpus=recipe.gpus, to_gpus=world,
                                        old=old_gbs, new=layout.gbs), "resize"))
    layout = _apply_user_layout(resized.layout, request)
    errors = [v for v in rules.check_layout(layout, arch, hardware) if v.severity == "error"]
    if errors:
        raise _override_error(errors, request)
    rec.layout = layout
    rec.estimate = resized.estimate if layout == resized.layout else _estimate(layout, arch, hardware, precision, request.goal)
    _record_layout_changes(rec, _recipe_layout(recipe, world), layout, resized)
    _record_user_changes(rec)
    overrides = {o.path: o.value or "" for o in request.overrides}
    rec.warnings = find_pitfalls(recipe=recipe, layout=layout, arch=arch, gpu_type=gpu_type, dataset=dataset,
                                 dataset_is_vlm=selector_is_vlm(dataset), vlm_choices=vlm_selectors(),
                                 overrides=overrides, recompute=layout.recompute)
    if arch is None:
        rec.warnings.append(("ARCH_UNKNOWN", t("pitfall.arch_unknown", model=model)))
    if resized.gbs_changed_from is not None and recipe.kind == "library":
        rec.warnings.append(("GBS_CHANGED", t("pitfall.gbs_changed", old=resized.gbs_changed_from, new=layout.gbs)))
    if recipe.hardware and recipe.hardware != gpu_type and gpu_type not in ("h200",):
        kind = t(f"card.kind.{recipe.kind}")
        rec.warnings.append(("HARDWARE_SUBSTITUTE", t("pitfall.hardware_substitute", kind=kind, gpu_type=gpu_type,
                                                     hardware=recipe.hardware, recipe=recipe.name)))
    if rec.estimate is not None and not getattr(rec.estimate, "fits", True):
        rec.warnings.append(("MEMORY_OVER", t("pitfall.memory_over", mem=rec.estimate.memory_total_gb,
                                              limit=rec.estimate.memory_limit_gb, hbm=hardware.hbm_gb)))
    return rec


def _fit_world(request: Request, recipe: Any, arch: Any, hardware: Any, precision: str) -> tuple[int, Any, int | None]:
    """The GPU count and resized layout. With --gpus the user's count is final. Without it the
    recipe's canonical count is used, or, when the memory model says the recipe's layout cannot fit
    there, the smallest count (doubling, up to 8x) that fits, reported as a note."""
    if recipe.kind == "benchmark":
        return request.gpus or recipe.gpus or 1, None, None
    start = request.gpus or recipe.gpus or 1
    if request.gpus:
        _nodes_for(start, hardware.gpus_per_node, hardware.name)  # whole nodes, or one clear error
    counts = [start] if request.gpus else [start * 2 ** k for k in range(4)]
    for i, world in enumerate(counts):
        if world > hardware.gpus_per_node and world % hardware.gpus_per_node:
            continue
        seq = request.seq_length or _recipe_layout(recipe, world).seq_length
        try:
            resized = resize_layout(_recipe_layout(recipe, world), world=world, seq_length=seq, arch=arch,
                                    hardware=hardware, precision=precision, goal=request.goal)
        except NoLayoutError:
            if i == len(counts) - 1:
                raise
            continue
        return world, resized, (start if world != start else None)
    raise NoLayoutError("recommend.no_layout", model=recipe.model, gpus=start, gpu_type=hardware.name,
                        seq=request.seq_length or recipe.seq_length, reason="-")


def _override_error(errors: list[Any], request: Request) -> UserError:
    """The broken rule, preferring one about a field the user overrode, and which override did it."""
    by_attr = {attr: o for o in request.overrides for attr, key in LAYOUT_KEYS.items() if o.path == key}
    for violation in errors:
        if violation.field in by_attr:
            return UserError("recommend.override_rule", setting=by_attr[violation.field].as_arg(), reason=violation.message())
    setting = ", ".join(o.as_arg() for o in by_attr.values()) or "-"
    return UserError("recommend.override_rule", setting=setting, reason=errors[0].message())


def _estimate(layout: Any, arch: Any, hardware: Any, precision: str, goal: str) -> Any:
    if arch is None:
        return None
    from mbridge_launch.planner.search import estimate_layout

    return estimate_layout(layout, arch, hardware, precision=precision, goal=goal)


def _record_layout_changes(rec: Recommendation, before: Any, after: Any, resized: Resized) -> None:
    user_keys = {o.path for o in rec.request.overrides}
    for attr, key in LAYOUT_KEYS.items():
        old, new = getattr(before, attr), getattr(after, attr)
        if old == new or key in user_keys:
            continue
        if attr == "gbs" and rec.recipe.kind == "benchmark":
            continue  # recorded as the weak-scaling change
        if attr == "seq_length":
            cls = classify(key)
            rec.changes.append(Change(key, old, new, cls.change_class, t("change.reason.user_seq_length"), "user"))
            continue
        if attr == "gbs":
            reason = t("change.reason.resize_gbs", old=old, mbs=after.mbs, dp=after.dp, gpus=after.world)
            rec.changes.append(Change(key, old, new, "convergence", reason, "resize"))
            continue
        cls = classify(key, gbs_fixed=before.gbs == after.gbs)
        reason = t("change.reason.resize", from_gpus=rec.recipe.gpus, to_gpus=after.world) + "; " + t(cls.reason_key)
        rec.changes.append(Change(key, old, new, cls.change_class, reason, "resize"))


def _record_user_changes(rec: Recommendation) -> None:
    recipe_values = rec.recipe.megatron_fields() if hasattr(rec.recipe, "megatron_fields") else {}
    for o in rec.request.overrides:
        cls = classify(o.path, gbs_fixed="train.global_batch_size" not in {x.path for x in rec.request.overrides})
        leaf = o.path.split(".")[-1]
        rec.changes.append(Change(o.path, recipe_values.get(leaf), o.value, cls.change_class, t(cls.reason_key), "user"))

