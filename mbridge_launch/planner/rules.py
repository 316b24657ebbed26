"""Parallelism rules of Megatron Core (the dense grid TP x PP x CP x DP and the expert grid
PP x EP x ETP x EDP, TP vs heads and KV heads, SP with TP, CP vs sequence length, layers vs
PP x VP, GBS = MBS x DP x accumulation), one place for recommend, plan, preflight and the catalog
findings.

`check_layout(layout, arch, hardware)` returns every broken rule as a `Violation` with a stable
code, the field it concerns, the valid choices and a message in the user's language, e.g.
"TP=3 does not divide num_query_groups=8 of llama3_8b; valid TP: 1, 2, 4, 8".
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from math import gcd, prod
from typing import TYPE_CHECKING, Any, Optional

from mbridge_launch.planner.pipeline_split import EVEN, PipelineSplit, mtp_layers, split_of

if TYPE_CHECKING:  # imported for type hints only; keeps this module cheap to import
    from mbridge_launch.knowledge.hardware import Hardware
    from mbridge_launch.knowledge.models import ModelArch


CP_COMM_TYPES = ("p2p", "a2a", "a2a+p2p", "allgather")
RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class LayoutFields:
    """The layout settings a Plan records as well: its `parallelism` section (plan.model.Parallelism)
    is these fields, under the same names and with the same defaults, plus the data-parallel size."""

    tp: int = 1
    pp: int = 1
    vp: Optional[int] = None
    cp: int = 1
    ep: int = 1
    etp: Optional[int] = None
    sp: bool = False
    mbs: int = 1
    gbs: int = 1
    seq_length: int = 4096
    recompute: str = "none"
    fsdp: bool = False
    distributed_optimizer: bool = True


SHARED_FIELDS = tuple(f.name for f in fields(LayoutFields))


@dataclass(frozen=True)
class Layout(LayoutFields):
    """One parallel layout: the LayoutFields and what the planner reads from the rest of a Plan.
    `world` is the total GPU count (None: unknown, grids unchecked)."""

    world: Optional[int] = None
    # full recompute of only this many layers per pipeline chunk (Megatron's recompute_method=block,
    # recompute_num_layers=N); None: every layer (method=uniform, one layer per group)
    recompute_layers: Optional[int] = None
    cp_comm_type: Optional[str] = None
    # Megatron's hierarchical_context_parallel_sizes (the a2a and p2p levels of cp_comm_type
    # a2a+p2p); None: not set
    hierarchical_cp: Optional[tuple[int, ...]] = None
    packing: bool = False
    # the dataset's enable_in_batch_packing (several sequences concatenated into each micro-batch)
    in_batch_packing: bool = False
    cpu_offload: bool = False
    uneven_pp: bool = False
    gpus_per_node: Optional[int] = None
    first_stage_layers: Optional[int] = None  # uneven PP: decoder layers on the first stage
    last_stage_layers: Optional[int] = None  # uneven PP: decoder layers on the last stage
    # the pipeline split (planner.pipeline_split.PipelineSplit); None: even, or the first/last
    # counts above, or (uneven_pp) the best whole-layer split the throughput model assumes
    split: Optional[PipelineSplit] = None
    # selective recompute's model.recompute_modules (planner.recompute); None: the planner chose
    # selective and writes planner.recompute.planner_modules
    recompute_modules: Optional[tuple[str, ...]] = None
    # mixed_precision.fp8_param_gather; None: the precision's Bridge mixed-precision recipe default
    fp8_param_gather: Optional[bool] = None
    # the MoE token dispatcher: alltoall, allgather, deepep or hybridep (flex backends); None: alltoall
    moe_dispatcher: Optional[str] = None
    # recipe settings the memory model charges (planner.recipe_settings reads them from a recipe;
    # None everywhere: the planner's defaults, as before these fields existed)
    # model.cpu_offloading_num_layers with cpu_offloading: these layers' activations go to the CPU
    cpu_offload_layers: Optional[int] = None
    # model.offload_modules with fine_grained_activation_offloading: these modules' inputs go to the CPU
    offload_modules: Optional[tuple[str, ...]] = None
    # optimizer state bytes per trained parameter (master weights + Adam moments); None: 12 (fp32)
    optimizer_bytes: Optional[float] = None
    # optimizer.optimizer_offload_fraction with optimizer_cpu_offload: the share of it on the CPU
    optimizer_offload_fraction: Optional[float] = None
    # gradient buffer bytes per parameter (ddp.grad_reduce_in_fp32: 4, else 2); None: the caller's
    grad_bytes: Optional[float] = None
    # model.cuda_graph_scope of per-layer CUDA graphs (cuda_graph_impl transformer_engine or local);
    # None or (): no per-layer graphs
    cuda_graph_scope: Optional[tuple[str, ...]] = None
    # model.cross_entropy_loss_fusion; None: unfused (the fp32 logits copy counted)
    ce_fusion: Optional[bool] = None
    # model.mtp_num_layers of the run (0: multi-token prediction off); None: the model's own
    mtp_layers: Optional[int] = None
    # model.freeze_language_model: the decoder's weights get no gradients or optimizer state (a VLM
    # recipe that trains only its projection); None: trained
    frozen_language: Optional[bool] = None

    @property
    def etp_size(self) -> int:
        """Expert TP as the run has it. Unset (None) is Megatron Bridge 0.6.2's default
        (models/transformer_config.py _set_moe_expert_tensor_parallel_default): 1 with EP > 1,
        else Megatron Core's, the tensor-parallel size (model_parallel_config.py). Only expert
        layers read it: a dense model's TP4 layout has no experts to split."""
        if self.etp is not None:
            return self.etp
        return 1 if self.ep > 1 else self.tp

    @property
    def etp_shown(self) -> int:
        """ETP as texts print it: the set value, else 1 (a dense layout never says "ETP=4")."""
        return self.etp or 1

    @property
    def vp_size(self) -> int:
        return self.vp or 1

    @property
    def grad_accum(self) -> int:
        return max(self.gbs // max(self.mbs * self.dp, 1), 1)

    @property
    def microbatches(self) -> int:
        return self.grad_accum

    @property
    def dp(self) -> int:
        """Data-parallel size (world / (TP x PP x CP))."""
        return _replicas(self.world, self.tp * self.pp * self.cp)

    @property
    def edp(self) -> int:
        """Expert data-parallel size (world / (PP x EP x ETP))."""
        return _replicas(self.world, self.pp * self.ep * self.etp_size)


def _replicas(world: Optional[int], group: int) -> int:
    """How many groups of `group` GPUs the world holds (at least one); 1 when the world size is unknown."""
    return max(world // group, 1) if world else 1


def evolve(layout: Layout, **changes: Any) -> Layout:
    """`dataclasses.replace` without re-running __init__: the search copies layouts thousands
    of times. Only field names are accepted."""
    unknown = set(changes) - _LAYOUT_FIELDS
    if unknown:
        raise TypeError(f"unknown Layout fields: {sorted(unknown)}")
    new = object.__new__(Layout)
    new.__dict__.update(layout.__dict__)
    new.__dict__.update(changes)
    return new


@dataclass(frozen=True)
class Violation:
    code: str
    key: str
    params: dict[str, Any] = field(default_factory=dict, hash=False)
    field: str = ""
    valid: tuple = ()
    severity: str = "error"

    def message(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import t

        return t(self.key, lang=lang, **self.params)

    def as_msg(self) -> Any:
        """The message unrendered (a base.i18n.Msg), for what is stored (Plans)."""
        from mbridge_launch.base.i18n import Msg

        return Msg(self.key, **self.params)

    def __str__(self) -> str:
        return f"{self.code}: {self.message('en')}"


_LAYOUT_FIELDS = frozenset(Layout.__dataclass_fields__)


def divisors(n: int) -> list[int]:
    if n <= 0:
        return []
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def _fmt(values: Any, limit: int = 12) -> str:
    values = list(values)
    text = ", ".join(str(v) for v in values[:limit])
    return text + (", ..." if len(values) > limit else "") if values else "-"


def _v(code: str, key: str, fld: str, valid: Any = (), severity: str = "error", **params: Any) -> Violation:
    valid = tuple(valid)
    params.setdefault("valid", _fmt(valid))
    return Violation(code=code, key=key, params=params, field=fld, valid=valid, severity=severity)


def valid_tp(arch: ModelArch) -> list[int]:
    """TP sizes that divide the attention heads, the KV groups and the FFN width."""
    base = gcd(arch.num_attention_heads, arch.kv_groups)
    if arch.ffn_hidden_size:
        base = gcd(base, arch.ffn_hidden_size)
    return divisors(base)


def declared_split(num_layers: int, pp: int, layout: Layout | None) -> tuple[int, int, int] | None:
    """(first stage, last stage, busiest middle stage) decoder layers of a split the layout
    declares (its pipeline split or first/last-stage counts), or None when it declares none."""
    split = split_of(layout) if layout is not None else None
    if split is None or split.kind == EVEN:
        return None
    ranks = [r.decoders for r in split.rank_shares(num_layers, pp, layout.vp_size if layout else 1)]
    return ranks[0], ranks[-1], max(ranks[1:-1], default=0)


def stage_layers(num_layers: int, pp: int, vp: int, layout: Layout | None = None) -> int:
    """Decoder layers on the most loaded pipeline stage (all its virtual chunks)."""
    split = split_of(layout) if layout is not None else None
    if split is not None and split.kind != EVEN:
        return max(r.decoders for r in split.rank_shares(num_layers, pp, vp))
    chunks = pp * vp
    return -(-num_layers // chunks) * vp


def chunk_layers(num_layers: int, layout: Layout) -> int:
    """Decoder layers in the largest pipeline chunk (a stage's share with VP)."""
    split = layout.split
    if split is not None and split.kind != EVEN and layout.pp > 1:
        return max(s.decoders for s in split.virtual_stages(num_layers, layout.pp, layout.vp_size))
    return -(-num_layers // (layout.pp * layout.vp_size))


def recompute_share(num_layers: int, layout: Layout) -> float:
    """The share of a chunk's layers that full recompute recomputes: 1 for every layer, N / chunk
    layers with recompute_layers=N, 0 without full recompute."""
    if layout.recompute != "full":
        return 0.0
    if layout.recompute_layers is None:
        return 1.0
    return min(1.0, layout.recompute_layers / max(chunk_layers(num_layers, layout), 1))


def recompute_label(layout: Layout) -> str:
    """The recompute level as the cards print it ('full (4 layers per pipeline chunk)')."""
    if layout.recompute == "full" and layout.recompute_layers is not None:
        from mbridge_launch.base.i18n import t

        return t("planner.recompute_block", layers=layout.recompute_layers)
    return layout.recompute


# Beyond any real job: a GPU count or parallel size above 2^20 (a million GPUs), a micro/global
# batch above 2^31 sequences, a sequence above 2^26 tokens. Checked before the other rules, whose
# messages list divisors and would take hours to enumerate them for a 20-digit value.
SIZE_LIMITS = {"gbs": 2**31, "mbs": 2**31, "seq_length": 2**26}
DEFAULT_SIZE_LIMIT = 2**20


def size_limit(name: str) -> int:
    """The largest value rules accept for a layout size (`tp`, `world`, `seq_length`, ...)."""
    return SIZE_LIMITS.get(name, DEFAULT_SIZE_LIMIT)


# Rules that refuse (or warn about) a layout which Megatron Bridge 0.6.2's own validation
# (`runtime_config_update`, measured by tests/bridge/test_rules_conformance.py) accepts, and why.
# Developer-facing; a code not listed here is one the real validation rejects too.
STRICTER_THAN_MEGATRON: dict[str, str] = {
    "RULE_SIZE_LIMIT": "user experience: a value beyond any real job; the other rules' messages list divisors, "
                       "which for a 20-digit value would take hours",
    "RULE_EXPERT_GRID": "process group: checked by initialize_model_parallel (world % (PP x EP x ETP)), "
                        "which the config validation never calls",
    "RULE_VP_PP": "run time: the non-pipelined schedule refuses model chunks ('does not support model chunking'); "
                  "the config accepts VP at PP=1",
    "RULE_FSDP_PP": "support: the validation does not check PP with Megatron-FSDP, but no Megatron-FSDP recipe "
                    "of 0.6.2 (0 of 28) uses PP, and the memory and step models do not model the two together",
    "RULE_FSDP_DP": "warning only (memory/throughput): with one data-parallel rank FSDP has nothing to shard "
                    "over and only adds its communication",
    "RULE_RECOMPUTE_LAYERS": "user experience (the chunk variant): Megatron recomputes min(N, layers in the chunk) "
                             "with method=block; the planner asks for the count that says what runs. The "
                             "granularity variant is rejected by Megatron too",
    "RULE_SP_TP": "warnings: TP>1 without SP is valid but holds the full sequence's activations on every TP rank "
                  "(memory); SP at TP=1 is switched off silently by the Bridge's provider before Megatron Core's "
                  "own refusal, so the Plan would not say what runs",
    "RULE_SP_SEQ": "run time: the sequence-parallel scatter asserts the sequence divides by TP "
                   "(tensor_parallel.mappings); pretraining configs do not check it",
    "RULE_CP_COMM": "run time: Transformer Engine's attention checks cp_comm_type when it runs",
    "RULE_TP_FFN": "model build: ColumnParallelLinear divides the FFN width by TP (core.utils.divide)",
    "RULE_CP_A2A_HEADS": "run time: Transformer Engine's a2a context parallelism splits the KV heads over CP",
    "RULE_PP_LAYERS": "model build: TransformerBlock asserts num_layers divisible by PP (get_num_layers_to_build)",
    "RULE_VP_LAYERS": "model build: TransformerBlock asserts the layers per rank divisible by VP",
    "RULE_EP_EXPERTS": "model build: MoELayer asserts num_moe_experts % EP == 0",
    "RULE_ETP_FFN": "model build: the grouped expert weights divide the expert FFN width by ETP",
    "RULE_MOE_SP": "warning only: Megatron Core warns too (ModelParallelConfig) and accepts",
    "RULE_SEQ_POSITIONS": "warning only (quality): RoPE runs past the trained positions; nothing checks it",
    "RULE_TP_NVLINK": "warning only (throughput): TP all-reduces over the inter-node network",
    "RULE_EP_NVLINK": "warning only (throughput): the expert all-to-all leaves the NVLink domain",
    "RULE_PARTIAL_NODE": "warning only (scheduling): a job that fills no whole nodes shares them",
}


def check_layout(layout: Layout, arch: ModelArch | None, hardware: Hardware | None = None) -> list[Violation]:
    """Every rule `layout` breaks for `arch` on `hardware` (either may be None: those rules skip)."""
    out: list[Violation] = []
    L = layout
    sizes = {"tp": L.tp, "pp": L.pp, "cp": L.cp, "ep": L.ep, "mbs": L.mbs, "gbs": L.gbs, "seq_length": L.seq_length}
    if L.vp is not None:
        sizes["vp"] = L.vp
    if L.etp is not None:
        sizes["etp"] = L.etp
    if L.world is not None:
        sizes["world"] = L.world
    bad = [name for name, value in sizes.items() if not isinstance(value, int) or isinstance(value, bool) or value < 1]
    for name in bad:
        out.append(_v("RULE_POSITIVE", "planner.rule.positive", name, name=name, value=sizes[name]))
    huge = [name for name, value in sizes.items() if name not in bad and value > size_limit(name)]
    for name in huge:
        out.append(_v("RULE_SIZE_LIMIT", "planner.rule.size_limit", name, name=name, value=sizes[name],
                      limit=size_limit(name)))
    if bad or huge:
        return out
    _grid_rules(L, arch, out)
    _batch_rules(L, out)
    _feature_rules(L, out)
    if arch is not None:
        _model_rules(L, arch, out)
    if hardware is not None:
        _hardware_rules(L, hardware, out)
    return out


def errors(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.severity == "error"]


def _grid_rules(L: Layout, arch: ModelArch | None, out: list[Violation]) -> None:
    if L.world is None:
        return
    mp = L.tp * L.pp * L.cp
    if L.world % mp:
        out.append(_v("RULE_DENSE_GRID", "planner.rule.dense_grid", "world", range(mp, mp * 5, mp),
                      world=L.world, tp=L.tp, pp=L.pp, cp=L.cp, mp=mp))
    is_moe = arch is not None and arch.is_moe
    if is_moe or L.ep > 1 or (L.etp or 1) > 1:
        eg = L.pp * L.ep * L.etp_size
        if L.world % eg:
            need = L.pp * max(L.tp * L.cp, L.ep * L.etp_size)
            experts = arch.num_moe_experts if arch is not None and arch.num_moe_experts else 1
            valid = [e for e in divisors(experts) if L.world % (L.pp * e * L.etp_size) == 0]
            out.append(_v("RULE_EXPERT_GRID", "planner.rule.expert_grid", "ep", valid,
                          world=L.world, pp=L.pp, ep=L.ep, etp=L.etp_size, eg=eg, minimum=need))


def _batch_rules(L: Layout, out: list[Violation]) -> None:
    if L.world is not None and L.world % (L.tp * L.pp * L.cp) == 0:
        unit = L.mbs * L.dp
        if L.gbs % unit:
            out.append(_v("RULE_GBS", "planner.rule.gbs", "gbs", [unit * k for k in (1, 2, 4, 8, 16)],
                          gbs=L.gbs, mbs=L.mbs, dp=L.dp, unit=unit))
    if L.packing and L.mbs != 1:
        out.append(_v("RULE_PACKING_MBS", "planner.rule.packing_mbs", "mbs", (1,), mbs=L.mbs))
    if L.in_batch_packing and L.mbs < 2:
        # ConfigContainer.validate: in-batch packing needs at least two sequences per micro-batch
        out.append(_v("RULE_IN_BATCH_PACKING_MBS", "planner.rule.in_batch_packing_mbs", "mbs", (2, 4, 8), mbs=L.mbs))


def _feature_rules(L: Layout, out: list[Violation]) -> None:
    if L.vp is not None and L.vp > 1 and L.pp == 1:
        out.append(_v("RULE_VP_PP", "planner.rule.vp_pp", "vp", (1,), vp=L.vp))
    if L.cpu_offload and L.pp > 1:
        out.append(_v("RULE_CPU_OFFLOAD_PP", "planner.rule.cpu_offload_pp", "pp", (1,), pp=L.pp))
    if L.fsdp and L.pp > 1:
        out.append(_v("RULE_FSDP_PP", "planner.rule.fsdp_pp", "pp", (1,), pp=L.pp))
    if L.fsdp and L.world is not None and L.dp * L.cp == 1:
        out.append(_v("RULE_FSDP_DP", "planner.rule.fsdp_dp", "fsdp", severity="warning"))
    if L.recompute not in RECOMPUTE:
        out.append(_v("RULE_RECOMPUTE", "planner.rule.recompute", "recompute", RECOMPUTE, value=L.recompute))
    if L.recompute_layers is not None and (L.recompute != "full" or L.recompute_layers < 1):
        out.append(_v("RULE_RECOMPUTE_LAYERS", "planner.rule.recompute_layers_full", "recompute_layers", ("full",),
                      layers=L.recompute_layers, recompute=L.recompute))
    if L.tp > 1 and not L.sp:
        out.append(_v("RULE_SP_TP", "planner.rule.sp_off", "sp", (True,), severity="warning", tp=L.tp))
    if L.tp == 1 and L.sp:
        out.append(_v("RULE_SP_TP", "planner.rule.sp_tp1", "sp", (False,), severity="warning"))
    if L.sp and L.tp > 1 and L.seq_length % (L.tp * L.cp):
        # sequence parallelism scatters each CP rank's seq/CP tokens over the TP ranks
        valid = [t for t in divisors(L.tp * 8) if (L.seq_length // max(1, L.cp)) % t == 0 and L.seq_length % L.cp == 0]
        out.append(_v("RULE_SP_SEQ", "planner.rule.sp_seq", "tp", tuple(valid) or (1,), tp=L.tp, cp=L.cp,
                      seq=L.seq_length))
    if L.cp > 1:
        if L.seq_length % (2 * L.cp):
            valid = [c for c in divisors(L.seq_length // 2) if c <= 64] if L.seq_length % 2 == 0 else [1]
            out.append(_v("RULE_CP_SEQ", "planner.rule.cp_seq", "cp", valid, cp=L.cp, seq=L.seq_length, twice=2 * L.cp))
        if L.cp_comm_type is not None and L.cp_comm_type not in CP_COMM_TYPES:
            out.append(_v("RULE_CP_COMM", "planner.rule.cp_comm", "cp_comm_type", CP_COMM_TYPES, value=L.cp_comm_type))
        if L.cp_comm_type == "a2a+p2p" and prod(L.hierarchical_cp or (0,)) != L.cp:
            # ConfigContainer.validate: without the sizes "CP communication is silently disabled"
            out.append(_v("RULE_CP_HIERARCHICAL", "planner.rule.cp_hierarchical", "cp_comm_type", ("p2p", "a2a"),
                          cp=L.cp, sizes=_fmt(L.hierarchical_cp or ())))


def _model_rules(L: Layout, arch: ModelArch, out: list[Violation]) -> None:
    name = arch.name
    n, g = arch.num_attention_heads, arch.kv_groups
    tps = valid_tp(arch)
    # Megatron Core (TransformerConfig: "num_query_groups must be a multiple or divisor of
    # tensor_model_parallel_size") replicates the KV heads when TP is a multiple of the groups
    # (DeepSeek-V4's single KV head at TP 2, Nemotron 3 Super's 2 groups at TP 8, as NVIDIA ships them)
    if g % L.tp and L.tp % g:  # the KV groups are the stricter constraint: name them first
        out.append(_v("RULE_TP_KV_HEADS", "planner.rule.tp_kv_heads", "tp", tps, tp=L.tp, groups=g, model=name))
    elif n % L.tp:
        out.append(_v("RULE_TP_HEADS", "planner.rule.tp_heads", "tp", tps, tp=L.tp, heads=n, model=name))
    if arch.ffn_hidden_size and arch.ffn_hidden_size % L.tp and n % L.tp == 0 and not (g % L.tp and L.tp % g):
        out.append(_v("RULE_TP_FFN", "planner.rule.tp_ffn", "tp", tps, tp=L.tp, ffn=arch.ffn_hidden_size, model=name))
    if L.cp > 1 and L.cp_comm_type == "a2a" and (g // max(L.tp, 1)) % L.cp and g % L.tp == 0:
        out.append(_v("RULE_CP_A2A_HEADS", "planner.rule.cp_a2a_heads", "cp_comm_type", ("p2p", "a2a+p2p"),
                      cp=L.cp, local=g // L.tp, model=name))
    _pipeline_rules(L, arch, out)
    per_chunk = chunk_layers(arch.num_layers, L)
    if L.recompute == "full" and L.recompute_layers is not None and L.recompute_layers > per_chunk:
        out.append(_v("RULE_RECOMPUTE_LAYERS", "planner.rule.recompute_layers_chunk", "recompute_layers",
                      tuple(range(1, per_chunk + 1)), layers=L.recompute_layers, chunk=per_chunk, pp=L.pp,
                      vp=L.vp_size, model=name))
    _expert_rules(L, arch, out)
    if arch.max_position_embeddings and L.seq_length > arch.max_position_embeddings:
        out.append(_v("RULE_SEQ_POSITIONS", "planner.rule.seq_positions", "seq_length", severity="warning",
                      seq=L.seq_length, positions=arch.max_position_embeddings, model=name))


def _pipeline_rules(L: Layout, arch: ModelArch, out: list[Violation]) -> None:
    layers = arch.num_layers
    vp = L.vp_size
    chunks = L.pp * vp
    split = split_of(L)
    if split is not None and split.kind != EVEN:
        # the declared split (pipeline_split.PipelineSplit): Megatron Core's own checks on it
        for key, params in split.problems(layers, L.pp, L.vp, mtp_layers(arch)):
            out.append(_v("RULE_PP_UNEVEN", "planner.rule.pp_uneven", "pp", severity="error", model=arch.name,
                          layers=layers, pp=L.pp, vp=vp, split=split.describe(layers, L.pp, vp, mtp_layers(arch)),
                          reason=_msg(key, **params)))
        return
    if split is None:  # uneven_pp without a concrete split: the planner will choose one
        if layers + 2 < chunks:
            # an uneven split may count the embedding and the loss as one layer each
            # (account_for_embedding/loss_in_pipeline_split), never fewer than one layer per chunk
            out.append(_v("RULE_PP_LAYERS", "planner.rule.pp_layers", "pp", [p for p in divisors(layers)],
                          layers=layers, pp=L.pp, vp=vp, chunks=chunks, model=arch.name))
        return
    if layers % chunks:
        if vp > 1 and layers % L.pp == 0:
            out.append(_v("RULE_VP_LAYERS", "planner.rule.vp_layers", "vp", divisors(layers // L.pp),
                          layers=layers, pp=L.pp, vp=vp, model=arch.name))
        else:
            out.append(_v("RULE_PP_LAYERS", "planner.rule.pp_layers", "pp", divisors(layers),
                          layers=layers, pp=L.pp, vp=vp, chunks=chunks, model=arch.name))


def _msg(key: str, **params: Any) -> Any:
    from mbridge_launch.base.i18n import msg

    return msg(key, **params)


def _expert_rules(L: Layout, arch: ModelArch, out: list[Violation]) -> None:
    if not arch.is_moe:
        if L.ep > 1:
            out.append(_v("RULE_EP_DENSE", "planner.rule.ep_dense", "ep", (1,), ep=L.ep, model=arch.name))
        return
    experts = arch.num_moe_experts or 1
    if experts % L.ep:
        out.append(_v("RULE_EP_EXPERTS", "planner.rule.ep_experts", "ep", divisors(experts),
                      ep=L.ep, experts=experts, model=arch.name))
    if L.etp_size > 1 and arch.expert_ffn % L.etp_size:
        out.append(_v("RULE_ETP_FFN", "planner.rule.etp_ffn", "etp", divisors(gcd(arch.expert_ffn, 64)),
                      etp=L.etp_size, ffn=arch.expert_ffn, model=arch.name))
    if L.tp > 1 and L.ep > 1 and not L.sp:
        # Megatron Core warns (ModelParallelConfig.__post_init__), it does not refuse: NVIDIA ships
        # such layouts (GLM-4.5 355B SFT: TP2 EP16 without SP), so it is a warning here too
        out.append(_v("RULE_MOE_SP", "planner.rule.moe_sp", "sp", (True,), severity="warning", tp=L.tp, ep=L.ep))


def _hardware_rules(L: Layout, hw: Hardware, out: list[Violation]) -> None:
    if L.tp > hw.nvlink_domain:
        out.append(_v("RULE_TP_NVLINK", "planner.rule.tp_nvlink", "tp", [d for d in divisors(hw.nvlink_domain)],
                      severity="warning", tp=L.tp, domain=hw.nvlink_domain, gpu=hw.label))
    if L.ep * L.etp_size > hw.nvlink_domain and L.ep > 1:
        out.append(_v("RULE_EP_NVLINK", "planner.rule.ep_nvlink", "ep", severity="warning",
                      ep=L.ep, domain=hw.nvlink_domain, gpu=hw.label))
    gpn = L.gpus_per_node or hw.gpus_per_node
    if L.world is not None and L.world > gpn and L.world % gpn:
        out.append(_v("RULE_PARTIAL_NODE", "planner.rule.partial_node", "world", severity="warning",
                      world=L.world, gpn=gpn))
