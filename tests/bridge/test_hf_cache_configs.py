"""The tier's offline HF cache (hf_cache.py): every config.json it writes loads with the env's real
transformers (or diffusers) offline and says what catalog/models.yaml says, and the recipes of the
architectures issue 15 added (part A1: Qwen2/2.5(-VL), Qwen2-Audio, Llama 2 / 3.2-3B, DeepSeek-V2,
Moonlight, Kimi-K2, Gemma 3 12B, GLM-4.5V, FLUX) build with the real Megatron Bridge."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import hf_cache  # noqa: E402 - the tier's writer: stdlib + PyYAML, importable here too

# In the env: write the default cache, load every written repository the way its recipe does
# (AutoConfig; diffusers' load_config for a pipeline), print what the config class holds.
PROBE = r"""
import json, os, sys, warnings
sys.path[:0] = [sys.argv[1] + "/shim", sys.argv[1]]
import build_recipe, hf_cache
home = hf_cache.default_home()
hf_cache.ensure(home)
build_recipe.setup_environment(home)
warnings.filterwarnings("ignore")
import megatron.bridge.models  # noqa: F401 - registers the bridge's own config classes (Step35Config), as a recipe run does
from transformers import AutoConfig
from diffusers import FluxTransformer2DModel
KEYS = ("num_hidden_layers", "hidden_size", "vocab_size", "q_lora_rank", "use_qk_norm", "rope_parameters",
        "tie_word_embeddings", "n_shared_experts")
out = {}
for item in json.loads((home / "MANIFEST.json").read_text())["written"]:
    hf_id = item["hf_id"]
    try:
        if item["token"] == "-":  # files given whole (a diffusers pipeline)
            cfg = FluxTransformer2DModel.load_config(hf_id, subfolder="transformer")
            out[hf_id] = {"class": cfg["_class_name"], "num_layers": cfg["num_layers"]}
            continue
        cfg = AutoConfig.from_pretrained(hf_id, revision=item["revision"])
        text = getattr(cfg, "text_config", None) or cfg
        out[hf_id] = {"class": type(cfg).__name__, **{k: getattr(text, k, "<absent>") for k in KEYS}}
    except Exception as exc:  # noqa: BLE001 - the test reports every failure, not the first
        out[hf_id] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
print(json.dumps(out, default=str))
"""

# HF id -> (config class, models.yaml token): the repositories part A1 made writable
A1 = {
    "Qwen/Qwen2-0.5B": ("Qwen2Config", "qwen2_500m"), "Qwen/Qwen2-72B": ("Qwen2Config", "qwen2_72b"),
    "Qwen/Qwen2.5-0.5B": ("Qwen2Config", "qwen25_500m"), "Qwen/Qwen2.5-72B": ("Qwen2Config", "qwen25_72b"),
    "Qwen/Qwen2.5-VL-3B-Instruct": ("Qwen2_5_VLConfig", "qwen25_vl_3b"),
    "Qwen/Qwen2-Audio-7B-Instruct": ("Qwen2AudioConfig", "qwen2_audio_7b"),
    "google/gemma-3-12b-it": ("Gemma3Config", "gemma3_vl_12b"),
    "meta-llama/Llama-2-7b-hf": ("LlamaConfig", "llama2_7b"), "meta-llama/Llama-3.2-3B": ("LlamaConfig", "llama32_3b"),
    "deepseek-ai/DeepSeek-V2": ("DeepseekV2Config", "deepseek_v2"),
    "deepseek-ai/DeepSeek-V2-Lite": ("DeepseekV2Config", "deepseek_v2_lite"),
    "moonshotai/Moonlight-16B-A3B": ("DeepseekV3Config", "moonlight_16b"),
    "moonshotai/Kimi-K2-Instruct": ("DeepseekV3Config", "kimi_k2"),
    "zai-org/GLM-4.5V": ("Glm4vMoeConfig", "glm_45v"),
}
# recipes of A1's models that still cannot be built, and why (hf_models.json "skip")
NOT_WRITABLE = {"gemma4_e4b", "gemma4_vl_26b", "kimi_k25_vl"}


def test_every_written_config_loads_offline_with_the_catalog_numbers(run_bridge):
    proc = run_bridge(["-c", PROBE, str(HERE)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    failed = {k: v["error"] for k, v in loaded.items() if "error" in v}
    assert not failed, failed
    archs = hf_cache.load_archs()
    for hf_id, (cls, token) in A1.items():
        got, arch = loaded[hf_id], archs[token]
        assert got["class"] == cls, (hf_id, got["class"])
        assert (got["num_hidden_layers"], got["hidden_size"], got["vocab_size"]) == (
            arch["num_layers"], arch["hidden_size"], arch["vocab_size"]), hf_id
    # the published values the class defaults would get wrong
    assert loaded["deepseek-ai/DeepSeek-V2-Lite"]["q_lora_rank"] is None  # class default 1536
    assert loaded["moonshotai/Moonlight-16B-A3B"]["q_lora_rank"] is None
    assert loaded["deepseek-ai/DeepSeek-V2"]["n_shared_experts"] == 2
    assert loaded["zai-org/GLM-4.5V"]["use_qk_norm"] is False  # glm_45v_bridge reads it; no class default
    assert loaded["moonshotai/Kimi-K2-Instruct"]["rope_parameters"]["rope_type"] == "yarn"
    assert loaded["Qwen/Qwen2.5-VL-3B-Instruct"]["tie_word_embeddings"] is True
    assert loaded["black-forest-labs/FLUX.1-dev"] == {"class": "FluxTransformer2DModel", "num_layers": 19}


def test_the_writer_keeps_published_nulls_and_writes_whole_files():
    written = {item["hf_id"]: item for item in hf_cache.plan()[0]}
    lite = json.loads(written["deepseek-ai/DeepSeek-V2-Lite"]["config"])
    assert "q_lora_rank" in lite and lite["q_lora_rank"] is None
    assert lite["rope_parameters"]["rope_type"] == "yarn" and lite["rope_parameters"]["factor"] == 40
    flux = written["black-forest-labs/FLUX.1-dev"]["files"]
    assert list(flux) == ["transformer/config.json"]
    assert json.loads(flux["transformer/config.json"])["num_single_layers"] == 38
    # Kimi-K2 is written as the DeepseekV3Config its published file holds, without the remote-code
    # model_type kimi_k2 / auto_map (same bridge: AutoBridge dispatches on DeepseekV3ForCausalLM)
    kimi = json.loads(written["moonshotai/Kimi-K2-Instruct"]["config"])
    assert kimi["model_type"] == "deepseek_v3" and "auto_map" not in kimi


def test_a1_recipes_build_with_the_real_bridge(all_results):
    tokens = {token for _, token in A1.values()} | {
        "qwen2_1p5b", "qwen2_7b", "qwen25_1p5b", "qwen25_7b", "qwen25_14b", "qwen25_32b", "qwen25_vl_7b",
        "qwen25_vl_32b", "qwen25_vl_72b", "flux_12b"}
    catalog = json.loads((HERE.parent.parent / "catalog" / "megatron-bridge-0.6.2.json").read_text())
    model_of = {r["name"]: r["model"] for r in catalog["recipes"] if r["kind"] == "library"}
    mine = [r for r in all_results if r.get("kind") == "library" and model_of.get(r["name"]) in tokens]
    assert len(mine) >= 60, len(mine)
    unbuilt = {r["name"]: (r.get("error") or {}).get("message") for r in mine if not r["built"]}
    assert not unbuilt, unbuilt
    not_writable = [r for r in all_results if r.get("kind") == "library" and model_of.get(r["name"]) in NOT_WRITABLE]
    assert not_writable and not any(r["built"] for r in not_writable)
