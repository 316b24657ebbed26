"""Every change a recommendation makes to the recipe's defaults, with its change-control class and
why: the resize (layout, batch, recompute, FSDP), the user's overrides and --seq-length, and the
choices the user made by flag (--precision, --goal dora on a LoRA recipe, --dataset).

The launcher's own settings (explicit per-run checkpoint paths, dataset.data_path) are derived
from the Plan by recommend.to_plan.launcher_changes, so the list matches the command exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mbridge_launch.base.i18n import t
from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS, PEFT_GOALS
from mbridge_launch.plan import settings as S
from mbridge_launch.plan.changecontrol import CONVERGENCE, classify


@dataclass
class Change:
    field: str
    from_: Any
    to: Any
    change_class: str
    reason: str
    source: str  # resize | user | dataset | launcher
    # True: a KEY=VALUE override the Plan carries in `overrides`. False: carried by another Plan
    # field (--mode for the PEFT scheme, --dataset, checkpoint paths, dataset.data_path).
    as_override: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"field": self.field, "from": self.from_, "to": self.to, "class": self.change_class,
                "reason": self.reason, "source": self.source}


RECOMPUTE_KEY = "model.recompute_granularity"
FSDP_KEYS = ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")


def _change(field: str, old: Any, new: Any, change_class: str, reason: str, source: str,
            as_override: bool = True) -> Any:
    return Change(field, old, new, change_class, reason, source, as_override)


def _resize_reason(rec: Any, after: Any, reason_key: str) -> str:
    return t("change.reason.resize", from_gpus=t("count.gpus", count=rec.recipe.gpus), to_gpus=t("count.gpus", count=after.world)) + "; " + t(reason_key)


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
            reason = t("change.reason.resize_gbs", old=old, mbs=after.mbs, dp=after.dp, gpus=after.world)
            rec.changes.append(_change(key, old, new, CONVERGENCE, reason, "resize"))
            continue
        cls = classify(key, gbs_fixed=before.gbs == after.gbs)
        rec.changes.append(_change(key, old, new, cls.change_class, _resize_reason(rec, after, cls.reason_key), "resize"))
    _record_recompute(rec, before, after, user_keys)
    _record_fsdp(rec, before, after, user_keys)


def _record_seq_length(rec: Any, key: str, old: Any, new: Any, user_keys: set[str]) -> None:
    reason = t("change.reason.user_seq_length")
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
    in Megatron Core; leaving full recompute clears them."""
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


def _record_fsdp(rec: Any, before: Any, after: Any, user_keys: set[str]) -> None:
    if before.fsdp == after.fsdp or any(k in user_keys for k in FSDP_KEYS):
        return
    cls = classify(FSDP_KEYS[0])
    reason = _resize_reason(rec, after, cls.reason_key)
    # Bridge's FSDP recipes set both flags and shard optimizer state, gradients and parameters
    wanted: dict[str, Any] = {FSDP_KEYS[0]: after.fsdp, FSDP_KEYS[1]: after.fsdp}
    if after.fsdp:
        wanted["ddp.data_parallel_sharding_strategy"] = S.FSDP_SHARDING_STRATEGY
    for key, value in wanted.items():
        old = S.recipe_default(rec.recipe, key)
        if key not in user_keys and old != value:
            rec.changes.append(_change(key, old, value, classify(key).change_class, reason, "resize"))


def record_user_changes(rec: Any) -> None:
    """The user's trailing KEY=VALUE overrides, each with the recipe's value when it is known."""
    paths = {o.path for o in rec.request.overrides}
    gbs_fixed = "train.global_batch_size" not in paths
    for o in rec.request.overrides:
        cls = classify(o.path, gbs_fixed=gbs_fixed)
        rec.changes.append(_change(o.key, S.recipe_default(rec.recipe, o.path), o.value, cls.change_class,
                                   t(cls.reason_key), "user"))
    if "model.seq_length" in paths and "dataset.seq_length" not in paths:
        # run_recipe.py reads both; a model-only override would leave the data at the old length
        seq = next(o.value for o in rec.request.overrides if o.path == "model.seq_length")
        rec.changes.append(_change("dataset.seq_length", rec.recipe.dataset_seq_length, seq,
                                   classify("dataset.seq_length").change_class, t("change.reason.user_seq_length"), "user"))


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
                                   t("change.reason.precision_flag", precision=request.precision,
                                     recipe_precision=recipe.precision or current), "user"))
    # --goal dora on a recipe built for LoRA: run_recipe.py --mode dora switches the PEFT scheme
    if recipe.kind == "library" and request.goal in PEFT_GOALS and recipe.peft_scheme \
            and recipe.peft_scheme != request.goal:
        rec.changes.append(_change("peft", recipe.peft_scheme, request.goal, CONVERGENCE,
                                   t("change.reason.peft_mode", mode=request.goal), "user", as_override=False))
    # --dataset (or the default for the goal) instead of the recipe's own dataset
    default = (recipe.dataset or {}).get("selector")
    if recipe.kind == "library" and default and rec.dataset != default:
        rec.changes.append(_change("dataset", default, rec.dataset, CONVERGENCE, t("change.reason.dataset_selector"),
                                   "dataset", as_override=False))
