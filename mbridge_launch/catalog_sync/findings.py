"""Validate each extracted recipe against Megatron Core's parallelism rules (planner.rules) and record
what is irregular about it, instead of hiding it.

Checks that need only the recipe: a grid needing more GPUs than the name says, a GPU count the
grid does not divide, GBS not divisible by MBS x DP, model vs dataset sequence length, CP vs
sequence length, VP without PP, SP without TP, recipes that raise. Checks that need the model
architecture (TP vs heads and KV heads, layers vs PP x VP, experts vs EP) come from the
planner's rules through `architecture_findings`, when those modules exist. Checks that Megatron
Bridge's own validation makes (in-batch packing, data cache path, pipeline layout vs VP, ...) read a
few more values of the interpreted config (`validation_facts`); the conformance tier
(tests/bridge/findings_conformance.py) checks each against the real error.
Every message is rendered in English and Chinese from the message catalog (messages/en.yaml, zh.yaml).
"""

from __future__ import annotations

import re
from typing import Any

from mbridge_launch.base.i18n import t

ERROR, WARNING, INFO = "error", "warning", "info"


def finding(code: str, severity: str, **params: Any) -> dict[str, Any]:
    key = f"catalog.finding.{code}"
    return {
        "code": code,
        "severity": severity,
        "message": t(key, lang="en", **params),
        "message_zh": t(key, lang="zh", **params),
    }


def effective_etp(tp: int, ep: int, etp: int | None) -> int:
    """Megatron Bridge's default (models/transformer_config.py,
    _set_moe_expert_tensor_parallel_default): unset ETP is 1 with EP > 1, else TP."""
    if etp is not None:
        return etp
    return 1 if ep > 1 else tp


def _ints(record: dict[str, Any], *names: str) -> list[int] | None:
    values = [record.get(name) for name in names]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return values  # type: ignore[return-value]


def layout_findings(record: dict[str, Any], facts: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """`facts`: validation_facts() of the same recipe (the dataset's class lineage), when known."""
    out: list[dict[str, Any]] = []
    gpus = record.get("gpus")
    sizes = _ints(record, "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                  "expert_model_parallel_size")
    if sizes is not None:
        tp, pp, cp, ep = sizes
        etp_raw = record.get("expert_tensor_parallel_size")
        etp = effective_etp(tp, ep, etp_raw if isinstance(etp_raw, int) else None)
        dense, expert = tp * pp * cp, pp * ep * etp
        if isinstance(gpus, int):
            if dense > gpus:
                out.append(finding("grid_exceeds_gpus", ERROR, need=dense, gpus=gpus, tp=tp, pp=pp, cp=cp))
            elif gpus % dense:
                out.append(finding("world_not_divisible", ERROR, gpus=gpus, need=dense, tp=tp, pp=pp, cp=cp))
            if ep > 1 or etp_raw is not None:
                if expert > gpus:
                    out.append(finding("expert_grid_exceeds_gpus", ERROR, need=expert, gpus=gpus, pp=pp, ep=ep, etp=etp))
                elif gpus % expert:
                    out.append(finding("expert_world_not_divisible", ERROR, gpus=gpus, need=expert, pp=pp, ep=ep, etp=etp))
            batch = _ints(record, "micro_batch_size", "global_batch_size")
            if batch is not None and dense <= gpus and gpus % dense == 0:
                mbs, gbs = batch
                dp = gpus // dense
                if gbs % (mbs * dp):
                    out.append(finding("gbs_not_divisible", ERROR, gbs=gbs, mbs=mbs, dp=dp, gpus=gpus))
        vp = record.get("virtual_pipeline_model_parallel_size")
        if isinstance(vp, int) and vp > 1 and pp == 1:
            out.append(finding("vp_without_pp", ERROR, vp=vp))
        if record.get("sequence_parallel") is True and tp == 1:
            out.append(finding("sp_without_tp", INFO))
        seq = record.get("seq_length")
        if isinstance(seq, int) and cp > 1 and seq % (2 * cp):
            out.append(finding("cp_seq_not_divisible", ERROR, seq=seq, cp=cp, mult=2 * cp))
    model_seq, data_seq = record.get("seq_length"), record.get("dataset_seq_length")
    if isinstance(model_seq, int) and isinstance(data_seq, int) and model_seq != data_seq:
        severity = ERROR if _validation_checks_seq_length(record, facts) else WARNING
        out.append(finding("seq_length_mismatch", severity, model=model_seq, dataset=data_seq))
    return out


# ConfigContainer.validate() (megatron/bridge/training/config.py, 0.6.2) asserts model seq_length ==
# dataset seq_length for these dataset classes and their subclasses; other providers are not checked.
SEQ_CHECKED_DATASETS = frozenset({
    "GPTDatasetConfig", "GPTSFTDatasetConfig", "DirectHFSFTDatasetConfig", "EnergonDatasetConfig",
    "MockVLMSFTDatasetConfig",
})


def _validation_checks_seq_length(record: dict[str, Any], facts: dict[str, Any] | None) -> bool:
    lineage = (facts or {}).get("dataset_lineage") or [(record.get("dataset") or {}).get("class")]
    return any(name in SEQ_CHECKED_DATASETS for name in lineage)


def name_findings(record: dict[str, Any], regular: bool, alias_mismatches: list[tuple[str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not regular:
        out.append(finding("name_irregular", INFO, name=record["name"]))
    for alias, what in alias_mismatches:
        out.append(finding("alias_differs", INFO, alias=alias, what=what))
    return out


def precision_findings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The precision in the name vs the mixed-precision settings the recipe really applies."""
    named = record.get("precision")
    features = record.get("features") or {}
    if named is None or "precision_recipe" not in features:
        return []
    fp8, fp8_recipe, fp4 = features.get("fp8"), features.get("fp8_recipe"), features.get("fp4")
    expected = {
        "bf16": fp8 is None and fp4 is None,
        "fp8cs": fp8 is not None and fp8_recipe == "tensorwise",
        "fp8mx": fp8 is not None and fp8_recipe == "mxfp8",
        "fp8ds": fp8 is not None and fp8_recipe == "delayed",
        "fp8sc": fp8 is not None and fp8_recipe == "blockwise",
        "nvfp4": fp4 is not None,
    }.get(named)
    if expected is False:
        return [finding("precision_mismatch", WARNING, named=named, recipe=features.get("precision_recipe"))]
    return []


def raise_findings(exception: str | None, where: str | None) -> list[dict[str, Any]]:
    if exception is None:
        return []
    if exception == "NotImplementedError":
        return [finding("raises_not_implemented", ERROR, where=where)]
    return [finding("raises", ERROR, exception=exception, where=where)]


def unresolved_findings(fields: list[str]) -> list[dict[str, Any]]:
    return [finding("unresolved", WARNING, fields=", ".join(fields))] if fields else []


def architecture_findings(record: dict[str, Any], unresolved: list[str] | tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Hook into the planner's rules: TP vs attention/KV heads and FFN, layers vs PP x VP (and
    uneven stages), experts vs EP, TP/EP vs the NVLink domain, SP with TP and EP...

    Uses mbridge_launch.knowledge.models.load_arch(model token) and
    mbridge_launch.planner.rules.check_layout(layout, arch, hardware); returns nothing when
    catalog/models.yaml lacks the recipe's model.
    """
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.planner.rules import Layout, check_layout

    return hf_seq_length_findings(record, load_arch) + _check_with_rules(record, load_arch, Layout, check_layout,
                                                                       unresolved)


def hf_seq_length_findings(record: dict[str, Any], load_arch: Any) -> list[dict[str, Any]]:
    """A recipe that leaves model.seq_length to the Hugging Face config gets max_position_embeddings
    (MegatronModelBridge's config mapping, unless the model's bridge sets it), which validate()
    requires to equal the dataset's seq_length: an error when models.yaml knows it differs, a
    warning when it is unknown."""
    data_seq = record.get("dataset_seq_length")
    if record.get("seq_length") is not None or not isinstance(data_seq, int):
        return []
    if not _validation_checks_seq_length(record, None):
        return []
    arch = load_arch(record["model"]) if record.get("model") else None
    hf_seq = getattr(arch, "max_position_embeddings", None) if arch is not None else None
    if hf_seq is None:
        return [finding("seq_length_from_hf", WARNING, dataset=data_seq)]
    if hf_seq != data_seq:
        return [finding("seq_length_mismatch", ERROR, model=hf_seq, dataset=data_seq)]
    return []


# Rules this module already checks against the GPU count in the recipe's name.
_DUPLICATE_RULE_KEYS = frozenset({
    "planner.rule.dense_grid", "planner.rule.expert_grid", "planner.rule.gbs", "planner.rule.vp_pp",
    "planner.rule.cp_seq", "planner.rule.sp_tp1",
})


def _layout_from_record(record: dict[str, Any], layout_cls: Any) -> Any:
    sizes = _ints(record, "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                  "expert_model_parallel_size", "micro_batch_size", "global_batch_size", "seq_length")
    if sizes is None:
        return None
    tp, pp, cp, ep, mbs, gbs, seq = sizes
    vp = record.get("virtual_pipeline_model_parallel_size")
    etp = record.get("expert_tensor_parallel_size")
    features = record.get("features") or {}
    dataset = record.get("dataset") or {}
    first = features.get("num_layers_in_first_pipeline_stage")
    last = features.get("num_layers_in_last_pipeline_stage")
    cp_comm = features.get("cp_comm_type")
    gpus = record.get("gpus")
    return layout_cls(
        tp=tp, pp=pp, vp=vp if isinstance(vp, int) else None, cp=cp, ep=ep,
        etp=effective_etp(tp, ep, etp if isinstance(etp, int) else None),
        sp=record.get("sequence_parallel") is True, mbs=mbs, gbs=gbs, seq_length=seq,
        world=gpus if isinstance(gpus, int) else None,
        fsdp=features.get("use_megatron_fsdp") is True,
        recompute=features.get("recompute_granularity") or "none",
        cp_comm_type=cp_comm if isinstance(cp_comm, str) else None,
        packing=dataset.get("offline_packing") is True,
        # account_for_* splits follow their own rule (_accounting_findings), not layers % (PP x VP)
        uneven_pp=first is not None or last is not None or features.get("pipeline_model_parallel_layout") is not None
        or _accounts_for_embedding_or_loss(features),
        first_stage_layers=first if isinstance(first, int) else None,
        last_stage_layers=last if isinstance(last, int) else None,
        distributed_optimizer=features.get("use_distributed_optimizer") is not False,
    )


def _accounts_for_embedding_or_loss(features: dict[str, Any]) -> bool:
    return features.get("account_for_embedding_in_pipeline_split") is True or (
        features.get("account_for_loss_in_pipeline_split") is True
    )


def _accounting_findings(record: dict[str, Any], arch: Any) -> list[dict[str, Any]]:
    """Megatron Core's rule with account_for_embedding/loss_in_pipeline_split (TransformerConfig
    __post_init__): layers + 1 per accounted stage must divide by PP, and per rank by VP."""
    features = record.get("features") or {}
    pp, vp = record.get("pipeline_model_parallel_size"), record.get("virtual_pipeline_model_parallel_size")
    layers = getattr(arch, "num_layers", None)
    if not _accounts_for_embedding_or_loss(features) or not isinstance(pp, int) or not isinstance(layers, int):
        return []
    total = layers + (features.get("account_for_embedding_in_pipeline_split") is True) + (
        features.get("account_for_loss_in_pipeline_split") is True
    )
    if total % pp:
        return [finding("pp_split_not_divisible", ERROR, layers=layers, total=total, pp=pp)]
    if isinstance(vp, int) and vp > 1 and (total // pp) % vp:
        return [finding("vp_split_not_divisible", ERROR, per_rank=total // pp, vp=vp)]
    return []


# the rules that judge how the layers split over the pipeline stages
_SPLIT_RULES = frozenset({"RULE_PP_LAYERS", "RULE_VP_LAYERS", "RULE_PP_UNEVEN"})


def _check_with_rules(record: dict[str, Any], load_arch: Any, layout_cls: Any, check_layout: Any,
                      unresolved: list[str] | tuple[str, ...] = ()) -> list[dict[str, Any]]:
    from mbridge_launch.base.errors import UserError

    if record.get("model") is None:
        return []
    arch = load_arch(record["model"])
    layout = _layout_from_record(record, layout_cls)
    if arch is None or layout is None:
        return []
    hardware = None
    if record.get("hardware"):
        try:
            from mbridge_launch.knowledge.hardware import get_hardware

            hardware = get_hardware(record["hardware"])
        except (ImportError, UserError):
            hardware = None  # vr200 / r100 are not in catalog/hardware.yaml
    out = _accounting_findings(record, arch)
    for violation in check_layout(layout, arch, hardware):
        if getattr(violation, "key", None) in _DUPLICATE_RULE_KEYS:
            continue
        if violation.code in _SPLIT_RULES and "pipeline_model_parallel_layout" in unresolved:
            # the recipe builds its layout at run time (DeepSeek-V4: from the HF config's layer
            # count): the static reading holds no split to judge, only the even one it would assume
            continue
        if violation.code in ("RULE_PP_LAYERS", "RULE_VP_LAYERS") and _accounts_for_embedding_or_loss(
            record.get("features") or {}
        ):
            continue  # replaced by _accounting_findings, which follows Megatron Core's rule
        out.append({
            "code": violation.code,
            "severity": getattr(violation, "severity", ERROR),
            "message": violation.message(lang="en"),
            "message_zh": violation.message(lang="zh"),
        })
    return sorted(out, key=lambda f: (f["code"], f["message"]))


# ---------------------------------------------------------------- checks of ConfigContainer.validate()
# Checks that Megatron Bridge 0.6.2 / Megatron Core 0.19.2 make in runtime_config_update(), found
# rejecting recipes by the conformance tier (tests/bridge/findings_conformance.py maps each code to
# the real error). They read a few values the catalog record does not store: validation_facts().

# Megatron Core 0.19.2 defaults of the fields below, for a recipe that never assigns them. Not
# mcore_defaults.py: that table is of megatron-core 0.16.1, where moe_deepep_num_sms defaulted to 20
# and moe_hybridep_num_sms to 16; 0.19.2 made both None (deprecated knobs), and a check over the old
# defaults would flag every recipe that builds a bare provider.
# These are execution settings: a Hugging Face config conversion never sets them.
_EXECUTION_DEFAULTS: dict[tuple[str, str], Any] = {
    # megatron/core/transformer/transformer_config.py
    ("model", "moe_deepep_num_sms"): None,
    ("model", "moe_hybridep_num_sms"): None,
    ("model", "moe_flex_dispatcher_num_sms"): None,
    # megatron/core/datasets/blended_megatron_dataset_config.py (BlendedMegatronDatasetConfig)
    ("dataset", "fast_cache_load"): False,
    ("dataset", "defer_npy_index_mmap"): False,
    ("dataset", "path_to_cache"): None,
}
# Fields of Megatron Bridge's own dataclasses (their defaults are in the wheel, read by the
# interpreter): known only when the interpreter has them.
_BRIDGE_FIELDS: tuple[tuple[str, str], ...] = (
    ("checkpoint", "ckpt_format"), ("checkpoint", "save"), ("checkpoint", "load"), ("dist", "use_megatron_fsdp"),
)
# Architecture fields (TransformerConfig): unknown for a provider built from a Hugging Face config.
_ARCHITECTURE_DEFAULTS: dict[tuple[str, str], Any] = {
    ("model", "num_layers"): 0,
    ("model", "hidden_size"): 0,
    ("model", "num_attention_heads"): 0,
    ("model", "kv_channels"): None,
}


def validation_facts(extractor: Any, cfg: Any) -> dict[str, Any]:
    """The values of _EXECUTION_DEFAULTS / _ARCHITECTURE_DEFAULTS / _BRIDGE_FIELDS' fields,
    "section.name" -> value, and "dataset_lineage"; a field whose value the interpreter cannot know
    is left out."""
    from mbridge_launch.catalog_sync.extract import to_data
    from mbridge_launch.catalog_sync.values import Obj, Unknown

    facts: dict[str, Any] = {}
    for (section, name), default in {**_EXECUTION_DEFAULTS, **_ARCHITECTURE_DEFAULTS}.items():
        owner = extractor.get(cfg, section)
        if not isinstance(owner, Obj):
            continue
        known, value = _assigned_value(owner, name)
        if not known and (section, name) in _EXECUTION_DEFAULTS:
            known, value = True, default
        elif not known and not owner.hf_derived:
            known, value = True, default
        if known:
            facts[f"{section}.{name}"] = value
    for section, name in _BRIDGE_FIELDS:
        if not isinstance(extractor.get(cfg, section), Obj):
            continue
        value = extractor.get(cfg, section, name)
        if isinstance(value, Unknown) and value.reason == "path":
            # os.path.join of a runtime directory (builtins_table._path_join): a str, never None
            facts[f"{section}.{name}"] = A_PATH
        elif not isinstance(value, (Obj, Unknown)):
            facts[f"{section}.{name}"] = to_data(value)
    dataset = extractor.get(cfg, "dataset")
    if isinstance(dataset, Obj):
        facts["dataset_lineage"] = list(dataset.lineage())
    return facts


def _assigned_value(owner: Any, name: str) -> tuple[bool, Any]:
    """(True, value) when the recipe or a dataclass of the wheel assigned `name` a value the
    interpreter knows; (True, UNKNOWN) for an assigned but unknowable value; (False, None) when
    nothing assigned it (the value is the Megatron Core default)."""
    from mbridge_launch.catalog_sync.extract import to_data
    from mbridge_launch.catalog_sync.values import Unknown

    if name not in owner.attrs:
        return False, None
    value = owner.attrs[name]
    if isinstance(value, Unknown):
        return True, UNKNOWN
    return True, to_data(value)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()  # an assigned value the interpreter could not know
A_PATH = "<a path computed at run time>"


def _known(facts: dict[str, Any], key: str) -> bool:
    return key in facts and facts[key] is not UNKNOWN


def validation_findings(record: dict[str, Any], facts: dict[str, Any]) -> list[dict[str, Any]]:
    out = in_batch_packing_findings(record)
    out += architecture_unset_findings(facts)
    out += data_cache_findings(facts)
    out += pipeline_layout_findings(record)
    out += dispatcher_sms_findings(facts)
    out += recompute_modules_findings(record)
    out += fsdp_checkpoint_findings(record, facts)
    return out


# TransformerConfig.__post_init__ (megatron-core 0.19.2): the modules selective recompute accepts
RECOMPUTE_MODULES = frozenset({
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts", "gdn_norm_out",
})


def recompute_modules_findings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Selective recompute asserts every recompute module is one megatron-core knows."""
    features = record.get("features") or {}
    modules = features.get("recompute_modules")
    if features.get("recompute_granularity") != "selective" or not isinstance(modules, list):
        return []
    unknown = sorted(m for m in modules if isinstance(m, str) and m not in RECOMPUTE_MODULES)
    return [finding("recompute_modules_unknown", ERROR, modules=", ".join(unknown))] if unknown else []


def fsdp_checkpoint_findings(record: dict[str, Any], facts: dict[str, Any]) -> list[dict[str, Any]]:
    """ConfigContainer._validate_and_apply_megatron_fsdp_configs: Megatron-FSDP saving or loading a
    checkpoint asserts checkpoint.ckpt_format == "fsdp_dtensor"."""
    fsdp = (record.get("features") or {}).get("use_megatron_fsdp") is True or facts.get("dist.use_megatron_fsdp") is True
    keys = ("checkpoint.ckpt_format", "checkpoint.save", "checkpoint.load")
    if not fsdp or not all(_known(facts, k) for k in keys):
        return []
    if (facts["checkpoint.save"] is not None or facts["checkpoint.load"] is not None) and (
        facts["checkpoint.ckpt_format"] != "fsdp_dtensor"
    ):
        return [finding("fsdp_ckpt_format", ERROR, format=facts["checkpoint.ckpt_format"])]
    return []


def in_batch_packing_findings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """ConfigContainer.validate(): `enable_in_batch_packing and train.micro_batch_size == 1` raises
    (in-batch packing concatenates the sequences of one micro-batch, so it needs two)."""
    dataset = record.get("dataset") or {}
    if dataset.get("in_batch_packing") is True and record.get("micro_batch_size") == 1:
        return [finding("in_batch_packing_mbs1", ERROR, mbs=1)]
    return []


def architecture_unset_findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """TransformerConfig.__post_init__ computes kv_channels = hidden_size // num_attention_heads when
    kv_channels is unset: a provider left at its dataclass defaults (num_attention_heads 0) raises
    ZeroDivisionError. Such a recipe expects the architecture as overrides."""
    heads, channels = facts.get("model.num_attention_heads", UNKNOWN), facts.get("model.kv_channels", UNKNOWN)
    if heads == 0 and heads is not UNKNOWN and _known(facts, "model.kv_channels") and channels is None:
        return [finding("architecture_unset", ERROR, layers=facts.get("model.num_layers", "?"),
                        hidden=facts.get("model.hidden_size", "?"), heads=heads)]
    return []


def data_cache_findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """BlendedMegatronDatasetConfig.__post_init__ asserts path_to_cache (--data-cache-path) is set
    when fast_cache_load or defer_npy_index_mmap is on: both read index caches built earlier."""
    if not _known(facts, "dataset.path_to_cache") or facts["dataset.path_to_cache"] is not None:
        return []
    flags = [f"dataset.{flag}" for flag in ("fast_cache_load", "defer_npy_index_mmap") if facts.get(f"dataset.{flag}") is True]
    return [finding("data_cache_path_missing", ERROR, flag=", ".join(flags))] if flags else []


def dispatcher_sms_findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """TransformerConfig.__post_init__ (megatron-core 0.19.2): the deprecated moe_deepep_num_sms and
    moe_hybridep_num_sms are routed to moe_flex_dispatcher_num_sms when that is unset; two different
    values raise, whichever dispatcher the recipe uses."""
    keys = ("model.moe_deepep_num_sms", "model.moe_hybridep_num_sms", "model.moe_flex_dispatcher_num_sms")
    if not all(_known(facts, k) for k in keys):
        return []
    deepep, hybridep, flex = (facts[k] for k in keys)
    if flex is None and deepep is not None and hybridep is not None and deepep != hybridep:
        return [finding("dispatcher_sms_conflict", ERROR, deepep=deepep, hybridep=hybridep)]
    return []


def pipeline_layout_findings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """TransformerConfig.__post_init__ with pipeline_model_parallel_layout: its stages must divide by
    PP, and stages / PP is the VP size; a VP size set besides it must equal that."""
    features = record.get("features") or {}
    layout, pp = features.get("pipeline_model_parallel_layout"), record.get("pipeline_model_parallel_size")
    stages = layout_stage_count(layout)
    if stages is None or not isinstance(pp, int) or pp < 1:
        return []
    if stages % pp:
        return [finding("layout_not_divisible_by_pp", ERROR, stages=stages, pp=pp)]
    vp = record.get("virtual_pipeline_model_parallel_size")
    if isinstance(vp, int) and vp != stages // pp:
        return [finding("vp_conflicts_with_layout", ERROR, vp=vp, stages=stages, pp=pp, detected=stages // pp)]
    return []


_LAYOUT_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_LAYOUT_REPEAT = re.compile(r"(.)\*(\d+)")


def layout_stage_count(layout: Any) -> int | None:
    """Pipeline stages of a layout: a list of stages, or Megatron Core's string form, where '|'
    separates stages, '(...)*n' and 'x*n' repeat, and commas are cosmetic
    (PipelineParallelLayerLayout.parse_str_to_list)."""
    if isinstance(layout, list):
        return len(layout)
    if not isinstance(layout, str):
        return None
    text = layout.replace(",", "")
    for pattern in (_LAYOUT_GROUP, _LAYOUT_REPEAT):
        text = pattern.sub(lambda m: m.group(1) * int(m.group(2)), text)
    return len(text.split("|"))
