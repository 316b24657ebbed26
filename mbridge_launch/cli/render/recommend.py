"""Recommendation -> JSON object (the stable contract) or a readable card (en/zh)."""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.escape import one_line
from mbridge_launch.base.i18n import t
from mbridge_launch.plan.settings import override_text
from mbridge_launch.recommend.estimate_missing import estimate_missing


def all_changes(rec: Any, plan: Any) -> list[Any]:
    """The recommendation's changes and the launcher's (checkpoint paths, data paths)."""
    from mbridge_launch.recommend.to_plan import launcher_changes

    return [*rec.changes, *launcher_changes(rec, plan)]


def _estimate_missing_json(rec: Any) -> dict[str, str] | None:
    """{code, message} saying why "estimate" is null; None when there is an estimate."""
    missing = estimate_missing(rec)
    return None if missing is None else {"code": missing[0], "message": str(missing[1])}


def as_json(rec: Any, plan: Any, command: str) -> dict[str, Any]:
    layout = rec.layout
    est = rec.estimate
    return {
        "recipe": rec.recipe.name,
        "alias": (rec.recipe.aliases or [None])[0],
        "kind": rec.recipe.kind,
        "mode": plan.mode,
        "model": rec.model,
        "dataset": rec.dataset,
        "command": command,
        "parallelism": {
            "tp": layout.tp, "pp": layout.pp, "vp": layout.vp, "cp": layout.cp, "ep": layout.ep,
            "etp": layout.etp, "sp": layout.sp, "dp": layout.dp, "mbs": layout.mbs, "gbs": layout.gbs,
            "seq_length": layout.seq_length, "nodes": rec.nodes, "gpus_per_node": rec.gpus_per_node,
            "recompute": layout.recompute, "recompute_layers": layout.recompute_layers, "fsdp": layout.fsdp,
        },
        "changes": [c.as_json() for c in all_changes(rec, plan)],
        "warnings": [{"code": code, "message": str(message)} for code, message in rec.warnings],
        "notes": rec.notes,
        "estimate": None if est is None else plan.estimates.model_dump(mode="json"),
        "estimate_missing": _estimate_missing_json(rec),
        # the planner's first for the request, or why the layout is not (recommend.resize.LayoutChoice)
        "layout_choice": rec.layout_choice.as_json() if getattr(rec, "layout_choice", None) is not None else None,
        "gpu_type": rec.hardware.name,
        "catalog": {"source": rec.catalog.source, "version": rec.catalog.version},
        "plan_hash": plan.plan_hash(),
    }


def as_card(rec: Any, plan: Any, command: str) -> str:
    from mbridge_launch.planner.rules import recompute_label

    layout = rec.layout
    lines = [f"== {t('card.title')} =="]
    alias = (rec.recipe.aliases or [None])[0]
    lines.append(f"{t('card.recipe')}: {rec.recipe.name}" + (f"  ({t('card.alias')}: {alias})" if alias else ""))
    lines.append(f"    {t('card.kind.' + rec.recipe.kind)}")
    lines.append(f"{t('card.mode')}: {plan.mode}    {t('card.dataset')}: {rec.dataset}")
    lines.append(f"{t('card.hardware')}: " + t("card.nodes", nodes=t("count.nodes", count=rec.nodes),
                                              per_node=t("count.node_gpus", count=rec.gpus_per_node, gpu_type=rec.hardware.name.upper()),
                                              gpus=t("count.gpus", count=rec.nodes * rec.gpus_per_node)))
    vp = layout.vp if layout.vp else "-"
    etp = layout.etp if layout.etp else "-"
    lines.append(f"{t('card.layout')}: TP={layout.tp} PP={layout.pp} VP={vp} CP={layout.cp} EP={layout.ep} "
                 f"ETP={etp} SP={t('card.on') if layout.sp else t('card.off')} DP={layout.dp}"
                 + (f" {t('card.recompute')}={recompute_label(layout)}" if layout.recompute != "none" else "")
                 + (" FSDP" if layout.fsdp else ""))
    lines.append(f"{t('card.batch')}: " + t("card.batch_line", mbs=layout.mbs, gbs=layout.gbs,
                                           ga=layout.gbs // max(1, layout.mbs * layout.dp), seq=layout.seq_length))
    est = plan.estimates
    missing = estimate_missing(rec)
    if est.memory_gb_per_gpu is not None and est.step_time_s:
        lines.append(f"{t('card.estimate')}: " + t("card.estimate_line", mem=est.memory_gb_per_gpu, hbm=est.hbm_gb or 0,
                                                  step=est.step_time_s, tps=est.tokens_per_sec_per_gpu or 0,
                                                  mfu=est.mfu or 0))
        if rec.assessment is not None:  # inside the calibrated domain or extrapolated, with the band
            lines.append(f"    {rec.assessment.text()}")
    elif missing is not None:  # never left out silently
        lines.append(f"{t('card.estimate')}: " + t("card.estimate_none", code=missing[0], message=str(missing[1])))
    lines.append(f"{t('card.command')}:")
    lines.append(f"    {command}")
    lines.append(f"{t('card.changes')}:")
    changes = all_changes(rec, plan)
    if not changes:
        lines.append(f"    {t('card.no_changes')}")
    for c in changes:
        lines.append(f"    [{t('change.class.' + c.change_class)}] {c.field}: {override_text(c.from_)} -> "
                     f"{override_text(c.to)}  ({c.reason})")
    if rec.warnings or rec.notes:
        lines.append(f"{t('card.warnings')}:")
        for code, message in rec.warnings:
            lines.append(f"    ! {code}: {message}")
        for note in rec.notes:
            lines.append(f"    - {note}")
    lines.append(f"{t('card.catalog')}: megatron-bridge {rec.catalog.version} ({rec.catalog.source})")
    # each entry is one line of the card: a value holding a line break or a control character
    # (a save path, a partition, a reason) is escaped where it stands
    return "\n".join(one_line(line) for line in lines)
