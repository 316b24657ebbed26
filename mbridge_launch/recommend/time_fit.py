"""The recommendation against its time limit and its batch: a step or a run beyond --time
(plan.scale_sanity), and a layout whose batch is too small to keep the GPUs busy.

A global batch of a few micro batches per pipeline leaves most of each step to the pipeline's
fill and drain and to communication that nothing overlaps (Qwen3-235B on 256 B200 at GBS 32
predicts an MFU of 1.2%). The warning names the smallest batch, doubling, at which the planner's
own step model predicts a sane MFU; a larger batch is a convergence change, so it is only advised.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mbridge_launch.base import slurm_time
from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.plan import settings as S
from mbridge_launch.plan.overrides import whole_number
from mbridge_launch.plan.scale_sanity import TINY_BATCH_MFU, time_findings

# Below TINY_MFU a layout wastes most of its GPUs; SANE_MFU is the level the advised batch must
# reach. A larger batch must at least double the MFU to be worth a convergence change.
TINY_MFU = 0.05
SANE_MFU = 0.10
MIN_GAIN = 2.0
MAX_DOUBLINGS = 6  # up to 64x the batch: beyond that the batch is another experiment


def train_iters(rec: Any) -> int | None:
    """train.train_iters as the run will see it: the user's override, else the recipe's."""
    for o in reversed(rec.request.overrides):
        if o.path == "train.train_iters":
            return whole_number(o.value)
    value = S.recipe_default(rec.recipe, "train.train_iters") or getattr(rec.recipe, "train_iters", None)
    return whole_number(value) if value is not None else None


def scale_sanity_warnings(rec: Any, time: str) -> list[tuple[str, Msg]]:
    est = rec.estimate
    if est is None or rec.layout is None:
        return []
    found: list[tuple[str, Msg]] = []
    layout = rec.layout
    try:
        limit = slurm_time.parse_seconds(time)
    except ValueError:
        limit = None  # build_plan refuses a bad --time with its own line
    for finding in time_findings(step_s=getattr(est, "step_time_s", None), limit_s=limit,
                                 train_iters=train_iters(rec), gbs=layout.gbs, batch_quantum=layout.mbs * layout.dp):
        found.append((finding.code, msg(finding.message_key, **finding.params)))
    found += _tiny_batch(rec)
    return found


def _tiny_batch(rec: Any) -> list[tuple[str, Msg]]:
    mfu = getattr(rec.estimate, "mfu", None)
    if mfu is None or mfu >= TINY_MFU or rec.arch is None:
        return []
    better = sane_batch(rec.layout, rec.arch, rec.hardware, _precision(rec), rec.request.goal, mfu)
    if better is None:
        return []
    gbs, new_mfu = better
    return [(TINY_BATCH_MFU, msg("pitfall.tiny_batch_mfu", mfu=_pct(mfu), gbs=rec.layout.gbs, world=rec.layout.world,
                                 better=gbs, better_mfu=_pct(new_mfu)))]


def sane_batch(layout: Any, arch: Any, hardware: Any, precision: str, goal: str, mfu: float) -> tuple[int, float] | None:
    """The smallest doubled global batch whose predicted MFU reaches SANE_MFU (or the best of
    them) when it at least doubles the MFU; None when a larger batch does not help."""
    from mbridge_launch.planner.measured import shipped_for
    from mbridge_launch.planner.search import estimate_layout

    measured = shipped_for(arch.name, hardware.name, layout.world or 0, precision)
    best: tuple[int, float] | None = None
    for k in range(1, MAX_DOUBLINGS + 1):
        gbs = layout.gbs * 2 ** k  # stays divisible by MBS x DP
        est = estimate_layout(replace(layout, gbs=gbs), arch, hardware, precision=precision, goal=goal, measured=measured)
        new = getattr(est, "mfu", None)
        if new is None or not getattr(est, "fits", True):
            continue
        if best is None or new > best[1]:
            best = (gbs, new)
        if new >= SANE_MFU and new >= mfu * MIN_GAIN:
            return gbs, new
    if best is not None and best[1] >= mfu * MIN_GAIN:
        return best
    return None


def _precision(rec: Any) -> str:
    return rec.request.precision or getattr(rec.recipe, "precision", None) or "bf16"


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"
