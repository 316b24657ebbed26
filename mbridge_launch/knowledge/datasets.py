"""Dataset selectors of run_recipe.py (catalog/datasets.yaml): the modes each allows, the
fields each needs, text or VLM, and the Hugging Face dataset of each preset."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.vocabulary import goal_or_none


@dataclass(frozen=True)
class DatasetSelector:
    name: str
    modes: tuple[str, ...]
    modality: str  # text | vlm | any
    kind: str  # synthetic | local | hf
    required: tuple[str, ...] = ()
    hf_dataset_id: str | None = None
    hf_subset: str | None = None
    hf_split: str | None = None
    needs_recipe_dataset: str | None = None
    description: str = ""
    description_zh: str = ""

    def allows(self, mode: str) -> bool:
        return normalize_mode(mode) in self.modes

    def describe(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import current_lang

        return self.description_zh if (lang or current_lang()) == "zh" and self.description_zh else self.description


def normalize_mode(mode: str) -> str:
    """A goal as the selectors' modes name it (run_recipe.py's: peft means lora): any spelling of
    the vocabulary; an unknown word is left as it is (no selector allows it)."""
    return goal_or_none(mode) or mode


@lru_cache(maxsize=1)
def load_datasets() -> dict[str, DatasetSelector]:
    import yaml

    from mbridge_launch.base.resources import catalog_dir

    path = catalog_dir() / "datasets.yaml"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as handle:
        data: dict[str, Any] = yaml.load(handle, Loader=loader) or {}
    selectors: dict[str, DatasetSelector] = {}
    for name, entry in (data.get("selectors") or {}).items():
        selectors[name] = DatasetSelector(
            name=name,
            modes=tuple(entry.get("modes") or ()),
            modality=entry.get("modality", "text"),
            kind=entry.get("kind", "hf"),
            required=tuple(entry.get("required") or ()),
            hf_dataset_id=entry.get("hf_dataset_id"),
            hf_subset=entry.get("hf_subset"),
            hf_split=entry.get("hf_split"),
            needs_recipe_dataset=entry.get("needs_recipe_dataset"),
            description=entry.get("description", ""),
            description_zh=entry.get("description_zh", ""),
        )
    return selectors


def get_dataset(selector: str) -> DatasetSelector:
    selectors = load_datasets()
    if selector in selectors:
        return selectors[selector]
    close = difflib.get_close_matches(selector, list(selectors), n=3, cutoff=0.5)
    raise UserError("catalog.dataset.unknown", selector=selector, choices=", ".join(close or selectors))


def allowed_modes(selector: str) -> tuple[str, ...]:
    return get_dataset(selector).modes


def selectors_for(mode: str, modality: str | None = None) -> list[DatasetSelector]:
    """Selectors that allow `mode` (and suit `modality`, text or vlm, when given)."""
    wanted = normalize_mode(mode)
    return [
        s for s in load_datasets().values()
        if wanted in s.modes and (modality is None or s.modality in (modality, "any"))
    ]


def check_dataset_mode(selector: str, mode: str) -> DatasetSelector:
    """The selector, or UserError when it does not allow the mode (mock with SFT, ...)."""
    found = get_dataset(selector)
    if not found.allows(mode):
        raise UserError(
            "catalog.dataset.mode", selector=selector, mode=normalize_mode(mode), modes=", ".join(found.modes),
            choices=", ".join(s.name for s in selectors_for(mode)),
        )
    return found
