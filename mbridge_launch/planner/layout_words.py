"""How a layout's virtual pipeline is named in every text the tool prints: "VP off" when there is
no interleaving (no VP, or VP=1: Megatron runs the same), else "VP=n". One place, so that `plan`,
`estimate`, `recommend`, the card, `tune` and `catalog` never show one layout two ways (VP=-,
VP=1 and VP off were all in use). JSON keeps the number (or null) as Megatron has it."""

from __future__ import annotations

from typing import Any, Optional

from mbridge_launch.base.i18n import t


def vp_word(vp: Any, lang: Optional[str] = None) -> str:
    try:
        size = int(vp) if vp is not None else 1
    except (TypeError, ValueError):
        size = 1
    return f"VP={size}" if size > 1 else t("card.vp_off", lang=lang)
