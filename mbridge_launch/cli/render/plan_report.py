"""Render planner results: JSON objects and the text card with a memory bar chart against HBM.

Shared by `plan` and `estimate`.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base.escape import one_line
from mbridge_launch.base.i18n import t
from mbridge_launch.base.terminal import display_width, pad
from mbridge_launch.knowledge.hardware import Hardware
from mbridge_launch.planner.domain import Assessment
from mbridge_launch.planner.layout_words import vp_word
from mbridge_launch.planner.memory import HEADROOM, MemoryBreakdown
from mbridge_launch.planner.memory_band import WIDE, memory_band
from mbridge_launch.planner.pipeline_split import mtp_layers
from mbridge_launch.planner.rules import recompute_label
from mbridge_launch.planner.search import MEMORY_COMFORT, MEMORY_PRESSURE, Candidate, Rejection, ranking_terms

BAR_WIDTH = 40
_COMPONENTS = ("weights", "gradients", "optimizer", "activations", "logits", "allowance")
_GLYPHS = {"weights": "W", "gradients": "G", "optimizer": "O", "activations": "A", "logits": "L", "allowance": "x",
           "fp8_copies": "F", "dispatcher": "D"}
_WHEN_SET = ("fp8_copies", "dispatcher")  # rows shown only when the layout has them (planner.memory)


def recompute_text(layout: Any) -> str:
    """The recompute level as the text cards say it, in the reader's language (a Chinese word, not
    "=none"); the JSON keeps the tool's values (recompute_label)."""
    if layout.recompute in ("none", "selective") or (layout.recompute == "full" and layout.recompute_layers is None):
        return t(f"planner.recompute_level.{layout.recompute}")
    return recompute_label(layout)  # full with a layer count: already a sentence of the language


def budget(candidate: Candidate, tokens: float | None, gpus: int) -> dict[str, float] | None:
    """Wall-clock hours and GPU-hours to train on `tokens` tokens at the predicted speed."""
    if not tokens:
        return None
    seconds = tokens / (candidate.tokens_per_sec_per_gpu * gpus)
    return {"tokens": tokens, "hours": seconds / 3600.0, "gpu_hours": seconds * gpus / 3600.0}


def split_json(c: Candidate, arch: Any) -> dict[str, Any] | None:
    """The pipeline split the estimate assumed (kind, Megatron settings, layers per rank, words)."""
    L = c.layout
    if arch is None or L.pp <= 1 or L.split is None:
        return None
    return L.split.as_json(arch.num_layers, L.pp, L.vp_size, mtp_layers(arch))


def split_text(c: Candidate, arch: Any) -> str | None:
    L = c.layout
    if arch is None or L.pp <= 1 or L.split is None:
        return None
    return L.split.describe(arch.num_layers, L.pp, L.vp_size, mtp_layers(arch))


def candidate_json(c: Candidate, hw: Hardware, tokens: float | None = None, arch: Any = None) -> dict[str, Any]:
    L = c.layout
    data: dict[str, Any] = {
        "tp": L.tp, "pp": L.pp, "vp": L.vp, "cp": L.cp, "ep": L.ep, "etp": L.etp, "dp": L.dp, "sp": L.sp,
        "mbs": L.mbs, "gbs": L.gbs, "grad_accum": L.grad_accum, "seq_length": L.seq_length, "gpus": L.world,
        "fsdp": L.fsdp, "distributed_optimizer": L.distributed_optimizer and not L.fsdp, "recompute": L.recompute,
        "recompute_layers": L.recompute_layers, "cp_comm_type": L.cp_comm_type, "uneven_pp": L.uneven_pp,
        "memory_gb": c.memory.as_dict(), "memory_stage": c.memory.stage, "hbm_gb": hw.hbm_gb,
        # the settings the memory figures charge (planner.memory.MemoryBreakdown)
        "memory_assumes": {"recompute_modules": list(c.memory.recompute_modules) or None,
                           "fp8_param_gather": c.memory.fp8_param_gather, "moe_dispatcher": c.memory.moe_dispatcher},
        "memory_limit_gb": round(HEADROOM * hw.hbm_gb, 2), "fits": c.fits,
        # the measured p90 band of the memory total (planner.memory_band; null without the model)
        "memory_band_gb": _band_json(c.memory, arch),
        "tokens_per_sec_per_gpu": round(c.tokens_per_sec_per_gpu, 1),
        "model_tflops_per_gpu": round(c.model_tflops_per_gpu, 1),
        "mfu": round(c.mfu, 4),
        # clamped to the precision's MFU ceiling (planner/throughput.py MFU_CEILING), and the model's own figure
        "mfu_capped": c.step.mfu_capped, "mfu_uncapped": round(c.step.mfu_uncapped, 4),
        "step_time_s": round(c.step_time_s, 4),
        "time_breakdown_s": {k: round(v, 4) for k, v in c.step.breakdown.items()},
        # what the ranking adds to log(tokens/s/GPU): the memory charge (search.ranking_terms)
        "ranking_terms": {k: round(v, 4) for k, v in ranking_terms(_memory_fraction(c), L).items()},
        # the published row of this configuration that corrected the estimate (planner.measured),
        # and whether it ran this very grid (then it ranks first)
        "measured": c.measured.as_json() if c.measured is not None else None,
        "corrected_by": c.twin.as_json() if c.twin is not None else None,
        "measured_ratio": round(c.step.measured_ratio, 4),
    }
    split = split_json(c, arch)
    if split is not None and L.split is not None:
        data["pipeline_split"] = split
        data["split_overrides"] = dict(L.split.to_overrides())
    spend = budget(c, tokens, L.world or 1)
    if spend:
        data["budget"] = {k: float(f"{v:.6g}") for k, v in spend.items()}  # small budgets keep their hours
    return data


# The near-tie set (planner.near_tie) within the request's near-tie tolerance (planner.domain.
# tie_band), as planner.entry.plan_request computed it: this module only renders it.
def near_tie_json(result: Any) -> dict[str, Any]:
    """`near_tie_set` of plan's JSON (a planner.entry.PlanResult): the tolerance and its basis,
    whether the set may go on past the listed candidates, and the layouts with their estimates."""
    band = result.tie
    unranked = result.near_tie_unranked
    return {
        "within": round(band.within, 4), "basis": band.basis("en"), "complete": result.near_tie_complete,
        # the model cannot rank the set (planner.near_tie.cannot_rank): `layouts` holds its first
        # part only, and `tune` measures them
        "cannot_rank": unranked, "size": len(result.near_tie), "advice": "tune" if unranked else None,
        "layouts": [{"rank": rank, "tp": c.layout.tp, "pp": c.layout.pp, "vp": c.layout.vp, "cp": c.layout.cp,
                     "ep": c.layout.ep, "etp": c.layout.etp, "dp": c.layout.dp, "mbs": c.layout.mbs, "fsdp": c.layout.fsdp,
                     "recompute": recompute_label(c.layout),
                     "tokens_per_sec_per_gpu": round(c.tokens_per_sec_per_gpu, 1), "mfu": round(c.mfu, 4),
                     "step_time_s": round(c.step_time_s, 4), "memory_total_gb": round(c.memory_total_gb, 2)}
                    for rank, c in result.near_tie_shown],
    }


def near_tie_text(result: Any) -> list[str]:
    found, band = result.near_tie, result.tie
    if len(found) <= 1:
        return []
    if result.near_tie_unranked:
        # never "within 100% of the first": the model cannot rank these, `tune` can
        listed = result.near_tie_shown
        lines = [t("planner.near_tie_unranked", layouts=", ".join(str(rank) for rank, _ in listed), basis=band.basis())]
        if len(listed) < len(found):
            lines.append(t("planner.near_tie_unranked_more", size=len(found), shown=len(listed)))
        elif not result.near_tie_complete:
            lines.append(t("planner.near_tie_more", top=len(result.candidates)))
        return [*lines, ""]
    # with measured layouts in the set, some may lie outside the tolerance: say why they are in it
    key = "planner.near_tie_measured" if band.evidence else "planner.near_tie"
    lines = [t(key, layouts=", ".join(str(rank) for rank, _ in found), pct=band.within, basis=band.basis())]
    if not result.near_tie_complete:
        lines.append(t("planner.near_tie_more", top=len(result.candidates)))
    return [*lines, ""]


def domain_lines(assessment: Assessment) -> list[str]:
    """The domain line of `estimate` and `plan` (planner.domain.Assessment), and a warning when
    the error table was computed with other constants than the committed ones."""
    lines = [assessment.text()]
    if not assessment.domain.current:
        lines.append(t("planner.domain.stale"))
    return lines


def _band_json(memory: MemoryBreakdown, arch: Any) -> dict[str, Any] | None:
    band = memory_band(arch, memory) if arch is not None else None
    return band.as_dict() if band is not None else None


def _memory_fraction(c: Candidate) -> float:
    return c.memory.total / c.memory.hbm_gb if c.memory.hbm_gb else 0.0


def rank_note(index: int, candidates: list[Candidate], lang: str | None = None) -> str | None:
    """Why candidates[index] ranks below a layout predicted slower than it, or None when the
    ranking above it follows the predicted speed. Names the first such layout and the ranking
    terms (search.ranking_terms) that put it ahead."""
    c = candidates[index]
    slower_above = [i for i in range(index) if candidates[i].tokens_per_sec_per_gpu < c.tokens_per_sec_per_gpu]
    if not slower_above:
        return None
    k = slower_above[0]
    above = candidates[k]
    mine = ranking_terms(_memory_fraction(c), c.layout)
    theirs = ranking_terms(_memory_fraction(above), above.layout)
    reasons = []
    if mine["memory"] < theirs["memory"]:
        reasons.append(t("planner.rank_reason.memory", lang=lang, frac=_memory_fraction(c), comfort=MEMORY_COMFORT,
                         cost=MEMORY_PRESSURE / 10))
    faster = c.tokens_per_sec_per_gpu / above.tokens_per_sec_per_gpu - 1
    return t("planner.rank_below", lang=lang, above=k + 1, pct=faster,
             reasons=t("planner.rank_reason.join", lang=lang).join(reasons) or "-")


def rejected_json(rejected: dict[str, Rejection]) -> list[dict[str, Any]]:
    out = []
    for code, r in sorted(rejected.items(), key=lambda item: -item[1].count):
        out.append({"code": code, "count": r.count, "example": r.example, "message": _rejection_message(r, "en")})
    return out


def _rejection_message(r: Rejection, lang: str | None = None) -> str:
    """The rule's message (search.Rejection.message): every rejection line says what broke."""
    return r.message(lang)


def memory_band_lines(memory: MemoryBreakdown, arch: Any) -> list[str]:
    """The measured band of the memory estimate (planner.memory_band); none without the model."""
    band = memory_band(arch, memory) if arch is not None else None
    if band is None:
        return []
    key = "planner.memory_band" if band.reliable else "planner.memory_band_wide"
    return [t(key, count=band.rows, lo=band.low_ratio, hi=band.high_ratio, low=band.low_gib, high=band.high_gib,
              wide=WIDE)]


def memory_chart(memory: MemoryBreakdown, hbm_gb: float, indent: str = "     ") -> list[str]:
    """One row per component (bar scaled to HBM) and a stacked bar of the whole GPU, where '|'
    marks the usable limit (HBM minus headroom)."""
    scale = BAR_WIDTH / hbm_gb
    parts = memory.as_dict()
    lines = []
    shown = _COMPONENTS + tuple(name for name in _WHEN_SET if parts.get(name))
    labels = {name: t(f"planner.memory.{name}") for name in shown}
    label_width = max(display_width(label) for label in labels.values())
    for name in shown:
        value = parts[name]
        bar = "█" * int(round(value * scale))
        label = pad(labels[name], label_width)  # CJK glyphs are two columns
        lines.append(f"{indent}  {label}  {bar:<{BAR_WIDTH}} {value:7.1f}")
    stacked = "".join(_GLYPHS[name] * int(round(parts[name] * scale)) for name in shown)
    limit = int(round(HEADROOM * hbm_gb * scale))
    cells = list(stacked[:BAR_WIDTH * 2].ljust(max(BAR_WIDTH, len(stacked)), "."))
    if limit < len(cells):
        cells.insert(limit, "|")
    overflow = " !" if memory.total > HEADROOM * hbm_gb else ""
    lines.append(f"{indent}  [{''.join(cells)}] {memory.total:.1f}/{hbm_gb:.0f} GiB{overflow}")
    return lines


# How the step-time breakdown (throughput.StepEstimate.breakdown) is grouped on the card
_TIME_GROUPS = (
    ("compute", ("gemm", "attention", "moe", "elementwise")),
    ("latency", ()),
    ("comm", ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")),
    ("pp_bubble", ()),
    ("optimizer", ()),
)
_TIME_SHOWN = 0.005  # seconds; smaller parts are left off the line


def time_line(breakdown: dict[str, float], lang: str | None = None) -> str:
    """One line saying where the predicted step time goes: compute (by kind), host round trips,
    exposed communication (by parallelism), pipeline bubble, optimizer; parts that round to zero
    are left out. Tells a user what to attack (CUDA graphs for host time, a layout for comm)."""
    parts = []
    for group, keys in _TIME_GROUPS:
        label = t(f"planner.time.{group}", lang=lang)
        if not keys:
            seconds = breakdown.get(group, 0.0)
            if seconds >= _TIME_SHOWN:
                parts.append(t("planner.time_single", lang=lang, label=label, seconds=seconds))
            continue
        items = [(key, breakdown.get(key, 0.0)) for key in keys if breakdown.get(key, 0.0) >= _TIME_SHOWN]
        if items:
            named = [t("planner.time_item", lang=lang, label=t(f"planner.time.{key}", lang=lang), seconds=v)
                     for key, v in items]
            parts.append(t("planner.time_group", lang=lang, label=label, seconds=sum(v for _, v in items),
                           items=t("planner.time_sep_items", lang=lang).join(named)))
    return t("planner.time_line", lang=lang, parts=t("planner.time_sep_parts", lang=lang).join(parts))


def mfu_basis(precision: str | None) -> str:
    """The peak an MFU is measured against, named: the precision's own (FP8/FP4 for fp8/fp4 runs)."""
    from mbridge_launch.knowledge.vocabulary import PEAK_CLASS

    return PEAK_CLASS.get(precision or "bf16", "bf16").upper()


def candidate_text(rank: int, c: Candidate, hw: Hardware, tokens: float | None = None,
                   ranked: list[Candidate] | None = None, arch: Any = None, precision: str | None = None) -> list[str]:
    """The card of the rank-th candidate; given the whole ranked list, it also says why it ranks
    below a layout predicted slower (rank_note). `precision` names the peak its MFU is against."""
    L = c.layout
    lines = [t("planner.candidate", rank=rank, tp=L.tp, pp=L.pp, vp=vp_word(L.vp), cp=L.cp, ep=L.ep, etp=L.etp or 1,
               dp=L.dp, mbs=L.mbs, recompute=recompute_text(L), fsdp=" FSDP" if L.fsdp else "")]
    lines.append(t("planner.figures", tps=c.tokens_per_sec_per_gpu, tflops=c.model_tflops_per_gpu, mfu=c.mfu,
                   step=c.step_time_s, basis=mfu_basis(precision)))
    lines.append(time_line(c.step.breakdown))
    spend = budget(c, tokens, L.world or 1)
    if spend:
        lines.append(t("planner.budget", tokens=spend["tokens"], hours=spend["hours"], gpu_hours=spend["gpu_hours"]))
    lines.append(t("planner.memory_title", stage=t(f"planner.stage.{c.memory.stage}"), total=c.memory.total,
                   hbm=hw.hbm_gb, limit=HEADROOM * hw.hbm_gb, headroom=1 - HEADROOM))
    lines.extend(memory_chart(c.memory, hw.hbm_gb))
    lines.extend(memory_band_lines(c.memory, arch))
    lines.extend(evidence_lines(c))
    note = rank_note(rank - 1, ranked) if ranked else None
    if note:
        lines.append(note)
    split = split_text(c, arch) if L.uneven_pp else None
    if split is not None:
        # the concrete settings (plan -o writes them), not a reminder to choose some
        lines.append(t("planner.split_line", split=split))
    return lines


def evidence_lines(c: Candidate, lang: str | None = None) -> list[str]:
    """What corrected the candidate's estimate (planner.measured): its own published row, or the
    row of another layout of the same configuration; nothing for the model's own figure."""
    twin = c.twin
    if twin is None:
        return []
    from mbridge_launch.base.escape import one_line

    release = one_line(twin.row.release or "-")  # a user's row names its own release: one line
    own = "_own" if twin.own else ""  # the user's row (the calibration in use) or NVIDIA's
    if c.measured is not None:
        return [t(f"planner.measured_layout{own}", lang=lang, measured=twin.row.tokens_per_sec, release=release,
                  ratio=c.step.measured_ratio)]
    g = twin.row.layout
    return [t(f"planner.measured_corrected{own}", lang=lang, ratio=c.step.measured_ratio, tp=g.tp, pp=g.pp, cp=g.cp,
              ep=g.ep, release=release)]


def rejected_text(rejected: dict[str, Rejection]) -> list[str]:
    if not rejected:
        return []
    lines = [t("planner.rejected_title")]
    for code, r in sorted(rejected.items(), key=lambda item: -item[1].count):
        lines.append(t("planner.rejected_line", code=code, count=r.count, example=r.example or "-",
                       message=_rejection_message(r)))
    return lines


# NVIDIA's tuned layout (planner.nvidia_layout): shown after the ranked candidates, never ranked
def nvidia_json(option: Any, hw: Hardware) -> dict[str, Any] | None:
    """`nvidia_layout` of plan's JSON: the benchmark recipe, its layout, our estimate, whether our
    rules and memory model accept it, and its grid's rank in the list (null when not listed)."""
    if option is None:
        return None
    L, c, r = option.layout, option.estimate, option.recipe
    data: dict[str, Any] = {
        "recipe": r.name, "tp": L.tp, "pp": L.pp, "vp": L.vp, "cp": L.cp, "ep": L.ep, "etp": L.etp, "dp": L.dp,
        "sp": L.sp, "mbs": L.mbs, "gbs": L.gbs, "seq_length": L.seq_length, "gpus": L.world, "fsdp": L.fsdp,
        "recompute": recompute_label(L), "recipe_gbs": r.gbs,
        "recipe_seq_length": r.seq_length or r.dataset_seq_length,
        "tokens_per_sec_per_gpu": round(c.tokens_per_sec_per_gpu, 1) if c is not None else None,
        "mfu": round(c.mfu, 4) if c is not None else None,
        "step_time_s": round(c.step_time_s, 4) if c is not None else None,
        "memory_total_gb": round(c.memory_total_gb, 2) if c is not None else None,
        "memory_limit_gb": round(HEADROOM * hw.hbm_gb, 2), "fits": option.fits,
        "rule_errors": [{"code": v.code, "message": v.message("en")} for v in option.rule_errors],
        "accepted": option.accepted, "in_ranked_list": option.rank,
    }
    return data


def nvidia_text(option: Any, hw: Hardware, listed: int, precision: str | None = None) -> list[str]:
    """The lines of NVIDIA's layout after the ranked list ([] when there is none)."""
    if option is None:
        return []
    L, c, r = option.layout, option.estimate, option.recipe
    lines = [t("planner.nvidia.title", recipe=one_line(r.name)),  # a synced catalog's name: escaped
             t("planner.nvidia.layout", tp=L.tp, pp=L.pp, vp=vp_word(L.vp), cp=L.cp, ep=L.ep, etp=L.etp or 1, dp=L.dp,
               mbs=L.mbs, recompute=recompute_text(L), fsdp=" FSDP" if L.fsdp else "")]
    if c is not None:
        lines.append(t("planner.figures", tps=c.tokens_per_sec_per_gpu, tflops=c.model_tflops_per_gpu, mfu=c.mfu,
                       step=c.step_time_s, basis=mfu_basis(precision)))
        lines.append(t("planner.memory_title", stage=t(f"planner.stage.{c.memory.stage}"), total=c.memory.total,
                       hbm=hw.hbm_gb, limit=HEADROOM * hw.hbm_gb, headroom=1 - HEADROOM))
        if not c.fits:
            lines.append(t("planner.nvidia.no_fit", total=c.memory.total, limit=HEADROOM * hw.hbm_gb))
    if option.rule_errors:
        lines.append(t("planner.nvidia.rules", reasons="; ".join(f"{v.code} {v.message()}" for v in option.rule_errors)))
    recipe_seq = r.seq_length or r.dataset_seq_length
    if (r.gbs, recipe_seq) != (L.gbs, L.seq_length):
        lines.append(t("planner.nvidia.batch", gbs=L.gbs, seq=L.seq_length, recipe_gbs=r.gbs or "-",
                       recipe_seq=recipe_seq or "-"))
    lines.append(t("planner.nvidia.ranked", rank=option.rank) if option.rank else t("planner.nvidia.unranked",
                                                                                   count=listed))
    return [*lines, ""]
