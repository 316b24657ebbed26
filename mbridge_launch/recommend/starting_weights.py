"""Where a fine-tuning run's weights come from.

SFT, LoRA and DoRA start from a pretrained model: Megatron Bridge 0.6.2 reads it from
`checkpoint.pretrained_checkpoint`, a Megatron checkpoint directory (a Hugging Face model is
converted first: `python examples/conversion/convert_checkpoints.py import --hf-model ID
--megatron-path DIR`, or `AutoBridge.import_ckpt(ID, DIR)`). Without it PEFT stops at the
configuration's validation ("PEFT requires a pretrained checkpoint path"), after the job waited in
the queue, and SFT silently trains from random weights. So `recommend` writes the path into the
Plan, or, with --from-scratch, the explicit statement that the run starts from random weights; and
a fine-tuning request with neither gets one line saying what is missing and how to give it.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.knowledge.vocabulary import FINETUNE_GOALS
from mbridge_launch.recommend.request import PRETRAINED_KEY

CODE_MISSING = "PRETRAINED_CHECKPOINT_MISSING"


def is_finetune(request: Any) -> bool:
    return request.goal in FINETUNE_GOALS


def plan_fields(request: Any) -> dict[str, Any]:
    """The Plan's checkpoint fields for the request's starting weights."""
    if request.pretrained_checkpoint:
        return {"pretrained_checkpoint": request.pretrained_checkpoint}
    if request.from_scratch and is_finetune(request):
        return {"from_scratch": msg("plan.from_scratch.flag", goal=request.goal)}
    return {}


def starting_weights_warnings(rec: Any) -> list[tuple[str, Msg]]:
    """One warning when a fine-tuning request names no starting weights (the Plan is still written)."""
    request = rec.request
    if not is_finetune(request) or request.pretrained_checkpoint or request.from_scratch:
        return []
    if any(o.path == PRETRAINED_KEY for o in request.overrides):
        return []
    return [(CODE_MISSING, msg("pitfall.pretrained_checkpoint_missing", goal=request.goal))]
