"""Fine-tuning step time: the planner's estimates against fine-tuning runs it was never fitted on.

    python benchmarks/finetune_step_time.py [--markdown]

The rows (benchmarks/external/data/finetune_*.csv, a source on each) are validation only:
benchmarks/fit_constants.py never reads them.

- finetune_megatron_bridge.csv: NVIDIA's published SFT and LoRA rows (Megatron Bridge 26.06,
  Llama 3 70B, GBS 32, packed sequences of 4096 padded to full length).
- finetune_mlperf_llama2_70b_lora.csv: MLPerf Training v4.1 llama2_70b_lora, NVIDIA's runs (GBS 8
  and 128, sequences of 8192, 1-4 micro-batches per step). Llama 2 70B is Llama 3 70B's shape
  (80 layers, hidden 8192, 64 heads, 8 KV groups, FFN 28672) with a 32,000-token vocabulary; the
  catalog has no Llama 2 entry, so it is built here from llama3_70b.
- throughput_mlperf.csv, its LoRA rows: the external throughput set's MLPerf v4.1/v5.1
  llama2_70b_lora submissions of every submitter on NVIDIA GPUs (benchmarks/external/
  throughput_mlperf_extract.py; H100 to GB300, FP8 and NVFP4, 4 to 512 GPUs).

For each row: the estimate of the published layout (recompute as the row says, with the wheel's
step model and the shipped constants), its error against the measured tokens/s/GPU, and whether
the p90 band `estimate` prints for the request contains it. Prints the median |error| per set and
task; `--markdown` prints the RESULTS.md section.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.knowledge.hardware import get_hardware  # noqa: E402
from mbridge_launch.knowledge.models import ModelArch, load_arch  # noqa: E402
from mbridge_launch.knowledge.vocabulary import normalize_precision  # noqa: E402
from mbridge_launch.planner.domain import assess  # noqa: E402
from mbridge_launch.planner.rules import Layout  # noqa: E402
from mbridge_launch.planner.throughput import estimate_step  # noqa: E402

DATA = Path(__file__).resolve().parent / "external" / "data"
SETS = {"megatron_bridge": DATA / "finetune_megatron_bridge.csv",
        "mlperf_lora": DATA / "finetune_mlperf_llama2_70b_lora.csv",
        "mlperf_lora_all": DATA / "throughput_mlperf.csv"}
# the external throughput set's column names for the ones read here
_ALIASES = {"num_gpus": "gpus", "task": "goal"}
# Llama 2 70B: Llama 3 70B's decoder with Llama 2's 32k vocabulary (Touvron et al. 2023, table 1)
_DERIVED = {"llama2_70b": ("llama3_70b", {"vocab_size": 32000})}


def arch_of(model: str) -> ModelArch:
    if model in _DERIVED:
        base, changes = _DERIVED[model]
        found = load_arch(base)
        assert found is not None, base
        return replace(found, name=model, **changes)
    found = load_arch(model)
    if found is None:
        raise SystemExit(f"{model}: not in catalog/models.yaml")
    return found


@dataclass(frozen=True)
class Result:
    set: str
    task: str
    label: str
    measured: float
    predicted: float
    p90: float  # the p90 band `estimate` prints for the request

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def inside(self) -> bool:
        return abs(self.error) <= self.p90


def rows(name: str) -> list[dict[str, str]]:
    """The fine-tuning rows of set `name`, read under this script's column names."""
    with open(SETS[name], newline="") as fh:
        records = [{**r, **{ours: r[theirs] for ours, theirs in _ALIASES.items() if theirs in r}}
                   for r in csv.DictReader(fh)]
    return [r for r in records if r["task"] in ("sft", "lora", "dora")]


def evaluate(name: str, record: dict[str, str]) -> Result:
    arch = arch_of(record["model"])
    hw = get_hardware(record["system"])
    precision = normalize_precision(record["precision"])
    tp, pp, cp, n = (int(record[k]) for k in ("tp", "pp", "cp", "num_gpus"))
    vp = int(record["vp"]) if record.get("vp") else None
    layout = Layout(tp=tp, pp=pp, vp=vp if vp and vp > 1 else None, cp=cp, ep=int(record.get("ep") or 1), sp=tp > 1,
                    mbs=int(record["mbs"]), gbs=int(record["gbs"]), seq_length=int(record["seq_length"]), world=n,
                    cp_comm_type="p2p" if cp > 1 else None, recompute=record.get("recompute") or "none",
                    uneven_pp=arch.num_layers % (pp * (vp or 1)) != 0)
    task = record["task"]
    est = estimate_step(arch, hw, layout, precision, goal=task)
    band = assess(record["model"], arch, hw.name, precision, task, layout.seq_length, n).band
    who = f"{record['submitter']} " if record.get("submitter") else ""
    label = (f"{who}{record['model']} {task} {record['system']} x{n} {precision} GBS {layout.gbs} seq {layout.seq_length} "
             f"TP{tp} PP{pp} CP{cp} VP{vp or 1} ({layout.microbatches} micro-batches)")
    return Result(name, task, label, float(record["tokens_per_sec_per_gpu"]), est.tokens_per_sec_per_gpu, band.p90)


def all_results() -> list[Result]:
    return [evaluate(name, record) for name in SETS for record in rows(name)]


def summary(results: list[Result]) -> list[tuple[str, str, int, float, float]]:
    """(set, task, rows, median |error|, share inside the printed p90 band) per set and task."""
    out = []
    for key in sorted({(r.set, r.task) for r in results}):
        group = [r for r in results if (r.set, r.task) == key]
        out.append((*key, len(group), statistics.median(abs(r.error) for r in group),
                    sum(r.inside for r in group) / len(group)))
    return out


def markdown(results: list[Result]) -> str:
    lines = ["| set | task | rows | median abs error | inside printed p90 band |", "|---|---|---|---|---|"]
    lines += [f"| {s} | {t} | {n} | {m:.1%} | {c:.0%} |" for s, t, n, m, c in summary(results)]
    lines += ["", "| row | measured tok/s/GPU | predicted | error | p90 band |", "|---|---|---|---|---|"]
    lines += [f"| {r.label} | {r.measured:.0f} | {r.predicted:.0f} | {r.error:+.1%} | ±{r.p90:.0%} |" for r in results]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the RESULTS.md tables")
    args = parser.parse_args(argv)
    results = all_results()
    if args.markdown:
        print(markdown(results))
        return 0
    for r in results:
        print(f"{r.error:+7.1%}  inside={r.inside!s:5}  {r.label}: measured {r.measured:.0f}, predicted {r.predicted:.0f}")
    for s, t, n, m, c in summary(results):
        print(f"{s:16} {t:5} rows {n:2}  median |error| {m:6.1%}  inside the printed p90 band {c:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
