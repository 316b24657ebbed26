"""The memory band: how far measured peaks fall from the memory model, on runs it was not fitted on.

catalog/memory-band.json is written by benchmarks/external_memory.py (never by hand) from an
external set (Megatron-LM's functional tests: measured allocator peaks). Per regime (model kind:
dense, moe, hybrid; `all` when a kind has too few rows) it holds the 5th and 95th percentiles of
measured / predicted - 1 of the modelled components (weights, gradients, optimizer, activations,
logits...: the planner's total without its allowance, which the allocator peak does not count).
The band applies them to those components and adds the allowance back. Nothing here is fitted: the
file only reports the model's measured error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.resources import catalog_dir
from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.planner.memory import MemoryBreakdown

BAND_NAME = "memory-band.json"
QUANTILES = (0.05, 0.95)  # a p90 band
WIDE = 0.50  # a band wider than this (high - low, as a share of the estimate): no reliable estimate


@dataclass(frozen=True)
class MemoryBand:
    low_gib: float
    high_gib: float
    regime: str  # dense, moe, hybrid or all
    rows: int  # external rows the band was measured on
    reliable: bool  # False: the band is wider than WIDE
    low_ratio: float = 0.0  # measured / predicted - 1 of the modelled part, 5th percentile
    high_ratio: float = 0.0  # ... 95th percentile

    def as_dict(self) -> dict[str, Any]:
        return {"low_gb": round(self.low_gib, 2), "high_gb": round(self.high_gib, 2), "regime": self.regime,
                "rows": self.rows, "reliable": self.reliable,
                "modelled_part_error": [round(self.low_ratio, 4), round(self.high_ratio, 4)]}


def band_file() -> Path:
    """catalog/memory-band.json of the installed package (or the source checkout)."""
    return Path(catalog_dir()) / BAND_NAME


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    try:
        return json.loads(band_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def regime_of(arch: ModelArch) -> str:
    if arch.is_hybrid:
        return "hybrid"
    return "moe" if arch.is_moe else "dense"


def memory_band(arch: ModelArch, memory: MemoryBreakdown) -> Optional[MemoryBand]:
    """The p90 band of `memory.total` (None when no band file ships)."""
    table = _table()
    regimes = table.get("regimes") or {}
    regime = regime_of(arch)
    entry = regimes.get(regime)
    if not entry or entry.get("rows", 0) < table.get("min_regime_rows", 0):
        regime, entry = "all", regimes.get("all")
    if not entry:
        return None
    modelled = memory.total - memory.allowance
    low = memory.allowance + modelled * (1.0 + float(entry["low"]))
    high = memory.allowance + modelled * (1.0 + float(entry["high"]))
    width = (high - low) / memory.total if memory.total > 0 else 0.0
    return MemoryBand(low_gib=low, high_gib=high, regime=regime, rows=int(entry["rows"]), reliable=width <= WIDE,
                      low_ratio=float(entry["low"]), high_ratio=float(entry["high"]))
