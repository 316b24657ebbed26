"""A submission's GPU-hours: GPUs x the time limit (the most it can cost). The one implementation:
the plan card, the gate's confirmation, preflight's policy checks and the ledger's per-day usage
all call this (a layer below plan, so that each of them may)."""

from __future__ import annotations

from mbridge_launch.base import slurm_time


def gpu_hours(total_gpus: int, time_limit: str) -> float:
    """GPU-hours of `total_gpus` GPUs held for the Slurm time `time_limit` (inf for UNLIMITED)."""
    return total_gpus * slurm_time.hours(time_limit)
