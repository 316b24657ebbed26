"""Rows of the external memory set (benchmarks/external/data/memory_mlm_functional.json) as
planner requests: a ModelArch, a Layout, the precision and the gradient bytes, read from the
Megatron-LM arguments of each functional test with Megatron-LM's own defaults
(megatron/training/arguments.py) where an argument is absent. A row the planner cannot express is
skipped with one reason; a setting the memory model does not model is kept and tagged (`lacks`),
so that the table can show its error apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.knowledge.models import MLA, Mamba, ModelArch
from mbridge_launch.planner.memory import BF16_GRAD_BYTES, GRAD_BYTES
from mbridge_launch.planner.pipeline_split import (
    EMBEDDING_KEY,
    FIRST_KEY,
    LAST_KEY,
    LAYOUT_KEY,
    LOSS_KEY,
    PipelineSplit,
)
from mbridge_launch.planner.rules import Layout

DATA = Path(__file__).resolve().parent / "data" / "memory_mlm_functional.json"
GPUS_PER_NODE = {"dgx_h100": 8, "dgx_gb200": 4}
GPU_TYPE = {"dgx_h100": "h100", "dgx_gb200": "gb200"}
# Vocabulary sizes of the tokenizers the tests name (before Megatron pads them)
GPT2_BPE_VOCAB = 50257  # vocab.json + merges.txt: GPT2BPETokenizer
TOKENIZER_FILE_VOCAB = {
    "vocab.json": GPT2_BPE_VOCAB,
    "nemotron_2_256k.model": 256000,  # Nemotron-4's SentencePiece model
    "multiMixV8.gpt4o_nc_sd.500000.128k.vocab.json": 131072,  # TikTokenizer: Megatron's default 2**17
    "tokenizer.model": 32000,  # Llama-2 SentencePiece (Llama2Tokenizer)
}
FP8_RECIPES = {"delayed": "fp8ds", "tensorwise": "fp8cs", "mxfp8": "fp8mx", "blockwise": "fp8sc"}
NOT_DECODER = {"bert": "encoder model (BERT), not planned", "t5": "encoder-decoder model (T5), not planned",
               "multimodal-llava": "vision-language test with a vision tower the row does not describe",
               "mimo": "multimodal (MIMO) test with encoders the row does not describe"}


@dataclass
class Request:
    """One row as the planner sees it."""

    row: dict[str, Any]
    arch: ModelArch
    layout: Layout
    precision: str
    grad_bytes: float
    gpu_type: str
    lacks: list[str] = field(default_factory=list)  # settings the memory model does not model
    tags: list[str] = field(default_factory=list)  # settings, for the per-setting table

    @property
    def kind(self) -> str:
        if self.arch.is_hybrid:
            return "hybrid"
        return "moe" if self.arch.is_moe else "dense"


class Skip(Exception):
    """A row the planner cannot take; the message is the reason."""


def load(path: Path = DATA) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _flag(args: dict[str, Any], name: str) -> bool:
    return args.get(name) in (True, "true", "True", 1)


def _int(args: dict[str, Any], name: str, default: Optional[int] = None) -> Optional[int]:
    value = args.get(name)
    if value is None or value is False:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Skip(f"--{name} is not a number ({value})") from None


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value).strip("[]").replace(",", " ").split()


def world_size(row: dict[str, Any]) -> int:
    sizes = {r["nodes"] * r["gpus_per_node"] for r in row["recipes"]}
    if not sizes:
        raise Skip("no CI recipe lists the case for this platform (GPU count unknown)")
    if len(sizes) > 1:
        raise Skip(f"CI recipes run the case at several GPU counts {sorted(sizes)}")
    return sizes.pop()


def world_candidates(row: dict[str, Any], most: int = 4096) -> list[int]:
    """GPU counts a row's layout can run at when no public CI recipe gives it (the release tests):
    TP x PP x CP x DP with DP dividing GBS / MBS and the expert group (PP x EP x ETP) dividing it."""
    args = row["args"]
    tp = _int(args, "tensor-model-parallel-size", 1) or 1
    pp = _int(args, "pipeline-model-parallel-size", 1) or 1
    cp = _int(args, "context-parallel-size", 1) or 1
    ep = _int(args, "expert-model-parallel-size", 1) or 1
    etp = _int(args, "expert-tensor-parallel-size", tp) or tp
    mbs = _int(args, "micro-batch-size", 1) or 1
    gbs = _int(args, "global-batch-size")
    out = []
    for dp in range(1, most // (tp * pp * cp) + 1):
        world = tp * pp * cp * dp
        if gbs is not None and gbs % (mbs * dp):
            continue
        if ep > 1 and world % (pp * ep * etp):
            continue
        out.append(world)
    return out


def vocab_size(args: dict[str, Any]) -> int:
    kind = args.get("tokenizer-type")
    if kind == "NullTokenizer":
        size = _int(args, "vocab-size")
        if size is None:
            raise Skip("NullTokenizer without --vocab-size")
        return size + 1  # NullTokenizer adds its end-of-document token
    name = args.get("vocab-file") or args.get("tokenizer-model")
    if name in TOKENIZER_FILE_VOCAB:
        return TOKENIZER_FILE_VOCAB[str(name)]
    raise Skip(f"vocabulary size unknown (tokenizer {kind or '-'} {name or '-'})")


def _moe_dense_first(args: dict[str, Any], num_layers: int) -> int:
    freq = args.get("moe-layer-freq")
    if freq is None:
        return 0
    text = str(freq)
    if text.isdigit():
        if int(text) == 1:
            return 0
        raise Skip(f"--moe-layer-freq {text} (MoE every {text} layers) is not a dense-first pattern")
    m = re.fullmatch(r"\(?\[0\]\*(\d+)\+\[1\]\*(\d+)\)?", text.replace(" ", ""))
    if not m or int(m.group(1)) + int(m.group(2)) != num_layers:
        raise Skip(f"--moe-layer-freq {text} is not dense-first then MoE")
    return int(m.group(1))


def _hybrid(args: dict[str, Any]) -> tuple[Optional[str], int]:
    """(decoder pattern without pipeline separators, MTP layers after '/')."""
    pattern = args.get("hybrid-layer-pattern") or args.get("hybrid-override-pattern")
    if not pattern:
        return None, 0
    text = str(pattern)
    main, *mtp = text.split("/")
    return main.replace("|", ""), len(mtp)


def build_arch(row: dict[str, Any]) -> ModelArch:
    args = row["args"]
    family = row["family"]
    if family in NOT_DECODER:
        raise Skip(NOT_DECODER[family])
    pattern, hybrid_mtp = _hybrid(args)
    num_layers = _int(args, "num-layers")
    if pattern:
        num_layers = len(pattern)
    hidden = _int(args, "hidden-size")
    heads = _int(args, "num-attention-heads")
    if not num_layers or not hidden or not heads:
        raise Skip("architecture incomplete (num-layers, hidden-size or num-attention-heads absent)")
    swiglu = _flag(args, "swiglu")
    ffn = _int(args, "ffn-hidden-size")
    if ffn is None:
        # Megatron-LM's default: 4h, or with SwiGLU 2/3 of it rounded down to a multiple of 64
        ffn = int(4 * hidden * 2 / 3 / 64) * 64 if swiglu else 4 * hidden
    experts = _int(args, "num-experts")
    mla = None
    if _flag(args, "multi-latent-attention"):
        mla = MLA(kv_lora_rank=_int(args, "kv-lora-rank", 32) or 32, q_lora_rank=_int(args, "q-lora-rank"),
                  qk_head_dim=_int(args, "qk-head-dim", 128), qk_pos_emb_head_dim=_int(args, "qk-pos-emb-head-dim", 64),
                  v_head_dim=_int(args, "v-head-dim", 128))
    groups = _int(args, "num-query-groups") if _flag(args, "group-query-attention") else None
    return ModelArch(
        name=row["id"], num_layers=num_layers, hidden_size=hidden, num_attention_heads=heads,
        ffn_hidden_size=ffn, num_query_groups=groups, kv_channels=_int(args, "kv-channels"),
        vocab_size=vocab_size(args), make_vocab_size_divisible_by=_int(args, "make-vocab-size-divisible-by", 128) or 128,
        gated_linear_unit=swiglu, share_embeddings_and_output_weights=not _flag(args, "untie-embeddings-and-output-weights"),
        max_position_embeddings=_int(args, "max-position-embeddings"),
        num_moe_experts=experts, moe_router_topk=_int(args, "moe-router-topk", 2) if experts else None,
        moe_ffn_hidden_size=_int(args, "moe-ffn-hidden-size", ffn) if experts else None,
        moe_shared_expert_intermediate_size=_int(args, "moe-shared-expert-intermediate-size") if experts else None,
        moe_first_dense_layers=_moe_dense_first(args, num_layers) if experts and not pattern else 0,
        mla=mla, mtp_num_layers=hybrid_mtp if pattern else (_int(args, "mtp-num-layers", 0) or 0),
        hybrid_layer_pattern=pattern,
        mamba=Mamba(state_dim=_int(args, "mamba-state-dim"), head_dim=_int(args, "mamba-head-dim"),
                    num_groups=_int(args, "mamba-num-groups"), num_heads=_int(args, "mamba-num-heads")),
    )


def precision_of(args: dict[str, Any]) -> str:
    if args.get("fp8-format"):
        recipe = str(args.get("fp8-recipe") or "delayed")
        if recipe not in FP8_RECIPES:
            raise Skip(f"--fp8-recipe {recipe} is not one the planner models")
        return FP8_RECIPES[recipe]
    if _flag(args, "bf16") or _flag(args, "fp16"):
        return "bf16"  # fp16 keeps the same 2-byte weights and activations
    raise Skip("fp32 training (neither --bf16 nor --fp16): the planner models mixed precision only")


def build(row: dict[str, Any], world: Optional[int] = None) -> Request:
    """The planner request of one row; raises Skip with the reason when there is none. `world`:
    a GPU count to assume (for rows whose CI recipe is not public; see world_candidates)."""
    if row.get("second_run"):
        raise Skip("second half of a resume test (same configuration as its first run)")
    args = row["args"]
    if _flag(args, "perform-rl-step"):
        raise Skip("RL test: an inference engine (KV cache, CUDA graphs) shares the GPU with training")
    if args.get("export-kd-teacher-load"):
        raise Skip("distillation: a teacher model the row does not describe shares the GPU")
    arch = build_arch(row)
    precision = precision_of(args)
    world = world if world is not None else world_size(row)
    tp = _int(args, "tensor-model-parallel-size", 1) or 1
    pp = _int(args, "pipeline-model-parallel-size", 1) or 1
    cp = _int(args, "context-parallel-size", 1) or 1
    ep = _int(args, "expert-model-parallel-size", 1) or 1
    etp = _int(args, "expert-tensor-parallel-size")
    if world % (tp * pp * cp):
        raise Skip(f"{world} GPUs are not a multiple of TP x PP x CP = {tp * pp * cp}")
    dp = world // (tp * pp * cp)
    mbs = _int(args, "micro-batch-size", 1) or 1
    gbs = _int(args, "global-batch-size", mbs * dp) or mbs * dp
    seq = _int(args, "seq-length")
    if not seq:
        raise Skip("no --seq-length")
    vp = None
    per_vstage = _int(args, "num-layers-per-virtual-pipeline-stage")
    if per_vstage:
        vp = arch.num_layers // (pp * per_vstage)
    vp = _int(args, "num-virtual-stages-per-pipeline-rank", vp)
    settings = {FIRST_KEY: args.get("decoder-first-pipeline-num-layers"),
                LAST_KEY: args.get("decoder-last-pipeline-num-layers"),
                EMBEDDING_KEY: args.get("account-for-embedding-in-pipeline-split"),
                LOSS_KEY: args.get("account-for-loss-in-pipeline-split"),
                LAYOUT_KEY: args.get("pipeline-model-parallel-layout")}
    split = PipelineSplit.from_settings(settings) if any(v not in (None, False) for v in settings.values()) else None
    if split is not None and split.error:
        raise Skip(f"pipeline split unreadable ({split.error})")
    if split is not None and split.stages is not None:
        vp = max(len(split.stages) // pp, 1) if len(split.stages) > pp else vp
    granularity = args.get("recompute-granularity")
    recompute = str(granularity) if granularity in ("full", "selective") else "none"
    modules = tuple(_list(args.get("recompute-modules"))) if recompute == "selective" else None
    recompute_layers = None
    if recompute == "full" and args.get("recompute-method") == "block":
        recompute_layers = _int(args, "recompute-num-layers")
    dispatcher = args.get("moe-token-dispatcher-type")
    if dispatcher == "flex":
        dispatcher = args.get("moe-flex-dispatcher-backend") or "deepep"
    fp8_gather = True if _flag(args, "fp8-param-gather") else (False if precision.startswith("fp8") else None)
    layout = Layout(
        tp=tp, pp=pp, vp=vp if vp and vp > 1 else None, cp=cp, ep=ep, etp=etp, sp=_flag(args, "sequence-parallel"),
        mbs=mbs, gbs=gbs, seq_length=seq, recompute=recompute,
        fsdp=_flag(args, "use-megatron-fsdp") or _flag(args, "use-torch-fsdp2"),
        distributed_optimizer=_flag(args, "use-distributed-optimizer") or _flag(args, "use-megatron-fsdp"),
        world=world, gpus_per_node=GPUS_PER_NODE[row["platform"]], recompute_layers=recompute_layers,
        split=split, recompute_modules=modules, fp8_param_gather=fp8_gather,
        moe_dispatcher=str(dispatcher) if dispatcher and arch.is_moe else ("alltoall" if arch.is_moe else None),
    )
    # Megatron-LM: bf16 accumulates and reduces gradients in fp32 unless --grad-reduce-in-bf16;
    # fp16 keeps fp16 main gradients unless --accumulate-allreduce-grads-in-fp32
    if _flag(args, "bf16"):
        grad_bytes = BF16_GRAD_BYTES if _flag(args, "grad-reduce-in-bf16") else GRAD_BYTES
    else:
        grad_bytes = GRAD_BYTES if _flag(args, "accumulate-allreduce-grads-in-fp32") else BF16_GRAD_BYTES
    recipe = _recipe_settings(args)
    if recipe:
        layout = replace(layout, **recipe)
    request = Request(row=row, arch=arch, layout=layout, precision=precision, grad_bytes=grad_bytes,
                      gpu_type=GPU_TYPE[row["platform"]])
    request.lacks = _lacks(args, modelled={f for f in _SETTING_FIELDS if f in _LAYOUT_FIELDS})
    request.tags = _tags(request)
    return request


# Layout fields of the recipe settings the memory model charges (planner/rules.py Layout), with the
# tag a row gets when the installed planner has no such field
_SETTING_FIELDS = {"cuda_graph_scope": "cuda_graphs", "offload_modules": "activation_offload",
                   "optimizer_offload_fraction": "optimizer_offload", "optimizer_bytes": "precision_aware_optimizer",
                   "ce_fusion": "ce_fusion", "cpu_offload_layers": "cpu_offload"}
_LAYOUT_FIELDS = {f.name for f in fields(Layout)}
_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "uint8": 1.0, "int8": 1.0}


def _recipe_settings(args: dict[str, Any]) -> dict[str, Any]:
    """The row's memory settings as the Layout fields the installed planner has (Megatron-LM names:
    --cuda-graph-impl/--cuda-graph-modules, --fine-grained-activation-offloading/--offload-modules,
    --optimizer-cpu-offload/--optimizer-offload-fraction, --use-precision-aware-optimizer with the
    state dtypes, --cross-entropy-loss-fusion, --cpu-offloading/--cpu-offloading-num-layers)."""
    out: dict[str, Any] = {}
    if args.get("cuda-graph-impl") in ("transformer_engine", "local") or _flag(args, "enable-cuda-graph"):
        out["cuda_graph_scope"] = tuple(_list(args.get("cuda-graph-modules") or args.get("cuda-graph-scope"))) or ("full",)
    if _flag(args, "fine-grained-activation-offloading") and args.get("offload-modules"):
        out["offload_modules"] = tuple(_list(args.get("offload-modules")))
    if _flag(args, "optimizer-cpu-offload"):
        out["optimizer_offload_fraction"] = float(args.get("optimizer-offload-fraction") or 1.0)
    if _flag(args, "use-precision-aware-optimizer"):
        out["optimizer_bytes"] = sum(_DTYPE_BYTES.get(str(args.get(k) or "fp32"), 4.0)
                                     for k in ("main-params-dtype", "exp-avg-dtype", "exp-avg-sq-dtype"))
    if _flag(args, "cross-entropy-loss-fusion"):
        out["ce_fusion"] = True
    if _flag(args, "cpu-offloading"):
        out["cpu_offload_layers"] = _int(args, "cpu-offloading-num-layers", 1)
    return {k: v for k, v in out.items() if k in _LAYOUT_FIELDS}


def _lacks(args: dict[str, Any], modelled: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Settings of the row that planner/memory.py does not model (the row is kept and tagged);
    `modelled`: the Layout fields of recipe settings the installed memory model charges."""
    out = []
    setting = _recipe_settings_wanted(args)
    out += [_SETTING_FIELDS[f] for f in setting if f not in modelled and f != "ce_fusion"]
    if args.get("optimizer") not in (None, "adam"):
        out.append(f"optimizer_{args['optimizer']}")
    if "optimizer_bytes" not in modelled and any(
            args.get(k) not in (None, "fp32") for k in ("main-params-dtype", "exp-avg-dtype", "exp-avg-sq-dtype")):
        out.append("precision_aware_optimizer")
    if args.get("main-grads-dtype") not in (None, "fp32"):
        out.append("bf16_main_grads")
    if (_int(args, "num-distributed-optimizer-instances", 1) or 1) > 1:
        out.append("partial_dist_opt")
    if args.get("transformer-impl") == "local":
        out.append("local_impl")
    if args.get("attention-backend") == "unfused" or args.get("transformer-impl") == "local":
        # unfused core attention keeps the s x s scores, softmax and dropout mask per head: the
        # memory model assumes flash/fused attention (no s^2 term)
        out.append("unfused_attention")
    if args.get("moe-latent-size"):
        out.append("moe_latent")
    return out


def _recipe_settings_wanted(args: dict[str, Any]) -> list[str]:
    """The recipe-setting Layout fields the row asks for, whether or not the planner has them."""
    wanted = []
    if args.get("cuda-graph-impl") in ("transformer_engine", "local") or _flag(args, "enable-cuda-graph"):
        wanted.append("cuda_graph_scope")
    if args.get("offload-modules") or _flag(args, "fine-grained-activation-offloading"):
        wanted.append("offload_modules")
    if _flag(args, "optimizer-cpu-offload"):
        wanted.append("optimizer_offload_fraction")
    if _flag(args, "use-precision-aware-optimizer"):
        wanted.append("optimizer_bytes")
    if _flag(args, "cpu-offloading"):
        wanted.append("cpu_offload_layers")
    return wanted


def _tags(r: Request) -> list[str]:
    L = r.layout
    tags = [r.kind]
    tags += [name for name, on in (("TP>1", L.tp > 1), ("SP", L.sp), ("PP>1", L.pp > 1), ("VP", L.vp_size > 1),
                                   ("CP>1", L.cp > 1), ("EP>1", L.ep > 1), ("dist-opt", L.distributed_optimizer),
                                   ("FSDP", L.fsdp), ("MLA", r.arch.is_mla), ("MTP", bool(r.arch.mtp_num_layers)))
             if on]
    if L.recompute != "none":
        tags.append(f"recompute={L.recompute}")
    if _flag(r.row["args"], "deterministic-mode"):
        # deterministic mode (NVTE_ALLOW_NONDETERMINISTIC_ALGO=0) can make Transformer Engine pick
        # another attention backend than the flash one the memory model assumes
        tags.append("deterministic")
    if r.precision != "bf16":
        tags.append(r.precision)
    tags += [_SETTING_FIELDS[f] for f in _recipe_settings_wanted(r.row["args"])]
    if _flag(r.row["args"], "cross-entropy-loss-fusion"):
        tags.append("ce_fusion")
    tags += [lack for lack in r.lacks if lack not in tags]
    return tags


def describe(r: Request) -> str:
    L = r.layout
    parts = [f"TP{L.tp}", f"PP{L.pp}"] + ([f"VP{L.vp}"] if L.vp else []) + [f"CP{L.cp}"]
    if r.arch.is_moe:
        parts.append(f"EP{L.ep}")
    parts.append(f"DP{L.dp}")
    return f"{' '.join(parts)} MBS{L.mbs} seq{L.seq_length} {r.precision}"

