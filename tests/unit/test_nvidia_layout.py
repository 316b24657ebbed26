"""NVIDIA's tuned layout (planner.nvidia_layout): the 0.6.2 benchmark recipe of a plan request,
read from the shipped catalog and estimated apart from the ranked candidates."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.measured import shipped_for
from mbridge_launch.planner.nvidia_layout import (
    CATALOG_VERSION,
    benchmark_recipe,
    nvidia_option,
    ranked_position,
    recipe_layout,
    shipped_recipes,
)
from mbridge_launch.planner.search import estimate_layout, search

H100 = get_hardware("h100")


@pytest.fixture(scope="module")
def recipes():
    return list(load_catalog(CATALOG_VERSION).recipes)


def test_the_h100_fp8_benchmark_recipe_of_llama3_70b_is_found_with_its_stored_layout(recipes):
    recipe = benchmark_recipe(recipes, "llama3_70b", "h100", 64, "fp8cs", "pretrain")
    assert recipe is not None and recipe.name == "llama3_70b_pretrain_64gpu_h100_fp8cs_config"
    assert recipe.kind == "benchmark"
    layout = recipe_layout(recipe, load_arch("llama3_70b"))
    # the catalog stores TP4 PP8 VP5 CP1 MBS1 GBS256 at 8k for it, distributed optimizer
    assert (layout.tp, layout.pp, layout.vp, layout.cp, layout.ep, layout.mbs) == (4, 8, 5, 1, 1, 1)
    assert (layout.tp, layout.pp, layout.vp, layout.mbs) == (recipe.tp, recipe.pp, recipe.vp, recipe.mbs)
    assert (layout.gbs, layout.seq_length, layout.world) == (recipe.gbs, recipe.seq_length, 64)
    assert not layout.fsdp and layout.recompute == "none" and layout.sp


def test_no_recipe_for_another_gpu_count_precision_system_or_task(recipes):
    assert benchmark_recipe(recipes, "llama3_70b", "h100", 63, "fp8cs", "pretrain") is None
    assert benchmark_recipe(recipes, "llama3_70b", "h100", 64, "nvfp4", "pretrain") is None
    assert benchmark_recipe(recipes, "llama3_70b", "h200", 64, "fp8cs", "pretrain") is None  # no H200 benchmarks
    assert benchmark_recipe(recipes, "llama3_70b", "vr200", 64, "fp8cs", "pretrain") is None  # vr200: bf16, fp8mx, nvfp4
    # the 8-GPU H100 recipe is a PEFT one: a pretraining plan has none, a LoRA plan gets it
    assert benchmark_recipe(recipes, "llama3_70b", "h100", 8, "bf16", "pretrain") is None
    lora = benchmark_recipe(recipes, "llama3_70b", "h100", 8, "bf16", "lora")
    assert lora is not None and lora.mode == "peft"


def test_recipe_settings_fsdp_and_block_recompute_are_read(recipes):
    fsdp = benchmark_recipe(recipes, "llama3_70b", "gb200", 32, "bf16", "pretrain")
    assert fsdp is not None and fsdp.features["use_megatron_fsdp"] is True
    assert recipe_layout(fsdp).fsdp
    peft = benchmark_recipe(recipes, "llama3_70b", "h100", 8, "bf16", "lora")
    assert peft.features["recompute_granularity"] == "full" and peft.features["recompute_method"] == "block"
    layout = recipe_layout(peft)
    assert layout.recompute == "full" and layout.recompute_layers == peft.features["recompute_num_layers"]


def test_the_option_carries_our_estimate_and_its_place_in_the_ranked_list(recipes):
    arch = load_arch("llama3_70b")
    ranked = search(arch, H100, 64, gbs=256, seq_length=8192, precision="fp8cs", top=10).candidates
    option = nvidia_option(recipes, "llama3_70b", arch, H100, 64, precision="fp8cs", goal="pretrain", gbs=256,
                           seq_length=8192, candidates=ranked)
    assert option is not None and not option.rule_errors
    # estimated as `estimate` would, corrected by the published rows of this configuration
    same = estimate_layout(option.layout, arch, H100, precision="fp8cs",
                           measured=shipped_for("llama3_70b", "h100", 64, "fp8cs"))
    assert same.twin is not None
    assert option.estimate.tokens_per_sec_per_gpu == pytest.approx(same.tokens_per_sec_per_gpu)
    assert option.fits == same.fits and option.accepted == same.fits
    assert option.rank is not None and option.rank == ranked_position(option.layout, ranked)
    if option.rank:
        listed = ranked[option.rank - 1].layout
        assert (listed.tp, listed.pp, listed.cp, listed.ep, listed.fsdp) == (4, 8, 1, 1, False)
    # absent from a list that does not hold its grid
    others = [c for c in ranked if (c.layout.tp, c.layout.pp) != (4, 8)]
    assert ranked_position(option.layout, others) is None


def test_our_rules_and_memory_model_may_reject_it(recipes):
    arch = load_arch("llama3_70b")
    # GBS 255 is no multiple of MBS x DP = 2: a rule error, shown, never silently fixed
    option = nvidia_option(recipes, "llama3_70b", arch, H100, 64, precision="fp8cs", goal="pretrain", gbs=255,
                           seq_length=8192)
    assert "RULE_GBS" in {v.code for v in option.rule_errors} and not option.accepted
    # at a 128k sequence without CP its activations do not fit in 80 GiB
    long = nvidia_option(recipes, "llama3_70b", arch, H100, 64, precision="fp8cs", goal="pretrain", gbs=256,
                         seq_length=131072)
    assert not long.fits and not long.accepted
    assert long.layout.seq_length == 131072 and long.estimate.memory.total > 0.95 * 80


def test_shipped_recipes_are_the_catalog_of_the_version():
    assert any(r.kind == "benchmark" for r in shipped_recipes())


def _plan(capsys, *argv):
    code = main(["plan", *argv])
    out, _ = capsys.readouterr()
    return code, out


def test_plan_shows_nvidia_layout_apart_in_json_and_text(capsys):
    argv = ("--model", "llama3_70b", "--gpus", "64", "--gpu-type", "h100", "--precision", "fp8cs", "--gbs", "256",
            "--seq-length", "8192", "--top", "3")
    code, out = _plan(capsys, *argv, "--format", "json")
    assert code == 0
    data = json.loads(out)
    nv = data["nvidia_layout"]
    assert nv["recipe"] == "llama3_70b_pretrain_64gpu_h100_fp8cs_config"
    assert (nv["tp"], nv["pp"], nv["vp"], nv["cp"]) == (4, 8, 5, 1) and nv["gbs"] == 256
    assert {"tokens_per_sec_per_gpu", "fits", "accepted", "rule_errors", "in_ranked_list"} <= set(nv)
    # it is not one of the ranked candidates: the list is the search's alone
    assert len(data["candidates"]) == 3
    rank = nv["in_ranked_list"]
    assert rank is None or (data["candidates"][rank - 1]["tp"], data["candidates"][rank - 1]["pp"]) == (4, 8)
    code, text = _plan(capsys, *argv)
    assert code == 0
    head = "NVIDIA's tuned layout, benchmark recipe llama3_70b_pretrain_64gpu_h100_fp8cs_config"
    assert head in text and text.index(head) > text.index("#3 ")  # after the ranked list


def test_plan_without_a_benchmark_recipe_says_nothing_of_it(capsys):
    code, out = _plan(capsys, "--model", "llama3_8b", "--gpus", "3", "--gpu-type", "h100", "--gbs", "3",
                      "--seq-length", "4096", "--top", "2", "--format", "json")
    assert code == 0 and json.loads(out)["nvidia_layout"] is None
