"""Recipe choice: a library recipe for real training, always; a benchmark recipe only with
--benchmark, matching hardware, precision and GPU count where one exists, weak-scaled (and saying
so) where not."""

from __future__ import annotations

import pytest

from cli_helpers import recommend_answer as answer
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.recommend import select

pytestmark = pytest.mark.usefixtures("english")

GPU_TYPES = ("h100", "h200", "b200", "b300", "gb200", "gb300")


def test_library_selection_never_returns_a_benchmark_recipe():
    catalog = load_catalog()
    pairs = sorted({(r.model, r.mode) for r in catalog.recipes if r.kind == "library" and not r.raises_not_implemented})
    assert len(pairs) > 100
    for model, mode in pairs:
        goals = ("lora", "dora") if mode == "peft" else (mode,)
        for goal in goals:
            for gpu_type in GPU_TYPES:
                for seq in (None, 131072):
                    recipe = select.select_library(catalog, model, goal, mode, seq_length=seq, gpu_type=gpu_type,
                                                   precision=None, gpus=None)
                    assert recipe.kind == "library" and recipe.model == model and recipe.mode == mode
                    assert not recipe.raises_not_implemented


def test_model_with_only_benchmark_recipes_needs_the_flag(capsys):
    assert main(["recommend", "--model", "glm51"]) == 2
    assert "no Megatron Bridge library recipe for model glm51" in capsys.readouterr().err
    assert answer(capsys, "--model", "glm51", "--benchmark")["kind"] == "benchmark"


def test_benchmark_matches_hardware_precision_and_gpus_exactly(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--benchmark", "--gpu-type", "h100", "--precision", "fp8cs",
                  "--gpus", "8")
    assert data["recipe"] == "llama3_8b_pretrain_8gpu_h100_fp8cs_config"
    assert not any(c["field"] == "train.global_batch_size" for c in data["changes"])
    data = answer(capsys, "--model", "llama3_8b", "--benchmark", "--gpu-type", "gb300", "--precision", "nvfp4",
                  "--gpus", "32")
    assert data["recipe"] == "llama3_8b_pretrain_32gpu_gb300_nvfp4_config"


def test_benchmark_weak_scaling_says_how(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--benchmark", "--gpu-type", "b200", "--precision", "nvfp4",
                  "--gpus", "64")
    recipe = load_catalog().get(data["recipe"])
    assert (recipe.hardware, recipe.precision) == ("b200", "nvfp4") and recipe.gpus != 64
    change = next(c for c in data["changes"] if c["field"] == "train.global_batch_size")
    assert change["class"] == "benchmark_only" and change["to"] * recipe.gpus == change["from"] * 64
    assert f"from {recipe.gpus} to 64 GPUs" in change["reason"] and "samples per GPU" in change["reason"]
    assert data["parallelism"]["gbs"] == change["to"]


def test_benchmark_rejects_a_dataset(capsys):
    assert main(["recommend", "--model", "llama3_8b", "--benchmark", "--dataset", "squad"]) == 2
    assert "benchmark recipes own their dataset" in capsys.readouterr().err
