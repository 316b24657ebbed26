"""FLOPs per token, Megatron Bridge accounting, checked by hand and against published rows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.flops import flops_per_token

DATA = Path(__file__).resolve().parents[1] / "data" / "perf_calibration.csv"


# Dense Llama 3 (GQA, SwiGLU): hidden h, L layers, n heads of d=128 (n*d = h), g KV groups, ffn,
# vocabulary V, at sequence length s; then the totals worked out by hand from the formulas below.
@pytest.mark.parametrize("model,h,layers,n,g,ffn,vocab,s,by_hand", [
    ("llama3_8b", 4096, 32, 32, 8, 14336, 128256, 8192,
     # per layer: projections 251,658,240; attention 201,326,592; MLP 1,056,964,608
     dict(attn_proj=8_053_063_680, attn_core=6_442_450_944, mlp=33_822_867_456, logits=3_152_019_456,
          total=51_470_401_536)),
    ("llama3_70b", 8192, 80, 64, 8, 28672, 128256, 8192,
     dict(attn_proj=72_477_573_120, attn_core=32_212_254_720, mlp=338_228_674_560, logits=6_304_038_912,
          total=449_222_541_312)),
])
def test_dense_llama_by_hand(model, h, layers, n, g, ffn, vocab, s, by_hand):
    f = flops_per_token(load_arch(model), s)
    # Q/K/V/O projections: 12*h*n*d*(1 + g/n) per layer
    assert f.attn_proj == 12 * h * h * (1 + g / n) * layers == by_hand["attn_proj"]
    # causal attention: 12*(s/2)*n*d per layer
    assert f.attn_core == 12 * (s / 2) * h * layers == by_hand["attn_core"]
    # SwiGLU MLP: 12*h*ffn*1.5 per layer
    assert f.mlp == 12 * h * ffn * 1.5 * layers == by_hand["mlp"]
    # LM head: 6*h*V
    assert f.logits == 6 * h * vocab == by_hand["logits"]
    assert f.total == by_hand["total"]


def test_the_vocabulary_is_padded_to_a_multiple_of_128_times_tp():
    # as Megatron does: 128256 -> 128512 at TP=4
    assert flops_per_token(load_arch("llama3_70b"), 8192, tp=4).logits == 6 * 8192 * 128512


def test_qwen3_30b_a3b_by_hand():
    # h=2048, L=48 (all MoE), n=32, g=4, d=128, 128 experts, top-8, expert ffn=768, V=151936, s=4096
    f = flops_per_token(load_arch("qwen3_30b_a3b"), 4096)
    assert f.attn_proj == 12 * 2048 * 4096 * (1 + 4 / 32) * 48 == 5_435_817_984
    assert f.attn_core == 12 * 2048 * 4096 * 48 == 4_831_838_208
    assert f.mlp == 0  # no dense MLP, no shared expert
    # routed experts: 12*h*ffn_e*topk*1.5 = 12*2048*768*8*1.5 = 226,492,416 per layer, x48
    assert f.moe == 12 * 2048 * 768 * 8 * 1.5 * 48 == 10_871_635_968
    assert f.logits == 6 * 2048 * 151936 == 1_866_989_568
    assert f.total == 23_006_281_728


def test_deepseek_v3_by_hand():
    # h=7168, 61 layers (3 dense, 58 MoE) + 1 MTP layer (MoE, like the last layer) = 62 attention layers;
    # MLA: q_lora=1536, kv_lora=512, n=128, qk=128, rope=64, v=128; 256 experts top-8, expert ffn 2048,
    # one shared expert of 2048, dense ffn 18432, V=129280, s=4096
    f = flops_per_token(load_arch("deepseek_v3"), 4096)
    q = 1536 * (7168 + 128 * (128 + 64) + 1)  # 48,760,320
    kv = 512 * (7168 + 128 * (128 + 128) + 1) + 7168 * 64  # 20,906,496
    o = 128 * 128 * 7168  # 117,440,512
    assert f.attn_proj == 6 * (q + kv + o) * 62 == 69_603_926_016
    assert f.attn_core == 6 * 2048 * 128 * (128 + 64 + 128) * 62 == 31_205_621_760
    # dense MLP on 3 layers + shared expert on 58 MoE layers and the MTP layer
    assert f.mlp == 12 * 7168 * 18432 * 1.5 * 3 + 12 * 7168 * 2048 * 1.5 * 59 == 22_724_739_072
    assert f.moe == 12 * 7168 * 2048 * 8 * 1.5 * 59 == 124_721_823_744
    # two LM heads (main + MTP) and the MTP norms and 2h->h projection
    assert f.logits == 6 * 7168 * 129280 * 2 + 6 * (3 * 7168 + 2 * 7168 * 7168) == 11_736_840_192
    assert f.total == 259_992_950_784
    # "w/o MTP" benchmarks: one attention layer, one MoE layer and one LM head less
    assert flops_per_token(load_arch("deepseek_v3"), 4096, mtp_layers=0).total < f.total * 0.97


def _rows():
    with open(DATA, newline="", encoding="utf-8") as handle:
        return [r for r in csv.DictReader(handle) if r["tokens_per_sec_per_gpu"] and r["model_tflops_per_gpu"]]


@pytest.mark.parametrize("model", ["llama3_8b", "llama3_70b", "llama31_405b", "qwen3_30b_a3b", "qwen3_235b_a22b",
                                   "deepseek_v3", "kimi_k2", "nemotron_3_nano"])
def test_agrees_with_published_model_tflops_within_1_percent(model):
    rows = [r for r in _rows() if r["model"] == model]
    assert rows
    arch = load_arch(model)
    for r in rows:
        published = float(r["model_tflops_per_gpu"]) * 1e12 / float(r["tokens_per_sec_per_gpu"])
        mtp = 0 if "w/o MTP" in r["model_variant"] else None
        ours = flops_per_token(arch, int(r["seq_length"]), tp=int(r["tp"]), mtp_layers=mtp).total
        # published TFLOP/s and tokens/s are rounded to integers: about 0.1-0.3% of noise
        assert abs(ours / published - 1) < 0.01, (r["release"], r["system"], ours, published)


def test_gpt_oss_published_rows_use_the_older_formula():
    """Before 26.06 Megatron Bridge counted GPT-OSS experts as a plain (non-gated) MLP and its
    attention as full causal attention: that older count reproduces the published ratio, ours
    (SwiGLU experts, 128-token windows on every other layer) is about 20% higher at 4096."""
    from dataclasses import replace

    arch = load_arch("gpt_oss_120b")
    older = replace(arch, gated_linear_unit=False, sliding_window=None)
    for r in (r for r in _rows() if r["model"] == "gpt_oss_120b"):
        published = float(r["model_tflops_per_gpu"]) * 1e12 / float(r["tokens_per_sec_per_gpu"])
        seq = int(r["seq_length"])
        assert abs(flops_per_token(older, seq).total / published - 1) < 0.015
        assert flops_per_token(arch, seq).total > published * 1.10


def test_sliding_windows_count_the_keys_seen():
    arch = load_arch("gpt_oss_120b")  # 36 layers, windows of 128 on every other layer
    f = flops_per_token(arch, 4096)
    full = 12 * (4096 / 2) * 64 * 64  # one full-attention layer
    windowed = 12 * (128 - 128 * 128 / (2 * 4096)) * 64 * 64
    assert f.attn_core == pytest.approx(18 * full + 18 * windowed)


def test_peft_changes_the_flops():
    arch = load_arch("llama3_8b")
    full = flops_per_token(arch, 4096)
    lora = flops_per_token(arch, 4096, goal="lora")
    dora = flops_per_token(arch, 4096, goal="dora")
    # frozen base: forward + data gradient only (2/3 of each GEMM), attention core unchanged
    assert lora.mlp == pytest.approx(full.mlp * 2 / 3) and lora.attn_core == full.attn_core
    # rank-32 adapters on qkv, proj, fc1, fc2: 6*r*(in+out) per adapted matrix, 32 layers
    per_layer = (4096 + 6144) + (4096 + 4096) + (4096 + 2 * 14336) + (14336 + 4096)
    assert lora.adapters == 6 * 32 * per_layer * 32
    assert lora.total < full.total * 0.75 and dora.total > lora.total


def test_nemotron_hybrid_formula():
    # Nemotron-H layers: 6 attention, 23 Mamba (d_inner = 2h), 23 MoE with squared-ReLU experts
    f = flops_per_token(load_arch("nemotron_3_nano"), 8192)
    h = 2688
    mamba = 3 * (2 * h * (2 * 2 * h + 2 * 8 * 128 + 64) + 7 * 2 * h * 128 + 2 * 2 * h * h)
    assert f.mamba == 23 * mamba
    assert f.moe == 12 * h * 1856 * 6 * 23 and f.mlp == 12 * h * 3712 * 23
