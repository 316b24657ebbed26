"""Training FLOPs per token with Megatron Bridge's model-TFLOP/s accounting.

This follows `num_floating_point_operations` of Megatron-LM / Megatron Bridge: every GEMM counted
three times (forward, data gradient, weight gradient) at 2 FLOPs per multiply-add; GQA key/value
projections scaled by num_query_groups / num_attention_heads; SwiGLU MLPs at 3/2 of a plain MLP;
MoE layers counting top-k routed experts plus shared experts; multi-latent attention with its
LoRA ranks; MTP layers (norms, projection, one extra decoder layer and another LM head); the LM
head over the vocabulary padded to a multiple of 128 x TP; causal attention counting half the
score matrix; Nemotron-H Mamba layers with d_inner = 2 x hidden. Sliding-window layers count
the keys a query really sees. PEFT (LoRA/DoRA) freezes the base weights: no weight-gradient GEMM
for them, plus the adapters' own GEMMs.

Components are returned separately because they run at different speeds (see throughput.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.knowledge.vocabulary import recipe_task

LORA_DEFAULT_RANK = 32  # Megatron Bridge LoRA default `dim`


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token (forward + backward) by component."""

    attn_proj: float  # Q/K/V/O projections (or MLA down/up projections)
    attn_core: float  # QK^T and attention x V (bf16 flash attention)
    mlp: float  # dense MLPs and MoE shared experts
    moe: float  # routed experts (grouped GEMMs)
    mamba: float  # Mamba mixers (projections and scan)
    logits: float  # LM head(s) and MTP projections
    adapters: float = 0.0  # LoRA/DoRA adapter GEMMs

    @property
    def total(self) -> float:
        return self.attn_proj + self.attn_core + self.mlp + self.moe + self.mamba + self.logits + self.adapters

    @property
    def gemm(self) -> float:
        """FLOPs of dense GEMMs in the training precision."""
        return self.attn_proj + self.mlp + self.logits + self.adapters


def _avg_keys(seq_length: int, window: int | None) -> float:
    """Keys one query attends to on average under a causal mask (Megatron: s/2)."""
    if not window or window >= seq_length:
        return seq_length / 2
    return window - window * window / (2 * seq_length)


def _attention_per_layer(arch: ModelArch, seq_length: int, window: int | None) -> tuple[float, float]:
    """(projection FLOPs, core FLOPs) per token of one attention layer, x3 for training."""
    h = arch.hidden_size
    n = arch.num_attention_heads
    keys = _avg_keys(seq_length, window)
    mla = arch.mla
    if mla is not None:
        qk, pe, v = mla.qk_head_dim or 0, mla.qk_pos_emb_head_dim or 0, mla.v_head_dim or 0
        if mla.q_lora_rank:
            q_term = mla.q_lora_rank * (h + n * (qk + pe) + 1)
        else:
            q_term = h * n * (qk + pe)
        kv_term = mla.kv_lora_rank * (h + n * (qk + v) + 1) + h * pe
        proj = 6 * (q_term + kv_term + n * v * h)
        core = 6 * keys * n * (qk + pe + v)
        return proj, core
    d = arch.head_dim
    proj = 12 * h * n * d * (1 + arch.kv_groups / n)
    if arch.o_lora_rank:  # DeepSeek-V4: Megatron Bridge 0.6.2 flop_utils' dsv4_hybrid projection terms
        proj = 6 * (arch.attention_params() - h)  # (q + kv + grouped o) weights, the input norm aside
    core = 12 * keys * n * d  # (DeepSeek-V4's compressed sparse core is counted as dense here)
    return proj, core


def _windows(arch: ModelArch) -> list[int | None]:
    """Per attention layer: its window (None = full attention)."""
    count = arch.layer_counts()["attention"] + (arch.mtp_num_layers if not arch.is_hybrid else 0)
    if not arch.sliding_window:
        return [None] * count
    period = arch.sliding_window_pattern or 0
    if period <= 1:
        return [arch.sliding_window] * count
    return [None if (i + 1) % period == 0 else arch.sliding_window for i in range(count)]


def flops_per_token(
    arch: ModelArch,
    seq_length: int,
    *,
    tp: int = 1,
    mtp_layers: int | None = None,
    goal: str = "pretrain",
    lora_rank: int = LORA_DEFAULT_RANK,
) -> FlopsPerToken:
    """Training FLOPs per token. `mtp_layers` overrides the architecture's MTP depth (benchmarks
    "without MTP"); `tp` pads the vocabulary like Megatron does."""
    h = arch.hidden_size
    mtp = arch.mtp_num_layers if mtp_layers is None else mtp_layers
    if arch.is_hybrid:
        mtp = 0  # Megatron's hybrid formula has no MTP term
    counts = arch.layer_counts()
    gated = 1.5 if arch.gated_linear_unit else 1.0
    kinds = arch.layer_kinds()
    last_is_moe = bool(kinds) and kinds[-1] == "E"
    n_mlp = counts["mlp"] + (0 if last_is_moe else mtp)
    n_moe = counts["moe"] + (mtp if last_is_moe else 0)

    attn_proj = attn_core = 0.0
    for window in _windows(arch)[: counts["attention"] + mtp]:
        proj, core = _attention_per_layer(arch, seq_length, window)
        attn_proj += proj
        attn_core += core
    mlp = 12 * h * (arch.ffn_hidden_size or 0) * gated * n_mlp
    mlp += 12 * h * (arch.moe_shared_expert_intermediate_size or 0) * gated * n_moe
    # a LatentMoE's experts compute in the latent width, plus its hidden<->latent projection pair
    # (Megatron Bridge 0.6.2 flop_utils moe_layer_flops with moe_latent_size)
    moe = 12 * arch.expert_width * arch.expert_ffn * (arch.moe_router_topk or 0) * gated * n_moe
    moe += 12 * h * (arch.moe_latent_size or 0) * n_moe
    mamba = counts["mamba"] * _mamba_per_layer(arch)
    logits = 6 * h * arch.padded_vocab(tp) * (mtp + 1) + 6 * mtp * (3 * h + 2 * h * h)
    parts = FlopsPerToken(attn_proj, attn_core, mlp, moe, mamba, logits)
    if recipe_task(goal) == "peft":  # lora, dora (or the task name itself)
        parts = _peft(arch, parts, lora_rank, n_mlp, n_moe, counts["attention"] + mtp, goal)
    return parts


def _mamba_per_layer(arch: ModelArch) -> float:
    h = arch.hidden_size
    d_in = 2 * h  # Megatron's formula: d_inner = 2 x hidden, heads as configured
    mamba = arch.mamba
    heads = mamba.num_heads or d_in // (mamba.head_dim or 64)
    groups, state = mamba.num_groups or 1, mamba.state_dim or 16
    return 3 * (2 * h * (2 * d_in + 2 * groups * state + heads) + 7 * d_in * state + 2 * d_in * h)


def _peft(arch: ModelArch, parts: FlopsPerToken, rank: int, n_mlp: int, n_moe: int, n_attn: int, goal: str) -> FlopsPerToken:
    """Frozen base: forward + data gradient only (2/3 of each GEMM); attention core unchanged
    (its backward is needed for the activations' gradients); adapters trained (x3, rank r)."""
    frozen = 2.0 / 3.0
    attn, mlp, expert = _adapter_widths(arch)
    # an adapter on an (in x out) matrix costs 2 x r x (in + out) per token forward
    per_token = n_attn * attn + n_mlp * mlp + n_moe * (arch.moe_router_topk or 0) * expert
    adapters = 6 * rank * per_token
    if goal == "dora":
        adapters *= 1.5  # DoRA: magnitude scaling and the column norm of W + BA on top of LoRA
    return FlopsPerToken(
        attn_proj=parts.attn_proj * frozen,
        attn_core=parts.attn_core,
        mlp=parts.mlp * frozen,
        moe=parts.moe * frozen,
        mamba=parts.mamba * frozen,
        logits=parts.logits * frozen,
        adapters=adapters,
    )


def _adapter_widths(arch: ModelArch) -> tuple[float, float, float]:
    """in + out of the adapted matrices of one attention layer, one dense MLP and one routed
    expert: LoRA on linear_qkv, linear_proj, linear_fc1, linear_fc2 (Megatron Bridge's default
    targets); an adapter of rank r on an (in x out) matrix holds r x (in + out) weights."""
    h = arch.hidden_size
    d = arch.head_dim
    n, g = arch.num_attention_heads, arch.kv_groups
    glu = 2 if arch.gated_linear_unit else 1
    ffn = arch.ffn_hidden_size or 0
    attn = (h + d * (n + 2 * g)) + (n * d + h)
    mlp = (h + glu * ffn) + (ffn + h)
    expert = (h + glu * arch.expert_ffn) + (arch.expert_ffn + h)
    return attn, mlp, expert


def trained_params(arch: ModelArch, goal: str, rank: int = LORA_DEFAULT_RANK) -> tuple[float, float] | None:
    """(dense, routed-expert) parameters that get gradients and optimizer state under `goal`, or
    None when every weight trains (pretraining, SFT). PEFT (LoRA/DoRA) trains its adapters only:
    the frozen base has no gradient to reduce across data-parallel ranks and no optimizer step,
    which at a few micro-batches per step is most of what a pretraining model charges per step
    (70B: a 280 GB gradient reduce-scatter against 0.1 GB of adapters)."""
    if recipe_task(goal) != "peft":
        return None
    attn, mlp, expert = _adapter_widths(arch)
    counts = arch.layer_counts()
    n_attn = counts["attention"] + (arch.mtp_num_layers if not arch.is_hybrid else 0)
    dense = rank * (n_attn * attn + counts["mlp"] * mlp)
    routed = rank * counts["moe"] * (arch.num_moe_experts or 0) * expert
    if goal == "dora":  # DoRA adds one magnitude per output column of each adapted matrix
        dense *= 1.0 + 1.0 / (2 * rank)
    return dense, routed
