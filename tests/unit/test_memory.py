"""Memory per GPU by component, checked by hand (GiB = 2^30 bytes)."""

from __future__ import annotations

import pytest

from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.memory import ALLOWANCE_GIB, FRAGMENTATION, GIB, HEADROOM, estimate_memory, static_memory
from mbridge_launch.planner.rules import Layout, evolve


def test_llama3_8b_single_stage_by_hand():
    # 8 GPUs, TP=PP=CP=1 -> DP=8; bf16; one micro-batch of 8192 tokens; no recompute
    m = estimate_memory(load_arch("llama3_8b"), Layout(mbs=1, gbs=128, seq_length=8192, world=8), 80)
    params = 8_030_261_248
    assert m.weights == pytest.approx(2 * params / GIB)  # bf16 weights: 14.96 GiB
    assert m.gradients == pytest.approx(4 * params / GIB)  # fp32 main grads: 29.92 GiB
    assert m.optimizer == pytest.approx(12 * params / 8 / GIB)  # master + Adam, sharded over DP=8: 11.22
    # per token per layer (bf16, h=4096, 32 heads x 128, 8 KV groups, ffn 14336):
    #   attention: LN input + LN output 2*2h, Q/K/V 2*(4096 + 2*1024), attention output 2*4096
    #   MLP: LN input + output 2*2h, fc1 output 2*2*14336 (SwiGLU halves), activation output 2*14336
    per_token = (4 * 4096 + 2 * (4096 + 2048) + 2 * 4096) + (4 * 4096 + 4 * 14336 + 2 * 14336)
    assert per_token == 139_264  # = 34 x h, Korthikanti's 34sbh with flash attention
    embedding_output = 2 * 4096 * 8192
    assert m.activations == pytest.approx((per_token * 8192 * 32 + embedding_output) / GIB)  # 34.06 GiB
    assert m.logits == pytest.approx(8192 * 128256 * (2 + 4) / GIB)  # bf16 logits + fp32 softmax: 5.87
    base = m.weights + m.gradients + m.optimizer + m.activations + m.logits
    assert m.allowance == pytest.approx(ALLOWANCE_GIB + FRAGMENTATION * base)
    assert m.total == pytest.approx(103.83, abs=0.01) and not m.fits  # over 80 GiB: needs FSDP or recompute
    assert estimate_memory(load_arch("llama3_8b"), Layout(mbs=1, gbs=128, seq_length=8192, world=8, fsdp=True), 80).fits


def test_llama3_70b_interleaved_first_stage_by_hand():
    # the published H100 layout: TP=4, PP=8, VP=5, 64 GPUs -> DP=2, GBS 256 -> 128 micro-batches; FP8
    layout = Layout(tp=4, pp=8, vp=5, sp=True, mbs=1, gbs=256, seq_length=8192, world=64)
    m = estimate_memory(load_arch("llama3_70b"), layout, 80, precision="fp8cs")
    assert m.stage == "first"
    # 40 virtual stages of 2 layers; stage 0 holds chunks 0, 8, 16, 24, 32 = 10 layers + embedding
    per_layer = (151_003_136 + 704_651_264) / 4  # attention + MLP params (with norms) / TP
    embedding = 128_512 * 8192 / 4  # vocabulary padded to 128 x TP
    params = per_layer * 10 + embedding  # 2,402,328,576
    assert m.weights == pytest.approx(2 * params / GIB)
    assert m.gradients == pytest.approx(4 * params / GIB)
    assert m.optimizer == pytest.approx(12 * params / 2 / GIB)  # DP x CP = 2
    # FP8: GEMM inputs kept in 1 byte; with SP everything divides by TP=4
    norms = 2 * (2 * 8192 + 1 * 8192)  # two LN inputs (bf16) and outputs (fp8)
    attention = 2 * (8192 + 2 * 1024) + 2 * 8192
    mlp = 2 * 2 * 28672 + 1 * 28672
    per_token = (norms + attention + mlp) / 4  # 57,344 bytes
    # interleaved 1F1B warm-up at stage 0: 2*(PP-1) + (VP-1)*PP + 1 = 47 chunks of 2 layers
    chunks_in_flight = 2 * 7 + 4 * 8 + 1
    assert m.activations == pytest.approx((per_token * 8192 * 2 * chunks_in_flight + 2 * 8192 * 8192 / 4) / GIB)
    assert m.total == pytest.approx(74.40, abs=0.01) and m.fits and m.total <= HEADROOM * 80


def test_qwen3_30b_a3b_expert_parallel_by_hand():
    # 8 B200, EP=8 (expert grid: EDP = 8 / (PP x EP x ETP) = 1), TP=1 -> DP=8; MXFP8
    layout = Layout(ep=8, mbs=1, gbs=512, seq_length=4096, world=8)
    m = estimate_memory(load_arch("qwen3_30b_a3b"), layout, 180, precision="fp8mx")
    dense = 48 * (18_876_416 + 264_192) + 2 * 311_164_928  # attention, router + norm, embedding + LM head
    experts = 48 * 603_979_776 / 8  # 128 experts x 3 x 2048 x 768 per layer, split over EP=8
    assert m.weights == pytest.approx(2 * (dense + experts) / GIB)
    assert m.optimizer == pytest.approx((12 * dense / 8 + 12 * experts / 1) / GIB)  # expert optimizer unsharded
    # routed tokens: 8 copies of each token keep the expert GEMM inputs (1 byte x h), fc1 outputs
    # (2 bytes x 2 x 768) and activation outputs (1 byte x 768)
    routed = 8 * (2048 + 2 * 2 * 768 + 768)
    per_token = 2 * 3 * 2048 + 2 * (4096 + 2 * 512) + 2 * 4096 + routed
    assert m.activations == pytest.approx((per_token * 4096 * 48 + 2 * 2048 * 4096) / GIB)


def test_deepseek_v3_first_stage_by_hand():
    # B200 layout: PP=16 (uneven: 61 layers), EP=8; stage 0 = 3 dense layers + 1 MoE layer + embedding
    layout = Layout(pp=16, ep=8, mbs=1, gbs=4096, seq_length=4096, world=256, uneven_pp=True)
    m = estimate_memory(load_arch("deepseek_v3"), layout, 180, precision="fp8mx")
    attention, dense_mlp, shared_moe, routed = 187_114_496, 396_368_896, 45_882_368, 11_274_289_152
    dense = 4 * attention + 3 * dense_mlp + shared_moe + 129_280 * 7168
    experts = routed / 8
    assert m.weights == pytest.approx(2 * (dense + experts) / GIB)  # 8.05 GiB
    assert m.optimizer == pytest.approx((12 * dense / 16 + 12 * experts / 2) / GIB)  # DP=16, EDP=2


def test_parallelism_and_recompute_reduce_memory():
    arch = load_arch("llama3_70b")
    base = Layout(tp=4, pp=4, sp=True, mbs=1, gbs=64, seq_length=8192, world=64)
    m = estimate_memory(arch, base)
    assert estimate_memory(arch, evolve(base, tp=8)).weights == pytest.approx(m.weights / 2, rel=0.02)
    # a dense TE layer: the planner's selective is Megatron's default core_attn, which drops nothing
    # with flash attention (planner.recompute); "mlp" drops the MLP's saved tensors
    assert estimate_memory(arch, evolve(base, recompute="selective")).activations == pytest.approx(m.activations)
    selective = estimate_memory(arch, evolve(base, recompute="selective", recompute_modules=("mlp",)))
    full = estimate_memory(arch, evolve(base, recompute="full"))
    assert full.activations < selective.activations < m.activations
    assert estimate_memory(arch, evolve(base, cp=2)).activations == pytest.approx(m.activations / 2, rel=0.01)
    no_sp = estimate_memory(arch, evolve(base, sp=False))
    assert no_sp.activations > m.activations  # norms and residuals replicated without SP
    assert estimate_memory(arch, evolve(base, distributed_optimizer=False)).optimizer > m.optimizer
    lower = static_memory(arch, base)
    assert lower <= min(x.total for x in (m, selective, full))


def test_fsdp_shards_everything():
    arch = load_arch("llama3_70b")
    dist = estimate_memory(arch, Layout(mbs=1, gbs=64, seq_length=8192, world=64, recompute="full"))
    fsdp = estimate_memory(arch, Layout(mbs=1, gbs=64, seq_length=8192, world=64, recompute="full", fsdp=True))
    assert fsdp.gradients == pytest.approx(dist.gradients / 64)
    assert fsdp.weights < dist.weights / 10  # sharded, plus two gathered layers


def test_peft_has_no_base_optimizer_state():
    arch = load_arch("llama3_8b")
    layout = Layout(mbs=1, gbs=8, seq_length=4096, world=8)
    full = estimate_memory(arch, layout, 80)
    lora = estimate_memory(arch, layout, 80, goal="lora")
    assert lora.weights == pytest.approx(full.weights, rel=0.02)  # frozen base + small adapters
    assert lora.gradients < full.gradients / 50 and lora.optimizer < full.optimizer / 50
    assert lora.total < full.total


def test_hbm_comparison_uses_headroom():
    m = estimate_memory(load_arch("llama3_8b"), Layout(mbs=1, gbs=8, seq_length=4096, world=8, fsdp=True), 80)
    assert m.fits == (m.total <= HEADROOM * 80)
    assert estimate_memory(load_arch("llama3_8b"), Layout(world=8, gbs=8), None).fits  # no HBM: no verdict
    assert set(m.as_dict()) == {"weights", "gradients", "optimizer", "activations", "logits", "allowance",
                                "fp8_copies", "dispatcher", "total"}
