"""Model catalog, name resolution and Hugging Face config.json reading."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge import models
from mbridge_launch.knowledge.hf_config import arch_from_hf_config
from mbridge_launch.knowledge.models import (
    ModelArch,
    known_models,
    load_arch,
    require_planning_arch,
    resolve_model,
)

# models.yaml holds the 52 architectures shared with the planner's first data, then the blocks that
# issue 15 added below its "# --- issue 15: architectures" markers (part A1: these 21 well-known ones)
ISSUE15_A1 = ("qwen2_500m", "qwen2_1p5b", "qwen2_7b", "qwen2_72b", "qwen25_500m", "qwen25_1p5b", "qwen25_7b",
              "qwen25_14b", "qwen25_32b", "qwen25_72b", "qwen25_vl_3b", "qwen25_vl_7b", "qwen25_vl_32b",
              "qwen25_vl_72b", "qwen2_audio_7b", "gemma3_vl_12b", "llama32_3b", "llama2_7b", "deepseek_v2",
              "deepseek_v2_lite", "moonlight_16b")


def _issue15_tokens() -> list[str]:
    from mbridge_launch.base.resources import catalog_dir

    text = (catalog_dir() / "models.yaml").read_text(encoding="utf-8")
    tail = text.split("# --- issue 15: architectures", 1)[1]
    return [line[:-1] for line in tail.splitlines() if line.endswith(":") and line[:1].isalnum()]


def test_catalog_has_every_shared_model_with_hf_ids():
    names = known_models()
    added = _issue15_tokens()
    assert len(names) - len(added) == 52 and set(added) <= set(names)
    assert set(ISSUE15_A1) <= set(added) and len(ISSUE15_A1) == 21
    for token in ("llama3_8b", "llama31_405b", "deepseek_v3", "qwen3_30b_a3b", "gpt_oss_120b", "kimi_k2", "nemotron_3_nano"):
        assert token in names
        arch = load_arch(token)
        assert arch is not None and arch.name == token and arch.complete
    assert load_arch("llama3_8b").hf_model_id == "meta-llama/Meta-Llama-3-8B"
    assert load_arch("no_such_model") is None


def test_architecture_fields():
    ds = load_arch("deepseek_v3")
    assert ds.is_moe and ds.is_mla and not ds.is_hybrid
    assert (ds.num_layers, ds.hidden_size, ds.num_moe_experts, ds.moe_router_topk) == (61, 7168, 256, 8)
    assert ds.moe_first_dense_layers == 3 and ds.mtp_num_layers == 1
    assert ds.layer_counts() == {"attention": 61, "mamba": 0, "mlp": 3, "moe": 58}
    nano = load_arch("nemotron_3_nano")
    assert nano.is_hybrid and not nano.gated_linear_unit
    assert nano.layer_counts() == {"attention": 6, "mamba": 23, "mlp": 0, "moe": 23}
    llama = load_arch("llama3_8b")
    assert (llama.kv_groups, llama.head_dim, llama.padded_vocab(1), llama.padded_vocab(4)) == (8, 128, 128256, 128512)


def test_parameter_counts_match_published_totals():
    # Llama 3 8B: 8.03B; Qwen3-30B-A3B: 30.5B total, 3.3B active (model cards)
    assert load_arch("llama3_8b").total_params == 8_030_261_248
    qwen = load_arch("qwen3_30b_a3b")
    assert abs(qwen.total_params / 30.5e9 - 1) < 0.01
    assert abs(qwen.active_params / 3.3e9 - 1) < 0.03
    # references carried in models.yaml: exact for Nemotron 3 Nano 4B, GPT-OSS 20B lacks biases
    assert load_arch("nemotron_3_nano_4b").total_params == 3_973_556_832
    oss = load_arch("gpt_oss_20b")
    assert abs(oss.total_params / oss.total_params_reference - 1) < 0.001
    # DeepSeek-V3: 671B + 14B MTP module = 685B published
    assert abs(load_arch("deepseek_v3").total_params / 685e9 - 1) < 0.01


def test_well_known_models_of_issue_15_match_their_published_parameter_counts():
    # safetensors counts of the model pages (total_params_reference): exact for Llama; Qwen2/2.5
    # differ only by their qkv biases, which the planner's count leaves out (< 0.01%)
    for token in ("qwen2_500m", "qwen2_1p5b", "qwen2_7b", "qwen2_72b", "qwen25_500m", "qwen25_1p5b", "qwen25_7b",
                  "qwen25_14b", "qwen25_32b", "qwen25_72b", "llama32_3b", "llama2_7b"):
        arch = load_arch(token)
        assert arch.complete and abs(arch.total_params / arch.total_params_reference - 1) < 1e-4, token
    assert load_arch("llama2_7b").total_params == 6_738_415_616
    # DeepSeek-V2: 236B total, 21B active; V2-Lite: 15.7B total (model cards); Lite has no q LoRA
    v2, lite = load_arch("deepseek_v2"), load_arch("deepseek_v2_lite")
    assert abs(v2.total_params / 236e9 - 1) < 0.01 and abs(v2.active_params / 21e9 - 1) < 0.03
    assert abs(lite.total_params / 15.7e9 - 1) < 0.01
    assert v2.mla.q_lora_rank == 1536 and lite.mla.q_lora_rank is None and load_arch("moonlight_16b").mla.q_lora_rank is None
    # Gemma 3 12B ties its embeddings: 11.77B decoder + embedding once (the 12.2B card adds the vision tower)
    assert abs(load_arch("gemma3_vl_12b").total_params / 11.77e9 - 1) < 0.01


def test_incomplete_architectures_say_what_is_missing():
    # every catalog model is complete now (issue 34): an architecture given without its widths
    partial = ModelArch(name="partial", num_layers=42, hidden_size=3584, num_attention_heads=16)
    assert not partial.complete
    assert set(partial.missing) == {"ffn_hidden_size", "vocab_size"}
    with pytest.raises(UserError) as err:
        require_planning_arch(partial, "partial")
    assert err.value.key == "models.incomplete" and "vocab_size" in str(err.value)
    with pytest.raises(UserError) as err:
        require_planning_arch(None, "mystery")
    assert err.value.key == "models.no_arch"


@pytest.mark.parametrize("text", [
    "llama3_8b", "Llama 3 8B", "llama3-8b", "LLaMA-3-8B", "meta-llama/Meta-Llama-3-8B", "META-LLAMA/META-LLAMA-3-8B",
    "Meta-Llama-3-8B", "llama3_8b ",
])
def test_resolve_llama3_8b_spellings(text):
    assert resolve_model(text) == "llama3_8b"


@pytest.mark.parametrize("text,token", [
    ("Qwen/Qwen3-0.6B", "qwen3_600m"), ("Qwen3 30B-A3B", "qwen3_30b_a3b"), ("deepseek-ai/DeepSeek-V3", "deepseek_v3"),
    ("DeepSeek V3", "deepseek_v3"), ("Llama 3.1 405B", "llama31_405b"), ("openai/gpt-oss-120b", "gpt_oss_120b"),
    ("Qwen/Qwen3-8B-Base", "qwen3_8b"), ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron_3_nano"),
])
def test_resolve_names_and_hf_ids(text, token):
    assert resolve_model(text) == token


def test_unknown_model_lists_closest():
    with pytest.raises(UserError) as err:
        resolve_model("llama3_9b")
    assert err.value.key == "models.unknown" and err.value.exit_code == 2
    assert "llama3_8b" in err.value.params["closest"]


def test_unknown_model_with_nothing_close_says_where_to_look():
    with pytest.raises(UserError) as err:
        resolve_model("zzqqxx")
    assert err.value.key == "models.not_in_catalog" and err.value.exit_code == 2
    assert "catalog list" in err.value.render() and "--hf-config" in err.value.render()


def test_a_local_path_given_as_the_model_is_named_as_such(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError) as err:
        resolve_model(str(tmp_path))
    assert err.value.key == "models.local_path" and f"--hf-config {tmp_path}" in err.value.render()
    with pytest.raises(UserError) as err:
        resolve_model(str(tmp_path / "missing"))  # looks like a path, nothing there
    assert err.value.key == "models.hf_config_missing"
    assert models.local_model_path(str(tmp_path)) and not models.local_model_path("llama3_8b")
    (tmp_path / "weights-only").mkdir()
    assert not models.local_model_path(str(tmp_path / "weights-only"))  # no config.json: not a model source


def test_recipe_only_tokens_resolve(monkeypatch):
    monkeypatch.setattr(models, "_recipe_models", lambda: [("mistral_7b", "mistralai/Mistral-7B-v0.1")])
    assert resolve_model("mistral_7b") == "mistral_7b"
    assert resolve_model("mistralai/Mistral-7B-v0.1") == "mistral_7b"
    assert resolve_model("Mistral 7B") == "mistral_7b"
    assert load_arch("mistral_7b") is None


def _write(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def test_hf_config_llama_directory(tmp_path):
    _write(tmp_path, {"model_type": "llama", "_name_or_path": "meta-llama/Meta-Llama-3-8B", "num_hidden_layers": 32,
                      "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
                      "rope_theta": 500000.0, "tie_word_embeddings": False, "hidden_act": "silu"})
    arch = arch_from_hf_config(str(tmp_path))  # a checkpoint directory holding config.json
    ref = load_arch("llama3_8b")
    assert arch.total_params == ref.total_params and arch.gated_linear_unit
    assert arch.hf_model_id == "meta-llama/Meta-Llama-3-8B" and arch.name == "hf:Meta-Llama-3-8B"


def test_hf_config_qwen3_moe(tmp_path):
    path = _write(tmp_path, {"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048,
                             "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
                             "num_experts_per_tok": 8, "num_attention_heads": 32, "num_key_value_heads": 4,
                             "head_dim": 128, "vocab_size": 151936, "decoder_sparse_step": 1, "mlp_only_layers": [],
                             "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": False})
    arch = arch_from_hf_config(path)
    assert arch.total_params == load_arch("qwen3_30b_a3b").total_params
    assert arch.moe_first_dense_layers == 0 and arch.sliding_window is None


def test_hf_config_deepseek_v3_and_mixtral(tmp_path):
    ds = arch_from_hf_config(_write(tmp_path, {
        "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "first_k_dense_replace": 3, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "vocab_size": 129280, "num_nextn_predict_layers": 1}))
    assert ds.total_params == load_arch("deepseek_v3").total_params
    mixtral = arch_from_hf_config(_write(tmp_path, {
        "model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
        "vocab_size": 32000}, "mixtral.json"))
    # Mixtral 8x7B: 46.7B total, 12.9B active
    assert abs(mixtral.total_params / 46.7e9 - 1) < 0.01 and abs(mixtral.active_params / 12.9e9 - 1) < 0.01


def test_hf_config_gpt_oss_and_nemotron_h(tmp_path):
    oss = arch_from_hf_config(_write(tmp_path, {
        "model_type": "gpt_oss", "num_hidden_layers": 24, "hidden_size": 2880, "intermediate_size": 2880,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
        "experts_per_token": 4, "vocab_size": 201088, "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12}))
    assert (oss.sliding_window, oss.sliding_window_pattern, oss.moe_router_topk) == (128, 2, 4)
    nh = arch_from_hf_config(_write(tmp_path, {
        "model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 2688, "intermediate_size": 1856,
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
        "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "mamba_num_heads": 64,
        "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "n_routed_experts": 128,
        "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712, "num_experts_per_tok": 6,
        "mlp_hidden_act": "relu2"}, "nh.json"))
    assert nh.is_hybrid and not nh.gated_linear_unit
    assert nh.total_params == load_arch("nemotron_3_nano").total_params


def test_hf_config_unknown_type_and_errors(tmp_path):
    arch = arch_from_hf_config(_write(tmp_path, {"model_type": "brand_new", "num_hidden_layers": 4, "hidden_size": 512,
                                                 "intermediate_size": 1024, "num_attention_heads": 8, "vocab_size": 1000}))
    assert isinstance(arch, ModelArch) and arch.kv_groups == 8 and arch.complete
    with pytest.raises(UserError) as err:
        arch_from_hf_config(_write(tmp_path, {"model_type": "x", "hidden_size": 512}, "bad.json"))
    assert err.value.key == "models.hf_config_keys"
    assert "num_layers" in err.value.params["keys"] and "vocab_size" in err.value.params["keys"]
    with pytest.raises(UserError) as err:
        arch_from_hf_config(tmp_path / "nowhere")
    assert err.value.key == "models.hf_config_missing"
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(UserError) as err:
        arch_from_hf_config(tmp_path / "broken.json")
    assert err.value.key == "models.hf_config_invalid"


@pytest.mark.parametrize(("token", "total", "active"), [
    # published totals (model cards, rounded as published) of architectures added for issue 34;
    # active only where the modelled attention is the real one (DeepSeek-V4's compressed attention
    # with low-rank q/o is modelled as dense heads: its active count is not checked)
    ("nemotron_3_super", 120e9, 12e9),  # 120B-A12B; LatentMoE experts in the 1024-wide latent
    ("gemma4_vl_26b", 25.2e9, 3.8e9),  # without the ~0.55B vision tower
    ("kimi_k25_vl", 1.0e12, 32e9),  # the Kimi K2 language model
    ("deepseek_v4_pro", 1.6e12, 49e9),
    ("ministral3_8b", 8.4e9, None),  # Megatron Bridge docs, language model
    ("ministral3_3b", 3.4e9, None),
    ("gemma2_27b", 27.2e9, None),
    ("nemotronh_56b", 56e9, None),
])
def test_issue34_architectures_match_their_published_parameter_counts(token, total, active):
    arch = load_arch(token)
    assert arch is not None and arch.complete, token
    assert abs(arch.total_params / total - 1) < 0.05, (token, arch.total_params)
    if active is not None:
        assert abs(arch.active_params / active - 1) < 0.10, (token, arch.active_params)


def test_a_latent_moe_counts_its_experts_in_the_latent_width():
    super_ = load_arch("nemotron_3_super")
    assert super_.expert_width == 1024 and super_.expert_params() == 2 * 1024 * 2688  # squared ReLU: 2 matrices
    plain = ModelArch(name="plain", num_layers=2, hidden_size=4096, num_attention_heads=32, num_moe_experts=8,
                      moe_router_topk=2, moe_ffn_hidden_size=2688, gated_linear_unit=False)
    assert plain.expert_width == 4096 and plain.expert_params() == 2 * 4096 * 2688  # unchanged without a latent


def test_deepseek_v4_attention_is_low_rank_as_published():
    """DeepSeek-V4 (q latent, one K=V head of 512, grouped low-rank output): totals and actives as
    published (V4-Flash 284B/13B without its MTP layer, V4-Pro 1.6T/49B); dense heads would make
    V4-Pro's active count 89B."""
    flash, pro = load_arch("deepseek_v4_flash_no_mtp"), load_arch("deepseek_v4_pro")
    assert abs(flash.total_params / 284e9 - 1) < 0.02 and abs(flash.active_params / 13e9 - 1) < 0.05
    assert abs(pro.total_params / 1.6e12 - 1) < 0.02 and abs(pro.active_params / 49e9 - 1) < 0.02
    h, n, d = 7168, 128, 512
    q = 1536 * (h + n * d + 1)
    kv = h * d + d
    out = n * d * 1024 + 16 * 1024 * h
    assert pro.attention_params() == q + kv + out + h


def test_the_deepseek_v4_projection_flops_are_megatron_bridges_dsv4_terms():
    from mbridge_launch.planner.flops import flops_per_token

    pro = load_arch("deepseek_v4_pro")
    per_layer = 6 * (pro.attention_params() - pro.hidden_size)  # flop_utils: 3 * 2 * (q + kv + o terms)
    assert flops_per_token(pro, 4096, mtp_layers=0).attn_proj == per_layer * pro.num_layers


def test_a_deepseek_v4_config_json_reads_as_the_catalogs_v4_flash(tmp_path):
    """The keys of DeepSeek-V4's config.json (V4-Flash's values, transformers' DeepseekV4Config
    defaults) give the catalog's architecture: low-rank q/o, hyper-connections, the MLA path."""
    import json

    from mbridge_launch.knowledge.hf_config import arch_from_hf_config

    config = {"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"], "num_hidden_layers": 43,
              "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
              "vocab_size": 129280, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
              "num_experts_per_tok": 6, "num_nextn_predict_layers": 1, "q_lora_rank": 1024, "o_lora_rank": 1024,
              "o_groups": 8, "qk_rope_head_dim": 64, "hc_mult": 4, "max_position_embeddings": 1048576}
    (tmp_path / "config.json").write_text(json.dumps(config))
    got, catalog = arch_from_hf_config(tmp_path / "config.json"), load_arch("deepseek_v4_flash")
    assert (got.q_lora_rank, got.o_lora_rank, got.o_groups, got.hyper_connection_streams) == (1024, 1024, 8, 4)
    assert got.uses_mla_path and got.mla is None
    assert got.total_params == catalog.total_params and got.active_params == catalog.active_params


def test_a_latent_moe_config_json_keeps_its_latent_size(tmp_path):
    import json

    from mbridge_launch.knowledge.hf_config import arch_from_hf_config

    super_ = load_arch("nemotron_3_super")
    config = {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "num_hidden_layers": 88,
              "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
              "vocab_size": 131072, "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
              "moe_latent_size": 1024, "mlp_hidden_act": "relu2", "hybrid_override_pattern": super_.hybrid_layer_pattern}
    (tmp_path / "config.json").write_text(json.dumps(config))
    got = arch_from_hf_config(tmp_path / "config.json")
    assert got.moe_latent_size == 1024 and got.expert_params() == super_.expert_params()


def test_gemma4_e4b_counts_its_per_layer_embeddings_on_the_first_stage():
    """Gemma 4 E4B (8B published with its towers; the language model 7.3B of it): the per-layer
    table of 262144 tokens x 42 layers x 256 (Megatron Bridge's Gemma4DenseProvider defaults) is
    counted with the word embeddings, on the first pipeline stage."""
    from dataclasses import replace

    from mbridge_launch.planner.memory import estimate_memory
    from mbridge_launch.planner.rules import Layout

    e4b = load_arch("gemma4_e4b")
    assert e4b.per_layer_embedding_params() == 262144 * 42 * 256
    assert 7.0e9 < e4b.total_params < 8.0e9
    without = replace(e4b, per_layer_embed_dim=None)
    layout = Layout(world=2, gbs=8, seq_length=4096)
    gained = estimate_memory(e4b, layout).weights - estimate_memory(without, layout).weights
    assert gained * 2**30 == pytest.approx(e4b.per_layer_embedding_params() * 2, rel=1e-3)  # bf16 weights, GiB
