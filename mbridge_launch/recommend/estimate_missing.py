"""Why a recommendation has no estimate (or only part of one), as a (code, Msg) pair.

The card, the JSON (`"estimate": null, "estimate_missing": {code, message}`) and the Plan's
warnings all say it; an estimate is never left out silently.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.i18n import Msg, msg


def estimate_missing(rec: Any) -> tuple[str, Msg] | None:
    """The reason `rec.estimate` is None, or None when there is an estimate."""
    if rec.estimate is not None:
        return None
    arch = rec.arch
    if rec.recipe.kind == "benchmark":
        return "ESTIMATE_BENCHMARK", msg("estimate_missing.benchmark", recipe=rec.recipe.name)
    if arch is None:
        return "ARCH_UNKNOWN", msg("pitfall.arch_unknown", model=rec.model)
    if getattr(arch, "missing", ()):
        return "ESTIMATE_ARCH_INCOMPLETE", msg("estimate_missing.arch_incomplete", model=rec.model,
                                               fields=", ".join(arch.missing))
    return "ESTIMATE_UNAVAILABLE", msg("estimate_missing.unavailable", model=rec.model)


def estimate_warnings(rec: Any) -> list[tuple[str, Msg]]:
    """The Plan warnings about the estimate: why it is missing (once: ARCH_UNKNOWN may be there
    already), or that a vision-language model's estimate covers only its language model."""
    from mbridge_launch.recommend.pitfalls import is_vlm

    have = {code for code, _ in rec.warnings}
    missing = estimate_missing(rec)
    if missing is not None:
        return [] if missing[0] in have else [missing]
    if is_vlm(rec.recipe):
        return [("ESTIMATE_LANGUAGE_ONLY", msg("estimate_missing.language_only", model=rec.model))]
    return []


def hf_config_and_estimate_warnings(rec: Any) -> list[tuple[str, Msg]]:
    """What recommend() adds after the pitfalls: the --hf-config check and the estimate's gaps."""
    from mbridge_launch.recommend.hf_config_check import mismatch_warning

    found = []
    mismatch = mismatch_warning(rec.model, rec.recipe, rec.arch, rec.request.hf_config)
    if mismatch is not None:
        found.append(mismatch)
    return found + estimate_warnings(rec)
