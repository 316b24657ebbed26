"""The planner's memory model on an external set it was never fitted on: Megatron-LM's functional tests.

    python benchmarks/external_memory.py [--no-write] [--limit N]

Rows: benchmarks/external/data/memory_mlm_functional.json (written by
benchmarks/external/memory_mlm_extract.py from a Megatron-LM clone; every row names its repository,
commit and paths). Each row becomes a planner request (benchmarks/external/memory_rows.py) and is
predicted with mbridge_launch.planner.memory.

What is compared: Megatron logs `mem-max-allocated-bytes` (torch's allocated_bytes.all.peak) from
the LAST rank only (the TensorBoard writer lives on rank world-1), i.e. the last pipeline stage, and
counts only what PyTorch's caching allocator hands out: no CUDA context, no NCCL buffers, no
fragmentation. So the like-for-like prediction is the last stage's modelled components (weights,
gradients, optimizer, activations, logits, FP8 copies, dispatcher) WITHOUT the planner's allowance
(fixed ALLOWANCE_GIB + FRAGMENTATION share). The planner's printed total (allowance included) is
reported beside it: on these tiny models the allowance is most of it.

The band: per regime (model kind), the 5th and 95th percentiles of measured / predicted - 1 on
the rows the planner can express (no setting the memory model lacks); its held-out coverage is
measured by grouped 5-fold cross-validation over architectures (all runs of one model stay in one
fold): the band of four folds is checked on the fifth. With --write (the
default) the band goes to catalog/memory-band.json (the wheel reads it: planner/memory_band.py)
and the figures to the section "External memory set" of benchmarks/RESULTS.md. Nothing in the
wheel's constants is fitted on this set; the band only reports its error.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "external"))

import memory_rows  # noqa: E402

from mbridge_launch.planner.memory import ALLOWANCE_GIB, MemoryBreakdown, _model  # noqa: E402
from mbridge_launch.planner.memory_band import QUANTILES, WIDE, band_file  # noqa: E402
from results_file import write_section  # noqa: E402

HEADING = "## External memory set"
TARGET_MEDIAN = 0.10
TARGET_WITHIN = 0.20
TARGET_SHARE = 0.90
TARGET_COVERAGE = 0.85
MIN_REGIME_ROWS = 20  # a regime with fewer rows takes the band of all rows
FOLDS = 5
SIZE_BUCKETS = ((0.0, 2.0, "< 2 GiB"), (2.0, 8.0, "2-8 GiB"), (8.0, float("inf"), ">= 8 GiB"))


def predict(r: memory_rows.Request) -> tuple[MemoryBreakdown, float]:
    """(the last stage's breakdown, its allocator part in GiB): the rank Megatron logs from."""
    # _model is the memory module's per-model cache; the public estimate_memory returns the more
    # loaded of the first and last stages, and the measurement is the last stage's
    last = _model(r.arch, r.precision, "pretrain", r.grad_bytes).stage(r.layout, r.layout.pp == 1, None)
    return last, last.total - last.allowance


def quantile(values: list[float], q: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def band_of(errors: Iterable[float]) -> tuple[float, float]:
    xs = list(errors)
    return quantile(xs, QUANTILES[0]), quantile(xs, QUANTILES[1])


def summary(errs: list[float]) -> dict[str, Any]:
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median_abs": statistics.median(abs(e) for e in errs),
            "median": statistics.median(errs), "within": sum(abs(e) <= TARGET_WITHIN for e in errs) / len(errs)}


def bands(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per regime: the p90 band of measured / predicted - 1, its rows and median."""
    by: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by[row["kind"]].append(row["ratio_err"])
        by["all"].append(row["ratio_err"])
    out = {}
    for regime, errs in sorted(by.items()):
        low, high = band_of(errs)
        out[regime] = {"rows": len(errs), "low": round(low, 4), "high": round(high, 4),
                       "median": round(statistics.median(errs), 4)}
    return out


# The band describes runs whose measured peak is at least this: below it the model's few GiB are
# dwarfed by fixed-size buffers the allocator also counts (workspaces, Megatron's global buffers),
# so a relative error there measures those, not the components the band scales (RESULTS.md: the
# < 2 GiB rows carry 76% allowance in the printed total). Rows below still appear in every figure.
BAND_MIN_PEAK_GIB = 2.0


def band_row(row: dict[str, Any]) -> bool:
    """A row the band is measured on: no setting the model lacks, and a peak of at least
    BAND_MIN_PEAK_GIB (the band is applied to training runs, not to kilobyte-scale test models)."""
    return not row["lacks"] and row["measured"] >= BAND_MIN_PEAK_GIB


def band_for(table: dict[str, dict[str, Any]], kind: str) -> dict[str, Any]:
    entry = table.get(kind)
    return entry if entry and entry["rows"] >= MIN_REGIME_ROWS else table["all"]


def cross_validated_coverage(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Grouped k-fold over architectures (a model's runs, every layout and platform, sit in one fold):
    the band of the other folds' band rows, checked on the held-out fold. Two figures per regime:
    `band_rows` (held-out rows the planner can express, the band's own population) and `all_rows`
    (held-out rows with settings the model lacks too)."""
    groups = sorted({row["group"] for row in rows})
    fold_of = {group: i % FOLDS for i, group in enumerate(groups)}
    hits: dict[str, dict[str, list[bool]]] = {"band_rows": defaultdict(list), "all_rows": defaultdict(list)}
    for fold in range(FOLDS):
        train = [row for row in rows if fold_of[row["group"]] != fold and band_row(row)]
        if not train:
            continue
        table = bands(train)
        for row in rows:
            if fold_of[row["group"]] != fold:
                continue
            b = band_for(table, row["kind"])
            inside = b["low"] <= row["ratio_err"] <= b["high"]
            if row["measured"] < BAND_MIN_PEAK_GIB:
                continue  # below the band's population (see band_row): not what the band claims to cover
            for name in ("all_rows",) + (() if not band_row(row) else ("band_rows",)):
                hits[name][row["kind"]].append(inside)
                hits[name]["all"].append(inside)
    return {name: {k: {"rows": len(v), "coverage": round(sum(v) / len(v), 4)} for k, v in sorted(h.items())}
            for name, h in hits.items()}


def in_sample_coverage(rows: list[dict[str, Any]], table: dict[str, dict[str, Any]]) -> float:
    inside = [band_for(table, r["kind"])["low"] <= r["ratio_err"] <= band_for(table, r["kind"])["high"] for r in rows]
    return sum(inside) / len(inside) if inside else float("nan")


def evaluate(data: dict[str, Any], limit: Optional[int] = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    used: list[dict[str, Any]] = []
    skipped: dict[str, int] = defaultdict(int)
    for raw in data["rows"][:limit]:
        try:
            r = memory_rows.build(raw)
        except memory_rows.Skip as why:
            skipped[str(why)] += 1
            continue
        last, allocator = predict(r)
        measured = raw["peak_max_allocated_gib"]
        used.append({
            "id": raw["id"], "case": raw["case"], "group": architecture_key(r), "platform": raw["platform"],
            "kind": r.kind, "tags": r.tags,
            "lacks": r.lacks, "settings": memory_rows.describe(r), "measured": measured,
            "predicted": allocator, "planner_total": last.total, "allowance": last.allowance,
            "err": allocator / measured - 1.0, "total_err": last.total / measured - 1.0,
            "ratio_err": measured / allocator - 1.0 if allocator > 0 else float("inf"),
            "params_b": r.arch.total_params_reference, "source": raw["source"]["golden"],
        })
    return used, dict(skipped)


def unknown_world(data: dict[str, Any], limit: Optional[int] = None) -> list[dict[str, Any]]:
    """Rows whose GPU count no public CI recipe gives (the release tests run from NVIDIA's internal
    recipes): predicted at every GPU count their layout allows (memory_rows.world_candidates), the
    lowest and highest prediction beside the measured peak. Not part of the figures or the band."""
    out = []
    for raw in data["rows"][:limit]:
        if raw["recipes"] or raw.get("second_run"):
            continue
        try:
            preds = [(predict(memory_rows.build(raw, world=w))[1], w) for w in memory_rows.world_candidates(raw)]
        except memory_rows.Skip:
            continue
        if not preds:
            continue
        (low, low_world), (high, high_world) = min(preds), max(preds)
        measured = raw["peak_max_allocated_gib"]
        request = memory_rows.build(raw, world=low_world)
        out.append({"id": raw["id"], "settings": memory_rows.describe(request).split(" DP")[0],
                    "lacks": request.lacks, "measured": measured, "low": low, "low_world": low_world,
                    "high": high, "high_world": high_world, "inside": low * 0.999 <= measured <= high * 1.001})
    return out


def architecture_key(r: memory_rows.Request) -> str:
    """The model a row trains, whatever its layout: the unit the held-out folds keep together."""
    a = r.arch
    return (f"L{a.num_layers} h{a.hidden_size} n{a.num_attention_heads} g{a.kv_groups} f{a.ffn_hidden_size} "
            f"e{a.num_moe_experts or 0}x{a.moe_ffn_hidden_size or 0} mla{int(a.is_mla)} {a.hybrid_layer_pattern or ''}")


def _fmt(s: dict[str, Any]) -> str:
    if not s.get("n"):
        return "0 | - | - | -"
    return f"{s['n']} | {s['median_abs']:.1%} | {s['median']:+.1%} | {s['within']:.0%}"


def report(used: list[dict[str, Any]], skipped: dict[str, int], source: dict[str, Any], table: dict[str, Any],
           cv: dict[str, Any], measured_at: str, unknown: Optional[list[dict[str, Any]]] = None) -> str:
    errs = [u["err"] for u in used]
    total_errs = [u["total_err"] for u in used]
    overall = summary(errs)
    lines = [HEADING + " (`python benchmarks/external_memory.py`)", ""]
    lines.append(
        f"Megatron-LM's functional tests ([{source['repo']}](https://github.com/{source['repo']}) at "
        f"`{source['commit'][:12]}`, {source['committed'][:10]}): the measured `mem-max-allocated-bytes` of every "
        f"H100/GB200 training golden-values file beside its `model_config.yaml`, GPU count from the CI recipes "
        f"(`benchmarks/external/memory_mlm_extract.py` -> `benchmarks/external/data/memory_mlm_functional.json`). "
        f"Validation only: no constant of `mbridge_launch/` is fitted on it. Measured with the planner at "
        f"`{measured_at}`.")
    lines.append("")
    lines.append(f"**Rows: {len(used) + sum(skipped.values())} extracted, {len(used)} used, "
                 f"{sum(skipped.values())} skipped.** Skipped: " +
                 "; ".join(f"{why}: {n}" for why, n in sorted(skipped.items(), key=lambda kv: -kv[1])) + ".")
    lines.append("")
    lines.append("Compared like for like: Megatron logs the peak of PyTorch's allocator on the LAST rank "
                 "(last pipeline stage); the prediction is the last stage's modelled components without the "
                 "planner's allowance (3 GiB + 5%: CUDA context, NCCL, fragmentation, which the allocator "
                 "peak does not count). Error = predicted / measured - 1.")
    lines.append("")
    lines.append(f"**Median |error| {overall['median_abs']:.1%} (target <= {TARGET_MEDIAN:.0%}); "
                 f"{overall['within']:.0%} within {TARGET_WITHIN:.0%} (target {TARGET_SHARE:.0%}).** "
                 f"Median signed error {overall['median']:+.1%}. "
                 f"Targets {'met' if overall['median_abs'] <= TARGET_MEDIAN and overall['within'] >= TARGET_SHARE else 'NOT met'}.")
    tot = summary(total_errs)
    lines.append("")
    lines.append(f"The planner's printed total (allowance included) against the same allocator peak: median |error| "
                 f"{tot['median_abs']:.0%}, median {tot['median']:+.0%}, {tot['within']:.0%} within 20%: these are "
                 f"tiny models (median measured peak {statistics.median(u['measured'] for u in used):.1f} GiB) "
                 "where the fixed allowance dominates the total, and it is memory the allocator peak does not see.")
    lines.append("")
    lines.append("| split | rows | median abs error | median error | within 20% |")
    lines.append("|---|---|---|---|---|")
    for kind in ("dense", "moe", "hybrid"):
        lines.append(f"| kind {kind} | {_fmt(summary([u['err'] for u in used if u['kind'] == kind]))} |")
    for lo, hi, label in SIZE_BUCKETS:
        sel = [u for u in used if lo <= u["measured"] < hi]
        share = statistics.median(ALLOWANCE_GIB / u["planner_total"] for u in sel) if sel else float("nan")
        lines.append(f"| measured {label} (fixed allowance = {share:.0%} of the printed total) | "
                     f"{_fmt(summary([u['err'] for u in sel]))} |")
    for platform in ("dgx_h100", "dgx_gb200"):
        lines.append(f"| {platform} | {_fmt(summary([u['err'] for u in used if u['platform'] == platform]))} |")
    lines.append(f"| without a setting the model lacks | {_fmt(summary([u['err'] for u in used if not u['lacks']]))} |")
    lines.append("")
    lines.append("Per setting (a row counts under each setting it has):")
    lines.append("")
    lines.append("| setting | rows | median abs error | median error | within 20% |")
    lines.append("|---|---|---|---|---|")
    tags = sorted({t for u in used for t in u["tags"]})
    for tag in tags:
        lines.append(f"| {tag} | {_fmt(summary([u['err'] for u in used if tag in u['tags']]))} |")
    lines.append("")
    lines.append("Largest rows (measured peak), where the fixed allowance matters least:")
    lines.append("")
    lines.append("| row | settings | lacks | measured GiB | predicted GiB | error |")
    lines.append("|---|---|---|---|---|---|")
    for u in sorted(used, key=lambda u: -u["measured"])[:10]:
        lines.append(f"| {u['id']} | {u['settings']} | {', '.join(u['lacks']) or '-'} | {u['measured']:.2f} | "
                     f"{u['predicted']:.2f} | {u['err']:+.0%} |")
    lines.append("")
    lines.append("Worst rows (largest |error|):")
    lines.append("")
    lines.append("| row | settings | lacks | measured GiB | predicted GiB | error |")
    lines.append("|---|---|---|---|---|---|")
    for u in sorted(used, key=lambda u: -abs(u["err"]))[:12]:
        lines.append(f"| {u['id']} | {u['settings']} | {', '.join(u['lacks']) or '-'} | {u['measured']:.2f} | "
                     f"{u['predicted']:.2f} | {u['err']:+.0%} |")
    lines.append("")
    n_groups = len({u["group"] for u in used})
    lines.append("**Memory band** (`catalog/memory-band.json`, written by this script; printed by `plan` and "
                 "`estimate`): per regime the 5th-95th percentile of measured / predicted - 1 of the modelled "
                 "components, on the rows the planner can express (no setting the model lacks) whose measured peak "
                 f"is at least {BAND_MIN_PEAK_GIB:g} GiB: {sum(band_row(u) for u in used)} rows (below that, fixed "
                 "buffers the allocator counts dwarf the modelled components; those rows stay in every figure "
                 f"above but not in the band, nor in its coverage); a regime with under {MIN_REGIME_ROWS} rows "
                 f"uses all of them. A band wider than {WIDE:.0%} is printed as no reliable estimate. Coverage of the p90 "
                 f"band held out: grouped {FOLDS}-fold over the {n_groups} architectures (a model's runs, every "
                 "layout and platform, never on both sides), the band of four folds checked on the fifth; target "
                 f">= {TARGET_COVERAGE:.0%}.")
    lines.append("")
    lines.append("| regime | band rows | band (p5 .. p95) | median | held-out coverage, band rows | "
                 "held-out coverage, all rows |")
    lines.append("|---|---|---|---|---|---|")
    for regime, entry in table.items():
        cells = []
        for name in ("band_rows", "all_rows"):
            c = (cv.get(name) or {}).get(regime)
            cells.append(f"{c['coverage']:.0%} of {c['rows']}" if c else "-")
        lines.append(f"| {regime} | {entry['rows']} | {entry['low']:+.0%} .. {entry['high']:+.0%} | "
                     f"{entry['median']:+.0%} | {cells[0]} | {cells[1]} |")
    lines.append("")
    if unknown:
        inside = sum(u["inside"] for u in unknown)
        lines.append(f"**Rows without a public GPU count** ({len(unknown)}, among them the release tests of larger "
                     "models, which run from recipes not in the public repository; not in the figures above nor in "
                     "the band): predicted at every "
                     "GPU count the layout allows (DP dividing GBS / MBS, the expert group dividing the world, up to "
                     f"4,096 GPUs); the measured peak lies inside the predicted range for {inside} of {len(unknown)}.")
        lines.append("")
        lines.append("| row | layout | lacks | measured GiB | predicted GiB (GPUs) | inside |")
        lines.append("|---|---|---|---|---|---|")
        for u in unknown:
            lines.append(f"| {u['id']} | {u['settings']} | {', '.join(u['lacks']) or '-'} | {u['measured']:.1f} | "
                         f"{u['low']:.1f} ({u['low_world']}) .. {u['high']:.1f} ({u['high_world']}) | "
                         f"{'yes' if u['inside'] else 'no'} |")
        lines.append("")
    lines.append("Other held-out sources: the repository holds no NVIDIA-side MEASURED memory (the calibration "
                 "CSV has throughput only; `memory_vs_bridge.py` compares two formulas, `recipe_memory.py` has no "
                 "measurement), so the band is measured on this set alone and checked held out within it; no band "
                 "for fine-tuning or long-context memory can be measured from it (every row is a short-sequence "
                 "pretraining test).")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md and the band file")
    parser.add_argument("--limit", type=int, default=None, help="only the first N extracted rows (a quick check)")
    parser.add_argument("--data", type=Path, default=memory_rows.DATA)
    args = parser.parse_args(argv)
    data = memory_rows.load(args.data)
    used, skipped = evaluate(data, args.limit)
    if not used:
        print("no usable rows")
        return 1
    band_rows = [u for u in used if band_row(u)]
    table = bands(band_rows) if band_rows else {}
    cv = cross_validated_coverage(used) if len({u["group"] for u in used}) >= FOLDS else {}
    root = Path(__file__).resolve().parent.parent
    try:
        measured_at = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], check=True,
                                     capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        measured_at = "unknown"
    text = report(used, skipped, data["source"], table, cv, measured_at, unknown_world(data, args.limit))
    print(text)
    if not args.no_write:
        write_section(HEADING, text, before="## Scenario matrix")
        band = {
            "written_by": "benchmarks/external_memory.py (never by hand)",
            "set": "Megatron-LM functional tests (benchmarks/external/data/memory_mlm_functional.json)",
            "source": data["source"], "planner_commit": measured_at,
            "measure": "measured allocator peak / predicted modelled components (allowance excluded) - 1",
            "quantiles": list(QUANTILES), "min_regime_rows": MIN_REGIME_ROWS,
            "regimes": table, "held_out_coverage": cv,
            "in_sample_coverage": round(in_sample_coverage(band_rows, table), 4),
            "band_rows": "rows without a setting the memory model lacks (memory_rows._lacks)",
        }
        band_file().write_text(json.dumps(band, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
