"""Memory a layout needs before any activation: weights + gradients + optimizer state + the fixed
allowance (CUDA context, workspaces, NCCL buffers).

These three terms are parameter counts times bytes, sharded as the layout shards them; they do not
depend on the activation or fragmentation terms the memory model estimates. When they alone are
above the whole HBM the layout cannot fit by arithmetic, whatever the estimate of the rest, and a
shipped recipe in that state is named as such (recommend's MEMORY_SHIPPED warning, pitfall.memory_static_over_shipped) instead
of as a doubtful estimate. Issue 34: 0.6.2 ships e.g. llama3_8b pretraining on 2 H100 at TP1 CP2
(8.0B parameters x (2 + 4) bytes unsharded over CP plus 12 bytes / 2 = 89.7 GiB).
"""

from __future__ import annotations

from math import gcd
from typing import Any

from mbridge_launch.planner.memory import ALLOWANCE_GIB, HEADROOM


def static_gib(memory: Any) -> float:
    """Weights + gradients + optimizer state + the fixed allowance, GiB per GPU."""
    return float(memory.weights + memory.gradients + memory.optimizer + ALLOWANCE_GIB)


def cannot_fit_by_arithmetic(memory: Any, hbm_gb: float) -> bool:
    """True when the static memory alone is above the whole HBM: not HEADROOM x HBM, the planner's
    margin, so that a layout within that margin is never said to be impossible."""
    return static_gib(memory) > hbm_gb


def layout_minimum_gpus(layout: Any) -> int:
    """The fewest GPUs the layout's model-parallel sizes allow (data parallel 1): PP x lcm(TP x CP,
    ETP x EP), the dense grid and the expert grid sharing the same ranks (Megatron Core's
    parallel_state builds both from one world)."""
    dense = (layout.tp or 1) * (layout.cp or 1)
    expert = (getattr(layout, "etp", None) or layout.tp or 1) * (layout.ep or 1)
    return (layout.pp or 1) * dense * expert // gcd(dense, expert)


def static_params(memory: Any, hbm_gb: float) -> dict[str, str]:
    """The figures of the arithmetic for a message."""
    return {"weights": f"{memory.weights:.1f}", "gradients": f"{memory.gradients:.1f}",
            "optimizer": f"{memory.optimizer:.1f}", "fixed": f"{ALLOWANCE_GIB:.1f}",
            "static": f"{static_gib(memory):.1f}", "usable": f"{HEADROOM * hbm_gb:.1f}", "hbm": f"{hbm_gb:.0f}"}
