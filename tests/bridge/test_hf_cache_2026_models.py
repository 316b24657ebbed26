"""Part A2 of issue 15's architectures (the 2026 models): the HF configs hf_cache.py writes for them
carry the published values where the transformers / bridge config class defaults differ, and their
0.6.2 library recipes build with the real Megatron Bridge (those whose config cannot be had stay
unbuilt, each for the reason data/hf_models.json records)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import hf_cache  # noqa: E402 - the tier's writer: stdlib + PyYAML, importable here too

# models.yaml tokens of part A2 whose recipes must build
BUILT = {
    "deepseek_v4_flash", "deepseek_v4_flash_no_mtp", "glm52", "nemotron_3_super", "qwen35_vl_800m",
    "qwen35_vl_2b", "qwen35_vl_4b", "qwen35_vl_9b", "qwen35_vl_35b_a3b", "qwen35_vl_122b_a10b",
    "qwen35_text_9b", "qwen35_text_35b_a3b", "qwen3_omni_30b_a3b", "step35_196b_a11b", "step37",
    "exaone45_vl_33b", "exaone_moe_236b_a23b", "minimax_m3",
}
# no config.json can be written: remote code only (Nemotron VL / Omni) or nothing published (Pro, Ultra)
NOT_WRITABLE = {"deepseek_v4_pro", "nemotron_3_ultra", "nemotron_nano_v2_vl_12b", "nemotron_omni_cord_v2",
                "nemotron_omni_valor32k"}


def _written() -> dict[str, dict]:
    # a repository given as whole files (a diffusers pipeline) has no top-level config.json
    return {item["hf_id"]: json.loads(item["config"]) for item in hf_cache.plan()[0] if item["config"]}


def test_published_values_that_the_class_defaults_would_get_wrong():
    w = _written()
    flash = w["deepseek-ai/DeepSeek-V4-Flash"]
    assert flash["rope_parameters"]["factor"] == 16 and flash["num_nextn_predict_layers"] == 1  # bridge reads both
    super_ = w["nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16"]
    assert super_["moe_latent_size"] == 1024 and super_["mtp_hybrid_override_pattern"] == "*E"
    assert len(super_["hybrid_override_pattern"]) == super_["num_hidden_layers"] == 88
    glm = w["zai-org/GLM-5.2"]
    assert glm["indexer_rope_interleave"] is True and glm["index_topk_freq"] == 4
    assert w["Qwen/Qwen3.5-122B-A10B"]["text_config"]["linear_num_value_heads"] == 64  # class default 32
    assert w["Qwen/Qwen3.5-0.8B"]["text_config"]["tie_word_embeddings"] is True
    # Qwen3-Omni: the language model under thinker_config.text_config, as the bridge reads it
    omni = w["Qwen/Qwen3-Omni-30B-A3B-Instruct"]["thinker_config"]
    assert omni["model_type"] == "qwen3_omni_moe_thinker" and omni["text_config"]["num_hidden_layers"] == 48
    # Step-3.5's own key names (the bridge's Step35Config), also as Step-3.7's text_config
    step = w["stepfun-ai/Step-3.5-Flash"]
    assert (step["num_attention_groups"], step["moe_num_experts"], step["share_expert_dim"]) == (8, 288, 1280)
    assert w["stepfun-ai/Step-3.7-Flash"]["text_config"]["model_type"] == "step3p5"
    kexaone = w["LGAI-EXAONE/K-EXAONE-236B-A23B"]
    assert (kexaone["num_shared_experts"], kexaone["first_k_dense_replace"]) == (1, 1)


def test_base_checkpoints_share_their_models_config():
    w = _written()
    assert w["Qwen/Qwen3.5-9B-Base"]["text_config"] == w["Qwen/Qwen3.5-9B"]["text_config"]
    assert w["Qwen/Qwen3.5-35B-A3B-Base"]["text_config"] == w["Qwen/Qwen3.5-35B-A3B"]["text_config"]


def test_a2_recipes_build_with_the_real_bridge(all_results):
    catalog = json.loads((HERE.parent.parent / "catalog" / "megatron-bridge-0.6.2.json").read_text())
    model_of = {r["name"]: r["model"] for r in catalog["recipes"] if r["kind"] == "library"}
    mine = [r for r in all_results if r.get("kind") == "library" and model_of.get(r["name"]) in BUILT]
    assert len(mine) >= 54, len(mine)
    unbuilt = {r["name"]: (r.get("error") or {}).get("message") for r in mine if not r["built"]}
    assert not unbuilt, unbuilt
    blocked = [r for r in all_results if r.get("kind") == "library" and model_of.get(r["name"]) in NOT_WRITABLE]
    assert len(blocked) == 11 and not any(r["built"] for r in blocked)
