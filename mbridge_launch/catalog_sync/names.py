"""Parse recipe function names.

Canonical: `<model>_<task>_<N>gpu_<hw>_<precision>[_<variant>]_config`, task in pretrain, sft,
peft. A few exported canonical functions do not follow it (`nemotron_3_super_pretrain_config`);
they still parse as `<model>_<task>[_<variant>]_config`, without GPU count, hardware or precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mbridge_launch.knowledge.vocabulary import PRECISIONS, RECIPE_HARDWARE, RECIPE_TASKS

_CANONICAL = re.compile(
    rf"^(?P<model>.+?)_(?P<task>{'|'.join(RECIPE_TASKS)})_(?P<gpus>\d+)gpu_(?P<hardware>{'|'.join(RECIPE_HARDWARE)})"
    rf"_(?P<precision>{'|'.join(PRECISIONS)})(?:_(?P<variant>.+))?_config$"
)
_LOOSE = re.compile(rf"^(?P<model>.+?)_(?P<task>{'|'.join(RECIPE_TASKS)})(?:_(?P<variant>.+))?_config$")


@dataclass(frozen=True)
class RecipeName:
    model: str | None
    mode: str | None
    gpus: int | None
    hardware: str | None
    precision: str | None
    variant: str | None
    regular: bool  # follows the canonical pattern


def parse_recipe_name(name: str) -> RecipeName:
    match = _CANONICAL.match(name)
    if match:
        return RecipeName(
            model=match["model"], mode=match["task"], gpus=int(match["gpus"]), hardware=match["hardware"],
            precision=match["precision"], variant=match["variant"], regular=True,
        )
    match = _LOOSE.match(name)
    if match:
        return RecipeName(match["model"], match["task"], None, None, None, match["variant"], regular=False)
    return RecipeName(None, None, None, None, None, None, regular=False)
