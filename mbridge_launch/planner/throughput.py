"""Step time, tokens/s/GPU, model TFLOP/s/GPU and MFU of one layout.

Per micro-batch and pipeline stage (forward + backward):
  compute   dense GEMMs at the precision's peak x CAL.gemm_eff[precision] x the generation's
            sustained-speed factor; flash attention at the bf16 peak x CAL.attn_eff, slower on
            short chunks (CP splits a sequence into 2 x CP chunks; CAL.attn_half_tokens) and with
            its softmax share CAL.exp_share sped up on GPUs with faster exp units (Blackwell
            Ultra); routed-expert grouped GEMMs at CAL.moe_eff of the bf16 peak (x
            CAL.moe_lowp_gain in FP8/FP4), growing with the tokens each local expert receives
            (CAL.moe_half_tokens); memory-bound element-wise work (norms, activations, casts,
            permutes) moving CAL.elementwise x the element bytes through HBM; the host's launch
            time per layer (CAL.layer_latency_s), hidden while GPU work is longer and exposed when
            layers are short; the dropless-MoE host sync per MoE layer (CAL.moe_sync_s); both host
            round trips scaled by the host (CAL.host_latency: Grace over NVLink-C2C vs x86). Full
            recompute repeats the forward (x4/3; x3/2 for the GEMMs of frozen PEFT weights, which
            have no weight gradient), selective a few percent.
  comms     TP (sequence-parallel all-gather/reduce-scatter), CP (KV ring exchange) and EP
            (all-to-all dispatch/combine) over NVLink when the group sits inside one NVLink
            domain, else the network; overlap hides CAL.*_exposed of it at most, never more than
            the compute there is to hide behind.
Per step: (micro-batches + (PP-1)/VP bubble) x the busiest stage's time (stages hold whole
layers; the last one also runs the LM head(s) and MTP, which an uneven split offsets only by
whole layers), plus pipeline send/receive (bandwidth + CAL.p2p_latency_s; all of it waited for
without interleaving, CAL.tp_exposed of it with VP > 1, which overlaps it), the data-parallel gradient
reduce-scatter / parameter all-gather (hierarchical: NVLink inside a domain, every GPU's NIC
across; plus CAL.ring_step_s per ring step and bucket) not hidden behind the last micro-batch,
Megatron-FSDP's per-micro-batch gathers (CAL.fsdp_exposed), and the optimizer step (HBM-bound).
Under PEFT (LoRA/DoRA) only the adapters get gradients and optimizer state: the data-parallel
reduction and the optimizer step cover them alone (flops.trained_params), which at a few
micro-batches per step is most of what a full-weight model would charge.
Every term is a time added to GEMM time at or below peak: no estimate exceeds the peak, and
an estimate above MFU_CEILING of its precision is clamped to it (StepEstimate.mfu_capped says so).
The constants are fitted by benchmarks/fit_constants.py on the published benchmark rows, each
inside its physical range (BOUNDS, declared once below with the reason for each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mbridge_launch.base.i18n import t
from mbridge_launch.knowledge.hardware import Hardware
from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.planner.flops import FlopsPerToken, flops_per_token, trained_params
from mbridge_launch.planner.pipeline_split import EVEN, split_of
from mbridge_launch.planner.rules import Layout, recompute_share, stage_layers


@dataclass(frozen=True)
class Calibration:
    """Fitted constants (benchmarks/fit_constants.py). Efficiencies are fractions of peak."""

    gemm_eff: dict = field(default_factory=lambda: {"bf16": 0.62, "fp8": 0.50, "fp8mx": 0.47, "nvfp4": 0.30}, hash=False)
    attn_eff: float = 0.42
    attn_half_tokens: float = 256.0  # query tokens per attention chunk at which efficiency halves
    exp_share: float = 0.35
    moe_eff: float = 0.6  # grouped-GEMM efficiency of the bf16 peak, large expert batches
    moe_lowp_gain: float = 1.3  # speed-up of FP8/FP4 grouped GEMMs over bf16 ones
    moe_half_tokens: float = 1500.0  # tokens per expert per micro-batch at which it halves
    elementwise: float = 1.0
    layer_latency_s: float = 1.5e-4  # host launch time per layer and micro-batch (fwd + bwd)
    moe_sync_s: float = 1.0e-3
    tp_exposed: float = 0.35
    cp_exposed: float = 0.35
    ep_exposed: float = 0.5
    dp_exposed: float = 0.2
    fsdp_exposed: float = 0.3  # Megatron-FSDP per-micro-batch gathers that prefetch does not hide
    p2p_latency_s: float = 5e-5  # per pipeline send/receive (network round trip + sync)
    ring_step_s: float = 1e-5  # latency of one step of a ring collective that crosses the network
    # host round trips (launch latency, dropless sync) relative to an x86 host over PCIe
    host_latency: dict = field(default_factory=lambda: {"x86": 1.0, "grace": 1.0}, hash=False)
    link_eff: float = 0.75
    # sustained speed of a GPU generation relative to its nominal peak (Blackwell = 1)
    generation: dict = field(default_factory=lambda: {"hopper": 1.0, "blackwell": 1.0, "blackwell_ultra": 1.0}, hash=False)


@dataclass(frozen=True)
class Bound:
    """The physical range of one constant of Calibration: the fit (benchmarks/fitting.py) keeps
    it inside [low, high]; `fitted` False: held at its value (references, link efficiency)."""

    low: float
    high: float
    why: str
    fitted: bool = True

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


# The physical range of every constant of Calibration, declared once ("group.key" for the dict
# fields). The published rows hold no dense BF16, no H200 and no sequence beyond 8k: unbounded, the
# fit reached Hopper GEMMs at 91% of peak, Blackwell Ultra attention at 98.6%, a half-saturation of
# 3,058 tokens, 3.5x the element-wise bytes and 3.8 ms of host time per layer, which then
# extrapolated to 75% MFU. Sources: NVIDIA's cuBLAS/Transformer Engine GEMM benchmarks and
# FlashAttention-3 (Shah et al. 2024) for the compute ceilings, NCCL's bus-bandwidth tests and
# CUDA launch latencies for the rest; where no source pins a figure the reasoning is given.
BOUNDS: dict[str, Bound] = {
    # GEMM rate = nominal peak x generation x gemm_eff: large GEMMs of transformer shapes sustain
    # 60-80% of the dense peak (cuBLAS, BF16 and FP8 alike, each of its own peak); a model-wide
    # average also holds small and skinny GEMMs, so 0.80 is the top, 0.30 a broken run
    "gemm_eff.bf16": Bound(0.30, 0.80, "BF16 GEMMs: at most 80% of the dense BF16 peak (cuBLAS, large shapes)"),
    "gemm_eff.fp8": Bound(0.30, 0.80, "FP8 GEMMs: at most 80% of the dense FP8 peak (same shapes, plus scaling)"),
    "gemm_eff.fp8mx": Bound(0.30, 0.80, "MXFP8 GEMMs: at most 80% of the FP8 peak (block scales cost more)"),
    "gemm_eff.nvfp4": Bound(0.20, 0.75, "NVFP4 GEMMs: at most 75% of the FP4 peak (two-level scaling, casts)"),
    # FlashAttention-3 reaches 740 of 989 TFLOP/s forward on H100 (75%), its backward less; the
    # faster exp units of Blackwell Ultra speed up the softmax share, never past this ceiling
    # (step_model caps the effective attention rate at attn_eff's high bound of the BF16 peak)
    "attn_eff": Bound(0.20, 0.75, "flash attention: at most 75% of the BF16 peak (FlashAttention-3 forward)"),
    "attn_half_tokens": Bound(64.0, 1024.0, "query tokens per chunk at half speed: tiles are 128 rows; "
                              "flash attention runs near full speed from a few thousand tokens"),
    "exp_share": Bound(0.0, 0.5, "softmax share of attention time: exp runs 256x slower than matmul on "
                       "H100 (FlashAttention-3), about half the cycles at head dim 128 without overlap, not more"),
    "moe_eff": Bound(0.20, 0.75, "grouped expert GEMMs: below the dense GEMM ceiling (0.80)"),
    "moe_lowp_gain": Bound(1.0, 2.0, "FP8 grouped GEMMs over BF16: never slower, at most the 2x peak ratio"),
    "moe_half_tokens": Bound(16.0, 4096.0, "tokens per expert at half speed: a few to a few dozen 128-row tiles"),
    "elementwise": Bound(1.0, 2.0, "HBM traffic of element-wise work over the counted bytes: the counted "
                         "reads and writes are the minimum, unfused kernels re-read at most once more"),
    # a generation's factor scales its nominal peak; gemm_eff is already the best fraction of a
    # peak any generation sustains, so a factor above 1 would put that generation's GEMMs past
    # 80% of its own peak (the unbounded fit put Hopper at 1.163 x 0.78 = 91%): at most 1.
    # Clock and power throttling under dense GEMM load costs a generation at most 30%.
    "generation.hopper": Bound(0.70, 1.0, "sustained share of the nominal peak relative to Blackwell: at most 1"),
    "generation.blackwell": Bound(1.0, 1.0, "the reference generation", fitted=False),
    "generation.blackwell_ultra": Bound(0.70, 1.0, "sustained share of the nominal peak relative to Blackwell: at most 1"),
    # a layer launches some 30-60 kernels forward and backward at 3-10 us each
    "layer_latency_s": Bound(1e-5, 1e-3, "host launch time per layer and micro-batch: 0.01-1 ms"),
    "moe_sync_s": Bound(1e-5, 2e-3, "dropless MoE host sync per layer: the sync plus relaunching one layer's "
                        "kernels forward and backward (2 x the launch bound)"),
    "tp_exposed": Bound(0.0, 1.0, "exposed share of TP communication: a fraction"),
    "cp_exposed": Bound(0.0, 1.0, "exposed share of CP communication: a fraction"),
    "ep_exposed": Bound(0.0, 1.0, "exposed share of EP communication: a fraction"),
    "dp_exposed": Bound(0.0, 1.0, "exposed share of data-parallel communication: a fraction"),
    "fsdp_exposed": Bound(0.0, 1.0, "exposed share of Megatron-FSDP gathers: a fraction"),
    "p2p_latency_s": Bound(1e-6, 1e-3, "pipeline send/receive latency: microseconds (network round trip + sync)"),
    "ring_step_s": Bound(1e-6, 2e-4, "one network ring step: NCCL's per-step latency is 5-20 us"),
    "host_latency.x86": Bound(1.0, 1.0, "the reference host", fitted=False),
    "host_latency.grace": Bound(0.3, 1.0, "Grace over NVLink-C2C vs x86 over PCIe: never slower, at most ~3x faster"),
    "link_eff": Bound(0.5, 0.9, "NCCL bus bandwidth over the link rate (nccl-tests: 70-85%)", fitted=False),
}


def constant(cal: Calibration, name: str) -> float:
    """The value of constant `name` of BOUNDS ("group.key" for the dict fields)."""
    group, _, key = name.partition(".")
    value = getattr(cal, group)
    return float(value[key]) if key else float(value)


def out_of_bounds(cal: Calibration) -> list[str]:
    """The constants of `cal` outside their physical range, as "name=value not in [low, high]"."""
    bad = []
    for name, b in BOUNDS.items():
        v = constant(cal, name)
        if not b.contains(v):
            bad.append(f"{name}={v:.4g} not in [{b.low:.4g}, {b.high:.4g}]")
    return bad


# No estimate above this model-FLOPs utilisation of the precision's dense peak. Dense BF16: the
# best published large-scale runs reach 40-55% (Llama 3 405B 38-43%, MegaScale 55.2% on 175B;
# NVIDIA's own dense BF16 rows are not in the calibration set), so 60% is generous; no dense BF16
# estimate above it (issue 17). FP8 (per-tensor, delayed, block, MXFP8) against the FP8 peak: the
# best published rows reach 51.7% (Llama 3.1 405B, GB300, FP8 current scaling) and 47.9% (MXFP8);
# attention and the casts stay at BF16 speed, so 55%. NVFP4 against the FP4 peak: 27.3% at best
# (attention, norms and the unquantised GEMMs run at a quarter of the FP4 rate), so 40%.
MFU_CEILING: dict[str, float] = {"bf16": 0.60, "fp8": 0.55, "fp8mx": 0.55, "nvfp4": 0.40}


# BEGIN FITTED CONSTANTS (written by benchmarks/fit_constants.py --write)
CAL = Calibration(
    gemm_eff={"bf16": 0.7841, "fp8": 0.7872, "fp8mx": 0.6595, "nvfp4": 0.4917},
    attn_eff=0.2265,
    attn_half_tokens=1012,
    exp_share=0.4919,
    moe_eff=0.2659,
    moe_lowp_gain=1.675,
    moe_half_tokens=138.3,
    elementwise=1.958,
    layer_latency_s=0.0009789,
    moe_sync_s=0.001965,
    tp_exposed=0.7357,
    cp_exposed=0.5328,
    ep_exposed=0.3308,
    dp_exposed=0.4207,
    fsdp_exposed=0.1632,
    p2p_latency_s=5.425e-05,
    ring_step_s=2.868e-05,
    host_latency={"x86": 1, "grace": 0.302},
    link_eff=0.75,
    generation={"hopper": 0.9986, "blackwell": 1, "blackwell_ultra": 0.9999},
)
# END FITTED CONSTANTS

# Precision -> key of Calibration.gemm_eff
_EFF_KEY = {"bf16": "bf16", "fp8cs": "fp8", "fp8ds": "fp8", "fp8sc": "fp8", "fp8mx": "fp8mx", "nvfp4": "nvfp4"}


@dataclass(frozen=True)
class StepEstimate:
    step_time_s: float
    tokens_per_sec_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    flops_per_token: float
    breakdown: dict = field(hash=False, default_factory=dict)
    # True when the model predicted more than MFU_CEILING of the precision and the estimate was
    # clamped to the ceiling (step time lengthened; breakdown["mfu_ceiling"] holds the added seconds)
    mfu_capped: bool = False
    # measured / predicted of the measured row that corrected this estimate (planner.measured);
    # 1.0 = the model's own figure
    measured_ratio: float = 1.0

    @property
    def mfu_uncapped(self) -> float:
        """The MFU the model predicts before the ceiling (= mfu when not capped); the renderers
        show it with message key planner.mfu_capped."""
        extra = self.breakdown.get("mfu_ceiling", 0.0)
        return self.mfu * self.step_time_s / (self.step_time_s - extra) if extra else self.mfu


def mfu_ceiling(precision: str) -> float:
    """The MFU ceiling of a precision (MFU_CEILING): no estimate goes above it."""
    return MFU_CEILING[_EFF_KEY.get(precision, precision)]


def ceiling_note(est: StepEstimate, precision: str, lang: str | None = None) -> str | None:
    """The card line of a clamped estimate (message planner.mfu_capped), None when not capped."""
    if not est.mfu_capped:
        return None
    key = _EFF_KEY.get(precision, precision)
    return t("planner.mfu_capped", lang=lang, precision=precision, ceiling=MFU_CEILING[key], mfu=est.mfu_uncapped)


@lru_cache(maxsize=256)
def _elementwise_bytes(arch: ModelArch, gemm_bytes: float) -> tuple[float, float]:
    """HBM bytes per token of element-wise work, (all layers, of which MoE routing), fwd+bwd."""
    h = arch.hidden_size
    ffn = arch.ffn_hidden_size or 0
    counts = arch.layer_counts()
    per_attn = 6 * h + 2 * (arch.num_attention_heads * arch.head_dim) if arch.mla is None else 6 * h + 4 * arch.num_attention_heads * (arch.mla.v_head_dim or 128)
    per_mlp = 6 * h + 3 * ffn
    k = arch.moe_router_topk or 0
    per_moe = 6 * h + 3 * (arch.moe_shared_expert_intermediate_size or 0) + k * (4 * h + 3 * arch.expert_ffn)
    heads = arch.mamba.num_heads or (2 * h // (arch.mamba.head_dim or 64))
    per_mamba = 6 * h + 8 * heads * (arch.mamba.head_dim or 64)
    attn_layers = counts["attention"]
    total = attn_layers * per_attn + counts["mlp"] * per_mlp + counts["moe"] * per_moe + counts["mamba"] * per_mamba
    routing = counts["moe"] * k * 4 * h
    # x2 bytes (bf16) x3 (forward, backward reads and writes)
    return total * 2.0 * 3.0, routing * 2.0 * 3.0


def _a2a_time(nbytes: float, span: int, hw: Hardware, cal: Calibration) -> float:
    """All-to-all among `span` consecutive GPUs: the part crossing NVLink domains uses the NIC."""
    if span <= 1:
        return 0.0
    share_out = (span - 1) / span
    if span <= hw.nvlink_domain:
        return nbytes * share_out / (hw.nvlink_gbps * 1e9 * cal.link_eff)
    remote = (span - hw.nvlink_domain) / (span - 1)
    t_local = nbytes * share_out * (1 - remote) / (hw.nvlink_gbps * 1e9 * cal.link_eff)
    t_remote = nbytes * share_out * remote / (hw.network_gbps * 1e9 * cal.link_eff)
    return max(t_local, t_remote)


def _ring_time(nbytes: float, group: int, stride: int, hw: Hardware, cal: Calibration) -> float:
    """All-gather or reduce-scatter of `nbytes` (full size) over `group` ranks `stride` GPUs
    apart, done hierarchically: inside each NVLink domain over NVLink, then across domains with
    every GPU's own NIC carrying its 1/r share (r = group ranks per domain)."""
    if group <= 1:
        return 0.0
    per_domain = max(1, min(group, hw.nvlink_domain // stride)) if stride <= hw.nvlink_domain else 1
    domains = group / per_domain
    t = 0.0
    if per_domain > 1:
        t += nbytes * (per_domain - 1) / per_domain / (hw.nvlink_gbps * 1e9 * cal.link_eff)
    if domains > 1:
        t += nbytes / per_domain * (domains - 1) / domains / (hw.network_gbps * 1e9 * cal.link_eff)
    return t


# Megatron's DDP bucket: max(40M, 1M x DP size) parameters (DistributedDataParallelConfig.bucket_size)
_BUCKET_MIN_PARAMS = 40e6
_BUCKET_PARAMS_PER_RANK = 1e6
# ring steps inside one NVLink domain cost a fraction of a network step
_NVLINK_STEP_SHARE = 0.2


def _ring_latency(collectives: float, group: int, stride: int, hw: Hardware, cal: Calibration) -> float:
    """Latency of `collectives` ring all-gathers/reduce-scatters over `group` ranks: a ring has
    group - 1 steps and each step waits for its slowest hop, the network when the group leaves
    one NVLink domain. This is what makes huge data-parallel groups (and Megatron-FSDP's
    per-layer gathers over them) slow at scale, whatever the bandwidth."""
    if group <= 1 or collectives <= 0:
        return 0.0
    crosses = group * stride > hw.nvlink_domain
    return collectives * (group - 1) * cal.ring_step_s * (1.0 if crosses else _NVLINK_STEP_SHARE)


def _buckets(params: float, group: int) -> float:
    return -(-params // max(_BUCKET_MIN_PARAMS, _BUCKET_PARAMS_PER_RANK * group)) if params > 0 else 0.0


def step_model(arch: ModelArch, hw: Hardware, precision: str = "bf16", goal: str = "pretrain", *,
               mtp_layers: int | None = None, moe_token_drop: bool = False, cal: Calibration = CAL,
               grad_bytes: float = 4.0) -> "_StepModel":
    """The cached per-(model, system, precision, goal) estimator; `.step(layout)`, `.bound(layout)`."""
    return _model(arch, hw, precision, goal, mtp_layers, moe_token_drop, cal, grad_bytes)


def estimate_step(arch: ModelArch, hw: Hardware, layout: Layout, precision: str = "bf16", goal: str = "pretrain",
                  **options: Any) -> StepEstimate:
    """The step estimate of one layout; `options` are step_model's (mtp_layers, moe_token_drop, cal, grad_bytes)."""
    return step_model(arch, hw, precision, goal, **options).step(layout)


@lru_cache(maxsize=64)
def _model(arch, hw, precision, goal, mtp_layers, moe_token_drop, cal, grad_bytes=4.0) -> "_StepModel":
    return _StepModel(arch, hw, precision, goal, mtp_layers, moe_token_drop, cal, grad_bytes)


class _StepModel:
    """Everything that depends only on (model, system, precision, goal, constants), computed
    once; `step(layout)` then costs a few dozen float operations."""

    def __init__(self, arch: ModelArch, hw: Hardware, precision: str, goal: str,
                 mtp_layers: int | None, moe_token_drop: bool, cal: Calibration, grad_bytes: float = 4.0) -> None:
        self.arch, self.hw, self.precision, self.goal, self.cal = arch, hw, precision, goal, cal
        self.grad_bytes = grad_bytes
        self.mtp_layers = mtp_layers
        speed = min(cal.generation.get(hw.generation, 1.0), 1.0 / max(cal.gemm_eff.values()))
        self.peak_nominal = hw.peak(precision) * 1e12
        self.peak_bf16 = hw.peak("bf16") * 1e12 * speed
        self.gemm_rate = hw.peak(precision) * 1e12 * speed * cal.gemm_eff[_EFF_KEY[precision]]
        attn_rate = self.peak_bf16 * cal.attn_eff / ((1 - cal.exp_share) + cal.exp_share / hw.attention_exp_speedup)
        # faster exp units speed up the softmax share, never past the physical attention ceiling
        self.attn_rate = min(attn_rate, hw.peak("bf16") * 1e12 * BOUNDS["attn_eff"].high)
        self.mfu_ceiling = MFU_CEILING[_EFF_KEY[precision]]
        self.low_precision = precision != "bf16"
        self.elem, _ = _elementwise_bytes(arch, 1.0 if self.low_precision else 2.0)
        counts = arch.layer_counts()
        self.layers = arch.num_layers + (0 if arch.is_hybrid else (arch.mtp_num_layers if mtp_layers is None else mtp_layers))
        self.attn_layers = counts["attention"]
        self.moe_layers = counts["moe"]
        self.host = cal.host_latency.get(hw.host, 1.0)
        self.moe_sync = 0.0 if moe_token_drop else self.moe_layers * cal.moe_sync_s * self.host
        self.dense_total = arch.total_params - arch.expert_total_params
        self.expert_total = arch.expert_total_params
        # the weights that get gradients and an optimizer step: all of them, or under PEFT the
        # adapters only (flops.trained_params); Megatron's DDP buckets hold trained weights only
        trained = trained_params(arch, goal)
        self.dense_trained: float = trained[0] if trained is not None else float(self.dense_total)
        self.expert_trained: float = trained[1] if trained is not None else float(self.expert_total)
        # forward share of a weight GEMM's training work: forward, data gradient and weight
        # gradient are equal thirds; a frozen weight has no weight gradient, so its forward is half
        self.gemm_forward_share = _FROZEN_FORWARD if trained is not None else _FULL_EXTRA
        mla = arch.mla
        if mla is not None:
            self.kv_width = arch.num_attention_heads * ((mla.qk_head_dim or 0) + (mla.qk_pos_emb_head_dim or 0) + (mla.v_head_dim or 0))
        else:
            self.kv_width = 2 * arch.kv_groups * arch.head_dim
        self._flops: dict[tuple[int, int], FlopsPerToken] = {}

    def bound(self, L: Layout) -> float:
        """An upper bound on tokens/s/GPU for every layout that differs from L only in VP and
        recompute: L's micro-batch time with no recompute, no pipeline bubble, no imbalance and
        no data-parallel or pipeline communication."""
        from mbridge_launch.planner.rules import evolve

        est = self.step(evolve(L, recompute="none", vp=None, uneven_pp=False), bound=True)
        return est.tokens_per_sec_per_gpu

    def step(self, L: Layout, bound: bool = False) -> StepEstimate:
        arch, hw, cal = self.arch, self.hw, self.cal
        tp, pp, cp, vp = L.tp, L.pp, L.cp, L.vp_size
        world = L.world or tp * pp * cp
        dp = L.dp
        m = L.microbatches
        seq = L.seq_length
        fl = self._flops.get((tp, seq))
        if fl is None:
            fl = self._flops[(tp, seq)] = flops_per_token(arch, seq, tp=tp, mtp_layers=self.mtp_layers, goal=self.goal)
        tokens_mb = L.mbs * seq  # tokens of one micro-batch (whole sequence)
        split = tp * cp  # every GEMM and token is shared by TP x CP GPUs (SP on)
        gemm_rate = self.gemm_rate
        # grouped GEMMs: their efficiency grows with the tokens each local expert receives
        moe_rate = 1.0
        if arch.is_moe:
            per_expert = tokens_mb / split * (arch.moe_router_topk or 1) * L.ep / (arch.num_moe_experts or 1)
            moe_rate = self.peak_bf16 * cal.moe_eff * per_expert / (per_expert + cal.moe_half_tokens)
            moe_rate = min(moe_rate * (cal.moe_lowp_gain if self.low_precision else 1.0), gemm_rate)
        recompute_factor = _recompute_factor(L, arch.num_layers)
        # the weight GEMMs repeat their forward, a larger share of their work when frozen (PEFT)
        gemm_factor = _recompute_factor(L, arch.num_layers, self.gemm_forward_share)
        per_tok_gemm = (fl.gemm - fl.logits) * gemm_factor + fl.logits
        scale = tokens_mb / split
        t_gemm = (per_tok_gemm + fl.mamba * gemm_factor) * scale / gemm_rate
        # flash attention loses efficiency on short chunks: CP splits each sequence into 2 x CP
        chunk = seq / (2 * cp)
        t_attn = fl.attn_core * recompute_factor * scale / self.attn_rate * (chunk + cal.attn_half_tokens) / chunk
        t_moe = fl.moe * gemm_factor * scale / moe_rate if fl.moe else 0.0
        # recompute repeats the forward's element-wise work and kernel launches as well
        t_elem = cal.elementwise * self.elem * scale / (hw.hbm_tbps * 1e12) * recompute_factor
        compute_all = t_gemm + t_attn + t_moe + t_elem  # whole model, one micro-batch

        h = arch.hidden_size
        link = cal.link_eff * 1e9
        # TP: 4 sequence-parallel collectives forward, 4 backward per layer (x1.5 with full recompute)
        t_tp = 0.0
        if tp > 1:
            n_tp = 8 * (1.0 + 0.5 * recompute_share(arch.num_layers, L))
            t_tp = n_tp * self.layers * _ring_time(tokens_mb / cp * h * 2.0, tp, 1, hw, cal)
        # CP: ring exchange of K and V (cp-1 steps), backward twice as much
        t_cp = 0.0
        if cp > 1:
            cp_bytes = 3 * (cp - 1) * tokens_mb / cp * self.kv_width * 2.0 / tp
            bw = hw.nvlink_gbps if tp * cp <= hw.nvlink_domain else hw.network_gbps
            t_cp = self.attn_layers * cp_bytes / (bw * link)
        # EP: dispatch (FP8 in low-precision runs) + combine, forward and backward
        t_ep = 0.0
        if arch.is_moe and L.ep > 1:
            k = arch.moe_router_topk or 1
            ep_bytes = scale * k * h * ((1.0 if self.low_precision else 2.0) + 2.0)
            t_ep = 2 * self.moe_layers * _a2a_time(ep_bytes, L.ep * L.etp_size, hw, cal)
        # overlap hides communication behind compute, never more than the compute there is
        e_tp = max(cal.tp_exposed * t_tp, t_tp - compute_all)
        e_cp = max(cal.cp_exposed * t_cp, t_cp - compute_all)
        e_ep = max(cal.ep_exposed * t_ep, t_ep - compute_all)
        # Host-side launch cost per layer: hidden while the GPU has longer work queued (CPU runs
        # ahead), exposed when layers are short; smoothly lat^2 / (lat + t_layer). Dropless MoE
        # synchronises host and device every MoE layer, which always costs moe_sync_s.
        lat = cal.layer_latency_s * self.host
        t_layer = compute_all / max(self.layers, 1)
        latency = (self.layers * lat * lat / (lat + t_layer) + self.moe_sync) * recompute_factor
        t_mb_all = compute_all + latency + e_tp + e_cp + e_ep

        # Pipeline: the slowest stage sets the pace. Stages hold whole layers and the last one
        # also the LM head(s) and loss, a few layers' worth for large vocabularies (see
        # _slowest_stage_layers).
        imbalance = 1.0
        t_stage = t_mb_all
        if pp > 1:
            t_head = fl.logits * scale / gemm_rate
            per_layer = (t_mb_all - t_head) / self.layers
            # MTP layers run on the last stage too
            last_extra = (t_head / per_layer if per_layer > 0 else 0.0) + self.layers - arch.num_layers
            t_stage = per_layer * _slowest_stage_layers(arch.num_layers, pp, vp, last_extra, L)
            imbalance = t_stage * pp / t_mb_all
        bubble = (pp - 1) / vp if pp > 1 else 0.0
        if bound:
            t = m * t_mb_all / pp
            return StepEstimate(t, L.gbs * seq / t / world, 0.0, 0.0, fl.total)
        t_p2p = 0.0
        if pp > 1:
            bw = hw.nvlink_gbps if world <= hw.nvlink_domain else hw.network_gbps
            t_p2p = 2 * vp * ((tokens_mb / cp * h * 2.0 / tp) / (bw * link) + cal.p2p_latency_s)
        p2p_exposed = cal.tp_exposed if vp > 1 else 1.0  # interleaving overlaps send/receive
        t_pipe = (m + bubble) * (t_stage + p2p_exposed * t_p2p)

        # Data parallel: distributed-optimizer reduce-scatter (grads) + all-gather (bf16 params)
        dense = self.dense_total / (tp * pp)
        expert = self.expert_total / (pp * L.ep * L.etp_size)
        dense_trained = self.dense_trained / (tp * pp)
        expert_trained = self.expert_trained / (pp * L.ep * L.etp_size)
        edp = L.edp
        ep_stride = L.ep * L.etp_size
        if L.fsdp:
            # Megatron-FSDP: gather params for forward and backward and reduce-scatter grads every
            # micro-batch (FP8 runs gather FP8 params); prefetching hides it behind compute
            # (frozen PEFT bases are sharded and gathered too, but reduce no gradient)
            gather = (1.0 if self.low_precision else 2.0) * 2
            per_mb = (_ring_time(dense * gather + dense_trained * self.grad_bytes, dp * cp, tp, hw, cal)
                      + _ring_time(expert * gather + expert_trained * self.grad_bytes, edp, ep_stride, hw, cal))
            # one gather forward, one backward and one reduce-scatter per layer of the stage
            stage_layers = self.layers / pp
            per_mb += (_ring_latency(3 * stage_layers, dp * cp, tp, hw, cal)
                       + (_ring_latency(3 * stage_layers, edp, ep_stride, hw, cal) if self.expert_total else 0.0))
            t_dp = m * max(per_mb * cal.fsdp_exposed, per_mb - t_stage)
        else:
            # gradients reduce-scattered, bf16 params all-gathered: the trained weights only
            unit = 2.0 + self.grad_bytes
            full = (_ring_time(dense_trained * unit, dp * cp, tp, hw, cal)
                    + _ring_time(expert_trained * unit, edp, ep_stride, hw, cal))
            # a reduce-scatter and an all-gather per bucket
            full += (_ring_latency(2 * _buckets(dense_trained, dp * cp), dp * cp, tp, hw, cal)
                     + _ring_latency(2 * _buckets(expert_trained, edp), edp, ep_stride, hw, cal))
            t_dp = max(full * cal.dp_exposed, full - t_stage)
        sharded = L.distributed_optimizer or L.fsdp
        shard = (dense_trained / max(dp * cp, 1) + expert_trained / max(edp, 1) if sharded
                 else dense_trained + expert_trained)
        t_opt = shard * 30.0 / (hw.hbm_tbps * 1e12 * 0.7)

        step = t_pipe + t_dp + t_opt
        # the MFU ceiling: a faster estimate is physics the model does not have; clamp and say so
        # (a part in 1e9 more, so that rounding never reports a hair above the ceiling)
        ceiling_step = L.gbs * seq / world * fl.total / (self.mfu_ceiling * self.peak_nominal) * (1 + 1e-9)
        capped = step < ceiling_step
        t_ceiling = ceiling_step - step if capped else 0.0
        step += t_ceiling
        tps = L.gbs * seq / step / world
        tflops = tps * fl.total / 1e12
        breakdown = {
            "gemm": t_gemm * m, "attention": t_attn * m, "moe": t_moe * m, "elementwise": t_elem * m,
            "latency": latency * m, "tp_comm": e_tp * m, "cp_comm": e_cp * m, "ep_comm": e_ep * m,
            "pp_bubble": bubble * t_stage, "pp_comm": (m + bubble) * p2p_exposed * t_p2p,
            "dp_comm": t_dp, "optimizer": t_opt,
        }
        if capped:
            breakdown["mfu_ceiling"] = t_ceiling
        if pp > 1:  # the per-micro-batch terms above are for the whole model; one stage does 1/PP
            for key in ("gemm", "attention", "moe", "elementwise", "latency", "tp_comm", "cp_comm", "ep_comm"):
                breakdown[key] *= imbalance / pp
        return StepEstimate(
            step_time_s=step, tokens_per_sec_per_gpu=tps, model_tflops_per_gpu=tflops,
            mfu=tflops * 1e12 / self.peak_nominal, flops_per_token=fl.total, breakdown=breakdown,
            mfu_capped=capped,
        )


def _slowest_stage_layers(layers: int, pp: int, vp: int, head: float, L: Layout) -> float:
    """Work of the busiest pipeline rank, in layers (`head`: what the last rank runs besides its
    decoder layers, LM head(s) and MTP, in layers).

    An even split gives every rank layers / PP layers and the last one the head too. An uneven
    split (Megatron's first/last-stage layer counts or pipeline layout) can give the last rank
    fewer layers, but only whole ones: with 94 layers on 32 stages and a head worth 2.6 layers,
    the best split still has a rank with 3.6 layers' work against a mean of 3.0."""
    split = split_of(L)
    if split is not None and split.kind != EVEN:
        # the declared split: each rank's decoder layers, the head on the rank holding the loss
        # (the embedding lookup costs next to nothing)
        return max(r.decoders + (head if r.loss else 0.0) for r in split.rank_shares(layers, pp, vp))
    if not L.uneven_pp:
        return stage_layers(layers, pp, vp) + head
    # the last rank keeps j layers, the other PP - 1 ranks share the rest as evenly as they can
    def busiest(j: int) -> float:
        return max(j + head, -(-(layers - j) // (pp - 1)))

    crossing = int((layers - (pp - 1) * head) / pp)
    return min(busiest(min(max(j, 0), layers)) for j in range(crossing - 1, crossing + 3))


_SELECTIVE_FACTOR = 1.03
_FULL_EXTRA = 1.0 / 3.0  # full recompute repeats the forward: +1/3 of forward + backward
# frozen weights (PEFT): forward + data gradient only, so repeating the forward adds 1/2, not 1/3
_FROZEN_FORWARD = 1.0 / 2.0


def _recompute_factor(L: Layout, num_layers: int, forward_share: float = _FULL_EXTRA) -> float:
    """The work of a micro-batch with recompute over the work without: full recompute repeats the
    forward (`forward_share` of the work) of the layers it covers."""
    if L.recompute == "selective":
        return _SELECTIVE_FACTOR
    return 1.0 + forward_share * recompute_share(num_layers, L)
