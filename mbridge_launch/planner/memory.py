"""Per-GPU memory by component, for the most loaded pipeline stage.

Units are GiB (2^30 bytes): the HBM sizes of catalog/hardware.yaml are close to what nvidia-smi
reports in GiB. Components:

- weights: bf16 parameters of the stage held by this GPU (dense parts / TP, experts / (EP x ETP));
  FP8 training with fp8_param_gather keeps fp8 weights and their transpose instead (2 bytes),
  NVFP4 fp4 ones (WEIGHT_BYTES).
- gradients: fp32 main gradients, 4 bytes per trained parameter (Megatron's mixed precision); 2 bytes when
  gradients are reduced in bf16 (ddp.grad_reduce_in_fp32=false, as the benchmark recipes run).
- optimizer: fp32 master weights + Adam moments, 12 bytes per trained parameter, sharded over
  DP x CP (dense) or expert-DP (experts) by the distributed optimizer; Megatron-FSDP also shards
  weights and gradients and keeps two gathered layers as working buffers.
- activations: Korthikanti et al. (2022) per layer, redone for flash attention (no s^2 term),
  GQA, SwiGLU, MLA, MoE routed tokens and Mamba mixers; divided by TP with SP and by CP;
  times the micro-batches in flight at the first stage (1F1B: PP; interleaved: the Megatron
  warm-up count); selective recompute drops what its `recompute_modules` drop (planner.recompute:
  the Plan's list, Megatron's default ["core_attn"] when it sets none, or the planner's own choice),
  full recompute keeps only each layer's input plus one layer's working set.
- fp8_copies: with FP8 training and mixed_precision.fp8_param_gather off, the bf16 weights plus
  the fp8 copy (row-wise and column-wise) Transformer Engine keeps of every linear weight.
- dispatcher: the MoE token dispatcher's buffers (DeepEP / HybridEP registered buffers, the
  all-to-all permutation buffer), on stages holding MoE layers.
- logits: the LM head's logits and their fp32 softmax on the last stage (per MTP head too);
  with cross_entropy_loss_fusion (Layout.ce_fusion) the bf16 logits only.
- recipe settings (Layout fields, planner.recipe_settings reads them from a recipe): CPU
  activation offloading of N layers, fine-grained offloading of named modules' inputs, the
  precision-aware optimizer's state bytes, optimizer CPU offload, the gradient-reduction dtype and
  per-layer CUDA graphs' static buffers (counted with the activations).
- allowance: CUDA context, cuBLAS/TE workspaces and NCCL buffers (ALLOWANCE_GIB) plus allocator
  fragmentation (FRAGMENTATION of the rest).
A layout fits when the total is at most HEADROOM x HBM.
PEFT (LoRA/DoRA) keeps the frozen base weights only (no gradients or optimizer state for them);
MoE experts on one GPU share one adapter (Bridge's share_expert_adapters).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.knowledge.vocabulary import recipe_task
from mbridge_launch.planner.dsa import indexer_params, runs_indexer, uses_dsa
from mbridge_launch.planner.dsa import saved_bytes_per_token as dsa_saved_bytes
from mbridge_launch.planner.dsa import transient_bytes as dsa_transient_bytes
from mbridge_launch.planner.pipeline_split import EVEN, LAYOUT, mtp_layers, split_of
from mbridge_launch.planner.recompute import Dropped, dropped, effective_modules
from mbridge_launch.planner.rules import Layout, evolve, recompute_share

GIB = float(2**30)
ALLOWANCE_GIB = 3.0  # CUDA context ~0.6, workspaces ~0.5, NCCL communicators/buffers ~1.5-2
FRAGMENTATION = 0.05  # caching allocator with expandable_segments
HEADROOM = 0.95  # plan only layouts that leave 5% of HBM free
GRAD_BYTES = 4.0  # ddp.grad_reduce_in_fp32=true, the library recipes' setting
BF16_GRAD_BYTES = 2.0  # grad_reduce_in_fp32=false, as the benchmark (perf) recipes run
OPTIM_BYTES = 12.0


@dataclass(frozen=True)
class MemoryBreakdown:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    allowance: float
    stage: str  # "first", "last" or "only": the stage the figures describe
    hbm_gb: float | None = None
    fp8_copies: float = 0.0  # fp8 weight copies beside bf16 weights (fp8_param_gather off)
    dispatcher: float = 0.0  # MoE token dispatcher buffers
    # what the figures assume (shown by plan and estimate, so a Plan and an estimate can be
    # compared setting by setting): the selective-recompute modules charged (empty: none),
    # fp8_param_gather (None: not an FP8 run), the dispatcher (None: the largest buffer counted)
    recompute_modules: tuple[str, ...] = ()
    fp8_param_gather: bool | None = None
    moe_dispatcher: str | None = None

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.logits + self.allowance
                + self.fp8_copies + self.dispatcher)

    @property
    def fits(self) -> bool:
        return self.hbm_gb is None or self.total <= HEADROOM * self.hbm_gb

    def as_dict(self) -> dict[str, float]:
        return {
            "weights": round(self.weights, 2), "gradients": round(self.gradients, 2),
            "optimizer": round(self.optimizer, 2), "activations": round(self.activations, 2),
            "logits": round(self.logits, 2), "allowance": round(self.allowance, 2),
            "fp8_copies": round(self.fp8_copies, 2), "dispatcher": round(self.dispatcher, 2),
            "total": round(self.total, 2),
        }


def _stage_kinds(arch: ModelArch, layout: Layout, first: bool) -> tuple[str, ...]:
    """Layer kinds held by the first (or last) pipeline stage, all virtual chunks together."""
    kinds = arch.layer_kinds()
    return tuple(kinds[i] for i in _stage_layers(arch, layout, first))


def _stage_layers(arch: ModelArch, layout: Layout, first: bool, rank: int | None = None) -> tuple[int, ...]:
    """0-indexed decoder layers held by the first (or last, or `rank`) pipeline stage, all virtual
    chunks together."""
    count = len(arch.layer_kinds())
    pp = layout.pp
    if pp == 1:
        return tuple(range(count))
    rank = (0 if first else pp - 1) if rank is None else rank
    split = split_of(layout)
    if split is not None and split.kind != EVEN:
        # the declared split: virtual stages in order hold consecutive layers
        held: list[int] = []
        offset = 0
        for share in split.virtual_stages(count, pp, layout.vp_size, mtp_layers(arch)):
            if share.rank == rank:
                held.extend(range(offset, min(offset + share.decoders, count)))
            offset += share.decoders
        return tuple(held)
    vp = layout.vp_size
    per_chunk = -(-count // (pp * vp))
    chunks = [range(i, min(i + per_chunk, count)) for i in range(0, count, per_chunk)]
    # chunk c belongs to stage c % pp (interleaved assignment)
    return tuple(i for c, chunk in enumerate(chunks) if c % pp == rank for i in chunk)


def _layer_params(arch: ModelArch, kind: str, layout: Layout) -> tuple[float, float]:
    """(dense params on this GPU, expert params on this GPU) of one layer of `kind`."""
    tp = layout.tp
    if kind == "M":
        return arch.mamba_params() / tp, 0.0
    if kind == "*":
        return arch.attention_params() / tp, 0.0
    attn = 0.0 if arch.is_hybrid else arch.attention_params() / tp
    if kind == "-":
        return attn + arch.mlp_params() / tp, 0.0
    shared, routed = arch.moe_layer_params()
    return attn + shared / tp, routed / (layout.ep * layout.etp_size)


def _act_bytes_per_token(arch: ModelArch, kind: str, layout: Layout, gemm_bytes: float,
                         drop: Dropped | None = None) -> tuple[float, float]:
    """Activation bytes one token leaves behind in one layer: (layer-norm/residual part, which
    only sequence parallelism splits; part that tensor parallelism splits). `drop`: what the
    selective recompute modules recompute instead of keeping (planner.recompute.dropped)."""
    drop = drop or Dropped()
    a, f = 2.0, gemm_bytes
    h = arch.hidden_size
    norm = a * h + f * h  # layer-norm input + its output (the GEMM input)
    if kind == "M":
        mamba = arch.mamba
        heads = mamba.num_heads or (2 * h // (mamba.head_dim or 64))
        d_in = heads * (mamba.head_dim or 64)
        gn = (mamba.num_groups or 1) * (mamba.state_dim or 128)
        return norm, a * (2 * d_in + 2 * gn + heads) + a * (d_in + 2 * gn) + 2 * a * d_in + f * d_in
    norms = split = 0.0
    if kind == "*" or not arch.is_hybrid:  # a transformer layer's attention block
        mla = arch.mla
        # "layernorm" drops the input norm's output only where the norm is its own module (MLA)
        norms += a * h + (0.0 if drop.attn_norm_out else f * h)
        if mla is not None:
            n = arch.num_attention_heads
            qk = (mla.qk_head_dim or 0) + (mla.qk_pos_emb_head_dim or 0)
            v = mla.v_head_dim or 0
            latent = (mla.q_lora_rank or 0) + mla.kv_lora_rank + (mla.qk_pos_emb_head_dim or 0)
            # compressed latents, then Q, K, V expanded by the up-projections ("mla_up_proj"
            # recomputes them), attention output
            up = 0.0 if drop.mla_up else a * n * (2 * qk + v)
            split += a * latent + up + a * n * v
        else:
            nd = arch.num_attention_heads * arch.head_dim
            gd = arch.kv_groups * arch.head_dim
            split += a * (nd + 2 * gd) + a * nd
    m = 2 if arch.gated_linear_unit else 1
    if kind == "-":
        ffn = float(arch.ffn_hidden_size or 0)
        if drop.mlp:
            norms += a * h  # "mlp" keeps only the MLP's input
        else:
            norms += norm
            split += a * m * ffn + f * ffn
    elif kind == "E":
        if drop.moe:
            return norms + a * h, split  # "moe" keeps only the MoE block's input
        k = arch.moe_router_topk or 1
        ffn = arch.expert_ffn / layout.etp_size
        shared = arch.moe_shared_expert_intermediate_size or 0
        # the MoE pre_mlp_layernorm is its own module: "layernorm" drops its output
        norms += a * h + (0.0 if drop.moe_norm_out else f * h)
        if not drop.shared_experts:
            split += a * m * shared + f * shared
        # routed copies (expert GEMM inputs, fc1 outputs, activation outputs); tokens are
        # sequence-sharded across TP ranks before dispatch
        split += k * (f * h + a * m * ffn + (0.0 if drop.moe_act else f * ffn))
    return norms, split


def _offloaded_bytes_per_token(arch: ModelArch, kind: str, layout: Layout, gemm_bytes: float,
                               modules: tuple[str, ...], drop: Dropped | None = None) -> tuple[float, float]:
    """(norm part, TP part) of one token's saved bytes in one layer that fine-grained activation
    offloading moves to the CPU: the inputs of the named modules (Megatron Core
    transformer_config.py, fine_grained_activation_offloading: core_attn, attn_proj, qkv_linear,
    attn_norm, mlp_norm, expert_fc1, moe_act, fused_group_mlp), the same terms as
    _act_bytes_per_token keeps; what selective recompute already drops is not counted twice."""
    drop = drop or Dropped()
    a, f, h = 2.0, gemm_bytes, arch.hidden_size
    mods = set(modules)
    norms = split = 0.0
    if kind == "M":
        return 0.0, 0.0
    if kind == "*" or not arch.is_hybrid:
        if "attn_norm" in mods:
            norms += a * h
        if "qkv_linear" in mods and not drop.attn_norm_out:
            norms += f * h
        if arch.mla is None:
            nd = arch.num_attention_heads * arch.head_dim
            gd = arch.kv_groups * arch.head_dim
            if "core_attn" in mods:
                split += a * (nd + 2 * gd)
            if "attn_proj" in mods:
                split += a * nd
        else:
            n, v = arch.num_attention_heads, arch.mla.v_head_dim or 0
            qk = (arch.mla.qk_head_dim or 0) + (arch.mla.qk_pos_emb_head_dim or 0)
            if "core_attn" in mods and not drop.mla_up:
                split += a * n * (2 * qk + v)
            if "attn_proj" in mods:
                split += a * n * v
    if kind in ("-", "E") and "mlp_norm" in mods and not (kind == "-" and drop.mlp) and not (kind == "E" and drop.moe):
        norms += a * h
    if kind == "E" and not drop.moe:
        m = 2 if arch.gated_linear_unit else 1
        k = arch.moe_router_topk or 1
        ffn = arch.expert_ffn / layout.etp_size
        if "fused_group_mlp" in mods:
            split += k * (f * h + a * m * ffn + (0.0 if drop.moe_act else f * ffn))
        else:
            split += k * f * h if "expert_fc1" in mods else 0.0
            split += k * a * m * ffn if "moe_act" in mods and not drop.moe_act else 0.0
    return norms, split


def estimate_memory(
    arch: ModelArch,
    layout: Layout,
    hbm_gb: float | None = None,
    *,
    precision: str = "bf16",
    goal: str = "pretrain",
    grad_bytes: float = GRAD_BYTES,
) -> MemoryBreakdown:
    """Memory per GPU of the most loaded stage (first or last, whichever needs more).
    `grad_bytes`: 4 with fp32 gradient reduction (default), 2 with bf16 (BF16_GRAD_BYTES)."""
    model = _model(arch, precision, goal, grad_bytes)
    first = model.stage(layout, True, hbm_gb)
    if layout.pp == 1:
        return first
    last = model.stage(layout, False, hbm_gb)
    worst = first if first.total >= last.total else last
    for rank in _heavier_middle_ranks(arch, layout):
        inner = model.stage(layout, True, hbm_gb, rank=rank)
        worst = inner if inner.total > worst.total else worst
    return worst


def _heavier_middle_ranks(arch: ModelArch, layout: Layout) -> tuple[int, ...]:
    """The middle pipeline ranks to estimate besides the ends. With a layout string (split kind
    "layout": a recipe's pipeline_model_parallel_layout or the planner's own) every middle rank of
    distinct content, the earliest of equals (it has the most micro-batches in flight): chunks can
    put anything anywhere (GLM-5.2's recipe gives ranks 3-11 eight MoE layers, its ends five and four;
    DeepSeek-V3's "Et*4|t*4|...|tmL" gives the first rank three dense layers of its four; "Et|tt|...|mL"
    two MoE layers per middle rank against one at the end). With first/last or accounted splits, the
    middle ranks holding more decoder layers, or more MoE layers, than either end counts with what it
    carries instead: the embedding and the loss one layer each (as Megatron's account_for_embedding/
    loss_in_pipeline_split count them) and each MTP layer."""
    split = split_of(layout)
    if layout.pp <= 2 or split is None or split.kind == EVEN:
        return ()
    kinds = arch.layer_kinds()
    contents = {rank: tuple(sorted(kinds[i] for i in _stage_layers(arch, layout, True, rank)))
                for rank in range(layout.pp)}
    if split.kind == LAYOUT:
        seen: set[tuple[str, ...]] = set()
        distinct = []
        for rank in range(1, layout.pp - 1):
            if contents[rank] and contents[rank] not in seen:
                seen.add(contents[rank])
                distinct.append(rank)
        return tuple(distinct)
    mtp = _mtp_depth(arch, layout)
    first, last = contents[0], contents[layout.pp - 1]
    most = max(len(first) + 1, len(last) + 1 + mtp)
    most_moe = max(first.count("E") + 1, last.count("E") + 1 + (mtp if arch.is_moe else 0))
    return tuple(rank for rank in range(1, layout.pp - 1)
                 if len(contents[rank]) > most or contents[rank].count("E") > most_moe)


@lru_cache(maxsize=64)
def _model(arch: ModelArch, precision: str, goal: str, grad_bytes: float = GRAD_BYTES) -> "_MemoryModel":
    return _MemoryModel(arch, precision, goal, grad_bytes)


# Bytes per parameter of the weights a GPU holds, by precision (2: bf16, or fp8 + its transpose).
# NVFP4: Megatron Bridge's bf16_with_nvfp4_mixed sets fp4_param_gather (fp4_param), so the primary
# weights are 4-bit E2M1 with one E4M3 scale per 16 values, kept row-wise and column-wise for the
# backward GEMMs: 2 x (0.5 + 1/16) bytes. (The fp32 master copy is optimizer state: OPTIM_BYTES.)
WEIGHT_BYTES = {"nvfp4": 2 * (0.5 + 1 / 16)}

# Megatron Bridge 0.6.2 training/mixed_precision.py: the fp8 recipes the --precision names select
# gather fp8 parameters (fp8_param_gather=True: the fp8 weights are the primary copy) except the
# sub-channel (blockwise) one, which keeps bf16 weights.
FP8_PARAM_GATHER_DEFAULT = {"fp8ds": True, "fp8cs": True, "fp8mx": True, "fp8sc": False}
# Bytes per linear-weight parameter of the fp8 copy TE keeps beside bf16 weights: row-wise and
# column-wise (transposed) fp8 data, plus MXFP8's one E8M0 scale per 32 values in each.
FP8_COPY_BYTES = {"fp8mx": 2 * (1 + 1 / 32)}
FP8_COPY_BYTES_DEFAULT = 2.0

# MoE dispatcher buffers. DeepEP (Megatron Core 0.19 transformer/moe/fused_a2a.get_buffer): one
# Buffer sized by DeepEP's Config size hints for hidden_bytes = hidden x 2 (bf16): NVLink part
# about channels x NVLink ranks x chunked receive tokens x hidden_bytes, RDMA part (EP beyond one
# node) channels x RDMA ranks x chunked receive tokens x hidden_bytes x 2 (send and receive),
# with channels = SMs / 2 (Megatron's moe_deepep_num_sms default 20) and DeepEP's default
# normal-kernel configs (256 NVLink, 128 RDMA chunked receive tokens). An approximation of
# deep_ep/csrc/config.hpp's get_nvl_buffer_size_hint/get_rdma_buffer_size_hint (their small
# per-channel head/tail counters are left out).
DEEPEP_CHANNELS = 10
DEEPEP_NVL_RECV_TOKENS = 256
DEEPEP_RDMA_RECV_TOKENS = 128
NVLINK_DOMAIN_DEFAULT = 8


def dispatcher_bytes(arch: ModelArch, L: Layout) -> float:
    """Bytes per GPU of the MoE token dispatcher's buffers (0 without MoE layers).
    - deepep: DeepEP's registered NVLink/RDMA buffers (above);
    - hybridep: HybridEP's buffers (fused_a2a.init_hybrid_ep_buffer: max_num_of_tokens_per_rank =
      this rank's tokens, hidden_dim): receive buffers for dispatch and combine sized for every
      token of the NVLink domain's ranks, 2 x ranks x tokens x hidden x 2 bytes;
    - alltoall/allgather: the permuted copy of the routed tokens beside the all-to-all output
      while one layer dispatches, tokens x top-k x hidden x 2 bytes;
    - unknown (None: the search, which does not know the recipe's): the largest of the three, so
      that the recipe's own dispatcher never needs more than the planner counted."""
    if not arch.num_moe_experts:
        return 0.0
    if L.moe_dispatcher is None:
        return max(dispatcher_bytes(arch, evolve(L, moe_dispatcher=kind)) for kind in ("deepep", "hybridep", "alltoall"))
    h = arch.hidden_size
    hidden_bytes = 2.0 * h
    domain = min(L.ep, L.gpus_per_node or NVLINK_DOMAIN_DEFAULT)
    tokens = L.mbs * L.seq_length / max(L.cp * L.tp, 1)  # sequence-sharded before dispatch
    kind = L.moe_dispatcher.lower()
    if kind == "deepep":
        rdma_ranks = max(L.ep // max(domain, 1), 1)
        nvl = DEEPEP_CHANNELS * domain * DEEPEP_NVL_RECV_TOKENS * hidden_bytes
        rdma = DEEPEP_CHANNELS * rdma_ranks * DEEPEP_RDMA_RECV_TOKENS * hidden_bytes * 2 if rdma_ranks > 1 else 0.0
        return nvl + rdma
    if kind == "hybridep":
        return 2.0 * domain * tokens * hidden_bytes
    return tokens * (arch.moe_router_topk or 1) * hidden_bytes


class _MemoryModel:
    """Per (model, precision, goal) caches: stage contents and per-token activation bytes."""

    def __init__(self, arch: ModelArch, precision: str, goal: str, grad_bytes: float = GRAD_BYTES) -> None:
        self.arch = arch
        self.grad_bytes = grad_bytes
        self.precision = precision
        self.low_precision = precision != "bf16"
        self.weight_bytes = WEIGHT_BYTES.get(precision, 2.0)
        self.peft = recipe_task(goal) == "peft"  # lora, dora (or the task name itself)
        self._stages: dict[tuple, tuple] = {}
        self._acts: dict[tuple, tuple[float, float]] = {}

    def _stage_params(self, L: Layout, first: bool, rank: int | None = None) -> tuple:
        """`rank`: a middle pipeline rank (neither embedding nor loss); None: the first or last."""
        key = (L.tp, L.pp, L.vp_size, L.ep, L.etp_size, L.uneven_pp, L.first_stage_layers, L.last_stage_layers, L.split,
               first, L.mtp_layers, rank)
        hit = self._stages.get(key)
        if hit is not None:
            return hit
        arch = self.arch
        layers = _stage_layers(arch, L, first, rank)
        if rank is not None:
            first = False
        all_kinds = arch.layer_kinds()
        kinds = tuple(all_kinds[i] for i in layers)
        counts = {k: kinds.count(k) for k in set(kinds)}
        dense = expert = 0.0
        biggest = 0.0
        for kind, count in counts.items():
            d, e = _layer_params(arch, kind, L)
            dense += d * count
            expert += e * count
            biggest = max(biggest, d + e)
        last = rank is None and (not first or L.pp == 1)
        emb = arch.embedding_params(L.tp) / L.tp
        if first:
            dense += emb + arch.per_layer_embedding_params(L.tp) / L.tp  # Gemma 4's per-layer table, beside it
        if last:
            if not (arch.share_embeddings_and_output_weights and L.pp == 1):
                dense += emb
            mtp = _mtp_depth(arch, L)
            if mtp and not arch.is_hybrid:
                d, e = _layer_params(arch, arch.layer_kinds()[-1], L)
                dense += mtp * (d + 2 * arch.hidden_size * arch.hidden_size / L.tp)
                expert += mtp * e
        # a last stage that runs MTP but not the embedding builds its own copy of the word embeddings
        # for the MTP layers' shifted inputs (Megatron Core gpt_model.py / hybrid_model.py: the
        # embedding exists where `pre_process or mtp_process`), trained like the first stage's
        mtp_embedding = last and not first and _mtp_depth(arch, L) > 0
        if mtp_embedding:
            dense += emb
        # DSA: the indexer of each held layer that runs one (planner.dsa), replicated over TP; an MTP
        # layer runs its own
        dsa_layers = sum(1 for i in layers if runs_indexer(arch, i + 1))
        if last and uses_dsa(arch):
            dsa_layers += _mtp_depth(arch, L)
        dense += dsa_layers * indexer_params(arch)
        adapters = _adapter_params(arch, kinds, L) if self.peft else 0.0
        embeddings = emb * (int(first) + int(last and not (arch.share_embeddings_and_output_weights and L.pp == 1))
                            + int(mtp_embedding))
        hit = (dense, expert, counts, len(kinds), biggest, adapters, embeddings, dsa_layers)
        self._stages[key] = hit
        return hit

    def _act(self, kind: str, L: Layout) -> tuple[float, float]:
        modules = effective_modules(L, self.arch, self.precision)
        key = (kind, modules, L.etp_size)
        hit = self._acts.get(key)
        if hit is None:
            hit = _act_bytes_per_token(self.arch, kind, L, 1.0 if self.low_precision else 2.0,
                                       dropped(modules, self.arch))
            self._acts[key] = hit
        return hit

    def stage(self, L: Layout, first: bool, hbm_gb: float | None, rank: int | None = None) -> MemoryBreakdown:
        """The first (or last) stage's memory; `rank`: a middle pipeline rank's instead."""
        arch = self.arch
        tp, cp, pp = L.tp, L.cp, L.pp
        dense, expert, counts, n_layers, biggest, adapters, embeddings, dsa_layers = self._stage_params(L, first, rank)
        position = (0 if first else pp - 1) if rank is None else rank
        if rank is not None:
            first = False
        last = rank is None and (not first or pp == 1)
        # bf16 weights; FP8 runs keep fp8 primary weights (fp8_param_gather) plus the transposed
        # copy the backward GEMMs need (about 2 bytes); NVFP4 runs keep fp4 ones (WEIGHT_BYTES)
        weight_bytes = self.weight_bytes
        # the recipe's gradient-reduction dtype (ddp.grad_reduce_in_fp32) when the layout carries it,
        # and the precision-aware optimizer's state bytes (planner.recipe_settings.optimizer_bytes)
        grad_bytes = L.grad_bytes if L.grad_bytes is not None else self.grad_bytes
        optim_bytes = L.optimizer_bytes if L.optimizer_bytes is not None else OPTIM_BYTES
        dp_shard = max(L.dp * cp, 1)
        edp_shard = max(L.edp, 1)
        params = dense + expert
        if self.peft:
            weights = params * weight_bytes + adapters * 2
            grads = adapters * grad_bytes
            optim = adapters * optim_bytes / (dp_shard if L.distributed_optimizer else 1)
        elif L.fsdp:
            weights = dense * weight_bytes / dp_shard + expert * weight_bytes / edp_shard
            grads = (dense / dp_shard + expert / edp_shard) * grad_bytes
            optim = dense * optim_bytes / dp_shard + expert * optim_bytes / edp_shard
            weights += biggest * (2 * weight_bytes + grad_bytes)  # two gathered units + one unsharded grad
        else:
            weights = params * weight_bytes
            grads = params * grad_bytes
            if L.distributed_optimizer:
                optim = dense * optim_bytes / dp_shard + expert * optim_bytes / edp_shard
            else:
                optim = params * optim_bytes
        if L.frozen_language and not self.peft:
            # model.freeze_language_model: the decoder's parameters have requires_grad False, so
            # Megatron's DDP gives them no gradient buffer and the optimizer no state (the vision
            # parts are not modelled); activations stay, the trained projection is upstream
            grads = optim = 0.0
        if L.cpu_offload:
            optim = 0.0
        elif L.optimizer_offload_fraction:
            # optimizer_cpu_offload: this share of the optimizer state lives on the CPU (Megatron Core
            # optimizer/cpu_offloading/hybrid_optimizer.py, HybridDeviceOptimizer's offload_fraction)
            optim *= 1.0 - min(max(L.optimizer_offload_fraction, 0.0), 1.0)
        fp8_copies = 0.0
        gather = L.fp8_param_gather if L.fp8_param_gather is not None else FP8_PARAM_GATHER_DEFAULT.get(self.precision)
        if gather is False and self.precision.startswith("fp8"):
            # bf16 primary weights (2 bytes, not the fp8 pair weight_bytes assumed) plus TE's fp8
            # copy of every linear weight (embeddings and the output layer stay bf16)
            linear = max(params - embeddings, 0.0)
            if L.fsdp:
                linear = max(dense - embeddings, 0.0) / dp_shard + expert / edp_shard
            fp8_copies = linear * FP8_COPY_BYTES.get(self.precision, FP8_COPY_BYTES_DEFAULT)
        dispatch = dispatcher_bytes(arch, L) if counts.get("E") else 0.0

        tokens = L.mbs * L.seq_length / cp
        split = tp if (L.sp or tp == 1) else 1.0  # without SP, norms and residuals are replicated
        stage_act = 0.0
        working = 0.0
        offload = L.offload_modules or ()
        for kind, count in counts.items():
            norms, tp_part = self._act(kind, L)
            if offload:
                off_norms, off_tp = _offloaded_bytes_per_token(
                    arch, kind, L, 1.0 if self.low_precision else 2.0, offload,
                    dropped(effective_modules(L, arch, self.precision), arch))
                norms, tp_part = max(norms - off_norms, 0.0), max(tp_part - off_tp, 0.0)
            per_layer = tokens * (norms / split + tp_part / tp)
            stage_act += per_layer * count
            working = max(working, per_layer)
        dsa_scratch = 0.0
        if dsa_layers:
            # DSA (planner.dsa): the top-k and indexer-loss tensors of each layer that runs an
            # indexer (whole on every TP rank), and the scoring scratch of the layer at work, which
            # comes on top of whatever else is saved at that moment, with or without recompute
            recomputes_core = "core_attn" in effective_modules(L, arch, self.precision)
            dsa_saved = tokens * dsa_saved_bytes(arch, recomputes_core)
            stage_act += dsa_saved * dsa_layers
            working += dsa_saved
            dsa_scratch = dsa_transient_bytes(arch, L.mbs, L.seq_length, cp)
        vp = L.vp_size
        m = L.microbatches
        if pp == 1:
            inflight_chunks, chunks = 1.0, 1.0
        elif vp > 1:
            # Megatron's interleaved warm-up on pipeline rank r: 2 (pp - r - 1) + (vp - 1) pp
            warm = 2 * (pp - 1 - position) + (vp - 1) * pp
            inflight_chunks, chunks = float(min(warm + 1, m * vp)), float(vp)
        else:
            inflight_chunks, chunks = float(min(pp - position, m)), 1.0
        share = recompute_share(arch.num_layers, L)
        if share > 0.0:
            # recomputed layers keep only their input; the others (block method) keep everything
            layer_inputs = 2.0 * arch.hidden_size * tokens / split * n_layers / chunks
            activations = (share * layer_inputs + (1.0 - share) * stage_act / chunks) * inflight_chunks + working
        elif L.cpu_offload_layers and pp == 1:
            # CPU activation offloading (model.cpu_offloading, Megatron Core transformer_block.py ->
            # TE get_cpu_offload_context(num_layers=cpu_offloading_num_layers)): those layers'
            # saved activations go to the CPU (the first N: each is freed once copied, long before
            # the peak at the end of the forward pass, and reloaded one at a time in backward after
            # the later layers' are freed). Megatron rejects it with PP > 1 or recompute
            # (transformer_config.py __post_init__).
            kept = max(n_layers - L.cpu_offload_layers, 0) / max(n_layers, 1)
            activations = max(stage_act * kept, working)
        else:
            activations = stage_act / chunks * inflight_chunks
        if offload:
            activations += working  # the layer whose inputs are in flight to the CPU
        activations += dsa_scratch
        if L.cuda_graph_scope:
            # per-layer CUDA graphs (Megatron Core transformer/cuda_graphs.py, one set of static
            # sample args per (layer, micro-batch) of the schedule, reused once a micro-batch is
            # done): a hidden-sized static input and output for forward and backward per graphed
            # layer and micro-batch in flight
            hidden = 2.0 * arch.hidden_size * tokens / split
            activations += 4.0 * hidden * (n_layers / chunks) * inflight_chunks
        if first:
            activations += 2.0 * arch.hidden_size * tokens / split  # embedding output
        logits = 0.0
        if last:
            heads = 1 + (_mtp_depth(arch, L) if not arch.is_hybrid else 0)
            # bf16 logits, and the fp32 softmax the unfused vocab-parallel cross entropy keeps for
            # backward (tensor_parallel/cross_entropy.py); the fused one (cross_entropy_loss_fusion,
            # TE's parallel_cross_entropy or Megatron's fused_cross_entropy) writes its gradient
            # into the logits
            logits = heads * tokens * arch.padded_vocab(tp) / tp * (2.0 + (0.0 if L.ce_fusion else 4.0))
        base = weights + grads + optim + activations + logits + fp8_copies + dispatch
        allowance = ALLOWANCE_GIB * GIB + FRAGMENTATION * base
        stage = "only" if pp == 1 else ("first" if first else ("last" if last else "middle"))
        return MemoryBreakdown(
            weights=weights / GIB, gradients=grads / GIB, optimizer=optim / GIB, activations=activations / GIB,
            logits=logits / GIB, allowance=allowance / GIB, stage=stage, hbm_gb=hbm_gb,
            fp8_copies=fp8_copies / GIB, dispatcher=dispatch / GIB,
            recompute_modules=tuple(sorted(effective_modules(L, arch, self.precision))),
            fp8_param_gather=gather if self.precision.startswith("fp8") else None,
            moe_dispatcher=L.moe_dispatcher if counts.get("E") else None,
        )


def _mtp_depth(arch: ModelArch, L: Layout) -> int:
    """Multi-token prediction layers on the last stage: the recipe's model.mtp_num_layers (Layout.
    mtp_layers, 0: off, as DeepSeek-V3's "w/o MTP" runs) when the layout carries it, else the model's."""
    return int(L.mtp_layers if L.mtp_layers is not None else (arch.mtp_num_layers or 0))


def _adapter_params(arch: ModelArch, kinds: tuple[str, ...], layout: Layout, rank: int = 32) -> float:
    """LoRA adapters (rank r on linear_qkv, linear_proj, linear_fc1, linear_fc2) on this GPU.
    Grouped MoE expert linears get ONE adapter shared by all the experts local to an EP rank
    (Megatron Bridge 0.6.2 peft/lora.py: share_expert_adapters=True by default), not one per expert."""
    h, d = arch.hidden_size, arch.head_dim
    n, g = arch.num_attention_heads, arch.kv_groups
    m = 2 if arch.gated_linear_unit else 1
    attn = rank * (h + d * (n + 2 * g)) + rank * (n * d + h)
    mlp = rank * (h + m * (arch.ffn_hidden_size or 0)) + rank * ((arch.ffn_hidden_size or 0) + h)
    expert = rank * (2 * h + (m + 1) * arch.expert_ffn / layout.etp_size) if arch.num_moe_experts else 0.0
    total = 0.0
    for kind in kinds:
        total += attn / layout.tp if kind != "M" else 0.0
        total += mlp / layout.tp if kind == "-" else 0.0
        total += expert if kind == "E" else 0.0
    return total


def static_memory(arch: ModelArch, layout: Layout, *, precision: str = "bf16", goal: str = "pretrain",
                  grad_bytes: float = GRAD_BYTES) -> float:
    """A lower bound (GiB) on the memory of every variant of this grid: micro-batch 1, full
    recompute, no virtual pipeline. The search drops a grid whose bound already exceeds HBM."""
    lightest = evolve(layout, mbs=1, recompute="full", vp=None)
    bound = estimate_memory(arch, lightest, None, precision=precision, goal=goal, grad_bytes=grad_bytes).total
    if layout.cpu_offload_layers:
        # CPU offloading runs without recompute (Megatron rejects both) and may keep less than full
        # recompute's layer inputs: the bound is the lighter of the two
        offloaded = evolve(layout, mbs=1, recompute="none", recompute_layers=None, vp=None)
        bound = min(bound, estimate_memory(arch, offloaded, None, precision=precision, goal=goal,
                                           grad_bytes=grad_bytes).total)
    return bound
