"""How a layout's virtual pipeline is named in every text the tool prints: "VP off" when there is
no interleaving (no VP, or VP=1: Megatron runs the same), else "VP=n". One place, so that `plan`,
`estimate`, `recommend`, the card, `tune` and `catalog` never show one layout two ways (VP=-,
VP=1 and VP off were all in use). JSON keeps the number (or null) as Megatron has it."""

from __future__ import annotations

from typing import Any, Optional

from mbridge_launch.base.i18n import Msg, msg, t


def _size(vp: Any) -> int:
    try:
        return int(vp) if vp is not None else 1
    except (TypeError, ValueError):
        return 1


def vp_word(vp: Any, lang: Optional[str] = None) -> str:
    """The text, now, in `lang` (default: the current language)."""
    return f"VP={_size(vp)}" if _size(vp) > 1 else t("card.vp_off", lang=lang)


def layout_msg(layout: Any) -> Msg:
    """One line naming a planner Layout, as a message to store (a Plan's warning): rendered in the
    language it is shown in, so the Plan and its hash are the same in every language."""
    vp: object = f"VP={_size(layout.vp_size)}" if _size(layout.vp_size) > 1 else msg("card.vp_off")
    return msg("layout.one_line", tp=layout.tp, pp=layout.pp, vp=vp, cp=layout.cp, ep=layout.ep,
               etp=layout.etp_shown, mbs=layout.mbs, fsdp=" FSDP" if layout.fsdp else "")
