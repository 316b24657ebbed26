"""Every change a recommendation makes to the recipe's defaults, with its change-control class and
why: the resize (layout, batch, recompute, FSDP), the user's overrides and --seq-length, and the
choices the user made by flag (--precision, --goal dora on a LoRA recipe, --dataset).

The launcher's own settings (explicit per-run checkpoint paths, dataset.data_path) are derived
from the Plan by recommend.to_plan.launcher_changes, so the list matches the command exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS, PEFT_GOALS
from mbridge_launch.plan import settings as S
from mbridge_launch.plan.changecontrol import CONVERGENCE, classify
from mbridge_launch.plan.overrides import is_on
from mbridge_launch.plan.scale_sanity import weak_scaled_gbs
from mbridge_launch.planner.recompute import OVERRIDE_KEY, modules_text, planner_modules


@dataclass
class Change:
    field: str
    from_: Any
    to: Any
    change_class: str
    reason: Msg  # a message key and parameters: rendered when shown, so the Plan is language neutral
    source: str  # resize | user | planner (`plan -o`) | dataset | launcher | repair (plan.recipe_repairs)
    # True: a KEY=VALUE override the Plan carries in `overrides`. False: carried by another Plan
    # field (--mode for the PEFT scheme, --dataset, checkpoint paths, dataset.data_path).
    as_override: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"field": self.field, "from": self.from_, "to": self.to, "class": self.change_class,
                "reason": str(self.reason), "source": self.source}


RECOMPUTE_KEY = "model.recompute_granularity"
FSDP_KEYS = ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")


def _change(field: str, old: Any, new: Any, change_class: str, reason: Msg, source: str,
            as_override: bool = True) -> Any:
    return Change(field, old, new, change_class, reason, source, as_override)


def _resize_reason(rec: Any, after: Any, reason_key: str) -> Msg:
    """Why the layout moved, by its true cause: another GPU count than the recipe's, else another
    sequence length, else another system, else the memory estimate at the recipe's own count;
    followed by what kind of setting it is."""
    return msg("change.reason.joined", first=refit_cause(rec, after), second=msg(reason_key))


def refit_cause(rec: Any, after: Any) -> Msg:
    recipe = rec.recipe
    if recipe.gpus and recipe.gpus != after.world:
        return msg("change.reason.resize", from_gpus=msg("count.gpus", count=recipe.gpus),
                   to_gpus=msg("count.gpus", count=after.world))
    recipe_seq = recipe.seq_length or recipe.dataset_seq_length
    if recipe_seq and after.seq_length != recipe_seq:
        return msg("change.reason.refit_seq_length", old=recipe_seq, new=after.seq_length)
    system = rec.hardware.name
    if recipe.hardware and recipe.hardware != system and (recipe.hardware, system) != ("h100", "h200"):
        return msg("change.reason.refit_system", gpu_type=system, hardware=recipe.hardware)
    if getattr(rec, "refit_cause", None) is not None:
        return rec.refit_cause
    if any(o.path in LAYOUT_KEYS.values() for o in rec.request.overrides):
        return msg("change.reason.refit_user_layout")
    return msg("change.reason.refit_memory")


def record_layout_changes(rec: Any, before: Any, after: Any) -> None:
    """Layout fields the resize (or --seq-length) changed; a field the user overrode is theirs."""
    user_keys = {o.path for o in rec.request.overrides}
    for attr, key in LAYOUT_KEYS.items():
        old, new = getattr(before, attr), getattr(after, attr)
        if old == new or key in user_keys:
            continue
        if attr == "gbs" and rec.recipe.kind == "benchmark":
            continue  # recorded as the weak-scaling change
        if attr == "seq_length":
            _record_seq_length(rec, key, old, new, user_keys)
            continue
        if attr == "gbs":
            rec.changes.append(_change(key, old, new, CONVERGENCE, _gbs_reason(rec, old, new, after), "resize"))
            continue
        cls = classify(key, gbs_fixed=before.gbs == after.gbs)
        rec.changes.append(_change(key, old, new, cls.change_class, _resize_reason(rec, after, cls.reason_key), "resize"))
    _record_recompute(rec, before, after, user_keys)
    _record_fsdp(rec, before, after, user_keys)
    _record_switched_off(rec, after, user_keys)


def _gbs_reason(rec: Any, old: int, new: int, after: Any) -> Msg:
    """Why the global batch moved: Megatron Bridge's weak-scaling rule at another GPU count
    (plan.scale_sanity), then, where that batch does not divide by MBS x DP, the nearest one that does."""
    weak = weak_scaled_gbs(rec.recipe.gbs, rec.recipe.gpus, after.world)
    nearest = msg("change.reason.resize_gbs", old=weak or old, mbs=after.mbs, dp=after.dp, gpus=after.world)
    if weak is None:
        return nearest
    scaled = msg("change.reason.joined", first=refit_cause(rec, after),
                 second=msg("change.reason.weak_scale_library", old=old, new=weak))
    return scaled if new == weak else msg("change.reason.joined", first=scaled, second=nearest)


def record_split_changes(rec: Any, before: Any, after: Any) -> None:
    """The pipeline split settings (planner.pipeline_split) that differ from the recipe's, unless
    the user set them: a layout resized to another PP x VP needs its own split."""
    if after is None:
        return
    user_keys = {o.path for o in rec.request.overrides}
    old = before.settings()
    # a shipped layout whose layers do not split over its stages keeps its layout and gets the
    # split Megatron needs (SHIPPED_SPLIT_ADDED): a repair of the recipe, so the Plan still runs
    # the shipped layout (plan.shipped.plan_is_shipped) and preflight judges it as recommend did
    source = "repair" if any(code == "SHIPPED_SPLIT_ADDED" for code, _ in rec.warnings) else "resize"
    for key, value in after.to_overrides(relative_to=before):
        if key in user_keys:
            continue
        cls = classify(key)
        previous = old[key.removeprefix("model.")]
        rec.changes.append(_change(key, previous, value, cls.change_class, _resize_reason(rec, rec.layout, cls.reason_key),
                                   source))


def _record_seq_length(rec: Any, key: str, old: Any, new: Any, user_keys: set[str]) -> None:
    reason = msg("change.reason.user_seq_length")
    rec.changes.append(_change(key, old, new, classify(key).change_class, reason, "user"))
    # Bridge reads the model's and the dataset's sequence length separately: move both
    dataset_old = rec.recipe.dataset_seq_length or old
    if "dataset.seq_length" not in user_keys and dataset_old != new:
        rec.changes.append(_change("dataset.seq_length", dataset_old, new, classify("dataset.seq_length").change_class,
                                   reason, "user"))


def _recompute_text(level: str) -> Any:
    return None if level == "none" else level


def _record_recompute(rec: Any, before: Any, after: Any, user_keys: set[str]) -> None:
    """A recompute level the memory model needed. Full recompute needs a method and a layer count
    in Megatron Core; leaving full recompute clears them. Selective recompute the planner chose
    gets the modules the memory model charged (planner.recompute)."""
    _record_recompute_modules(rec, after, user_keys)
    same_level = before.recompute == after.recompute
    if (same_level and before.recompute_layers == after.recompute_layers) or RECOMPUTE_KEY in user_keys:
        return
    cls = classify(RECOMPUTE_KEY)
    reason = _resize_reason(rec, after, cls.reason_key)
    if not same_level:
        rec.changes.append(_change(RECOMPUTE_KEY, _recompute_text(before.recompute), _recompute_text(after.recompute),
                                   cls.change_class, reason, "resize"))
    companions: dict[str, Any] = {}
    if after.recompute == "full":
        companions = S.full_recompute_settings(after.recompute_layers)
    elif before.recompute == "full":
        companions = {key: None for key in S.FULL_RECOMPUTE_SETTINGS}
    for key, value in companions.items():
        old = S.recipe_default(rec.recipe, key)
        if key not in user_keys and old != value:
            rec.changes.append(_change(key, old, value, classify(key).change_class, reason, "resize"))


def _record_recompute_modules(rec: Any, after: Any, user_keys: set[str]) -> None:
    if after.recompute != "selective" or getattr(after, "recompute_modules", None) is not None:
        return  # not selective, or the recipe's / user's own modules: kept as they are
    if OVERRIDE_KEY in user_keys or RECOMPUTE_KEY in user_keys:
        return
    precision = getattr(rec.request, "precision", None) or getattr(rec.recipe, "precision", None) or "bf16"
    new = modules_text(planner_modules(rec.arch, precision))
    old = S.recipe_default(rec.recipe, OVERRIDE_KEY)
    if old is not None and modules_text(old if isinstance(old, (list, tuple)) else [old]) == new:
        return
    cls = classify(OVERRIDE_KEY)
    reason = msg("change.reason.joined", first=msg("change.reason.recompute_modules"),
                 second=_resize_reason(rec, after, cls.reason_key))
    rec.changes.append(_change(OVERRIDE_KEY, old, new, cls.change_class, reason, "resize"))


def _record_switched_off(rec: Any, after: Any, user_keys: set[str]) -> None:
    """The recipe settings Megatron rejects beside the recommended layout (CPU offloading with PP
    or recompute, per-layer CUDA graphs with full recompute), switched off by an override: the
    planner estimated the layout without them (planner.recipe_settings.switched_off)."""
    from mbridge_launch.planner.recipe_settings import memory_settings, switched_off

    precision = getattr(rec.request, "precision", None) or getattr(rec.recipe, "precision", None) or "bf16"
    for key, value in switched_off(memory_settings(rec.recipe.features, precision), after):
        if key in user_keys:
            continue
        reason = msg("change.reason.setting_off", setting=key, pp=after.pp,
                     recompute=msg(f"planner.recompute_level.{after.recompute or 'none'}"))
        rec.changes.append(_change(key, S.recipe_default(rec.recipe, key), value, classify(key).change_class, reason,
                                   "resize"))


def _record_fsdp(rec: Any, before: Any, after: Any, user_keys: set[str]) -> None:
    if before.fsdp == after.fsdp or any(k in user_keys for k in FSDP_KEYS):
        return
    cls = classify(FSDP_KEYS[0])
    reason = _resize_reason(rec, after, cls.reason_key)
    # Bridge's FSDP recipes set both flags and shard optimizer state, gradients and parameters
    wanted: dict[str, Any] = {FSDP_KEYS[0]: after.fsdp, FSDP_KEYS[1]: after.fsdp}
    if after.fsdp:
        wanted["ddp.data_parallel_sharding_strategy"] = S.FSDP_SHARDING_STRATEGY
    wanted["checkpoint.ckpt_format"] = S.CHECKPOINT_FORMAT[bool(after.fsdp)]
    for key, value in wanted.items():
        old = S.recipe_default(rec.recipe, key)
        if key not in user_keys and old != value:
            rec.changes.append(_change(key, old, value, classify(key).change_class, reason, "resize"))


def record_user_changes(rec: Any) -> None:
    """The user's trailing KEY=VALUE overrides, each with the recipe's value when it is known."""
    paths = {o.path for o in rec.request.overrides}
    gbs_fixed = "train.global_batch_size" not in paths
    recorded = set()
    for o in rec.request.overrides:
        default = S.recipe_default(rec.recipe, o.path)
        if is_no_op(default, o.value):
            continue  # restating the recipe's value changes nothing: no override, no change record
        cls = classify(o.key, gbs_fixed=gbs_fixed)  # the key as written: a +key is an added key
        rec.changes.append(_change(o.key, default, o.value, cls.change_class, msg(cls.reason_key), "user"))
        recorded.add(o.path)
    if "model.seq_length" in recorded and "dataset.seq_length" not in paths:
        # run_recipe.py reads both; a model-only override would leave the data at the old length
        seq = next(o.value for o in rec.request.overrides if o.path == "model.seq_length")
        rec.changes.append(_change("dataset.seq_length", rec.recipe.dataset_seq_length, seq,
                                   classify("dataset.seq_length").change_class, msg("change.reason.user_seq_length"), "user"))
    _user_fsdp_format(rec, recorded, paths)


def _user_fsdp_format(rec: Any, recorded: set[str], paths: set[str]) -> None:
    """A user who switches Megatron-FSDP gets its checkpoint format with it (S.CHECKPOINT_FORMAT):
    validation refuses a saving FSDP run in any other format, and fsdp_dtensor without FSDP."""
    switched = [o for o in rec.request.overrides if o.path in FSDP_KEYS and o.path in recorded]
    if not switched or "checkpoint.ckpt_format" in paths:
        return
    cls = classify("checkpoint.ckpt_format")
    rec.changes.append(_change("checkpoint.ckpt_format", None, S.CHECKPOINT_FORMAT[is_on(switched[-1].value)],
                               cls.change_class, msg(cls.reason_key), "user"))


def is_no_op(default: Any, value: str | None) -> bool:
    """An override that restates the recipe's known value (512 for 512, true for True). A
    default of None is unknown (the catalog does not record it), never a no-op."""
    if default is None or value is None:
        return False
    text = value.strip()
    if S.override_text(default).lower() == text.lower():
        return True
    try:
        return not isinstance(default, bool) and float(default) == float(text)
    except (TypeError, ValueError):
        return False


def record_finding_repairs(rec: Any) -> None:
    """The overrides that repair a shipped recipe Megatron Bridge itself rejects (plan.recipe_repairs),
    for each of its error findings that has one, unless the user set that key."""
    from mbridge_launch.plan.recipe_repairs import repairs_for

    paths = {o.path for o in rec.request.overrides} | {c.field for c in rec.changes}
    for finding in getattr(rec.recipe, "findings", None) or ():
        if getattr(finding, "severity", None) != "error":
            continue
        for key, value in repairs_for(finding.code, rec.recipe, rec.layout.seq_length):
            old = S.recipe_default(rec.recipe, key)
            if key in paths or is_no_op(old, value):
                continue
            cls = classify(key)
            rec.changes.append(_change(key, old, value, cls.change_class,
                                       msg("change.reason.recipe_repair", code=finding.code), "repair"))
            paths.add(key)


def record_choice_changes(rec: Any) -> None:
    """Changes the user chose by flag rather than by KEY=VALUE."""
    request, recipe = rec.request, rec.recipe
    paths = {o.path for o in request.overrides}
    # --precision with no recipe in that precision: switch the recipe's mixed-precision recipe
    wanted = S.MIXED_PRECISION.get(request.precision or "")
    current = (recipe.features or {}).get("precision_recipe") or S.MIXED_PRECISION.get(recipe.precision or "")
    if wanted and wanted != current and "mixed_precision" not in paths:
        cls = classify("mixed_precision")
        rec.changes.append(_change("mixed_precision", current, wanted, cls.change_class,
                                   msg("change.reason.precision_flag", precision=request.precision,
                                     recipe_precision=recipe.precision or current), "user"))
    # --goal dora on a recipe built for LoRA: run_recipe.py --mode dora switches the PEFT scheme
    if recipe.kind == "library" and request.goal in PEFT_GOALS and recipe.peft_scheme \
            and recipe.peft_scheme != request.goal:
        rec.changes.append(_change("peft", recipe.peft_scheme, request.goal, CONVERGENCE,
                                   msg("change.reason.peft_mode", mode=request.goal), "user", as_override=False))
    # --dataset (or the default for the goal) instead of the recipe's own dataset
    default = (recipe.dataset or {}).get("selector")
    if recipe.kind == "library" and default and rec.dataset != default:
        rec.changes.append(_change("dataset", default, rec.dataset, CONVERGENCE, msg("change.reason.dataset_selector"),
                                   "dataset", as_override=False))
