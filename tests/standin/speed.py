"""The stand-in's step time and GPU memory as functions of the layout, and Megatron Bridge's
memory report line.

`MBL_STANDIN_SPEED_MODEL` (unset: the step sleeps MBL_STANDIN_ITER_SECONDS and logs the time it
measured, as before):
  layout-v1          the step time is step_seconds(config, world_size): tables the planner does
                     not know (below), so the layout it ranks first is not always the fastest.
  favour:K=V,K=V...  layout-v1, and a layout matching every K=V is FAVOUR_FACTOR faster; K is
                     tp, pp, cp, vp, ep, mbs, gbs or recompute (none/selective/full), e.g.
                     `favour:tp=2,pp=1` (an e2e test makes the planner's second choice the
                     fastest this way, without hard-coding the answer).
With a model, each iteration sleeps that time and the log line reports it exactly (what a GPU
would take; a loaded test machine's scheduling jitter does not reach the measurement).

The memory report (Bridge prints it by default after the first logged iterations, see
train.py) gives peak_memory_gib(config, world_size): weights and optimizer shrink with TP x PP,
activations grow with MBS and sequence and shrink with TP x CP and recompute.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

SPEED_MODELS = ("layout-v1", "favour:")
# relative cost of a step by layout (1.0 = the reference); TP 2 is the sweet spot here, where a
# FLOPs-and-bandwidth model usually prefers TP 1 or the largest TP that fits
TP_COST = {1: 1.25, 2: 1.0, 4: 1.12, 8: 1.4}
TP_COST_OTHER = 1.5
MBS_COST = {1: 1.0, 2: 0.92, 4: 0.96}
RECOMPUTE_COST = {"none": 1.0, "selective": 1.06, "full": 1.33}
PP_BUBBLE = 0.12  # per extra stage, divided by the virtual stages
CP_COST = 0.10  # per extra rank
EP_COST = 0.05
FAVOUR_FACTOR = 0.6
MAX_STEP_S = 0.05  # ms = 50 x P / (P + 1.5): P = 1 is 20 ms; never reaches 50 ms
RECOMPUTE_MEMORY = {"none": 1.0, "selective": 0.6, "full": 0.25}


def _int(values: Mapping[str, Any], key: str, default: int = 1) -> int:
    try:
        value = int(values.get(key) or default)
    except (TypeError, ValueError):
        return default
    return value if value >= 1 else default


def layout(values: Mapping[str, Any]) -> dict[str, Any]:
    """The layout fields of a resolved stand-in config (config.parse's flat dict)."""
    recompute = values.get("model.recompute_granularity") or "none"
    return {
        "tp": _int(values, "model.tensor_model_parallel_size"),
        "pp": _int(values, "model.pipeline_model_parallel_size"),
        "cp": _int(values, "model.context_parallel_size"),
        "vp": _int(values, "model.virtual_pipeline_model_parallel_size"),
        "ep": _int(values, "model.expert_model_parallel_size"),
        "mbs": _int(values, "train.micro_batch_size"),
        "gbs": _int(values, "train.global_batch_size", 8),
        "seq": _int(values, "model.seq_length", 4096),
        "recompute": str(recompute).lower() if str(recompute).lower() in RECOMPUTE_COST else "none",
    }


def _favoured(spec: str, lay: Mapping[str, Any]) -> bool:
    wanted = {}
    for part in spec.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            wanted[key.strip()] = value.strip().lower()
    return bool(wanted) and all(str(lay.get(k, "")).lower() == v for k, v in wanted.items())


def known_model(name: Optional[str]) -> bool:
    return bool(name) and (name == "layout-v1" or str(name).startswith("favour:"))


def step_cost(values: Mapping[str, Any], world_size: int, model: str = "layout-v1") -> float:
    """The relative cost P of one step (larger is slower)."""
    lay = layout(values)
    cost = TP_COST.get(lay["tp"], TP_COST_OTHER)
    cost *= 1 + PP_BUBBLE * (lay["pp"] - 1) / lay["vp"]
    cost *= 1 + CP_COST * (lay["cp"] - 1)
    cost *= 1 + EP_COST * (lay["ep"] - 1)
    cost *= MBS_COST.get(lay["mbs"], 1.0)
    cost *= RECOMPUTE_COST[lay["recompute"]]
    work = lay["gbs"] * lay["seq"] / (max(1, world_size) * 8 * 4096)
    cost *= min(4.0, max(0.25, work)) ** 0.25  # the same for every trial of one tune
    if model.startswith("favour:") and _favoured(model[len("favour:"):], lay):
        cost *= FAVOUR_FACTOR
    return cost


def step_seconds(values: Mapping[str, Any], world_size: int, model: str = "layout-v1") -> float:
    """The step time of this layout in seconds (below MAX_STEP_S)."""
    cost = step_cost(values, world_size, model)
    return round(MAX_STEP_S * cost / (cost + 1.5), 6)


def peak_memory_gib(values: Mapping[str, Any], world_size: int) -> float:  # noqa: ARG001 - same call as step_seconds
    """Peak allocated memory of rank 0 (pipeline stage 0 holds the most activations), GiB."""
    lay = layout(values)
    static = 2.0 + 60.0 / (lay["tp"] * lay["pp"])
    activations = 8.0 * lay["mbs"] * lay["seq"] / 4096 / (lay["tp"] * lay["cp"]) * RECOMPUTE_MEMORY[lay["recompute"]]
    return round(static + activations, 3)


def _five_digits(gigabytes: float) -> float:
    """Bridge's report_memory rounding (5 significant digits)."""
    if gigabytes == 0:
        return gigabytes
    return round(gigabytes, -int(math.floor(math.log10(abs(gigabytes)))) + 4)


def memory_line(rank: int, iteration: int, peak_gib: float) -> str:
    """Megatron Bridge's training_log memory report (train_utils.report_memory's default
    MEMORY_KEYS, bytes shown as GB = 1e9 bytes), printed as `[Rank R] (after N iterations) ...`."""
    peak = peak_gib * 2**30 / 1e9
    stats = {
        "mem-allocated-gigabytes": 0.8 * peak, "mem-active-gigabytes": 0.8 * peak,
        "mem-inactive-gigabytes": 0.02 * peak, "mem-reserved-gigabytes": 1.1 * peak,
        "mem-max-allocated-gigabytes": peak, "mem-max-active-gigabytes": peak,
        "mem-max-inactive-gigabytes": 0.05 * peak, "mem-max-reserved-gigabytes": 1.15 * peak,
    }
    text = f"(after {iteration} iterations) memory (GB)"
    for name, value in stats.items():
        text += f" | {name}: {_five_digits(value)}"
    text += " | mem-alloc-retires: 0 | mem-allocated-count: 1234"
    return f"[Rank {rank}] {text}"
