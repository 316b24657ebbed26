"""The throughput model against runs it was never fitted on, and the per-regime bands that come of it.

    python benchmarks/external_throughput.py [--no-write]

External sets (benchmarks/external/data/throughput_*.csv, extracted by the scripts beside them;
nothing is fitted on them):

- mlperf_v41, mlperf_v51: MLPerf Training submissions (NVIDIA and other submitters) of
  llama2_70b_lora (fine-tuning at GBS 8-72), llama31_8b and llama31_405b (pretraining): logged
  step times and the configs' layouts;
- mbridge_2604_2608: Megatron Bridge's published rows of releases 26.04-26.08, which the
  calibration CSV (25.09-26.02.01) does not hold (release drift; SFT and LoRA rows of 26.06).

Each row is estimated through the planner's one entry point (planner.entry.estimate_request:
the row's layout fixed, shipped constants, which were fitted on NVIDIA's calibration rows, and
NVIDIA's measured rows of the same configuration where they exist, as `estimate` does) with the
cheapest recompute the memory model lets fit; error = predicted / measured tokens/s - 1.

Bands (catalog/calibration-domain.json "regimes", read by planner.domain): per regime (tuned
pretraining; small batch = fine-tuning or <= 2 micro-batches per step; long context >= 32k;
planner.domain.regime_of) and estimate kind
(model alone; corrected by measured rows), the median and p90 of |error| pooled over every
external set and the calibration rows' own held-out errors (leave-one-system/model-out; for
corrected estimates leave-one-release-out)
and, with --back, the other direction: constants fitted on the external tuned-pretraining rows alone
(benchmarks/fitting.py's fit_ranked, the --quick settings of domain_table.py) predicting NVIDIA's
calibration rows (stored in the domain file's "regimes_back" and reused by later runs without --back). Coverage is measured honestly: for each external set,
the bands are recomputed WITHOUT that set, and the share of its rows whose |error| lies within the
p90 of the band planner.domain prints (with those bands) is reported.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_rows import ROOT  # noqa: E402
from mbridge_launch.base.atomic import atomic_write_text  # noqa: E402
from mbridge_launch.knowledge.hardware import get_hardware  # noqa: E402
from mbridge_launch.knowledge.models import ModelArch, load_arch  # noqa: E402
from mbridge_launch.planner.domain import REGIMES, assess, regime_of, table_of  # noqa: E402
from mbridge_launch.planner.entry import PlanRequest, estimate_request, shipped_calibration  # noqa: E402
from mbridge_launch.planner.memory import BF16_GRAD_BYTES  # noqa: E402
from mbridge_launch.planner.recompute import RECOMPUTE_ORDER, recompute_levels  # noqa: E402
from mbridge_launch.planner.rules import Layout, chunk_layers  # noqa: E402
from results_file import write_section  # noqa: E402

DATA = Path(__file__).resolve().parent / "external" / "data"
DOMAIN = ROOT / "catalog" / "calibration-domain.json"
HEADING = "## External throughput set (`python benchmarks/external_throughput.py`)"
BANDS_HEADING = "## Bands (`python benchmarks/external_throughput.py`)"
TARGET_MEDIAN = 0.10  # issue 34: tuned-run tokens/s median |error|
TARGET_COVERAGE = 0.85  # issue 34: the band's p90 holds the measured value for this share of every set
KINDS = ("model", "measured")

# Llama 2 70B is not a catalog model: Llama 3 70B's shape (80 layers, hidden 8192, FFN 28672,
# 64 heads, 8 KV groups) with Llama 2's 32,000-token vocabulary (meta-llama/Llama-2-70b-hf config.json)
DERIVED = {"llama2_70b": ("llama3_70b", {"vocab_size": 32000})}


@dataclass
class External:
    set: str
    label: str
    model: str
    system: str
    gpus: int
    precision: str
    goal: str
    gbs: int
    mbs: int
    seq_length: int
    tp: int
    pp: int
    cp: int
    vp: int
    ep: int
    fsdp: bool
    measured: float  # tokens/s/GPU
    error: float | None = None  # predicted / measured - 1
    corrected: bool = False  # the estimate was corrected by NVIDIA's measured rows of its configuration
    fits: bool = True  # the memory model lets the published layout fit at some recompute level
    reason: str = ""  # why it has no estimate

    @property
    def microbatches(self) -> int:
        """Micro-batches per step and pipeline (GBS / (DP x MBS))."""
        dp = max(self.gpus // (self.tp * self.pp * self.cp), 1)
        return max(self.gbs // (dp * self.mbs), 1)

    @property
    def regime(self) -> str:
        return regime_of(self.goal, self.seq_length, self.microbatches)

    @property
    def kind(self) -> str:
        return "measured" if self.corrected else "model"


def load_sets() -> list[External]:
    rows: list[External] = []
    for path in sorted(DATA.glob("throughput_*.csv")):
        for r in csv.DictReader(path.open(encoding="utf-8")):
            if "release" in r:
                name, label = "mbridge_2604_2608", f"{r['release']} {r['model']}"
            else:
                name = "mlperf_v41" if "v4.1" in r["source"] else "mlperf_v51"
                label = f"{r['submitter']} {r['benchmark']}"
            rows.append(External(name, label, r["model"], r["system"], int(r["gpus"]), r["precision"], r["goal"],
                                 int(r["gbs"]), int(r["mbs"]), int(r["seq_length"]), int(r["tp"]), int(r["pp"]),
                                 int(r["cp"]), int(r["vp"] or 1), int(r["ep"] or 1), int(r["fsdp"] or 0) > 0,
                                 float(r["tokens_per_sec_per_gpu"])))
    return rows


def arch_of(model: str) -> ModelArch | None:
    if model in DERIVED:
        base, changes = DERIVED[model]
        arch = load_arch(base)
        return None if arch is None else replace(arch, name=model, **changes)
    return load_arch(model)


def layout_of(row: External, arch: ModelArch) -> Layout:
    """The row's published layout (no recompute: the caller picks the level)."""
    vp = row.vp if row.vp > 1 else None
    return Layout(tp=row.tp, pp=row.pp, vp=vp, cp=row.cp, ep=row.ep, sp=row.tp > 1, mbs=row.mbs, gbs=row.gbs,
                  seq_length=row.seq_length, world=row.gpus, fsdp=row.fsdp, cp_comm_type="p2p" if row.cp > 1 else None,
                  gpus_per_node=get_hardware(row.system).gpus_per_node,
                  uneven_pp=arch.num_layers % (row.pp * (vp or 1)) != 0)


def estimate(row: External) -> None:
    """row.error through planner.entry.estimate_request, at the cheapest recompute that fits."""
    arch = arch_of(row.model)
    if arch is None:
        row.reason = "architecture not in the catalog"
        return
    hw = get_hardware(row.system)
    base = layout_of(row, arch)
    # benchmark configs reduce gradients in bf16 (calibration_rows.GRAD_BYTES)
    request = PlanRequest(row.model, arch, hw, row.gpus, row.gbs, row.seq_length, row.precision, row.goal,
                          grad_bytes=BF16_GRAD_BYTES)
    calibration = shipped_calibration()
    candidate = None
    try:
        for recompute, layers in recompute_levels(list(RECOMPUTE_ORDER), chunk_layers(arch.num_layers, base),
                                                  partial=True):
            got = estimate_request(request, replace(base, recompute=recompute, recompute_layers=layers),
                                   calibration).candidate
            candidate = got  # none fits: the last level, full recompute (calibration_rows.with_fitting_recompute)
            if got is not None and got.fits:
                break
    except Exception as exc:  # noqa: BLE001 - a row the planner cannot take is reported, not fatal
        row.reason = f"{type(exc).__name__}: {exc}"[:120]
        return
    if candidate is None:
        row.reason = "no estimate"
        return
    row.error = candidate.tokens_per_sec_per_gpu / row.measured - 1
    row.corrected = candidate.twin is not None
    row.fits = bool(candidate.fits)


# ---------------------------------------------------------------------- statistics
def p90(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


BACK_SETTINGS = {"iters": 300, "rounds": 2, "restarts": 1}  # domain_table.py --quick: one fit takes minutes


def back_errors(rows: list[External]) -> list[float]:
    """Signed errors of NVIDIA's calibration rows (tokens/s) predicted by constants fitted on the
    external tuned-pretraining rows alone, from the physical defaults (the external -> NVIDIA
    direction of the cross-source error)."""
    from accuracy import errors_with
    from calibration_rows import Row, load_rows
    from fitting import fit_ranked, prepared, rank_problems
    from mbridge_launch.planner.throughput import Calibration

    train = []
    for i, r in enumerate(rows):
        arch = arch_of(r.model)
        if r.error is None or r.regime != "pretrain" or arch is None:
            continue
        train.append(Row(i, r.set, r.model, r.system, r.precision, arch, get_hardware(r.system), layout_of(r, arch),
                         r.measured, None, None, False, ""))
    cal = fit_ranked(train, start=Calibration(), rounds=BACK_SETTINGS["rounds"], iters=BACK_SETTINGS["iters"],
                     problems=rank_problems(train), restarts=BACK_SETTINGS["restarts"])
    return errors_with(prepared([r for r in load_rows() if r.tokens_per_sec]), cal)


def calibration_errors(doc: dict) -> dict[tuple[str, str], list[float]]:
    """The calibration rows' own held-out |errors| per (regime, kind): the worse of
    leave-one-system-out and leave-one-model-out for the model alone, leave-one-release-out for
    estimates corrected by measured rows (the NVIDIA -> NVIDIA direction of the held-out error)."""
    from calibration_rows import load_rows
    from domain_table import key_of_row, row_key

    microbatches = {key_of_row(row): row.layout.microbatches for row in load_rows()}
    out: dict[tuple[str, str], list[float]] = {}
    for r in doc.get("rows", []):
        regime = regime_of(r.get("goal", "pretrain"), int(r["seq_length"]), microbatches.get(row_key(r)))
        held = [abs(v) for v in (r.get("loso"), r.get("lomo")) if v is not None]
        if held:
            out.setdefault((regime, "model"), []).append(max(held))
        if r.get("loro_measured") is not None:
            out.setdefault((regime, "measured"), []).append(abs(r["loro_measured"]))
    return out


def regime_bands(rows: list[External], calibration: dict[tuple[str, str], list[float]],
                 back: Sequence[float] = ()) -> dict:
    """The "regimes" document: per regime and kind, median and p90 of the pooled |errors|
    (`back`: the external -> NVIDIA errors, tuned pretraining of the model alone)."""
    pooled: dict[tuple[str, str], list[float]] = {k: list(v) for k, v in calibration.items()}
    if back:
        pooled.setdefault(("pretrain", "model"), []).extend(abs(e) for e in back)
    for r in rows:
        if r.error is not None:
            pooled.setdefault((r.regime, r.kind), []).append(abs(r.error))
    doc: dict[str, dict] = {}
    for (regime, kind), values in sorted(pooled.items()):
        if values:
            doc.setdefault(regime, {})[kind] = {"median": round(statistics.median(values), 4),
                                                "p90": round(p90(values), 4), "rows": len(values)}
    return doc


def printed_p90(row: External, table) -> float:  # noqa: ANN001 - planner.domain.Table
    """The p90 of the band planner.domain prints for the row's request with `table`."""
    arch = arch_of(row.model)
    return assess(row.model, arch, row.system, row.precision, row.goal, row.seq_length, row.gpus, table=table,
                  measured=row.corrected, microbatches=row.microbatches).band.p90


def coverage(rows: list[External], doc: dict, calibration: dict, back: Sequence[float] = ()
             ) -> dict[str, tuple[int, int]]:
    """Per external set: (rows within the printed p90, rows) with bands computed without that set;
    with `back`, also NVIDIA's calibration rows predicted by constants fitted on the external rows
    (nvidia_from_external), with bands computed without those errors."""
    out: dict[str, tuple[int, int]] = {}
    for name in sorted({r.set for r in rows}):
        others = [r for r in rows if r.set != name]
        table = table_of({**doc, "regimes": regime_bands(others, calibration, back)})
        mine = [r for r in rows if r.set == name and r.error is not None]
        hits = sum(abs(r.error) <= printed_p90(r, table) + 1e-9 for r in mine)
        out[name] = (hits, len(mine))
    if back:
        out[BACK_SET] = back_coverage(doc, back, regime_bands(rows, calibration))
    return out


BACK_SET = "nvidia_from_external"


def back_coverage(doc: dict, back: Sequence[float], regimes: dict) -> tuple[int, int]:
    """(calibration rows whose external -> NVIDIA error lies within the p90 planner.domain prints
    for them with `regimes`, rows)."""
    from calibration_rows import load_rows

    table = table_of({**doc, "regimes": regimes})
    measured = [r for r in load_rows() if r.tokens_per_sec]
    hits = 0
    for row, error in zip(measured, back):
        band = assess(row.model, row.arch, row.system, row.precision, "pretrain", row.layout.seq_length,
                      row.layout.world, table=table, microbatches=row.layout.microbatches).band
        hits += abs(error) <= band.p90 + 1e-9
    return hits, len(back)


def summary(values: list[float]) -> str:
    a = [abs(v) for v in values]
    if not a:
        return "- | - | 0"
    return f"{100 * statistics.median(a):.1f}% | {100 * p90(a):.1f}% | {len(a)}"


def report(rows: list[External], cover: dict, bands: dict, held_cover: dict,
           back: Sequence[float] = ()) -> tuple[str, str]:
    lines = [HEADING, "",
             "Runs the constants were not fitted on, estimated through `planner.entry.estimate_request` with the",
             "row's layout fixed (error = predicted / measured tokens/s - 1; + = too fast). Sets: MLPerf Training",
             "v4.1 and v5.1 submissions (any submitter, NVIDIA GPUs; `benchmarks/external/throughput_mlperf_extract.py`),",
             "Megatron Bridge's published rows of releases 26.04-26.08 (`throughput_mbridge_releases_extract.py`).",
             "Regimes (`planner.domain.regime_of`): tuned pretraining; small batch (fine-tuning, SFT/LoRA, or <= 2",
             "micro-batches per step and pipeline, as MLPerf's strong-scaled Llama 3.1 8B runs); long context (>= 32k tokens).",
             "",
             "Estimate: `model` = the throughput model alone; `measured` = corrected by NVIDIA's measured rows of the",
             "same configuration in the calibration releases (planner.measured), as `estimate` does.", "",
             "\"Over HBM\": rows the memory model calls \"does not fit\" at every recompute level (estimated at full",
             "recompute, as the calibration rows are).", "",
             "| set | regime | estimate | median \\|error\\| | p90 \\|error\\| | rows | median signed | over HBM |",
             "|---|---|---|---|---|---|---|---|"]
    for name in sorted({r.set for r in rows}):
        for regime in REGIMES:
            for kind in KINDS:
                mine = [r for r in rows if r.set == name and r.regime == regime and r.kind == kind
                        and r.error is not None]
                errs = [r.error for r in mine]
                if errs:
                    signed = f"{100 * statistics.median(errs):+.1f}%"
                    over = sum(not r.fits for r in mine)
                    lines.append(f"| {name} | {regime} | {kind} | {summary(errs)} | {signed} | {over} |")
    lines.append("")
    for kinds, what in ((KINDS, "every estimate"), (("model",), "the model alone")):
        tuned = [r.error for r in rows if r.error is not None and r.regime == "pretrain" and r.kind in kinds]
        med = statistics.median([abs(e) for e in tuned]) if tuned else float("nan")
        lines.append(f"Tuned pretraining over every external set, {what}: median |error| {100 * med:.1f}% "
                     f"(target <= {100 * TARGET_MEDIAN:.0f}%: {'met' if med <= TARGET_MEDIAN else 'NOT met'}), "
                     f"n={len(tuned)}.")
    lines.append("")
    if back:
        median, high, _ = summary(list(back)).split(" | ")
        lines += [(f"The other direction (constants fitted on the external tuned-pretraining rows alone, "
                   f"{BACK_SETTINGS['iters']} iterations, {BACK_SETTINGS['rounds']} ranking rounds, "
                   f"{BACK_SETTINGS['restarts']} start, predicting NVIDIA's {len(back)} calibration rows): "
                   f"median |error| {median}, p90 {high}."), ""]
    missing = sorted({f"{r.model} ({r.reason})" for r in rows if r.error is None})
    if missing:
        lines += ["Rows without an estimate: " + "; ".join(missing) + ".", ""]
    worst = sorted((r for r in rows if r.error is not None), key=lambda r: -abs(r.error))[:10]
    lines += ["Largest errors:", "", "| set | run | system | GPUs | precision | goal | GBS | layout | measured | error |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in worst:
        lines.append(f"| {r.set} | {r.label} | {r.system} | {r.gpus} | {r.precision} | {r.goal} | {r.gbs} | "
                     f"TP{r.tp} PP{r.pp} CP{r.cp} VP{r.vp} EP{r.ep} MBS{r.mbs} | {r.measured:.0f} | {100 * r.error:+.0f}% |")
    band_lines = [BANDS_HEADING, "",
                  "The band `estimate` and `plan` print is never narrower than its regime's held-out error",
                  "(catalog/calibration-domain.json `regimes`: |error| of the external sets above pooled with the",
                  "calibration rows' leave-one-system/model-out errors, or leave-one-release-out for estimates corrected",
                  "by measured rows), and the errors of NVIDIA's rows predicted by constants fitted on the external",
                  "rows (`--back`). A p90 above 50% prints \"no reliable estimate\".", "",
                  "| regime | estimate | median | p90 | rows |", "|---|---|---|---|---|"]
    for regime, kinds in sorted(bands.items()):
        for kind, b in sorted(kinds.items()):
            flag = " (no reliable estimate)" if b["p90"] > 0.5 else ""
            band_lines.append(f"| {regime} | {kind} | ±{100 * b['median']:.1f}% | ±{100 * b['p90']:.1f}%{flag} | {b['rows']} |")
    band_lines += ["", "Coverage: share of each set's rows whose measured tokens/s lies within the printed band's p90.",
                   "Held out: the bands recomputed without the set itself (the honest figure); in-sample: with the",
                   f"shipped bands (which include the set). Target >= {100 * TARGET_COVERAGE:.0f}% for every set.", "",
                   "| set | held-out coverage | in-sample coverage |", "|---|---|---|"]
    for name in sorted(held_cover):
        h, n = held_cover[name]
        i, m = cover[name]
        band_lines.append(f"| {name} | {100 * h / n:.0f}% ({h}/{n}) | {100 * i / m:.0f}% ({i}/{m}) |")
    return "\n".join(lines) + "\n", "\n".join(band_lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="print, write neither RESULTS.md nor the domain file")
    parser.add_argument("--back", action="store_true",
                        help="refit the constants on the external rows and predict NVIDIA's rows (minutes); "
                             "without it the errors stored by the last --back run are used")
    args = parser.parse_args()
    rows = load_sets()
    for row in rows:
        estimate(row)
    doc = json.loads(DOMAIN.read_text(encoding="utf-8"))
    if args.back:
        doc["regimes_back"] = {"errors": [round(e, 4) for e in back_errors(rows)], "settings": BACK_SETTINGS}
    back = list(doc.get("regimes_back", {}).get("errors", []))
    calibration = calibration_errors(doc)
    bands = regime_bands(rows, calibration, back)
    held_cover = coverage(rows, doc, calibration, back)
    shipped = table_of({**doc, "regimes": bands})
    in_sample = {}
    for name in held_cover:
        if name == BACK_SET:
            in_sample[name] = back_coverage(doc, back, bands)
            continue
        mine = [r for r in rows if r.set == name and r.error is not None]
        in_sample[name] = (sum(abs(r.error) <= printed_p90(r, shipped) + 1e-9 for r in mine), len(mine))
    text, band_text = report(rows, in_sample, bands, held_cover, back)
    print(text)
    print(band_text)
    if not args.no_write:
        doc["regimes"] = bands
        doc["regimes_settings"] = {"sets": sorted({r.set for r in rows}), "rows": sum(r.error is not None for r in rows),
                                   "written_by": "benchmarks/external_throughput.py"}
        atomic_write_text(DOMAIN, json.dumps(doc, indent=1) + "\n")
        write_section(HEADING, text)
        write_section(BANDS_HEADING, band_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
