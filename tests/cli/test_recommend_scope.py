"""recommend outside its scope: exit 2 with a scope.* reason naming the field, the value and what IS
supported (other accelerators, NVIDIA GPUs the recipes do not target, schedulers other than Slurm,
model kinds without a Megatron Bridge recipe or bridge); in scope stays in scope; an unknown name
keeps its "did you mean"; a Kubernetes pod without Slurm gets a hint, never an error."""

from __future__ import annotations

import json
import os

import pytest

from cli_helpers import one_line_error
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.recommend import scope

SUPPORTED = "h100, h200, b200, b300, gb200, gb300"
BASE = ("recommend", "--model", "llama3_8b", "--gpus", "8")


@pytest.mark.parametrize(("gpu", "vendor"), [
    ("MI250", "AMD Instinct"), ("mi300x", "AMD Instinct"), ("MI325X", "AMD Instinct"), ("mi355x", "AMD Instinct"),
    ("AMD MI300X", "AMD Instinct"), ("Intel Gaudi 3", "Intel Gaudi"), ("gaudi2", "Intel Gaudi"),
    ("tpu-v5p", "Google TPU"), ("v6e", "Google TPU"), ("trainium2", "AWS Trainium"), ("trn1", "AWS Trainium"),
    ("inferentia2", "AWS Trainium / Inferentia"), ("apple-m2-ultra", "Apple silicon"), ("mps", "Apple silicon"),
    ("ascend-910b", "Huawei Ascend"),
])
def test_other_vendors(mbl, gpu, vendor):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", gpu))
    assert f"--gpu-type '{gpu}': {vendor}" in line and "outside what mbridge-launch applies to" in line
    assert f"supported --gpu-type: {SUPPORTED}" in line


@pytest.mark.parametrize("gpu", ["cpu", "CPU-only", "none"])
def test_cpu_only(mbl, gpu):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", gpu))
    assert f"--gpu-type '{gpu}': CPU-only training" in line and f"supported --gpu-type: {SUPPORTED}" in line


@pytest.mark.parametrize("gpu", ["A100", "a100-80gb", "L40S", "H800", "H20", "V100", "GH200", "H100 PCIe", "rtx4090"])
def test_nvidia_gpus_the_recipes_do_not_target(mbl, gpu):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", gpu))
    assert f"--gpu-type '{gpu}': an NVIDIA GPU that Megatron Bridge's recipes" in line
    assert f"supported --gpu-type: {SUPPORTED}" in line


def test_rubin_recipes_without_planner_figures(mbl):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", "vr200"))
    assert "Megatron Bridge has recipes for this system, but the planner has no hardware figures" in line


@pytest.mark.parametrize("gpu", ["h100", "H200", "dgx-b200", "gb200-nvl72"])
def test_supported_gpus_stay_in_scope(mbl, gpu):
    result = mbl.run(*BASE, "--gpu-type", gpu, "--format", "json")
    assert result.rc == 0, result.stderr
    assert result.json()["recipe"]


def test_unknown_gpu_spelling_keeps_the_old_answer(mbl):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", "hundred"))
    assert line == f"error: unknown GPU type 'hundred'; valid types: {SUPPORTED}"


def test_value_is_escaped(mbl):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", "AMD\x1b[2J MI300X"))
    assert "\x1b" not in line and "'AMD\\x1b[2J MI300X'" in line


@pytest.mark.parametrize(("value", "name"), [
    ("kubernetes", "Kubernetes"), ("k8s", "Kubernetes"), ("pbs", "PBS"), ("lsf", "LSF"), ("sge", "Grid Engine"),
    ("ray", "Ray"),
])
def test_schedulers_other_than_slurm(mbl, value, name):
    line = one_line_error(mbl.run(*BASE, "--scheduler", value))
    assert f"--scheduler '{value}': " in line and name in line and "submits to Slurm only" in line
    assert line.endswith("supported --scheduler: slurm")


def test_local_runs(mbl):
    line = one_line_error(mbl.run(*BASE, "--scheduler", "local"))
    assert "runs without a scheduler are outside" in line and line.endswith("supported --scheduler: slurm")


def test_unknown_scheduler_is_an_invalid_choice(mbl):
    line = one_line_error(mbl.run(*BASE, "--scheduler", "qsub-ish"))
    assert line == "error: invalid value for --scheduler: 'qsub-ish'; valid choices: slurm"


@pytest.mark.parametrize("value", ["slurm", "SLURM"])
def test_slurm_is_the_default_and_accepted(mbl, value):
    assert mbl.run(*BASE, "--scheduler", value, "--format", "json").rc == 0


@pytest.mark.parametrize(("model", "kind"), [
    ("bert-base-uncased", "an encoder-only model"), ("FacebookAI/roberta-large", "an encoder-only model"),
    ("BAAI/bge-large-en-v1.5", "an encoder-only model"), ("google/flan-t5-xl", "an encoder-decoder model"),
    ("t5-11b", "an encoder-decoder model"), ("facebook/bart-large", "an encoder-decoder model"),
    ("openai/whisper-large-v3", "an encoder-decoder model"),
    ("state-spaces/mamba-2.8b-hf", "a pure state-space or recurrent model"),
    ("tiiuae/falcon-mamba-7b", "a pure state-space or recurrent model"),
    ("RWKV/rwkv-6-world-7b", "a pure state-space or recurrent model"),
    ("stabilityai/stable-diffusion-xl-base-1.0", "a diffusion model without a Megatron Bridge recipe"),
    ("PixArt-alpha/PixArt-XL-2-1024-MS", "a diffusion model without a Megatron Bridge recipe"),
])
def test_model_kinds_without_recipe_or_bridge(mbl, model, kind):
    line = one_line_error(mbl.run("recommend", "--model", model, "--gpus", "8"))
    version = load_catalog().version
    assert f"--model '{model}': {kind}" in line
    assert f"Megatron Bridge {version} has no recipe and no bridge for it" in line
    assert "families deepseek, " in line and "llama" in line and "nemotronh" in line


def test_diffusion_names_the_catalog_diffusion_families(mbl):
    line = one_line_error(mbl.run("recommend", "--model", "stabilityai/sdxl-turbo", "--gpus", "8"))
    assert "the catalog's diffusion families: flux, wan" in line


@pytest.mark.parametrize("model", ["flux_12b", "wan_1_3b", "nvidia/Nemotron-H-8B-Base-8K", "llama3_8b"])
def test_recipe_models_of_those_kinds_stay_in_scope(mbl, model):
    # FLUX and WAN are diffusion models, Nemotron-H has Mamba layers: they have recipes
    result = mbl.run("recommend", "--model", model, "--gpus", "8", "--format", "json")
    assert result.rc == 0, result.stderr


def test_unknown_name_keeps_did_you_mean(mbl):
    line = one_line_error(mbl.run("recommend", "--model", "llama3_99b", "--gpus", "8"))
    assert line.startswith("error: unknown model 'llama3_99b'; closest known models: llama3_8b")


def test_hf_config_of_an_encoder(mbl, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "bert", "architectures": ["BertForMaskedLM"], "num_hidden_layers": 12, "hidden_size": 768,
        "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522}))
    line = one_line_error(mbl.run(*BASE, "--hf-config", tmp_path))
    assert f"--hf-config '{tmp_path} (model_type bert)': an encoder-only model" in line


def test_in_chinese(mbl):
    line = one_line_error(mbl.run(*BASE, "--gpu-type", "mi300x", lang="zh"))
    assert "不在 mbridge-launch 的适用范围内" in line and SUPPORTED in line
    line = one_line_error(mbl.run(*BASE, "--scheduler", "k8s", lang="zh"))
    assert "只向 Slurm 提交" in line


def _k8s_env(tmp_path, **extra):
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    env = {k: None for k in os.environ if k.startswith("SLURM_")}
    return {**env, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "PATH": str(empty), **extra}


def test_kubernetes_pod_without_slurm_gets_a_hint_not_an_error(mbl, tmp_path):
    result = mbl.run(*BASE, "--format", "json", env=_k8s_env(tmp_path))
    assert result.rc == 0, result.stderr
    assert "hint: this looks like a Kubernetes pod" in result.stderr and "10.96.0.1" not in result.stderr
    assert result.json()["recipe"]


def test_no_hint_where_slurm_is_reachable(mbl, tmp_path):
    result = mbl.run(*BASE, env=_k8s_env(tmp_path, SLURM_CONF="/etc/slurm/slurm.conf"))
    assert result.rc == 0 and "Kubernetes" not in result.stderr
    sbatch = tmp_path / "bin" / "sbatch"
    sbatch.write_text("#!/bin/sh\n")
    sbatch.chmod(0o755)
    result = mbl.run(*BASE, env=_k8s_env(tmp_path))
    assert result.rc == 0 and "Kubernetes" not in result.stderr


def test_no_known_model_is_classified_out_of_scope():
    """The name patterns catch no model the catalog trains nor any name of catalog/models.yaml (the
    check also runs only after resolution fails; this keeps the table honest on its own)."""
    from mbridge_launch.base.resources import catalog_yaml

    names = {n for r in load_catalog().recipes for n in (r.model, r.hf_model_id) if n}
    for token, entry in catalog_yaml("models.yaml").items():
        names |= {token, entry.get("hf_model_id") or token, *(entry.get("aliases") or ())}
    assert len(names) > 100
    assert sorted(n for n in names if scope.model_kind(n)) == []
    for name in names:
        scope.check_model(name)  # resolves: in scope


def test_hf_config_decides_over_the_name(mbl, tmp_path):
    """With a decoder config, a name that reads like an encoder is only a label: the config's
    architecture is what is planned, so the usual --hf-config answer comes (not a scope refusal)."""
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 16, "hidden_size": 2048,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256}))
    result = mbl.run("recommend", "--model", "my-bert-like-name", "--gpus", "8", "--hf-config", tmp_path)
    assert "outside what mbridge-launch applies to" not in result.stderr
    assert result.rc == 2 and "no recipe trains 'my-bert-like-name'" in result.stderr  # as before this check
