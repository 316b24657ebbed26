"""The fix for each cause, as a message; for a GPU OOM with a Plan, the memory model's view.

With a Plan, gpu_oom's fix is concrete: the planner's per-GPU estimate of the current layout
(the same model `estimate` and preflight use) and the single changes at the same GPU count that
fit by it (twice the TP, PP or CP, a heavier recompute, half the micro batch), checked against
the planner's rules; when none fits, the smallest change that does (more GPUs). Without a Plan, or
when the model or GPU type is unknown to the knowledge base, the generic fix.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from mbridge_launch.base.i18n import Msg, msg

_NODE_FIX = ("gpu_hardware", "node_failure", "network")
_PRECISION = re.compile(r"_(bf16|fp16|fp8[a-z_]*?|mxfp8|nvfp4)(?:_|$)")


def fix_for(cause: str, node: Optional[str] = None, plan: Any = None) -> Msg:
    if cause == "gpu_oom" and plan is not None:
        found = _memory_fix(plan)
        if found is not None:
            return found
    if cause in _NODE_FIX:
        if not node:  # never `--exclude=?`: say the logs do not name the node, and where to find it
            return msg(f"diagnose.fix.{cause}.unknown_node")
        return msg(f"diagnose.fix.{cause}", node=node)
    return msg(f"diagnose.fix.{cause}")


def _describe(layout: Any) -> str:
    text = f"TP={layout.tp} PP={layout.pp} CP={layout.cp} EP={layout.ep} MBS={layout.mbs} recompute={layout.recompute}"
    return text + (" FSDP" if getattr(layout, "fsdp", False) else "")


def _memory_fix(plan: Any) -> Optional[Msg]:
    """The memory model's fix for `plan`, or None when the model cannot say (unknown model/GPU)."""
    try:
        from mbridge_launch.knowledge.hardware import get_hardware
        from mbridge_launch.knowledge.models import load_arch
        from mbridge_launch.plan.layout import layout_of
        from mbridge_launch.planner import memory
        from mbridge_launch.planner.rules import check_layout, evolve

        arch = load_arch(plan.recipe.model)
        hardware = get_hardware(plan.cluster.gpu_type)
        layout = layout_of(plan)
    except Exception:  # noqa: BLE001 - any gap in the knowledge base means: no model view, generic fix
        return None
    if arch is None or hardware is None:
        return None
    m = _PRECISION.search(plan.recipe.name or "")
    precision = m.group(1) if m else "bf16"
    grads = memory.BF16_GRAD_BYTES if getattr(plan.recipe, "kind", "") == "benchmark" else memory.GRAD_BYTES
    hbm = float(hardware.hbm_gb)

    def total(candidate: Any) -> float:
        return float(memory.estimate_memory(arch, candidate, hbm, precision=precision, goal=plan.mode,
                                            grad_bytes=grads).total)

    try:
        current = total(layout)
    except Exception:  # noqa: BLE001 - a layout the model cannot evaluate: generic fix
        return None
    usable = hbm * memory.HEADROOM
    trials: list[Any] = []
    order = ("none", "selective", "full")
    if layout.recompute in order and layout.recompute != "full":
        trials.append(evolve(layout, recompute=order[order.index(layout.recompute) + 1], recompute_layers=None))
    if layout.mbs > 1:
        trials.append(evolve(layout, mbs=max(1, layout.mbs // 2)))
    for name in ("tp", "pp", "cp"):
        trials.append(evolve(layout, **{name: getattr(layout, name) * 2}))
    options: list[Msg] = []
    for trial in trials:
        try:
            if check_layout(trial, arch, hardware):
                continue  # breaks a rule (divisibility, NVLink domain, ...): not a fix
            estimate = total(trial)
        except Exception:  # noqa: BLE001 - a trial the model rejects is simply not offered
            continue
        if estimate <= usable:
            options.append(msg("diagnose.fix.option", change=_change(layout, trial), total=f"{estimate:.1f}"))
    params = {"total": f"{current:.1f}", "usable": f"{usable:.1f}", "hbm": f"{hbm:.0f}", "layout": _describe(layout)}
    if options:
        joined = options[-1]
        for option in reversed(options[:-1]):
            joined = msg("diagnose.fix.join", head=option, tail=joined)
        return msg("diagnose.fix.gpu_oom_model", options=joined, **params)
    try:
        from mbridge_launch.plan.shipped import smallest_fitting_change

        change = smallest_fitting_change(layout, arch, hardware, precision=precision, goal=plan.mode,
                                         grad_bytes=grads)
    except Exception:  # noqa: BLE001
        change = msg("diagnose.fix.gpu_oom")
    return msg("diagnose.fix.gpu_oom_model_none", change=change, **params)


def _change(before: Any, after: Any) -> str:
    """`TP=4->8` style: the fields that differ (identifiers, the same in every language)."""
    parts = []
    for name, label in (("tp", "TP"), ("pp", "PP"), ("cp", "CP"), ("mbs", "MBS"), ("recompute", "recompute")):
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            parts.append(f"{label}={old}->{new}")
    return ", ".join(parts)
