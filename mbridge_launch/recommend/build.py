"""recommend(): request -> Recommendation (recipe, dataset, layout, changes, warnings, command)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mbridge_launch.base.errors import NoLayoutError, UserError
from mbridge_launch.base.i18n import Msg, msg, t
from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS
from mbridge_launch.plan import settings, shipped, static_floor
from mbridge_launch.plan.overrides import is_true
from mbridge_launch.plan.scale_sanity import weak_scaled_layout
from mbridge_launch.planner.layout_words import layout_msg
from mbridge_launch.recommend import select
from mbridge_launch.recommend.changes import Change
from mbridge_launch.recommend.dataset_choice import choose_dataset, selector_is_vlm, vlm_selectors
from mbridge_launch.recommend.estimate_missing import hf_config_and_estimate_warnings
from mbridge_launch.recommend.pitfalls import find_pitfalls
from mbridge_launch.recommend.request import Request
from mbridge_launch.recommend.resize import LayoutChoice, Resized, choice_of, resize_layout


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
    warnings: list[tuple[str, Msg]] = field(default_factory=list)  # (code, message to render)
    estimate: Any = None
    notes: list[str] = field(default_factory=list)
    refit_cause: Any = None  # a Msg: why the layout moved at the recipe's own count, when not memory
    # planner.domain.Assessment of the estimate: inside the calibrated domain or extrapolated, and
    # the leave-one-out error band (None without an estimate)
    assessment: Any = None
    # where the layout comes from: the planner's first for the request, or why not (recommend.resize)
    layout_choice: LayoutChoice | None = None


def _recipe_layout(recipe: Any, world: int, overrides: dict[str, str] | None = None) -> Any:
    """The recipe's layout at `world` GPUs, with the user's recompute/FSDP/packing overrides
    (they change what fits and which rules apply: packing needs MBS=1)."""
    from mbridge_launch.planner.pipeline_split import recipe_split
    from mbridge_launch.planner.rules import Layout

    overrides = overrides or {}
    split: Any = recipe_split(recipe)  # the recipe's own pipeline split (kept while its PP x VP is)
    if "pipeline_model_parallel_layout" in recipe.unresolved:
        split = None  # built at run time (DeepSeek-V4): uneven, the planner assumes the best whole-layer split
    return Layout(tp=recipe.tp or 1, pp=recipe.pp or 1, vp=recipe.vp or None, cp=recipe.cp or 1,
                  ep=recipe.ep or 1, etp=recipe.etp, sp=bool(recipe.sp), mbs=recipe.mbs or 1,
                  gbs=recipe.gbs or 1, seq_length=recipe.seq_length or recipe.dataset_seq_length or 4096,
                  world=world, recompute=settings.recompute(recipe, overrides),
                  recompute_layers=settings.recompute_layers(recipe, overrides),
                  recompute_modules=settings.recompute_modules(recipe, overrides),
                  fp8_param_gather=settings.fp8_param_gather(recipe, overrides),
                  moe_dispatcher=settings.moe_dispatcher(recipe, overrides),
                  fsdp=settings.megatron_fsdp(recipe, overrides),
                  packing=bool(settings.offline_packing(recipe, overrides).value),
                  cp_comm_type=(recipe.features or {}).get("cp_comm_type"),
                  split=split, uneven_pp=split is None or split.uneven)


def _nodes_for(gpus: int, per_node: int, gpu_type: str) -> tuple[int, int]:
    if gpus <= per_node:
        return 1, gpus
    if gpus % per_node:
        raise UserError("recommend.gpus_per_node_split", gpus=gpus, gpu_type=gpu_type, per_node=per_node)
    return gpus // per_node, per_node


def _weak_scale(recipe: Any, world: int, overrides: dict[str, str]) -> tuple[Any, int | None]:
    layout = _recipe_layout(recipe, world, overrides)
    mp = layout.tp * layout.pp * layout.cp
    if world % mp:
        raise NoLayoutError("recommend.weak_scale_impossible", recipe=recipe.name, from_gpus=recipe.gpus,
                            to_gpus=world, reason=t("recommend.reason.world_not_divisible", world=world, mp=mp))
    if world == recipe.gpus:
        return layout, None
    scaled = layout.gbs * world / recipe.gpus
    if scaled != int(scaled):
        raise NoLayoutError("recommend.weak_scale_impossible", recipe=recipe.name, from_gpus=recipe.gpus,
                            to_gpus=world, reason=t("recommend.reason.gbs_not_integer", gbs=layout.gbs, world=world,
                                                    gpus=recipe.gpus))
    return replace(layout, gbs=int(scaled)), layout.gbs


def _apply_user_layout(layout: Any, request: Request, recipe: Any) -> Any:
    """The user's layout overrides on top of the resized layout. Recompute, FSDP and packing
    overrides win over the planner's choice too (the planner does not know packing needs MBS=1)."""
    names = {v: k for k, v in LAYOUT_KEYS.items()}
    overrides = {o.path: o.value or "" for o in request.overrides}
    updates: dict[str, Any] = {"packing": bool(settings.offline_packing(recipe, overrides).value),
                               # what the run keeps whatever layout the planner picked (planner.memory)
                               "fp8_param_gather": settings.fp8_param_gather(recipe, overrides),
                               "moe_dispatcher": settings.moe_dispatcher(recipe, overrides)}
    if any(k in overrides for k in ("model.recompute_granularity", "model.recompute_method", "model.recompute_num_layers",
                                    "model.recompute_modules")):
        updates["recompute"] = settings.recompute(recipe, overrides)
        updates["recompute_layers"] = settings.recompute_layers(recipe, overrides)
        updates["recompute_modules"] = settings.recompute_modules(recipe, overrides)
    if any(k in overrides for k in ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")):
        updates["fsdp"] = settings.megatron_fsdp(recipe, overrides)
    for o in request.overrides:
        attr = names.get(o.path)
        if attr is None or o.value is None:
            continue
        if attr == "sp":
            updates[attr] = is_true(o.value)
            continue
        try:
            value = int(o.value)
        except ValueError:
            raise UserError("recommend.override_int", setting=o.key, value=o.value) from None
        if value <= 0:
            raise UserError("recommend.override_int", setting=o.key, value=o.value)
        updates[attr] = value
    if updates.get("pp", 1) > 1 and "fsdp" not in updates and layout.fsdp:
        # Megatron-FSDP was the planner's pick, not the user's: it yields to the user's PP
        updates["fsdp"] = False
    return replace(layout, **updates)


def recommend(request: Request) -> Recommendation:
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.knowledge.hardware import get_hardware
    from mbridge_launch.knowledge.hf_config import arch_from_hf_config
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.planner import rules
    from mbridge_launch.planner.pipeline_split import recipe_split, settle_for_recipe
    from mbridge_launch.recommend import changes
    from mbridge_launch.recommend.hf_config_check import resolve_model_for

    hardware = get_hardware(request.gpu_type)
    gpu_type = hardware.name
    if request.precision:
        hardware.check_precision(request.precision)  # fp8mx / nvfp4 need Blackwell: exit 2, not a bad plan
    catalog = load_catalog(request.catalog_version)
    model = resolve_model_for(request)  # with --hf-config, an unknown name gets the nearest recipe models
    arch = arch_from_hf_config(request.hf_config) if request.hf_config else load_arch(model)
    recipe = select.recipe_for(catalog, model, request, gpu_type)
    # the recipe shipped for exactly this request that run_recipe.py cannot load: its dataset is the default
    shadowed = None if request.benchmark else select.passed_over(
        catalog, recipe, seq_length=request.seq_length, gpu_type=gpu_type, precision=request.precision, gpus=request.gpus)
    dataset, notes = choose_dataset(request.goal, recipe, request.dataset, default_from=shadowed)
    precision = request.precision or recipe.precision or "bf16"
    overrides = {o.path: o.value or "" for o in request.overrides}
    world, resized, fit_warnings = _fit_world(request, recipe, arch, hardware, precision, overrides)
    fit = dict(fit_warnings)  # code -> message
    nodes, per_node = _nodes_for(world, hardware.gpus_per_node, gpu_type)
    rec = Recommendation(request, model, recipe, catalog, hardware, arch, dataset, None, nodes, per_node, notes=notes)
    if shadowed is not None:
        rec.warnings.append(("SHIPPED_SHADOWED", msg("pitfall.shipped_shadowed", shipped=shadowed.name, recipe=recipe.name,
                                                     dataset=dataset)))
    for code in ("SHIPPED_LAYOUT_INVALID", "SHIPPED_SPLIT_ADDED"):
        if code in fit:
            rec.warnings.append((code, fit[code]))
            rec.refit_cause = msg("change.reason.refit_rule", rule=fit[code].params["rule"])

    if recipe.kind == "benchmark":
        layout, old_gbs = _weak_scale(recipe, world, overrides)
        resized = Resized(layout, None, old_gbs)
        if old_gbs is not None:
            rec.changes.append(Change("train.global_batch_size", old_gbs, layout.gbs, "benchmark_only",
                                      msg("change.reason.weak_scale", from_gpus=recipe.gpus, to_gpus=world,
                                        old=old_gbs, new=layout.gbs), "resize"))
    planned = _explicit_etp(resized.layout, recipe)
    layout = _apply_user_layout(planned, request, recipe)
    layout = settle_for_recipe(layout, arch, recipe_split(recipe), recipe.pp or 1, recipe.vp or 1, overrides)
    errors = [v for v in rules.check_layout(layout, arch, hardware) if v.severity == "error"]
    if errors:
        raise _override_error(errors, request)
    rec.layout = layout
    same = layout == resized.layout
    rec.estimate = resized.estimate if same else _estimate(layout, arch, hardware, precision, request.goal, recipe)
    rec.layout_choice = choice_of(resized, layout, rec.estimate, benchmark=recipe.kind == "benchmark",
                                  user_layout=_user_sets_layout(request))
    if rec.layout_choice.source != "planner" and rec.layout_choice.planner_first is not None:
        rec.warnings.append(_not_planner_first(rec.layout_choice, layout))
    if rec.estimate is not None:
        from mbridge_launch.planner.domain import assess

        rec.assessment = assess(model, arch, gpu_type, precision, request.goal, layout.seq_length, world,
                                measured=rec.estimate.twin is not None)
    changes.record_layout_changes(rec, _recipe_layout(recipe, world, overrides), layout)
    changes.record_split_changes(rec, recipe_split(recipe), layout.split)
    changes.record_user_changes(rec)
    changes.record_choice_changes(rec)
    changes.record_finding_repairs(rec)
    rec.warnings = rec.warnings + find_pitfalls(recipe=recipe, layout=layout, arch=arch, hardware=hardware, dataset=dataset,
                                 dataset_is_vlm=_dataset_has_images(recipe, dataset), vlm_choices=vlm_selectors(request.goal),
                                 overrides=overrides,
                                 seq_changed=any(c.field == "model.seq_length" for c in rec.changes),
                                 # only the planner's own first choice may say why it keeps a pitfall
                                 estimate=rec.layout_choice.planner_first if rec.layout_choice.source == "planner" else None)
    if arch is None:
        rec.warnings.append(("ARCH_UNKNOWN", msg("pitfall.arch_unknown", model=model)))
    if resized.gbs_changed_from is not None and recipe.kind == "library":
        rec.warnings.append(("GBS_CHANGED", msg("pitfall.gbs_changed", old=resized.gbs_changed_from, new=layout.gbs)))
    # an H100 recipe on H200 is the same compute generation with more memory: no substitute
    substitute = recipe.hardware and recipe.hardware != gpu_type and (recipe.hardware, gpu_type) != ("h100", "h200")
    if substitute and not any(code == "BLACKWELL_ONLY" for code, _ in rec.warnings):
        rec.warnings.append(("HARDWARE_SUBSTITUTE", msg("pitfall.hardware_substitute", kind=msg(f"card.kind_short.{recipe.kind}"),
                                                     gpu_type=gpu_type, hardware=recipe.hardware, recipe=recipe.name)))
    if "GPUS_RAISED" in fit:
        rec.warnings.append(("GPUS_RAISED", fit["GPUS_RAISED"]))
    if "MEMORY_SHIPPED" in fit and same:
        # the shipped layout, kept, above HBM by the model: figures and a way out
        rec.warnings.append(("MEMORY_SHIPPED", fit["MEMORY_SHIPPED"]))
    elif rec.estimate is not None and not getattr(rec.estimate, "fits", True):
        rec.warnings.append(("MEMORY_OVER", msg("pitfall.memory_over", mem=rec.estimate.memory_total_gb,
                                              limit=rec.estimate.memory_limit_gb, hbm=hardware.hbm_gb)))
    rec.warnings += hf_config_and_estimate_warnings(rec)  # --hf-config honesty; why an estimate is missing
    return rec


def _dataset_has_images(recipe: Any, selector: str) -> bool | None:
    """The recipe's own dataset under its own selector keeps its modality (a VLM recipe's mock
    data is image-text); any other selector has the modality of the selector."""
    own = recipe.dataset or {}
    if selector == own.get("selector") and own.get("modality") in ("vlm", "text"):
        return own["modality"] == "vlm"
    return selector_is_vlm(selector)


def _explicit_etp(layout: Any, recipe: Any) -> Any:
    """The planner leaves ETP unset (None: 1 in its rules, and Bridge's default with EP > 1);
    where the recipe sets ETP, keep it explicit so that no spurious 'ETP 1 -> None' change or an
    unparsable `=None` override reaches the command."""
    if layout.etp is None and recipe.etp is not None:
        return replace(layout, etp=layout.etp_size)
    return layout


def _fit_world(request: Request, recipe: Any, arch: Any, hardware: Any, precision: str,
               overrides: dict[str, str]) -> tuple[int, Any, list[tuple[str, Msg]]]:
    """The GPU count, the resized layout and a warning about the fit. A library recipe asked for
    at its own count and system is kept as NVIDIA ships it (no resize, no other count): where the
    memory model puts it above HBM, the warning gives the figures and the smallest change that fits
    by the model. With --gpus at another count the user's count is final and a layout that cannot
    fit is a NoLayoutError. Without --gpus on another system (or sequence length) the recipe's count
    is tried first, then the smallest count (doubling, up to 8x) that fits, said in the warning."""
    if recipe.kind == "benchmark":
        return request.gpus or recipe.gpus or 1, None, []
    if shipped.is_shipped_request(recipe, gpus=request.gpus, gpu_type=hardware.name, seq_length=request.seq_length,
                                  precision=request.precision):
        kept = _shipped(recipe, arch, hardware, precision, request.goal, overrides)
        if kept[1] is not None:
            return kept
        rule_warnings = kept[2]  # the shipped layout breaks a Megatron rule: resized, and said so
    else:
        rule_warnings = []
    start = request.gpus or recipe.gpus or 1
    if request.gpus:
        _nodes_for(start, hardware.gpus_per_node, hardware.name)  # whole nodes, or one clear error
    counts = [start] if request.gpus else [start * 2 ** k for k in range(4)]
    for i, world in enumerate(counts):
        if world > hardware.gpus_per_node and world % hardware.gpus_per_node:
            continue
        # Megatron Bridge's weak-scaling rule at another count: samples per GPU kept (plan.scale_sanity)
        base = weak_scaled_layout(_recipe_layout(recipe, world, overrides), recipe, world, overrides)
        seq = request.seq_length or base.seq_length
        try:
            resized = resize_layout(base, world=world, seq_length=seq, arch=arch,
                                    hardware=hardware, precision=precision, goal=request.goal, model=recipe.model,
                                    recipe=recipe)
        except NoLayoutError:
            if i == len(counts) - 1:
                raise
            continue
        if world == start:
            return world, resized, rule_warnings
        return world, resized, [("GPUS_RAISED", msg("pitfall.gpus_raised", recipe=recipe.name, gpu_type=hardware.name,
                                                    from_gpus=msg("count.gpus", count=start),
                                                    to_gpus=msg("count.gpus", count=world)))]
    raise NoLayoutError("recommend.no_layout", model=recipe.model, gpus=start, gpu_type=hardware.name,
                        seq=request.seq_length or recipe.seq_length, reason="-")


def _shipped(recipe: Any, arch: Any, hardware: Any, precision: str, goal: str,
             overrides: dict[str, str]) -> tuple[int, Any, list[tuple[str, Msg]]]:
    """The recipe's own layout at its own count, unchanged, with its estimate. When that layout
    breaks a parallelism rule here (a catalog finding: the job would stop at Megatron's own check),
    no layout and a SHIPPED_LAYOUT_INVALID warning naming the rule: it is then resized as any
    other request."""

    world = recipe.gpus
    _nodes_for(world, hardware.gpus_per_node, hardware.name)
    # the GPUs per node as preflight reads them from the Plan (the MoE dispatcher's buffers count them)
    layout = shipped.with_recipe_settings(replace(_recipe_layout(recipe, world, overrides),
                                                  gpus_per_node=hardware.gpus_per_node), recipe)
    warnings: list[tuple[str, Msg]] = []
    broken = _rule_errors(layout, arch, hardware)
    if broken and all(v.code in ("RULE_PP_LAYERS", "RULE_VP_LAYERS") for v in broken):
        # the layers do not split evenly over the shipped PP x VP: keep NVIDIA's layout and add
        # the split settings Megatron needs (as Bridge's own recipes do for uneven models)
        from mbridge_launch.planner.pipeline_split import settle

        fixed = settle(layout, arch)
        if not _rule_errors(fixed, arch, hardware):
            warnings.append(("SHIPPED_SPLIT_ADDED", msg("pitfall.shipped_split_added", recipe=recipe.name,
                                                        rule=broken[0].as_msg())))
            layout, broken = fixed, []
    if broken:
        return world, None, [("SHIPPED_LAYOUT_INVALID", msg("pitfall.shipped_layout_invalid", recipe=recipe.name,
                                                              rule=broken[0].as_msg()))]
    estimate = _estimate(layout, arch, hardware, precision, goal, recipe)
    if estimate is not None and not estimate.fits:
        change = shipped.smallest_fitting_change(layout, arch, hardware, precision=precision, goal=goal, recipe=recipe)
        if static_floor.cannot_fit_by_arithmetic(estimate.memory, hardware.hbm_gb):
            # weights + gradients + optimizer alone are above HBM: not a doubt about the estimate
            warnings.append(("MEMORY_SHIPPED", msg(
                "pitfall.memory_static_over_shipped", recipe=recipe.name, gpus=world, gpu_type=hardware.name,
                minimum=static_floor.layout_minimum_gpus(layout), change=change,
                **static_floor.static_params(estimate.memory, hardware.hbm_gb))))
        else:
            warnings.append(("MEMORY_SHIPPED", msg("pitfall.memory_over_shipped", recipe=recipe.name, gpus=world,
                                             gpu_type=hardware.name, change=change,
                                             **shipped.over_params(estimate.memory, hardware.hbm_gb))))
    if recipe.hardware == hardware.name or arch is None or arch.missing:
        return world, Resized(layout, estimate, None, reason="recipe_own"), warnings
    # the recipe's own count on a GPU of its compute generation (an H100 recipe on H200): kept as
    # shipped, with the planner's first for this very request beside it (recommend.resize.LayoutChoice)
    from mbridge_launch.planner.entry import PlanRequest, plan_request

    planned = plan_request(PlanRequest(recipe.model or arch.name, arch, hardware, world, layout.gbs, layout.seq_length,
                                       precision, goal, top=1, recipe=recipe), nvidia=False)
    return world, Resized(layout, estimate, None, planned=planned, reason="recipe_same_generation"), warnings


def _rule_errors(layout: Any, arch: Any, hardware: Any) -> list[Any]:
    from mbridge_launch.planner import rules

    return [v for v in rules.check_layout(layout, arch, hardware) if v.severity == "error"]


def _override_error(errors: list[Any], request: Request) -> UserError:
    """The broken rule, preferring one about a field the user overrode, and which override did it."""
    by_attr = {attr: o for o in request.overrides for attr, key in LAYOUT_KEYS.items() if o.path == key}
    for violation in errors:
        if violation.field in by_attr:
            return UserError("recommend.override_rule", setting=by_attr[violation.field].as_arg(), reason=violation.message())
    setting = ", ".join(o.as_arg() for o in by_attr.values()) or "-"
    return UserError("recommend.override_rule", setting=setting, reason=errors[0].message())


def _estimate(layout: Any, arch: Any, hardware: Any, precision: str, goal: str, recipe: Any = None) -> Any:
    if arch is None:
        return None
    from mbridge_launch.planner.entry import PlanRequest, estimate_request

    # the calibration in use and NVIDIA's published rows of this configuration, as plan and
    # estimate use them (planner.entry)
    # `recipe`: its settings on the fields the layout leaves unset, less those Megatron rejects beside it
    request = PlanRequest(arch.name, arch, hardware, layout.world or 0, layout.gbs, layout.seq_length, precision, goal,
                          recipe=recipe)
    return estimate_request(request, layout).candidate


# the overrides that set the layout (the layout keys, recompute, Megatron-FSDP)
_LAYOUT_OVERRIDES = frozenset({*LAYOUT_KEYS.values(), "model.recompute_granularity", "model.recompute_method",
                               "model.recompute_num_layers", "model.recompute_modules", "ddp.use_megatron_fsdp",
                               "dist.use_megatron_fsdp"})


def _user_sets_layout(request: Request) -> bool:
    return any(o.path in _LAYOUT_OVERRIDES for o in request.overrides)


def _not_planner_first(choice: LayoutChoice, layout: Any) -> tuple[str, Msg]:
    """The warning of a layout that is not the planner's first: why, and both predicted speeds."""
    label = layout_msg  # a message: the Plan stores it, rendered in the language it is shown in

    first = choice.planner_first
    return ("LAYOUT_NOT_PLANNER_FIRST", msg("recommend.layout_not_planner_first", reason=choice.reason_msg(),
                                            layout=label(layout), tps=choice.tokens_per_sec_per_gpu or 0.0,
                                            first=label(first.layout), first_tps=first.tokens_per_sec_per_gpu))
