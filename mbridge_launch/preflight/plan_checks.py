"""Plan checks: the planner's parallelism rules on the Plan's layout, memory per GPU against HBM,
the catalog's findings on the recipe, recipe kind vs data, dataset selector vs mode, the layout
vs the cluster section, and change control (which overrides change the convergence contract).
"""

from __future__ import annotations

import re
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.vocabulary import FINETUNE_GOALS, PRECISIONS, recipe_task
from mbridge_launch.plan.overrides import whole_number
from mbridge_launch.plan.recipe_repairs import is_repaired
from mbridge_launch.plan.shipped import plan_is_shipped
from mbridge_launch.preflight.context import PreflightContext, run_all
from mbridge_launch.preflight.model import Check


def run_plan_checks(ctx: PreflightContext) -> list[Check]:
    return run_all(ctx, (check_recorded_warnings, check_grid_vs_cluster, check_rules, check_memory,
                         check_catalog, check_recipe_and_data, check_change_control, check_override_keys,
                         check_integer_settings,
                         check_container_profile, check_signal_handled, check_renders, check_starting_weights,
                         check_time_limit))



def check_recorded_warnings(ctx: PreflightContext) -> list[Check]:
    """Warnings the recommender wrote into the Plan are shown again where they matter most."""
    return [
        Check(f"plan.recorded.{w.code}", w.severity, subject=w.code, key="preflight.plan.recorded", params={"message": w.message})
        for w in ctx.plan.warnings
        if not (w.code.startswith("RULE_") and ctx.arch().ok)  # check_rules reports those afresh
        and w.code not in _REDERIVED  # the starting weights and the time limit are judged afresh below
    ]


# Plan warnings of recommend that a check below derives again from the Plan as it is now
_REDERIVED = ("PRETRAINED_CHECKPOINT_MISSING", "STEP_OVER_TIME_LIMIT", "RUN_OVER_TIME_LIMIT")


# ---------------------------------------------------------------------- starting weights and time
def check_starting_weights(ctx: PreflightContext) -> list[Check]:
    """SFT/LoRA/DoRA need starting weights: without checkpoint.pretrained_checkpoint SFT trains
    from random weights and Megatron Bridge 0.6.2 stops PEFT at validation, after the queue wait.
    A Plan that says from_scratch (recommend --from-scratch) is told so; PEFT cannot be."""
    from mbridge_launch.knowledge.vocabulary import PEFT_GOALS

    plan = ctx.plan
    if plan.mode not in FINETUNE_GOALS:
        return []
    if plan.checkpoint.pretrained_checkpoint or ctx.override("checkpoint.pretrained_checkpoint"):
        return []  # path_checks.check_pretrained_path judges the path
    reason = plan.checkpoint.from_scratch
    if reason is None:
        return [Check("plan.pretrained_required", "error", {"mode": plan.mode}, subject="checkpoint.pretrained_checkpoint")]
    if plan.mode in PEFT_GOALS:
        return [Check("plan.peft_from_scratch", "error", {"mode": plan.mode}, subject="checkpoint.from_scratch")]
    return [Check("plan.from_scratch", "info", {"mode": plan.mode, "reason": reason}, subject="checkpoint.from_scratch")]


def check_time_limit(ctx: PreflightContext) -> list[Check]:
    """The Plan's predicted step against cluster.time (plan.scale_sanity): a step beyond the limit
    is an error, train_iters steps beyond it a warning, each with the number that fixes it."""
    from mbridge_launch.base import slurm_time
    from mbridge_launch.plan.scale_sanity import time_findings

    plan = ctx.plan
    try:
        limit = slurm_time.parse_seconds(plan.cluster.time)
    except ValueError:
        return []  # the Plan model refuses such a time on load
    p = plan.parallelism
    findings = time_findings(step_s=plan.estimates.step_time_s, limit_s=limit, train_iters=_train_iters(ctx),
                             gbs=p.gbs, batch_quantum=p.mbs * p.dp)
    return [Check("plan." + f.code.lower(), f.severity, f.params, subject="cluster.time", key=f.message_key)  # type: ignore[arg-type]
            for f in findings]


def _train_iters(ctx: PreflightContext) -> int | None:
    stated = whole_number(ctx.override("train.train_iters"))
    if stated is not None:
        return stated
    recipe = ctx.recipe()
    return getattr(recipe.value, "train_iters", None) if recipe.ok else None


# ---------------------------------------------------------------------- layout
def check_grid_vs_cluster(ctx: PreflightContext) -> list[Check]:
    """The layout must use exactly the GPUs the cluster section asks for."""
    p, c = ctx.plan.parallelism, ctx.plan.cluster
    checks: list[Check] = []
    world = p.tp * p.pp * p.cp * p.dp
    # when TP x PP x CP does not divide the GPUs at all, the planner's grid rule says so
    if world != c.total_gpus and c.total_gpus % (p.tp * p.pp * p.cp) == 0:
        checks.append(Check("plan.world_mismatch", "error", {
            "tp": p.tp, "pp": p.pp, "cp": p.cp, "dp": p.dp, "world": world,
            "count": c.nodes, "gpus_per_node": c.gpus_per_node, "total": c.total_gpus,
        }))
    hw = ctx.hardware()
    if not hw.ok:
        checks.append(Check("plan.gpu_type_unknown", "warning", {"gpu_type": c.gpu_type, "reason": hw.reason}))
    elif c.gpus_per_node > hw.value.gpus_per_node:
        checks.append(Check("plan.gpus_per_node_exceeds", "error", {"gpus_per_node": c.gpus_per_node, "gpu": hw.value.label, "max": hw.value.gpus_per_node}))
    return checks


# Layer counts Megatron reads as integers: a value such as 2.5 or "four" fails at start-up,
# after the job waited in the queue (null leaves the recipe's choice)
_INTEGER_SETTINGS = {
    "model.recompute_num_layers": 1,
    "model.num_layers_in_first_pipeline_stage": 0,
    "model.num_layers_in_last_pipeline_stage": 0,
}
_NULLS = ("null", "none", "~", "")


def check_integer_settings(ctx: PreflightContext) -> list[Check]:
    checks = []
    for key, least in _INTEGER_SETTINGS.items():
        value = ctx.override(key)
        if value is None or str(value).strip().lower() in _NULLS:
            continue
        number = whole_number(value)
        if number is None or number < least:
            checks.append(Check("plan.override_not_integer", "error", {"setting": key, "value": value, "least": least},
                                subject=key))
    return checks


def _block_recompute_layers(ctx: PreflightContext) -> int | None:
    """N when full recompute covers only N layers per pipeline chunk (recompute_method=block, from
    the overrides or the recipe): the other layers keep their activations, which costs memory."""
    from mbridge_launch.plan.settings import recompute_layers

    recipe = ctx.recipe()
    if not recipe.ok:
        return None
    try:
        return recompute_layers(recipe.value, {**ctx.overrides(), "model.recompute_granularity": "full"})
    except UserError:
        return None  # not a positive integer: check_integer_settings reports it


def plan_layout(ctx: PreflightContext) -> Any:
    """The planner's Layout of the Plan (plan.layout.layout_of), with what only preflight knows:
    the recipe's partial-recompute layer count and whether the data is packed."""
    from mbridge_launch.plan.layout import layout_of
    from mbridge_launch.preflight.path_checks import uses_packing

    full = ctx.plan.parallelism.recompute == "full"
    recipe = ctx.recipe()
    return layout_of(ctx.plan, recompute_layers=_block_recompute_layers(ctx) if full else None,
                     packing=uses_packing(ctx), recipe_features=getattr(recipe.value, "features", None) if recipe.ok else None,
                     precision=plan_precision(ctx))


def check_rules(ctx: PreflightContext) -> list[Check]:
    from mbridge_launch.planner.rules import check_layout

    arch, hw = ctx.arch(), ctx.hardware()
    checks: list[Check] = []
    if not arch.ok:
        checks.append(Check("plan.arch_unknown", "warning", {"model": ctx.plan.recipe.model, "reason": arch.reason}))
    layout = plan_layout(ctx)
    for violation in check_layout(layout, arch.value, hw.value):
        code = "plan.rule." + violation.code.lower().removeprefix("rule_")
        severity = violation.severity if violation.severity in ("error", "warning", "info") else "error"
        checks.append(Check(code, severity, dict(violation.params), subject=violation.field, key=violation.key, hint_key="preflight.plan.rule.hint"))
    return checks


# ---------------------------------------------------------------------- memory
# The rules that need the model's architecture (planner.rules._model_rules) or the GPU type
# (_hardware_rules), listed when preflight cannot run them.
ARCH_RULES = ("RULE_MEMORY", "RULE_TP_KV_HEADS", "RULE_TP_HEADS", "RULE_TP_FFN", "RULE_CP_A2A_HEADS", "RULE_PP_UNEVEN",
              "RULE_PP_LAYERS", "RULE_VP_LAYERS", "RULE_RECOMPUTE_LAYERS", "RULE_EP_DENSE", "RULE_EP_EXPERTS",
              "RULE_ETP_FFN", "RULE_MOE_SP", "RULE_SEQ_POSITIONS")
HARDWARE_RULES = ("RULE_MEMORY", "RULE_TP_NVLINK", "RULE_EP_NVLINK", "RULE_PARTIAL_NODE")


def check_memory(ctx: PreflightContext) -> list[Check]:
    """Memory per GPU by the planner's memory model against HBM with its headroom, recomputed
    from the architecture. The Plan's `estimates` block is never the answer: anyone can edit it,
    so without the architecture (or the GPU type) memory is said to be unchecked, never to fit."""
    lookup = ctx.lookup("memory", lambda: _memory_model_fit(ctx))
    if not lookup.ok:
        arch, hw = ctx.arch(), ctx.hardware()
        missing = arch if not arch.ok else hw if not hw.ok else lookup
        rules = ARCH_RULES if not arch.ok else HARDWARE_RULES
        return [Check("plan.memory_unchecked", "warning", {"reason": missing.reason, "rules": ", ".join(rules)})]
    total, usable, hbm, source = lookup.value
    params = {"total": f"{total:.1f}", "usable": f"{usable:.1f}", "hbm": f"{hbm:.0f}", "gpu": ctx.plan.cluster.gpu_type, "source": source}
    if total > usable:
        recipe = ctx.recipe()
        if recipe.ok and plan_is_shipped(ctx.plan, recipe.value):
            # NVIDIA ran this layout: an estimate above HBM is more likely the model's error than
            # an OOM, so it warns (with the way out) until the user changes the layout
            return [Check("plan.memory_oom", "warning", {**params, "recipe": ctx.plan.recipe.name,
                                                          "gpus": ctx.plan.cluster.total_gpus, "change": _fitting_change(ctx)},
                          key="preflight.plan.memory_oom_shipped", hint_key="preflight.plan.memory_oom_shipped.hint")]
        return [Check("plan.memory_oom", "error", params)]
    return [Check("plan.memory_ok", "info", params)]


def _fitting_change(ctx: PreflightContext) -> Any:
    """The smallest change that fits by the memory model (a message), for a shipped layout."""
    from mbridge_launch.base.i18n import msg
    from mbridge_launch.plan.shipped import smallest_fitting_change

    arch, hw = ctx.arch(), ctx.hardware()
    if not arch.ok or not hw.ok:
        return msg("shipped.change.unknown")
    recipe = ctx.recipe()
    return smallest_fitting_change(plan_layout(ctx), arch.value, hw.value, precision=plan_precision(ctx), goal=ctx.plan.mode,
                                   recipe=recipe.value if recipe.ok else None)


HEADROOM_FALLBACK = 0.10  # used only when the planner's memory model has no HEADROOM of its own


def _memory_model_fit(ctx: PreflightContext) -> tuple[float, float, float, str]:
    """(estimated GB per GPU, usable GB, HBM GB, where the estimate came from); LookupError
    (the lookup's reason) without the architecture or the GPU type."""
    from mbridge_launch.planner import memory

    arch, hw = ctx.arch(), ctx.hardware()
    if not arch.ok or not hw.ok:
        raise LookupError(arch.reason if not arch.ok else hw.reason)
    layout = plan_layout(ctx)
    hbm = float(hw.value.hbm_gb)
    # benchmark recipes reduce gradients in bf16 (ddp.grad_reduce_in_fp32=false), as the published runs did
    grads = memory.BF16_GRAD_BYTES if ctx.plan.recipe.kind == "benchmark" else memory.GRAD_BYTES
    estimate = memory.estimate_memory(arch.value, layout, hbm, precision=plan_precision(ctx), goal=ctx.plan.mode,
                                      grad_bytes=grads)
    headroom = float(getattr(memory, "HEADROOM", 1 - HEADROOM_FALLBACK))
    return float(estimate.total), hbm * headroom, hbm, "planner.memory"


_PRECISION = re.compile(rf"_({'|'.join(PRECISIONS)})(?:_|$)")


def plan_precision(ctx: PreflightContext) -> str:
    """The training precision: the Plan's `mixed_precision=` override (how recommend switches a
    recipe's precision, plan.settings.MIXED_PRECISION), else the recipe name's precision token
    (recipes are named <model>_<task>_<N>gpu_<hw>_<precision>[_variant]_config), else bf16."""
    from mbridge_launch.plan.settings import MIXED_PRECISION

    chosen = ctx.overrides().get("mixed_precision")
    by_recipe = {name: precision for precision, name in MIXED_PRECISION.items()}
    if chosen is not None and chosen.strip() in by_recipe:
        return by_recipe[chosen.strip()]
    match = _PRECISION.search(ctx.plan.recipe.name)
    return match.group(1) if match else "bf16"


# ---------------------------------------------------------------------- catalog and recipe
def check_catalog(ctx: PreflightContext) -> list[Check]:
    recipe = ctx.recipe()
    name = ctx.plan.recipe.name
    if not recipe.ok:
        if recipe.reason == "not found":
            # run_recipe.py cannot import a recipe its release lacks: the job would fail at its first line
            return [Check("plan.recipe_unknown", "error", {"recipe": name, "version": ctx.plan.catalog.version}, subject=name,
                          hint_key="preflight.plan.recipe_unknown_error.hint")]
        missing_module = recipe.reason.startswith("module ")
        return [Check("plan.catalog_skipped", "info" if missing_module else "warning", {"reason": recipe.reason})]
    checks: list[Check] = []
    kind = getattr(recipe.value, "kind", None)
    if kind and kind != ctx.plan.recipe.kind:
        checks.append(Check("plan.recipe_kind_mismatch", "error", {"recipe": name, "plan_kind": ctx.plan.recipe.kind, "catalog_kind": kind}, subject=name))
    recipe_mode = getattr(recipe.value, "mode", None)
    plan_task = recipe_task(ctx.plan.mode)
    if recipe_mode and recipe_mode != plan_task:
        checks.append(Check("plan.recipe_mode_mismatch", "error", {"recipe": name, "recipe_mode": recipe_mode, "mode": ctx.plan.mode}, subject=name))
    same_layout = _plan_keeps_recipe_layout(ctx, recipe.value)
    rules_checked = ctx.arch().ok  # check_rules evaluates every rule on the Plan's own layout and system
    overrides = {o.key.lstrip("+"): o.value for o in ctx.plan.overrides}
    for finding in getattr(recipe.value, "findings", None) or ():
        code, message, severity = _finding_fields(finding)
        if is_repaired(code, recipe.value, ctx.plan.parallelism.seq_length, overrides):
            continue  # the Plan carries the override that removes the cause (plan.recipe_repairs)
        layout_rule = code.startswith("RULE_") and code not in _MODEL_FINDINGS
        if (layout_rule or code in _LAYOUT_FINDINGS) and not same_layout or layout_rule and rules_checked:
            # computed for the recipe's own layout (and its split settings) on the recipe's system:
            # where check_rules runs on the Plan's layout, split and gpu_type, it has the answer
            # (a Plan that adds the split settings a recipe lacks is not refused for the recipe)
            continue
        checks.append(Check("plan.recipe_finding", severity, {"recipe": name, "code": code, "finding": message}, subject=name))
    return checks


# Rule findings about the model and the recipe's sequence length alone, whatever the layout
_MODEL_FINDINGS = frozenset({"RULE_SEQ_POSITIONS"})
# Catalog findings (catalog_sync.findings) about the recipe's own layout and batch
_LAYOUT_FINDINGS = frozenset({"expert_grid_exceeds_gpus", "gbs_not_divisible", "sp_without_tp", "seq_length_mismatch",
                              "pp_split_not_divisible", "vp_split_not_divisible"})


def _plan_keeps_recipe_layout(ctx: PreflightContext, recipe: Any) -> bool:
    """The Plan runs the recipe's own layout, GPU count and system (a finding about them holds)."""
    p, c = ctx.plan.parallelism, ctx.plan.cluster
    same = (p.tp, p.pp, p.vp or 1, p.cp, p.ep, p.mbs, p.gbs) == (
        recipe.tp or 1, recipe.pp or 1, recipe.vp or 1, recipe.cp or 1, recipe.ep or 1, recipe.mbs or 1, recipe.gbs or 1)
    system = recipe.hardware in (None, c.gpu_type)
    return same and system and (recipe.gpus in (None, c.total_gpus))


def _finding_fields(finding: Any) -> tuple[str, str, str]:
    """(code, text in the current language, severity) of a catalog finding."""
    if isinstance(finding, str):
        return "finding", finding, "warning"
    get = finding.get if isinstance(finding, dict) else (lambda k, d=None: getattr(finding, k, d))
    code = str(get("code", "finding"))
    text = finding.text() if callable(getattr(finding, "text", None)) else (get("message", None) or str(finding))
    severity = str(get("severity", "warning"))
    return code, str(text), severity if severity in ("error", "warning", "info") else "warning"


def check_recipe_and_data(ctx: PreflightContext) -> list[Check]:
    plan = ctx.plan
    selector, mode, kind = plan.dataset.selector, plan.mode, plan.recipe.kind
    checks: list[Check] = []
    if kind == "benchmark":
        if selector != "mock":
            checks.append(Check("plan.benchmark_real_data", "error", {"recipe": plan.recipe.name, "dataset": selector}))
        else:
            checks.append(Check("plan.benchmark_recipe", "warning", {"recipe": plan.recipe.name}))
    if selector == "mock" and mode in FINETUNE_GOALS:
        checks.append(Check("plan.mock_finetune", "error", {"mode": mode}))
    elif selector == "mock" and kind == "library":
        checks.append(Check("plan.mock_pretrain", "info", {}))
    checks += _selector_checks(ctx)
    return checks


def _selector_checks(ctx: PreflightContext) -> list[Check]:
    """The selector exists, serves the mode, and has the settings it requires (the dataset
    catalog, catalog/datasets.yaml)."""
    selector, mode = ctx.plan.dataset.selector, ctx.plan.mode
    try:
        from mbridge_launch.knowledge.datasets import load_datasets, normalize_mode

        selectors = load_datasets()
    except Exception as exc:  # noqa: BLE001 - no dataset catalog: say so, check the rest
        return [Check("plan.datasets_skipped", "info", {"reason": f"{type(exc).__name__}: {exc}"})]
    spec = selectors.get(selector)
    if spec is None:
        return [Check("plan.selector_unknown", "error", {"dataset": selector, "valid": ", ".join(selectors)})]
    if normalize_mode(mode) not in spec.modes:
        if selector == "mock" and mode in FINETUNE_GOALS:
            return []  # reported as plan.mock_finetune
        return [Check("plan.selector_mode", "error", {"dataset": selector, "mode": mode, "modes": ", ".join(spec.modes)})]
    missing = [key for key in spec.required if not _dataset_setting_given(ctx, key)]
    return [Check("plan.dataset_required", "error", {"dataset": selector, "setting": key}, subject=key) for key in missing]


def _dataset_setting_given(ctx: PreflightContext, key: str) -> bool:
    """A required `dataset.X` is given by the Plan's dataset section or by an override."""
    name = key.removeprefix("dataset.")
    ds = ctx.plan.dataset
    if name == "data_path" and (ds.data_paths or ds.fields.get("data_path")):
        return True
    if ds.fields.get(name):
        return True
    return bool((ctx.override(key) or "").strip())


# ---------------------------------------------------------------------- change control
def check_change_control(ctx: PreflightContext) -> list[Check]:
    """List the overrides that change the convergence contract; flag benchmark-only shortcuts in
    real training and overrides whose declared class disagrees with the key."""
    from mbridge_launch.plan.changecontrol import classify

    checks: list[Check] = []
    library = ctx.plan.recipe.kind == "library"
    for override in ctx.plan.overrides:
        declared = override.change_class
        params = {"setting": override.key, "value": override.value, "from": override.from_ if override.from_ is not None else "?", "reason": override.reason or "-", "declared": declared}
        actual = classify(override.key).change_class
        if actual != declared and not (declared == "convergence"):
            checks.append(Check("plan.override_misclassified", "warning", {**params, "actual": actual}, subject=override.key))
            declared = actual
        if declared == "convergence":
            # a setting the recipe leaves unset is said so, never "recipe default ?"
            unset = "preflight.plan.convergence_override_unset" if override.from_ is None else None
            checks.append(Check("plan.convergence_override", "info", params, subject=override.key, key=unset))
        elif declared == "benchmark_only" and library:
            checks.append(Check("plan.benchmark_override", "warning", params, subject=override.key))
    return checks


def check_override_keys(ctx: PreflightContext) -> list[Check]:
    """Every override key names a field of the release's ConfigContainer (the catalog's field
    tree, the recipe's own model provider where known); a `+key` adds one on purpose. A typo
    (train.trian_iters) would otherwise reach the queue and stop Megatron Bridge at start-up."""
    from mbridge_launch.base.i18n import msg
    from mbridge_launch.knowledge.config_fields import file_name, load_field_tree
    from mbridge_launch.plan.overrides import unknown_override

    plan = ctx.plan
    # the Plan's dataset fields reach run_recipe.py as dataset.NAME=VALUE (plan/trainer_args.py)
    keys = [f"dataset.{name}" for name in sorted(plan.dataset.fields)] + [o.key for o in plan.overrides]
    if keys and load_field_tree(plan.catalog.version) is None:  # a catalog synced without the real classes
        return [Check("plan.override_keys_unchecked", "info",
                      {"version": plan.catalog.version, "file": file_name(plan.catalog.version)})]
    checks: list[Check] = []
    for key in keys:
        error = unknown_override(key, plan.catalog.version, plan.recipe.name, plan.recipe.kind)
        if error is not None:
            checks.append(Check("plan.unknown_setting", "error", {"problem": msg(error.key, **error.params)},
                                subject=key))
    return checks


def check_container_profile(ctx: PreflightContext) -> list[Check]:
    c = ctx.plan.cluster
    if c.container_image and not c.profile.pyxis:
        return [Check("plan.container_without_pyxis", "warning", {"image": c.container_image})]
    return []


def check_signal_handled(ctx: PreflightContext) -> list[Check]:
    """The Plan's --signal must reach a trainer that saves on it: otherwise Slurm kills the run
    the signal's lead time before the limit, and everything since the last save is lost."""
    from mbridge_launch.plan.signals import problem

    found = problem(ctx.plan)
    if found is None:
        return []
    return [Check("plan.signal_not_handled", "error", {"problem": found}, subject="cluster.signal")]


def check_renders(ctx: PreflightContext) -> list[Check]:
    """The sbatch executor must accept the Plan (it refuses e.g. torchrun across nodes, control
    characters, secret values in env): rendering has no side effects."""
    from mbridge_launch.base.errors import UserError

    rendered = ctx.rendered_script()
    if isinstance(rendered.error, UserError):
        return [Check("plan.render_failed", "error", {"reason": rendered.reason})]
    return []
