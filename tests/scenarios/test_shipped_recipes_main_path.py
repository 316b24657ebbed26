"""NVIDIA's shipped layouts are never refused: every 0.6.2 library recipe with a GPU count and a
system the tool knows, asked for at that count and system, is recommended as it ships (or, where
Megatron Core itself would stop at its layout, refitted with a warning naming the rule), and
preflight accepts the Plan while it is unchanged (a memory estimate above HBM is a warning)."""

from __future__ import annotations

import pytest
from shipped_check import REFUSED, check

from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.vocabulary import GPU_TYPES

RECIPES = [r for r in load_catalog().recipes if r.kind == "library" and r.gpus and r.hardware in GPU_TYPES]


def test_the_catalog_has_the_shipped_recipes_this_test_walks():
    assert len(RECIPES) >= 250


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.name for r in RECIPES])
def test_shipped_recipe_at_its_own_count_and_system_is_not_refused(recipe, tmp_path):
    verdict, detail = check(recipe, tmp_path)
    assert verdict not in REFUSED, f"{verdict}: {detail}"
    if verdict == "another recipe selected":
        # only a named variant (muon, deterministic, energon, ...) is out of a request's reach:
        # recommend has no flag that names a recipe (said in benchmarks/RESULTS.md)
        assert recipe.variant, f"{recipe.name} is not a variant, yet {detail} was selected for its request"
