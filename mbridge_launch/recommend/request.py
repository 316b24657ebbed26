"""What the user asked for, validated. Nothing else is assumed."""

from __future__ import annotations

from dataclasses import dataclass, field

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge import vocabulary
from mbridge_launch.plan.overrides import RawOverride


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
    scheduler: str = "slurm"  # the only one in scope (recommend/scope.py)
    # the fine-tuning run's starting weights (a Megatron checkpoint directory), or from_scratch
    # when the user says a fine-tuning goal should start from random weights
    pretrained_checkpoint: str | None = None
    from_scratch: bool = False

    @property
    def recipe_mode(self) -> str:
        """Recipe task in the catalog: lora and dora both use the peft recipes."""
        return vocabulary.recipe_task(self.goal)


def normalize_precision(precision: str | None) -> str | None:
    """--precision: None (the recipe's) or the canonical precision of any vocabulary spelling."""
    return None if precision is None else vocabulary.normalize_precision(precision, flag="--precision")


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


PRETRAINED_KEY = "checkpoint.pretrained_checkpoint"


def validate_starting_weights(pretrained: str | None, from_scratch: bool, overrides: list[RawOverride],
                              goal: str) -> None:
    """--pretrained-checkpoint PATH, --from-scratch and a checkpoint.pretrained_checkpoint=PATH
    override each say where the weights come from: two of them contradict each other. PEFT trains
    adapters on frozen pretrained weights (Megatron Bridge 0.6.2 refuses it without them)."""
    if from_scratch and goal in vocabulary.PEFT_GOALS:
        raise UserError("recommend.peft_from_scratch", goal=goal)
    if pretrained is not None and not pretrained.strip():
        raise UserError("recommend.pretrained_empty")
    given = [flag for flag, on in (("--pretrained-checkpoint", pretrained is not None), ("--from-scratch", from_scratch),
                                   (PRETRAINED_KEY, any(o.path == PRETRAINED_KEY for o in overrides))) if on]
    if len(given) > 1:
        raise UserError("recommend.starting_weights_conflict", first=given[0], second=given[1])
