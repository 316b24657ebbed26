"""GPU systems (catalog/hardware.yaml) and training precisions.

`get_hardware("H100-SXM")` -> Hardware; unknown names raise UserError listing the valid ones.
Precision names are those of the recipe names (bf16, fp8cs, fp8mx, fp8sc, fp8ds, nvfp4); the
published benchmark tables' spellings (fp8_cs, mxfp8, fp8_blockwise) are accepted too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mbridge_launch.base.errors import UserError

PRECISIONS = ("bf16", "fp8cs", "fp8mx", "fp8sc", "fp8ds", "nvfp4")

# Which tensor-core peak a precision's GEMMs run at.
PEAK_CLASS = {"bf16": "bf16", "fp8cs": "fp8", "fp8mx": "fp8", "fp8sc": "fp8", "fp8ds": "fp8", "nvfp4": "fp4"}

_PRECISION_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp8cs": "fp8cs", "fp8_cs": "fp8cs", "fp8-cs": "fp8cs", "fp8": "fp8cs", "fp8_current_scaling": "fp8cs",
    "fp8mx": "fp8mx", "mxfp8": "fp8mx", "fp8_mx": "fp8mx",
    "fp8sc": "fp8sc", "fp8_sc": "fp8sc", "fp8_blockwise": "fp8sc", "fp8blockwise": "fp8sc", "fp8_subchannel": "fp8sc",
    "fp8ds": "fp8ds", "fp8_ds": "fp8ds", "fp8_delayed": "fp8ds",
    "nvfp4": "nvfp4", "fp4": "nvfp4",
}


def normalize_precision(text: str) -> str:
    key = (text or "").strip().lower()
    if key in _PRECISION_ALIASES:
        return _PRECISION_ALIASES[key]
    raise UserError("hardware.unknown_precision", precision=text, valid=", ".join(PRECISIONS))


@dataclass(frozen=True)
class Hardware:
    name: str
    label: str
    generation: str
    gpus_per_node: int
    nvlink_domain: int
    hbm_gb: float
    hbm_tbps: float
    peak_tflops: dict[str, float] = field(hash=False)
    nvlink_gbps: float
    network_gbps: float
    tdp_w: float
    attention_exp_speedup: float = 1.0
    host: str = "x86"
    precisions: tuple[str, ...] = PRECISIONS
    aliases: tuple[str, ...] = ()

    def peak(self, precision: str) -> float:
        """Dense tensor-core TFLOP/s for the GEMMs of `precision`; UserError if unsupported."""
        self.check_precision(precision)
        return float(self.peak_tflops[PEAK_CLASS[precision]])

    def supports(self, precision: str) -> bool:
        return precision in self.precisions and PEAK_CLASS.get(precision, "") in self.peak_tflops

    def check_precision(self, precision: str) -> None:
        if not self.supports(precision):
            raise UserError(
                "hardware.precision_unsupported", precision=precision, gpu=self.label,
                valid=", ".join(p for p in self.precisions if self.supports(p)),
            )

    def link_gbps(self, group_span: int) -> float:
        """Per-GPU bandwidth (GB/s, one direction) of a communication group of `group_span`
        consecutive ranks: NVLink when it fits in one NVLink domain, else the network."""
        return self.nvlink_gbps if group_span <= self.nvlink_domain else self.network_gbps


@lru_cache(maxsize=1)
def _entries() -> dict[str, dict[str, Any]]:
    import yaml

    from mbridge_launch.base.resources import catalog_dir

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(catalog_dir() / "hardware.yaml", encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader) or {}


def known_hardware() -> list[str]:
    return list(_entries())


@lru_cache(maxsize=None)
def _build(name: str) -> Hardware:
    entry = dict(_entries()[name])
    entry["aliases"] = tuple(entry.get("aliases") or ())
    entry["precisions"] = tuple(entry.get("precisions") or PRECISIONS)
    return Hardware(name=name, **entry)


def get_hardware(name: str) -> Hardware:
    key = (name or "").strip().lower().replace(" ", "-")
    entries = _entries()
    if key in entries:
        return _build(key)
    for hw_name, entry in entries.items():
        names = [a.lower() for a in entry.get("aliases") or ()] + [str(entry.get("label", "")).lower().replace(" ", "-")]
        if key in names:
            return _build(hw_name)
    raise UserError("hardware.unknown", gpu=name, valid=", ".join(entries))
