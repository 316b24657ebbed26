"""The published Megatron Bridge benchmark rows (benchmarks/data/perf_calibration.csv) as
planner inputs: architecture, hardware, precision and the published layout of each row.

Shared by fit_constants.py and accuracy.py. Conventions of the table (see its README):
empty VP/EP = not applicable (VP=1, EP=1 mean the same); `fsdp` > 0 = Megatron-FSDP;
model_variant "w/o MTP" = the DeepSeek-V3 MTP layer off; "tokendrop" = MoE capacity factor
(no dropless host synchronisation). Benchmark recipes reduce gradients in bf16 (GRAD_BYTES).
61-layer models (DeepSeek-V3, Kimi K2) declare an uneven
pipeline layout in their recipes.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.knowledge.hardware import Hardware, get_hardware  # noqa: E402
from mbridge_launch.knowledge.models import ModelArch, load_arch  # noqa: E402
from mbridge_launch.knowledge.vocabulary import normalize_precision  # noqa: E402
from mbridge_launch.planner.memory import estimate_memory  # noqa: E402
from mbridge_launch.planner.rules import Layout, check_layout, errors  # noqa: E402

CSV_PATH = Path(__file__).resolve().parent / "data" / "perf_calibration.csv"
# The rows are benchmark (perf) recipes, which reduce gradients in bf16
# (ddp.grad_reduce_in_fp32=false): 2-byte gradient buffers instead of the library recipes' 4.
GRAD_BYTES = 2.0


@dataclass(frozen=True)
class Row:
    index: int
    release: str
    model: str
    system: str
    precision: str
    arch: ModelArch
    hw: Hardware
    layout: Layout
    tokens_per_sec: float | None
    model_tflops: float | None
    mtp_layers: int | None
    token_drop: bool
    variant: str

    @property
    def label(self) -> str:
        L = self.layout
        return (f"{self.release} {self.model} {self.system} {self.precision} n={L.world} "
                f"tp{L.tp} pp{L.pp} cp{L.cp} ep{L.ep} vp{L.vp or 1} mbs{L.mbs}")

    @property
    def valid(self) -> bool:
        return not errors(check_layout(self.layout, self.arch, self.hw))


def _int(text: str, default: int | None = None) -> int | None:
    return int(text) if text not in ("", None) else default


def load_rows(path: Path = CSV_PATH) -> list[Row]:
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        for i, r in enumerate(csv.DictReader(handle)):
            arch = load_arch(r["model"])
            if arch is None:
                continue
            hw = get_hardware(r["system"])
            tp, pp, cp = int(r["tp"]), int(r["pp"]), int(r["cp"])
            vp = _int(r["vp"], 1)
            ep = _int(r["ep"], 1)
            layout = Layout(
                tp=tp, pp=pp, vp=vp if vp and vp > 1 else None, cp=cp, ep=ep, sp=tp > 1,
                mbs=int(r["mbs"]), gbs=int(r["gbs"]), seq_length=int(r["seq_length"]), world=int(r["num_gpus"]),
                fsdp=(_int(r["fsdp"], 0) or 0) > 0, cp_comm_type="p2p" if cp > 1 else None,
                uneven_pp=arch.num_layers % (pp * (vp or 1)) != 0,
            )
            variant = r["model_variant"]
            rows.append(Row(
                index=i, release=r["release"], model=r["model"], system=r["system"],
                precision=normalize_precision(r["precision"]), arch=arch, hw=hw, layout=layout,
                tokens_per_sec=float(r["tokens_per_sec_per_gpu"]) if r["tokens_per_sec_per_gpu"] else None,
                model_tflops=float(r["model_tflops_per_gpu"]) if r["model_tflops_per_gpu"] else None,
                mtp_layers=0 if "w/o MTP" in variant else None, token_drop="tokendrop" in variant, variant=variant,
            ))
    return rows


def with_fitting_recompute(row: Row) -> Layout:
    """The published layout with the cheapest recompute our memory model lets fit, from the same
    levels the search tries (none, selective, full recompute of part of each chunk, of all)."""
    from mbridge_launch.planner.rules import chunk_layers
    from mbridge_launch.planner.search import RECOMPUTE_ORDER, recompute_levels

    per_chunk = chunk_layers(row.arch.num_layers, row.layout)
    for recompute, layers in recompute_levels(list(RECOMPUTE_ORDER), per_chunk, partial=True):
        layout = replace(row.layout, recompute=recompute, recompute_layers=layers)
        if estimate_memory(row.arch, layout, row.hw.hbm_gb, precision=row.precision, grad_bytes=GRAD_BYTES).fits:
            return layout
    return replace(row.layout, recompute="full")
