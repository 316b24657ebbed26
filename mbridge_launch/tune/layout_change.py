"""A planner layout written into an existing Plan: its `parallelism` section and the overrides
that make the run use it, each of the execution class.

The KEY=VALUE form of a layout is recommend.plan_file.layout_overrides (the one mapping `plan -o`
writes); this module only adds what that mapping leaves to the recipe's defaults and an existing
Plan may have set otherwise: a VP or ETP, recompute or Megatron-FSDP the Plan had and the new
layout does not (`null` / `false`), and it drops the companion settings of what the new layout no
longer uses (full-recompute method, selective modules, CP communication, FSDP sharding).

A change that is not of the execution class (a GBS or sequence length other than the Plan's) is
refused: tuning must not change the experiment (plan.changecontrol).
"""

from __future__ import annotations

from typing import Any, Optional

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.hydra_values import override_text
from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS
from mbridge_launch.plan.changecontrol import EXECUTION, classify
from mbridge_launch.plan.layout import parallelism_of
from mbridge_launch.plan.model import Override, Plan
from mbridge_launch.plan.overrides import SWITCH_KEYS
from mbridge_launch.plan.settings import FULL_RECOMPUTE_SETTINGS
from mbridge_launch.planner.layout_words import vp_word
from mbridge_launch.planner.pipeline_split import SPLIT_KEYS
from mbridge_launch.planner.recompute import OVERRIDE_KEY

RECOMPUTE_KEY = SWITCH_KEYS["recompute"][0]


def layout_label(layout: Any) -> str:
    """One line naming a layout (planner Layout or Plan parallelism), as the card names it."""
    text = (f"TP={layout.tp} PP={layout.pp} {vp_word(layout.vp)} CP={layout.cp} EP={layout.ep} "
            f"MBS={layout.mbs} recompute={layout.recompute}")
    return text + (" SP" if layout.sp else "") + (" FSDP" if layout.fsdp else "")


def layout_items(candidate: Any, old: Any, arch: Any, precision: str, recipe: Any = None) -> list[tuple[str, str]]:
    """(key, value) of every override the layout needs on top of a Plan whose parallelism is `old`;
    with the Plan's `recipe`, the switches of its settings Megatron rejects beside the layout
    (planner.recipe_settings.switched_off: the planner estimated the layout without them)."""
    from mbridge_launch.recommend.plan_file import layout_overrides

    layout = candidate.layout
    items = [tuple(item.split("=", 1)) for item in layout_overrides(layout, arch, precision)]
    written = {key for key, _ in items}
    for attr in ("vp", "etp"):  # written by the mapping only when set
        if getattr(layout, attr) is None and getattr(old, attr) is not None:
            items.append((LAYOUT_KEYS[attr], "null"))
    if layout.recompute == "none" and old.recompute != "none" and RECOMPUTE_KEY not in written:
        items.append((RECOMPUTE_KEY, "null"))
    if not layout.fsdp and old.fsdp and SWITCH_KEYS["fsdp"][0] not in written:
        from mbridge_launch.plan.settings import CHECKPOINT_FORMAT

        items += [(SWITCH_KEYS["fsdp"][0], "false"), ("checkpoint.ckpt_format", CHECKPOINT_FORMAT[False])]
    if recipe is not None:
        from mbridge_launch.planner.recipe_settings import memory_settings, switched_off

        items += [(key, override_text(value)) for key, value in
                  switched_off(memory_settings(getattr(recipe, "features", None), precision), layout)]
    return [(k, v) for k, v in items]


def apply_layout(plan: Plan, candidate: Any, arch: Any, precision: str, *,
                 reason: Optional[Msg] = None, recipe: Any = None) -> Plan:
    """The Plan running `candidate`'s layout (module docstring); UserError when a changed setting
    is not an execution setting."""
    old = plan.parallelism
    new = parallelism_of(candidate.layout)
    if not new.fsdp:  # the mapping writes no distributed-optimizer switch: the Plan's stays what runs
        new = new.model_copy(update={"distributed_optimizer": old.distributed_optimizer})
    items = layout_items(candidate, old, arch, precision, recipe)
    current = {o.key.lstrip("+"): o for o in plan.overrides}
    by_field = {key: name for name, key in LAYOUT_KEYS.items()}
    reason = reason or msg("change.reason.tune_trial_layout")
    added: list[Override] = []
    for key, value in items:
        previous = current.get(key)
        if previous is not None and previous.value == value:
            continue  # the Plan says so already
        name = by_field.get(key)
        before = previous.value if previous is not None else (override_text(getattr(old, name)) if name else None)
        if name is not None and previous is None and before == value:
            continue  # the recipe's value already (recommend writes no no-op override)
        cls = classify(key, gbs_fixed=new.gbs == old.gbs)
        if cls.change_class != EXECUTION:
            raise UserError("tune.convergence_change", setting=key, value=value, before=before or "?")
        added.append(Override.model_validate({
            "key": key, "value": value, "from": previous.from_ if previous is not None else before,
            "class": EXECUTION, "reason": reason, "source": "tune"}))
    replaced = {o.key for o in added} | _unused_companions(old, candidate.layout, {k for k, _ in items})
    kept = [o for o in plan.overrides if o.key.lstrip("+") not in replaced]
    data = plan.model_dump(mode="python", by_alias=True)
    data["parallelism"] = new.model_dump(mode="python")
    data["overrides"] = [o.model_dump(mode="python", by_alias=True) for o in kept + added]
    return Plan.model_validate(data)


def _unused_companions(old: Any, layout: Any, written: set[str]) -> set[str]:
    """The companion settings of a feature the Plan had and the new layout does not use (the
    recipe's default applies again); a setting the Plan made for another reason stays."""
    dropped: set[str] = set()
    if old.cp > 1 and layout.cp == 1:
        dropped.add("model.cp_comm_type")
    if old.recompute == "selective" and layout.recompute != "selective":
        dropped.add(OVERRIDE_KEY)
    if old.recompute == "full" and layout.recompute != "full":
        dropped.update(FULL_RECOMPUTE_SETTINGS)
    if old.fsdp and not layout.fsdp:
        dropped.update({*SWITCH_KEYS["fsdp"][1:], "ddp.data_parallel_sharding_strategy"})
    if old.pp != layout.pp or old.vp != layout.vp:
        dropped.update("model." + key for key in SPLIT_KEYS)
    return dropped - written
