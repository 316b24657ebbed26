"""What the user asked for, validated. Nothing else is assumed."""

from __future__ import annotations

from dataclasses import dataclass, field

from mbridge_launch.base.errors import UserError
from mbridge_launch.plan.overrides import RawOverride

GOALS = ("pretrain", "sft", "lora", "dora")
GOAL_ALIASES = {"peft": "lora", "finetune": "sft", "fine-tune": "sft"}
PRECISIONS = ("bf16", "fp8cs", "fp8mx", "fp8sc", "fp8ds", "nvfp4")
PRECISION_ALIASES = {"fp8_cs": "fp8cs", "mxfp8": "fp8mx", "fp8_blockwise": "fp8sc", "fp8": "fp8cs", "fp4": "nvfp4"}


@dataclass
class Request:
    model: str
    gpus: int | None = None
    gpu_type: str = "h100"
    goal: str = "pretrain"
    seq_length: int | None = None
    benchmark: bool = False
    precision: str | None = None
    dataset: str | None = None
    overrides: list[RawOverride] = field(default_factory=list)
    hf_config: str | None = None
    catalog_version: str | None = None

    @property
    def recipe_mode(self) -> str:
        """Recipe task in the catalog: lora and dora both use the peft recipes."""
        return "peft" if self.goal in ("lora", "dora") else self.goal


def normalize_goal(goal: str) -> str:
    value = GOAL_ALIASES.get(goal.lower(), goal.lower())
    if value not in GOALS:
        raise UserError("arg.choice", flag="--goal", value=goal, choices=", ".join(GOALS + ("peft",)))
    return value


def normalize_precision(precision: str | None) -> str | None:
    if precision is None:
        return None
    value = PRECISION_ALIASES.get(precision.lower(), precision.lower())
    if value not in PRECISIONS:
        raise UserError("arg.choice", flag="--precision", value=precision, choices=", ".join(PRECISIONS))
    return value


def validate_counts(gpus: int | None, seq_length: int | None) -> None:
    from mbridge_launch.planner.inputs import within_size_limit

    if gpus is not None:
        if gpus <= 0:
            raise UserError("recommend.gpus_positive", value=gpus)
        within_size_limit("--gpus", gpus, "world")
    if seq_length is not None:
        if seq_length <= 0:
            raise UserError("recommend.seq_positive", value=seq_length)
        within_size_limit("--seq-length", seq_length, "seq_length")
