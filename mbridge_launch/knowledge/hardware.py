"""GPU systems (catalog/hardware.yaml) and training precisions.

`get_hardware("H100-SXM")` -> Hardware; unknown names raise UserError listing the valid ones.
The names, their aliases and the precision spellings are the vocabulary's
(knowledge/vocabulary.py), shared by every command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.resources import catalog_yaml
from mbridge_launch.knowledge.vocabulary import PEAK_CLASS, PRECISIONS, gpu_type_key, gpu_type_or_none


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


def known_hardware() -> list[str]:
    return list(catalog_yaml("hardware.yaml"))


@lru_cache(maxsize=None)
def _build(name: str) -> Hardware:
    entry = dict(catalog_yaml("hardware.yaml")[name])
    entry["precisions"] = tuple(entry.get("precisions") or PRECISIONS)
    return Hardware(name=name, **entry)


def get_hardware(name: str) -> Hardware:
    entries = catalog_yaml("hardware.yaml")
    key = gpu_type_or_none(name) or gpu_type_key(name)
    if key in entries:
        return _build(key)
    raise UserError("hardware.unknown", gpu=name, valid=", ".join(entries))
