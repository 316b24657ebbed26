"""Scale sanity: the global batch at another GPU count, and a run against its time limit.

Megatron Bridge's own launcher (scripts/training/run_recipe.py) weak-scales: run at another world
size than a recipe's, it scales train.global_batch_size by the GPU count so that the samples per
GPU stay the recipe's. The same rule is applied here to a library recipe resized to another count;
it changes the batch the optimizer sees, so it is a convergence-class change with its reason.

A step longer than the Slurm time limit never completes (the job is killed mid-step, no
checkpoint is written): an error. A run whose train_iters x step exceeds the limit stops early: a
warning with the iterations that fit and the limit the whole run needs. Step times are the
planner's prediction; a step's time is taken as proportional to its number of micro batches (the
pipeline's fixed part is small next to a step that long), so the batch that fits is "about".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from mbridge_launch.base.slurm_time import format_seconds

STEP_OVER_LIMIT = "STEP_OVER_TIME_LIMIT"
RUN_OVER_LIMIT = "RUN_OVER_TIME_LIMIT"
TINY_BATCH_MFU = "TINY_BATCH_MFU"
CODES = (STEP_OVER_LIMIT, RUN_OVER_LIMIT, TINY_BATCH_MFU)
# Slurm kills a job at its limit: a step must leave room for start-up (loading the model and the
# data, building the process groups), which takes minutes on a large job
START_UP_S = 600


def weak_scaled_gbs(recipe_gbs: int | None, recipe_gpus: int | None, world: int) -> int | None:
    """The recipe's global batch at `world` GPUs with its samples per GPU kept (run_recipe.py's
    rule); None at the recipe's own count, without one, or when the batch would fall below 1."""
    if not recipe_gbs or not recipe_gpus or world == recipe_gpus:
        return None
    scaled = round(recipe_gbs * world / recipe_gpus)
    return scaled if scaled >= 1 else None


def weak_scaled_layout(layout: Any, recipe: Any, world: int, overrides: dict[str, str]) -> Any:
    """The recipe's layout at `world` GPUs with its global batch weak-scaled, unless the user set
    the batch (theirs wins) or the count is the recipe's."""
    if "train.global_batch_size" in overrides:
        return layout
    gbs = weak_scaled_gbs(getattr(recipe, "gbs", None), getattr(recipe, "gpus", None), world)
    return layout if gbs is None else replace(layout, gbs=gbs)


@dataclass(frozen=True)
class TimeFinding:
    code: str
    severity: str  # error | warning
    message_key: str
    params: dict[str, Any]


def time_findings(*, step_s: float | None, limit_s: int | None, train_iters: int | None, gbs: int,
                  batch_quantum: int) -> list[TimeFinding]:
    """What a predicted step time says about the time limit. `batch_quantum` (MBS x DP) is the
    step by which a global batch can change."""
    if not step_s or step_s <= 0 or not limit_s:
        return []
    usable = max(limit_s - START_UP_S, limit_s / 2)
    if step_s > usable:
        needed = format_seconds(_round_up_minutes(step_s + START_UP_S))
        params = {"step": _duration(step_s), "limit": format_seconds(limit_s), "needed": needed}
        per_sample = step_s / max(gbs, 1)
        fit = int(usable / per_sample) // batch_quantum * batch_quantum if batch_quantum > 0 else 0
        if 0 < fit < gbs:
            return [TimeFinding(STEP_OVER_LIMIT, "error", "pitfall.step_over_time_limit",
                                {**params, "gbs": fit, "old_gbs": gbs, "fit_step": _duration(per_sample * fit)})]
        return [TimeFinding(STEP_OVER_LIMIT, "error", "pitfall.step_over_time_limit_time_only", params)]
    if train_iters and train_iters * step_s > usable:
        total = train_iters * step_s + START_UP_S
        fit = int(usable // step_s)
        over: dict[str, Any] = {"iters": train_iters, "step": _duration(step_s), "total": _duration(total),
                  "limit": format_seconds(limit_s), "fit": fit, "jobs": math.ceil(train_iters / max(fit, 1)),
                  "needed": format_seconds(_round_up_minutes(total))}
        # a run of days goes on in jobs that resume from the checkpoints; a --time of months is no advice
        key = "pitfall.run_over_time_limit" if total <= LONGEST_SINGLE_JOB_S else "pitfall.run_over_time_limit_jobs"
        return [TimeFinding(RUN_OVER_LIMIT, "warning", key, over)]
    return []


# Past this a run is not one job: the warning counts the jobs of the time limit it needs instead of
# suggesting a --time no site grants (Slurm partitions rarely allow more than a few days).
LONGEST_SINGLE_JOB_S = 2 * 86400


def _round_up_minutes(seconds: float) -> int:
    return int(math.ceil(seconds / 60) * 60)


def _duration(seconds: float) -> str:
    """A step or run length as people read it: 0.84 s, 12.5 min, 9.6 h, 3.2 d."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:,.3g} d" if seconds < 86400 * 100 else f"{seconds / 86400:,.0f} d"
