"""Memory of DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5.x), from Megatron Core 0.19's
transformer/experimental_attention_variant (dsa.py, dsa_cudnn_kernels.py), the code Megatron Bridge
0.6.2 runs. Three terms the MLA attention the memory model already counts does not have:

- the indexer's weights on every layer that runs it (DSAttention builds an indexer only where
  is_dsa_skip_topk_layer is false: with index sharing, dsa_indexer_topk_freq > 1, the other layers
  reuse their source layer's top-k): linear_wq_b (q_lora_rank -> heads x head_dim), linear_wk
  (hidden -> head_dim), k_norm (LayerNorm weight and bias) and linear_weights_proj (hidden -> heads),
  all plain (not tensor-parallel) linears, so every TP rank holds them whole;
- what a layer that runs the indexer saves for backward, per token: the int32 top-k indices the
  sparse attention reads (skip layers hold the same tensor), and, with the indexer loss on
  (dsa_indexer_loss_coeff > 0, as the GLM-5 bridge sets), the indexer gradients the fused
  top-k + loss kernel precomputes in forward (FusedQKTopKWithSparseLossFunc saves grad q in bf16,
  grad k in fp32, grad weights in bf16) and k_norm's input;
- the transient working set while one layer scores keys: the fp32 index-score chunk (b x rows x
  keys, at most _INDEXER_SCORE_CHUNK_MAX_BYTES) and the cuDNN top-k scratch (two int32 per score,
  at most _TOPK_WRAPPER_MAX_SCRATCH_BYTES), both bounded by row chunking; keys are the whole
  sequence (context parallelism gathers them: DSA runs with cp_comm_type allgather).
A layer that recomputes its core attention (selective "core_attn", or full recompute) keeps none of
the saved part. Every figure here is in bytes.
"""

from __future__ import annotations

from mbridge_launch.knowledge.models import ModelArch

INDEXER_SCORE_CHUNK_MAX_BYTES = 2**30  # dsa_cudnn_kernels._INDEXER_SCORE_CHUNK_MAX_BYTES
TOPK_SCRATCH_MAX_BYTES = 2 * 2**30  # dsa_cudnn_kernels._TOPK_WRAPPER_MAX_SCRATCH_BYTES
TOPK_SCRATCH_INT32_PER_SCORE = 2  # dsa_cudnn_kernels._TOPK_WRAPPER_SCRATCH_INT32_FACTOR


def uses_dsa(arch: ModelArch) -> bool:
    return bool(arch.dsa_indexer_n_heads and arch.dsa_indexer_head_dim and arch.dsa_indexer_topk)


def runs_indexer(arch: ModelArch, layer_number: int) -> bool:
    """Whether the 1-indexed decoder layer builds and runs its own indexer (Megatron Core dsa.py
    is_dsa_skip_topk_layer: offset 0 still starts at layer 1)."""
    if not uses_dsa(arch):
        return False
    freq = max(arch.dsa_indexer_topk_freq or 1, 1)
    offset = max(arch.dsa_indexer_skip_topk_offset or 0, 1)
    return max(layer_number - offset, 0) % freq == 0


def indexer_params(arch: ModelArch) -> float:
    """Parameters of one layer's indexer (0 without DSA)."""
    if not uses_dsa(arch):
        return 0.0
    n, d, h = arch.dsa_indexer_n_heads or 0, arch.dsa_indexer_head_dim or 0, arch.hidden_size
    q_in = (arch.mla.q_lora_rank if arch.mla is not None else None) or h
    return float(q_in * n * d + h * d + 2 * d + h * n)


def saved_bytes_per_token(arch: ModelArch, recomputes_core_attention: bool = False) -> float:
    """Bytes one token leaves saved for backward in a layer that runs the indexer."""
    if not uses_dsa(arch) or recomputes_core_attention:
        return 0.0
    n, d = arch.dsa_indexer_n_heads or 0, arch.dsa_indexer_head_dim or 0
    topk_indices = 4.0 * (arch.dsa_indexer_topk or 0)
    indexer_grads = 2.0 * n * d + 4.0 * d + 2.0 * n  # grad q (bf16), grad k (fp32), grad weights (bf16)
    k_norm_input = 2.0 * d
    return topk_indices + indexer_grads + k_norm_input


def transient_bytes(arch: ModelArch, mbs: int, seq_length: int, cp: int) -> float:
    """Peak scratch of one layer's key scoring and top-k selection (0 without DSA)."""
    if not uses_dsa(arch):
        return 0.0
    rows = float(mbs) * seq_length / max(cp, 1)  # this rank's queries
    keys = float(seq_length)
    scores = min(rows * keys * 4.0, float(INDEXER_SCORE_CHUNK_MAX_BYTES))
    scratch = min(rows * keys * 4.0 * TOPK_SCRATCH_INT32_PER_SCORE, float(TOPK_SCRATCH_MAX_BYTES))
    selected = rows * (arch.dsa_indexer_topk or 0) * (4.0 + 4.0)  # top-k indices and their scores
    return scores + scratch + selected
