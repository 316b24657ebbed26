"""Every model of the shipped catalog is plannable at its recipe's own size (issue 34, part 1).

Over the whole recipe catalog (catalog/megatron-bridge-0.6.2.json), in process (seconds, not a
subprocess per recipe): `plan` at each library recipe's GPU count, system, sequence length and
goal answers with layouts, or refuses with a named rule (does not fit, grid) - never with a
missing architecture field. Diffusion and template models get their own one-line refusal; an HF
id outside the catalog is read from the local Hugging Face cache; every recompute module a
shipped recipe uses is accepted by `estimate` for a model of that recipe.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from mbridge_launch.base.resources import catalog_yaml
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.models import TEMPLATE_MODELS, is_diffusion

ROOT = Path(__file__).resolve().parents[2]
RECIPES = json.loads((ROOT / "catalog" / "megatron-bridge-0.6.2.json").read_text())["recipes"]
LIBRARY = [r for r in RECIPES if r["kind"] == "library" and not r.get("raises_not_implemented")]
# Missing on purpose, each with the reason the architecture is not in catalog/models.yaml
NO_PUBLISHED_ARCH = {
    "nemotron_3_ultra": "published: 108 layers, hidden 8192, 512 experts (top 22), latent 2048; "
                        "no published heads, Mamba sizes, layer pattern or expert width",
}
# What every missing-architecture refusal says (models.no_arch, models.incomplete)
MISSING_ARCH_TEXT = ("is not in catalog/models.yaml", "the catalog does not know")


def _gpus(recipe: dict) -> int:
    """The recipe's GPU count, else the smallest grid its parallel sizes need (the few recipes
    that name no GPU count: their sizes are all the catalog records)."""
    if recipe["gpus"]:
        return int(recipe["gpus"])
    tp = recipe["tensor_model_parallel_size"] or 1
    pp = recipe["pipeline_model_parallel_size"] or 1
    cp = recipe["context_parallel_size"] or 1
    ep = recipe["expert_model_parallel_size"] or 1
    etp = recipe["expert_tensor_parallel_size"] or tp
    dense, expert = tp * pp * cp, etp * ep * pp
    return dense * expert // math.gcd(dense, expert)


def _goal(recipe: dict) -> str:
    return (recipe["peft_scheme"] or "lora") if recipe["mode"] == "peft" else recipe["mode"]


def _plan_args(recipe: dict) -> list[str]:
    args = ["plan", "--model", recipe["model"], "--gpus", str(_gpus(recipe)),
            "--gpu-type", recipe["hardware"] or "h100", "--goal", _goal(recipe), "--format", "json"]
    if recipe["seq_length"]:
        args += ["--seq-length", str(recipe["seq_length"])]
    return args


def _run(capsys, args: list[str]) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


PLANNABLE = [r for r in LIBRARY if not is_diffusion(r["model"]) and r["model"] not in TEMPLATE_MODELS]


def _recipe_param(recipe: dict):
    marks = ()
    if recipe["model"] in NO_PUBLISHED_ARCH:
        marks = (pytest.mark.xfail(strict=True, reason=NO_PUBLISHED_ARCH[recipe["model"]]),)
    return pytest.param(recipe, id=recipe["name"], marks=marks)


def test_the_catalog_has_the_models_the_issue_named():
    """The loop below is over the real catalog: its size is what the issue counted from."""
    models = {r["model"] for r in PLANNABLE}
    assert len(models) >= 90, len(models)
    assert {"nemotronh_8b", "gemma2_27b", "deepseek_v4_pro", "kimi_k25_vl"} <= models


@pytest.mark.parametrize("recipe", [_recipe_param(r) for r in PLANNABLE])
def test_plan_answers_at_the_recipes_own_size(capsys, recipe):
    rc, out, err = _run(capsys, _plan_args(recipe))
    assert not any(text in err for text in MISSING_ARCH_TEXT), err
    assert rc in (0, 3), (rc, err)
    if rc == 0:
        assert json.loads(out)["candidates"], out
    else:  # refused by a named rule of the planner (memory, grid, ...), with its reason
        assert "RULE_" in err, err


def test_every_catalog_architecture_names_its_sources():
    for token, entry in catalog_yaml("models.yaml").items():
        assert entry.get("sources"), token


@pytest.mark.parametrize("model", sorted({r["model"] for r in LIBRARY if is_diffusion(r["model"])}))
def test_a_diffusion_model_gets_one_line_that_the_planner_does_not_cover_it(capsys, model):
    rc, _out, err = _run(capsys, ["plan", "--model", model, "--gpus", "8"])
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert "diffusion model" in lines[0] and model in lines[0]
    assert not any(text in err for text in MISSING_ARCH_TEXT)


def test_the_template_gpt_recipe_says_it_has_no_architecture_of_its_own(capsys):
    rc, _out, err = _run(capsys, ["plan", "--model", "vanilla_gpt", "--gpus", "1"])
    assert rc == 2 and "no architecture of its own" in err and "--hf-config" in err


LLAMA_LIKE = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 16,
              "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
              "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 4096}


def _hf_cache(home: Path, hf_id: str, config: dict) -> Path:
    org, name = hf_id.split("/")
    snap = home / "hub" / f"models--{org}--{name}" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    return snap / "config.json"


def test_an_hf_id_outside_the_catalog_is_planned_from_the_local_hf_cache(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    _hf_cache(tmp_path, "TinyLlama/TinyLlama-1.1B-intermediate", LLAMA_LIKE)
    rc, out, err = _run(capsys, ["plan", "--model", "TinyLlama/TinyLlama-1.1B-intermediate", "--gpus", "8",
                                 "--format", "json"])
    assert rc == 0, err
    assert json.loads(out)["candidates"]


def test_without_a_cached_config_the_error_says_how_to_give_it(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    rc, _out, err = _run(capsys, ["plan", "--model", "TinyLlama/TinyLlama-1.1B-intermediate", "--gpus", "8"])
    assert rc == 2 and "--hf-config" in err and "Traceback" not in err


def test_a_catalog_model_without_architecture_is_read_from_the_cache_when_there(capsys, tmp_path, monkeypatch):
    """Nemotron 3 Ultra: no published sizes in the catalog; a user who downloaded its config.json
    plans it (the values here are a stand-in config, not Ultra's)."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    _hf_cache(tmp_path, "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", LLAMA_LIKE)
    rc, out, err = _run(capsys, ["plan", "--model", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "--gpus", "8",
                                 "--format", "json"])
    assert rc == 0, err
    assert json.loads(out)["candidates"]


def _modules_in_recipes() -> dict[str, list[dict]]:
    used: dict[str, list[dict]] = defaultdict(list)
    for recipe in RECIPES:
        for module in (recipe.get("features") or {}).get("recompute_modules") or ():
            used[module].append(recipe)
    return used


MODULES = _modules_in_recipes()


def test_the_recipes_use_the_modules_the_issue_names():
    assert {"mla_up_proj", "moe_act", "mhc"} <= set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_recompute_module_a_shipped_recipe_uses_is_accepted(capsys, module):
    """estimate with the module alone, for each model whose shipped recipe uses it, at the recipe's
    own layout: estimated (exit 0) or judged on memory (exit 3), never refused as input (exit 2)."""
    known = set(catalog_yaml("models.yaml"))
    checked = set()
    for recipe in MODULES[module]:
        model = recipe["model"]
        if model in checked or model not in known:
            continue
        checked.add(model)
        args = ["estimate", "--model", model, "--gpus", str(_gpus(recipe)), "--gpu-type", recipe["hardware"] or "h100",
                "--tp", str(recipe["tensor_model_parallel_size"] or 1),
                "--pp", str(recipe["pipeline_model_parallel_size"] or 1),
                "--ep", str(recipe["expert_model_parallel_size"] or 1),
                "--recompute", "selective", "--recompute-modules", module, "--format", "json"]
        rc, _out, err = _run(capsys, args)
        assert rc in (0, 3), (model, module, err)
        assert "--recompute-modules" not in err, (model, err)
    if not checked:  # only models without a published architecture use it (shared_experts: Ultra)
        rc, _out, err = _run(capsys, ["estimate", "--model", "nemotron_3_nano", "--gpus", "8", "--ep", "8",
                                      "--recompute", "selective", "--recompute-modules", module, "--format", "json"])
        assert rc in (0, 3) and "--recompute-modules" not in err, err


def test_a_module_that_does_not_apply_says_what_it_needs_not_that_it_is_unknown(capsys):
    rc, _out, err = _run(capsys, ["estimate", "--model", "llama3_8b", "--gpus", "8", "--recompute", "selective",
                                  "--recompute-modules", "mla_up_proj"])
    assert rc == 2 and "does not apply to llama3_8b" in err and "multi-latent attention" in err
    assert "valid choices" not in err and "choose from" not in err.lower()


def test_a_latent_moe_charges_its_experts_at_the_latent_width():
    """Megatron Bridge's flop_utils: routed experts at moe_latent_size, plus the up/down projections."""
    from dataclasses import replace

    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.planner.flops import flops_per_token

    latent = load_arch("nemotron_3_super")
    wide = replace(latent, moe_latent_size=None)
    h, latent_width = latent.hidden_size, latent.moe_latent_size
    wide_moe = flops_per_token(wide, 4096).moe  # experts at hidden_size: 12 h ffn k (gated) per MoE layer
    n_moe = wide_moe / (12 * h * latent.expert_ffn * latent.moe_router_topk)  # MoE layers FLOPs counts (gated 1)
    assert n_moe == int(n_moe) and n_moe >= latent.layer_counts()["moe"]
    expected = wide_moe * latent_width / h + 12 * h * latent_width * n_moe
    assert flops_per_token(latent, 4096).moe == expected


def test_recommend_reads_a_cached_config_of_an_hf_id_outside_the_catalog(capsys, tmp_path, monkeypatch):
    """recommend needs a recipe: it reads the cached config.json and names the nearest recipe
    models by architecture (instead of only pointing at --hf-config)."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    path = _hf_cache(tmp_path, "TinyLlama/TinyLlama-1.1B-intermediate", LLAMA_LIKE)
    rc, _out, err = _run(capsys, ["recommend", "--model", "TinyLlama/TinyLlama-1.1B-intermediate", "--gpus", "8"])
    assert rc == 2, err
    assert f"{path} describes 16 layers" in err and "llama32_1b" in err
