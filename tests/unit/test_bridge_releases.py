"""The entry command follows the Megatron Bridge release a Plan names: 0.7's run_recipe.py weak-scales
an implicit global batch at another world size (scripts/training/run_recipe.py
`_apply_benchmark_weak_scaling`, skipped when `train.global_batch_size` is an explicit override), so a
0.7 Plan's command writes its batch; a 0.6.2 Plan's command stays as it was."""

from __future__ import annotations

import pytest

import plan_fixtures as pf
from mbridge_launch.knowledge.bridge_releases import explicit_batch_overrides, weak_scales_batch
from mbridge_launch.plan.trainer_args import human_command, trainer_args

pytestmark = pytest.mark.usefixtures("english")


@pytest.mark.parametrize(("release", "expected"), [
    ("0.6.2", False), ("0.6.9", False), ("0.7.0", True), ("0.7.1", True), ("0.7.0rc1", True), ("1.0.0", True),
    (None, False), ("", False), ("main", False),
])
def test_which_releases_weak_scale(release, expected):
    assert weak_scales_batch(release) is expected


def _overrides(args):
    return [a for a in args if "=" in a and not a.startswith("-")]


def test_a_07_benchmark_plan_writes_its_global_batch():
    plan = pf.edit(pf.benchmark_recipe(), **{"catalog.version": "0.7.0"})
    args = trainer_args(plan)
    assert f"train.global_batch_size={plan.parallelism.gbs}" in _overrides(args)
    assert f"train.global_batch_size={plan.parallelism.gbs}" in human_command(plan)


def test_a_062_plan_is_rendered_as_before():
    plan = pf.benchmark_recipe()
    assert plan.catalog.version == "0.6.2"
    assert not [a for a in trainer_args(plan) if a.startswith("train.global_batch_size=")]


def test_a_library_plan_on_07_writes_it_too():
    plan = pf.edit(pf.single_node_h100(), **{"catalog.version": "0.7.1"})
    assert [a for a in trainer_args(plan) if a.startswith("train.global_batch_size=")] == [
        f"train.global_batch_size={plan.parallelism.gbs}"]


def test_the_plans_own_batch_override_is_the_only_one():
    base = pf.edit(pf.benchmark_recipe(), **{"catalog.version": "0.7.0"})
    plan = base.model_copy(update={"overrides": [*base.overrides, pf.override("train.global_batch_size", "64")]})
    written = [a for a in trainer_args(plan) if a.startswith("train.global_batch_size=")]
    assert written == ["train.global_batch_size=64"]


def test_explicit_batch_overrides_directly():
    assert explicit_batch_overrides("0.7.0", 256, set()) == ["train.global_batch_size=256"]
    assert explicit_batch_overrides("0.7.0", 256, {"train.global_batch_size"}) == []
    assert explicit_batch_overrides("0.6.2", 256, set()) == []
