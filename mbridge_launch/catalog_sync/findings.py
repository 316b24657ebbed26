"""Validate each extracted recipe against Megatron Core's parallelism rules (planner.rules) and record
what is irregular about it, instead of hiding it.

Checks that need only the recipe: a grid needing more GPUs than the name says, a GPU count the
grid does not divide, GBS not divisible by MBS x DP, model vs dataset sequence length, CP vs
sequence length, VP without PP, SP without TP, recipes that raise. Checks that need the model
architecture (TP vs heads and KV heads, layers vs PP x VP, experts vs EP) come from the
planner's rules through `architecture_findings`, when those modules exist.
Every message is rendered in English and Chinese from the message catalog (messages/en.yaml, zh.yaml).
"""

from __future__ import annotations

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


def layout_findings(record: dict[str, Any]) -> list[dict[str, Any]]:
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
        out.append(finding("seq_length_mismatch", WARNING, model=model_seq, dataset=data_seq))
    return out


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


def architecture_findings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Hook into the planner's rules: TP vs attention/KV heads and FFN, layers vs PP x VP (and
    uneven stages), experts vs EP, TP/EP vs the NVLink domain, SP with TP and EP...

    Uses mbridge_launch.knowledge.models.load_arch(model token) and
    mbridge_launch.planner.rules.check_layout(layout, arch, hardware); returns nothing when
    catalog/models.yaml lacks the recipe's model.
    """
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.planner.rules import Layout, check_layout

    return _check_with_rules(record, load_arch, Layout, check_layout)


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


def _check_with_rules(record: dict[str, Any], load_arch: Any, layout_cls: Any, check_layout: Any) -> list[dict[str, Any]]:
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
