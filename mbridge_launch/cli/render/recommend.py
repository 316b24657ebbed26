"""Recommendation -> JSON object (the stable contract) or a readable card (en/zh)."""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.escape import one_line
from mbridge_launch.base.i18n import t
from mbridge_launch.plan.settings import override_text
from mbridge_launch.planner.layout_words import vp_word
from mbridge_launch.recommend.estimate_missing import estimate_missing


def all_changes(rec: Any, plan: Any) -> list[Any]:
    """The recommendation's changes and the launcher's (checkpoint paths, data paths)."""
    from mbridge_launch.recommend.to_plan import launcher_changes

    return [*rec.changes, *launcher_changes(rec, plan)]


def _estimate_missing_json(rec: Any) -> dict[str, str] | None:
    """{code, message} saying why "estimate" is null; None when there is an estimate."""
    missing = estimate_missing(rec)
    return None if missing is None else {"code": missing[0], "message": str(missing[1])}


def as_json(rec: Any, plan: Any, command: str, manual_command: str | None = None) -> dict[str, Any]:
    """`command`: the submitted script's training line; `manual_command`: the same training run typed
    by hand inside an allocation (torchrun on one node, srun across nodes)."""
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
        "manual_command": manual_command,
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


# a speed estimate whose error band is wider than this is no estimate a user can plan with
RELIABLE_BAND = 0.5


def vp_text(vp: Any) -> str:
    """VP one way everywhere: "VP off" for no interleaving (None or 1), else "VP=n"."""
    return vp_word(vp)


def layout_text(layout: Any) -> str:
    from mbridge_launch.cli.render.plan_report import recompute_text

    words = [f"TP={layout.tp}", f"PP={layout.pp}", vp_text(layout.vp), f"CP={layout.cp}", f"EP={layout.ep}"]
    if layout.etp and int(layout.etp) > 1:
        words.append(f"ETP={layout.etp}")
    words += [f"DP={layout.dp}", f"SP {t('card.on') if layout.sp else t('card.off')}"]
    if layout.recompute != "none":
        words.append(f"{t('card.recompute')}={recompute_text(layout)}")
    if layout.fsdp:
        words.append("FSDP")
    return " ".join(words)


def mfu_basis(rec: Any) -> str:
    """The peak the MFU is measured against: the precision's own (FP8/FP4 for fp8/fp4 runs)."""
    from mbridge_launch.knowledge.hardware import PEAK_CLASS

    precision = getattr(rec.request, "precision", None) or getattr(rec.recipe, "precision", None) or "bf16"
    return PEAK_CLASS.get(precision, "bf16").upper()


def speed_lines(rec: Any, plan: Any, verbose: bool) -> list[str]:
    """Fit and speed: the figures with their error band, or "no reliable estimate" where the band
    is wider than RELIABLE_BAND (the figure then only with --verbose)."""
    est, lines = plan.estimates, []
    missing = estimate_missing(rec)
    if est.memory_gb_per_gpu is None or not est.step_time_s:
        if missing is not None:  # never left out silently
            lines.append(f"{t('card.estimate')}: " + t("card.estimate_none", code=missing[0], message=str(missing[1])))
        return lines
    lines.append(f"{t('card.fit')}: " + t("card.fit_line", mem=est.memory_gb_per_gpu, hbm=est.hbm_gb or 0))
    band = rec.assessment.band.median if rec.assessment is not None else None
    figures = t("card.speed_line", step=est.step_time_s, tps=est.tokens_per_sec_per_gpu or 0, mfu=est.mfu or 0,
                basis=mfu_basis(rec))
    if band is not None and band > RELIABLE_BAND:
        lines.append(f"{t('card.speed')}: " + t("card.speed_unreliable", band=band, limit=RELIABLE_BAND))
        if verbose:
            lines.append(f"    {figures}")
    else:
        lines.append(f"{t('card.speed')}: {figures}" + ("" if band is None else t("card.speed_band", band=band)))
    if verbose and rec.assessment is not None:  # inside the calibrated domain or extrapolated, and why
        lines.append(f"    {rec.assessment.text()}")
    return lines


def _warning_lines(rec: Any) -> list[str]:
    """Each warning and note once (a note that repeats a warning's text is not said again)."""
    seen: set[str] = set()
    out = []
    for _code, message in rec.warnings:
        text = str(message)
        if text not in seen:
            seen.add(text)
            out.append(f"    ! {text}")
    for note in rec.notes:
        if str(note) not in seen:
            seen.add(str(note))
            out.append(f"    - {note}")
    return out


def as_card(rec: Any, plan: Any, command: str, verbose: bool = False) -> str:
    """The answer first (recipe, layout, fit, speed, command); the changes from the recipe, the
    estimate's basis and the catalog only with `verbose`. `command` is the script's training step."""
    layout = rec.layout
    lines = [f"== {t('card.title')} =="]
    alias = (rec.recipe.aliases or [None])[0]
    lines.append(f"{t('card.recipe')}: {rec.recipe.name}  [{t('card.kind.' + rec.recipe.kind)}]")
    if verbose and alias:
        lines.append(f"    {t('card.alias')}: {alias}")
    hardware = t("card.nodes", nodes=t("count.nodes", count=rec.nodes),
                 per_node=t("count.node_gpus", count=rec.gpus_per_node, gpu_type=rec.hardware.name.upper()),
                 gpus=t("count.gpus", count=rec.nodes * rec.gpus_per_node))
    lines.append(f"{t('card.mode')}: {plan.mode}    {t('card.dataset')}: {rec.dataset}    {t('card.hardware')}: {hardware}")
    lines.append(f"{t('card.layout')}: {layout_text(layout)}")
    lines.append(f"{t('card.batch')}: " + t("card.batch_line", mbs=layout.mbs, gbs=layout.gbs,
                                           ga=layout.gbs // max(1, layout.mbs * layout.dp), seq=layout.seq_length))
    lines += speed_lines(rec, plan, verbose)
    lines.append(f"{t('card.command')}:")
    lines.append(f"    {command}")
    changes = all_changes(rec, plan)
    if verbose:
        lines.append(f"{t('card.changes')}:")
        if not changes:
            lines.append(f"    {t('card.no_changes')}")
        for c in changes:
            was = t("card.not_in_recipe") if c.from_ is None else override_text(c.from_)
            lines.append(f"    [{t('change.class.' + c.change_class)}] {c.field}: {was} -> "
                         f"{override_text(c.to)}  ({c.reason})")
    elif changes:
        conv = sum(1 for c in changes if c.change_class == "convergence")
        lines.append(f"{t('card.changes')}: " + t("card.changes_count", count=len(changes), convergence=conv))
    warnings = _warning_lines(rec)
    if warnings:
        lines.append(f"{t('card.warnings')}:")
        lines += warnings
    if verbose:
        lines.append(f"{t('card.catalog')}: megatron-bridge {rec.catalog.version} ({rec.catalog.source})")
    # each entry is one line of the card: a value holding a line break or a control character
    # (a save path, a partition, a reason) is escaped where it stands
    return "\n".join(one_line(line) for line in lines)
