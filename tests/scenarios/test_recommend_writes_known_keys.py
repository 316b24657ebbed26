"""Every override that recommend itself writes is a real setting of the release: each 0.6.2
library recipe with a GPU count and a system the tool knows, asked for at its own count and at
twice it (a resize: recommend writes the layout, batch and recompute changes), gives a Plan whose
every override key names a field of the real ConfigContainer (catalog/config-fields-0.6.2.json),
model.* keys checked against that recipe's own provider class."""

from __future__ import annotations

from shipped_check import goal_of

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.vocabulary import GPU_TYPES
from mbridge_launch.plan.overrides import unknown_override
from mbridge_launch.recommend.build import recommend
from mbridge_launch.recommend.request import Request
from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan

CATALOG = load_catalog("0.6.2")
RECIPES = [r for r in CATALOG.recipes if r.kind == "library" and r.gpus and r.hardware in GPU_TYPES]


def test_every_override_recommend_writes_for_every_shipped_recipe_is_a_known_key():
    plans = refused = 0
    unknown: list[str] = []
    for recipe in RECIPES:
        for gpus in (recipe.gpus, 2 * recipe.gpus):
            request = Request(model=recipe.model, gpus=gpus, gpu_type=recipe.hardware, goal=goal_of(recipe),
                              precision=recipe.precision, seq_length=recipe.seq_length)
            try:
                plan = build_plan(recommend(request), ClusterFlags())
            except UserError:  # no layout at that size, or out of scope: no overrides written
                refused += 1
                continue
            plans += 1
            for override in plan.overrides:
                error = unknown_override(override.key, plan.catalog.version, plan.recipe.name, plan.recipe.kind)
                if error is not None:
                    unknown.append(f"{recipe.name} on {gpus}: {error.render('en')}")
    assert not unknown, "\n".join(unknown[:20])
    # the walk reached the catalog: most requests give a Plan (measured: 556 of 576)
    assert len(RECIPES) >= 250 and plans >= 0.9 * (plans + refused), (plans, refused)
