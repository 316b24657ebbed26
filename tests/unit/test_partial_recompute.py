"""Full recompute of only N layers per pipeline chunk (Megatron's recompute_method=block): rules,
memory, step time, the search's recompute levels, and how plans and recommendations carry it."""

from __future__ import annotations

import pytest

from cli_helpers import recommend_answer as recommend_json
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.memory import estimate_memory
from mbridge_launch.planner.rules import Layout, check_layout, chunk_layers, evolve, recompute_share
from mbridge_launch.planner.search import Options, recompute_levels, search
from mbridge_launch.planner.throughput import estimate_step
from mbridge_launch.recommend.plan_file import layout_overrides

GB300, H100 = get_hardware("gb300"), get_hardware("h100")
LLAMA70 = load_arch("llama3_70b")
# 80 layers at PP=4 VP=5: 20 chunks of 4 layers
BASE = Layout(tp=4, pp=4, vp=5, sp=True, mbs=1, gbs=128, seq_length=8192, world=64)


def test_share_of_recomputed_layers():
    assert chunk_layers(80, BASE) == 4
    assert recompute_share(80, BASE) == 0.0
    assert recompute_share(80, evolve(BASE, recompute="full")) == 1.0
    assert recompute_share(80, evolve(BASE, recompute="full", recompute_layers=1)) == 0.25
    assert recompute_share(80, evolve(BASE, recompute="full", recompute_layers=3)) == 0.75


def test_rules_name_the_valid_layer_counts():
    def codes(layout):
        return [(v.code, v.message("en")) for v in check_layout(layout, LLAMA70, H100) if v.severity == "error"]

    assert codes(evolve(BASE, recompute="full", recompute_layers=4)) == []
    [(code, message)] = codes(evolve(BASE, recompute="full", recompute_layers=5))
    assert code == "RULE_RECOMPUTE_LAYERS"
    assert "exceeds the 4 layers of a pipeline chunk of llama3_70b at PP=4, VP=5" in message and "1, 2, 3, 4" in message
    [(code, message)] = codes(evolve(BASE, recompute="selective", recompute_layers=2))
    assert code == "RULE_RECOMPUTE_LAYERS" and "needs full recompute (recompute is 'selective')" in message


def test_memory_lies_between_no_and_full_recompute():
    def act(**kw):
        return estimate_memory(LLAMA70, evolve(BASE, **kw), 80.0, precision="fp8cs").activations

    none, full = act(recompute="none"), act(recompute="full")
    quarters = [act(recompute="full", recompute_layers=n) for n in (1, 2, 3)]
    assert none > quarters[0] > quarters[1] > quarters[2] > full
    # share s of each chunk keeps only its layer inputs, the rest everything, plus one layer's
    # working set while recomputing: act(s) = s x inputs + (1 - s) x everything + working, a
    # straight line in s (on the first stage, which holds the most micro-batches in flight)
    assert quarters[0] - quarters[1] == pytest.approx(quarters[1] - quarters[2])


def test_step_time_pays_only_for_the_recomputed_share():
    one_stage = Layout(tp=8, sp=True, mbs=1, gbs=64, seq_length=8192, world=64)  # 80 layers, one chunk

    def attention(**kw):
        return estimate_step(LLAMA70, H100, evolve(one_stage, **kw), "fp8cs").breakdown["attention"]

    plain = attention(recompute="none")
    assert attention(recompute="full") == pytest.approx(plain * 4 / 3)  # the forward again: +1/3
    assert attention(recompute="full", recompute_layers=20) == pytest.approx(plain * (1 + 0.25 / 3))


def test_search_tries_partial_levels_before_every_layer():
    assert recompute_levels(["none", "selective", "full"], 80, partial=True) == [
        ("none", None), ("selective", None), ("full", 20), ("full", 40), ("full", 60), ("full", None)]
    assert recompute_levels(["full"], 80, partial=False) == [("full", None)]
    assert recompute_levels(["full"], 1, partial=True) == [("full", None)]
    # Llama 3 70B at 8k, MBS 2, FSDP over 64 GB300: nothing lighter than full recompute fits, and a
    # quarter of the layers is enough (the published run does not recompute every layer either)
    found = search(LLAMA70, GB300, 64, gbs=256, seq_length=8192, precision="fp8cs",
                   options=Options(mbs=2, fsdp=True, tp=1, cp=1), top=1)
    best = found.best.layout
    assert (best.tp, best.pp, best.fsdp, best.recompute) == (1, 1, True, "full")
    assert best.recompute_layers == 20 and found.best.fits


def test_plan_overrides_use_the_block_method():
    partial = layout_overrides(evolve(BASE, recompute="full", recompute_layers=3))
    assert {"model.recompute_granularity=full", "model.recompute_method=block",
            "model.recompute_num_layers=3"} <= set(partial)
    every = layout_overrides(evolve(BASE, recompute="full"))
    assert {"model.recompute_method=uniform", "model.recompute_num_layers=1"} <= set(every)


def test_recommend_reads_the_users_block_recompute(capsys):
    data = recommend_json(capsys, "--model", "llama3_70b", "--gpus", "64", "model.recompute_granularity=full",
                          "model.recompute_method=block", "model.recompute_num_layers=2")
    assert data["parallelism"]["recompute"] == "full" and data["parallelism"]["recompute_layers"] == 2
    uniform = recommend_json(capsys, "--model", "llama3_70b", "--gpus", "64", "model.recompute_granularity=full")
    assert uniform["parallelism"]["recompute_layers"] is None


def test_recommend_refuses_a_bad_layer_count(capsys):
    from mbridge_launch.cli.main import main

    code = main(["recommend", "--model", "llama3_70b", "--gpus", "64", "model.recompute_granularity=full",
                 "model.recompute_method=block", "model.recompute_num_layers=some", "--lang", "en"])
    err = capsys.readouterr().err
    assert code == 2 and "model.recompute_num_layers needs a positive integer, got 'some'" in err


def test_a_planner_picked_block_recompute_is_a_recorded_change():
    from types import SimpleNamespace

    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.recommend import changes

    recipe = load_catalog().get("llama3_70b_pretrain_config")  # no recompute of its own
    assert recipe is not None and not recipe.features.get("recompute_granularity")
    rec = SimpleNamespace(recipe=recipe, changes=[], request=SimpleNamespace(overrides=[]))
    before = Layout(tp=4, pp=4, vp=5, sp=True, mbs=1, gbs=128, seq_length=8192, world=64)
    changes._record_recompute(rec, before, evolve(before, recompute="full", recompute_layers=2), set())
    recorded = {c.field: c.to for c in rec.changes}
    assert recorded == {"model.recompute_granularity": "full", "model.recompute_method": "block",
                        "model.recompute_num_layers": 2}
    # from every layer to part of them: only the method and the count change
    rec.changes.clear()
    every = evolve(before, recompute="full")
    changes._record_recompute(rec, every, evolve(every, recompute_layers=3), set())
    assert {c.field: (c.from_, c.to) for c in rec.changes} == {
        "model.recompute_method": (None, "block"), "model.recompute_num_layers": (None, 3)}
