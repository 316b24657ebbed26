"""Which dataset selector a recommendation uses: the user's, checked against the goal, or a
default (mock for pretraining, with a note; a fine-tuning preset for SFT/PEFT, never mock)."""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.knowledge import datasets
from mbridge_launch.recommend.pitfalls import is_vlm

DEFAULT_TEXT_FINETUNE = "squad"
DEFAULT_VLM_FINETUNE = "cord-v2"


def _names(mode: str, modality: str | None = None) -> str:
    return ", ".join(s.name for s in datasets.selectors_for(mode, modality))


def vlm_selectors(goal: str | None = None) -> list[str]:
    """Selectors with images (or either kind, like energon) that `goal` may use."""
    return [s.name for s in datasets.load_datasets().values()
            if s.modality in ("vlm", "any") and (goal is None or s.allows(goal))]


def selector_is_vlm(selector: str) -> bool | None:
    """True for image datasets, False for text-only ones, None when either works (energon)."""
    found = datasets.load_datasets().get(selector)
    if found is None or found.modality == "any":
        return None
    return found.modality == "vlm"


def choose_dataset(goal: str, recipe: Any, requested: str | None, *,
                   default_from: Any = None) -> tuple[str, list[str]]:
    """The selector and its notes. Without --dataset a fine-tuning request takes the selector of
    `default_from` (the recipe shipped for exactly this request when another one stands in for it)
    or else of the chosen recipe: the dataset follows the recipe NVIDIA ships for the request."""
    notes: list[str] = []
    if recipe.kind == "benchmark":
        if requested:
            raise UserError("recommend.benchmark_dataset", dataset=requested)
        return (recipe.dataset or {}).get("selector") or "mock", notes
    finetune = goal != "pretrain"
    selector = requested
    if selector is None:
        if not finetune:
            notes.append(t("card.dataset_mock_note"))
            return "mock", notes
        default = ((default_from or recipe).dataset or {}).get("selector")
        known = datasets.load_datasets()
        if default in known and default != "mock" and known[default].allows(goal):
            selector = default
        else:
            selector = DEFAULT_VLM_FINETUNE if is_vlm(recipe) else DEFAULT_TEXT_FINETUNE
    known = datasets.load_datasets()
    if selector not in known:
        raise UserError("recommend.dataset_unknown", dataset=selector, choices=", ".join(known))
    if selector == "mock" and finetune:
        raise UserError("recommend.mock_with_finetune", goal=goal, choices=_names(goal))
    if not known[selector].allows(goal):
        raise UserError("recommend.dataset_mode", dataset=selector, goal=goal, choices=_names(goal))
    if selector == "mock":
        notes.append(t("card.dataset_mock_note"))
    return selector, notes
