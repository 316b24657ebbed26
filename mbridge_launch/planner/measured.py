"""Measured evidence: published (or the user's) rows of the same model, system, GPU count and
precision as a request, used to correct the throughput model and to rank the layouts they ran.

Why: the throughput model errs by about 10% on a release it was not fitted on, and the error is
mostly a per-configuration offset (software, kernels, the cluster); a row measured on the same
configuration in another release errs by about 2% (benchmarks/RESULTS.md, "Generalisation across
releases"). So, where such a row exists:

- **estimates are corrected**: a candidate's tokens/s is the model's times the ratio measured /
  predicted of the row chosen for it (`twin_for`: the same (TP, PP, CP, EP, FSDP) first, then the newest
  release, the same GBS and sequence). The model still says how the candidate
  differs from the measured layout; the measurement says where the configuration really lies.
- **a measured layout is ranked first** (`rank_key`): it is the layout NVIDIA's tuning (or the
  user's run) found and ran; the model's claim that another layout is faster has been wrong more
  often than right on held-out releases. The near-tie set around it (planner.near_tie) holds every
  measured layout and those the corrected model puts within the near-tie tolerance of corrected
  estimates (planner.domain.tie_band: how far from the first the published layouts came, held
  out by release with measured evidence), which `tune` can measure.

The rows come from the caller (never read here by default): `plan`, `estimate`, `recommend` and
`tune` pass the shipped rows of the request (`shipped_for`), and `plan`, `estimate` and `tune` the
user's own rows of the calibration in use (`Options.own_measured`, Measured.own: a row of the
user's cluster corrects its grid ahead of NVIDIA's); the benchmarks pass their training releases'
rows only, so a held-out row never corrects its own prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from mbridge_launch.planner.calibration_rows import Row
    from mbridge_launch.planner.throughput import Calibration, StepEstimate


@dataclass(frozen=True)
class Measured:
    """One measured row: what ran (its Layout, with the recompute our memory model needs to fit it),
    the tokens/s/GPU measured and the model's prediction of that same layout."""

    row: "Row"
    predicted: float  # tokens/s/GPU the throughput model predicts for the row's layout
    # the user's own measurement (a calibration file's measured_rows: their cluster, their
    # software), preferred to NVIDIA's published rows of the same grid
    own: bool = False

    @property
    def grid(self) -> tuple[int, int, int, int, bool]:
        """(TP, PP, CP, EP, FSDP): what `ran` compares (a Megatron-FSDP row is not the same layout
        with the distributed optimizer)."""
        L = self.row.layout
        return (L.tp, L.pp, L.cp, L.ep, L.fsdp)

    def ran(self, layout: Any) -> bool:
        """Whether this row ran `layout`'s (TP, PP, CP, EP, FSDP)."""
        return self.grid == (layout.tp, layout.pp, layout.cp, layout.ep, layout.fsdp)

    @property
    def ratio(self) -> float:
        """measured / predicted: the correction this row carries."""
        assert self.row.tokens_per_sec is not None  # only measured rows are kept (evidence)
        return self.row.tokens_per_sec / self.predicted

    def as_json(self) -> dict[str, Any]:
        L = self.row.layout
        return {"release": self.row.release or None, "tokens_per_sec_per_gpu": self.row.tokens_per_sec,
                "predicted_tokens_per_sec_per_gpu": round(self.predicted, 1),
                "layout": {"tp": L.tp, "pp": L.pp, "cp": L.cp, "ep": L.ep, "vp": L.vp_size, "mbs": L.mbs,
                           "gbs": L.gbs, "seq_length": L.seq_length},
                "variant": self.row.variant or None, "source": "yours" if self.own else "nvidia"}


def release_key(release: str) -> tuple[int, ...]:
    """Container releases in time order ("25.09" < "26.02.01"); an unnamed release sorts first."""
    parts = [p for p in release.split(".") if p.isdigit()]
    return tuple(int(p) for p in parts)


def evidence(rows: Iterable["Row"], cal: "Calibration | None" = None, own: bool = False) -> tuple[Measured, ...]:
    """The measured, rule-valid rows of `rows`, each with the model's prediction (constants `cal`,
    default the shipped ones) of its own layout; `own`: the user's rows (Measured.own)."""
    from mbridge_launch.planner.calibration_rows import GRAD_BYTES, with_fitting_recompute
    from mbridge_launch.planner.throughput import CAL, estimate_step

    out = []
    for row in rows:
        if not row.tokens_per_sec or not row.valid:
            continue
        est = estimate_step(row.arch, row.hw, with_fitting_recompute(row), row.precision, mtp_layers=row.mtp_layers,
                            moe_token_drop=row.token_drop, cal=cal or CAL, grad_bytes=GRAD_BYTES)
        out.append(Measured(row, est.tokens_per_sec_per_gpu, own))
    return tuple(out)


def matching(rows: Iterable["Row"], arch_name: str, system: str, world: int, precision: str,
             mtp_layers: int | None = None, token_drop: bool = False) -> list["Row"]:
    """The rows of the request's configuration: the same architecture, system, GPU count,
    precision and model variant (MTP off, token drop: they change the work of a step)."""
    return [r for r in rows
            if (r.arch.name, r.hw.name, r.layout.world, r.precision) == (arch_name, system, world, precision)
            and r.mtp_layers == mtp_layers and r.token_drop == token_drop]


def twin_for(layout: Any, matches: Sequence[Measured]) -> Measured | None:
    """The row that corrects `layout`'s estimate: the same (TP, PP, CP, EP, FSDP) first, then the
    user's own row (their cluster) before NVIDIA's, then the newest release (the software the
    request will run; on held-out releases the newest row erred less than the one nearest in
    time: benchmarks/RESULTS.md), then the same GBS and sequence length."""
    if not matches:
        return None
    newest_first = sorted({m.row.release for m in matches}, key=release_key, reverse=True)
    return min(matches, key=lambda m: (not m.ran(layout), not m.own, newest_first.index(m.row.release),
                                       m.row.layout.gbs != layout.gbs, m.row.layout.seq_length != layout.seq_length))


def scaled(step: "StepEstimate", ratio: float, ceiling: float | None = None) -> "StepEstimate":
    """A step estimate with its speed multiplied by `ratio`: the step time and each of its parts
    divided by it (the parts still add up to the step). With `ceiling` (the precision's MFU
    ceiling, throughput.MFU_CEILING) a correction never lifts an estimate above it: the step is
    lengthened to the ceiling, the added seconds under breakdown["mfu_ceiling"], as the model does."""
    parts = {k: v / ratio for k, v in step.breakdown.items()}
    kept = ratio
    capped = step.mfu_capped
    if ceiling is not None and step.mfu * ratio > ceiling:
        kept, capped = ceiling / step.mfu, True
        parts["mfu_ceiling"] = parts.get("mfu_ceiling", 0.0) + step.step_time_s / kept - step.step_time_s / ratio
    return replace(step, step_time_s=step.step_time_s / kept, tokens_per_sec_per_gpu=step.tokens_per_sec_per_gpu * kept,
                   model_tflops_per_gpu=step.model_tflops_per_gpu * kept, mfu=step.mfu * kept, breakdown=parts,
                   mfu_capped=capped, measured_ratio=step.measured_ratio * kept)


def correct(step: "StepEstimate", layout: Any, matches: Sequence[Measured], ceiling: float | None = None) -> tuple["StepEstimate", Measured | None]:
    """The estimate corrected by the layout's twin (unchanged without one), and the twin when it
    ran this very (TP, PP, CP, EP) (the candidate is then 'measured')."""
    twin = twin_for(layout, matches)
    if twin is None:
        return step, None
    return scaled(step, twin.ratio, ceiling), twin if twin.ran(layout) else None


# ------------------------------------------------------------------ the shipped rows of a request
@lru_cache(maxsize=1)
def _shipped_records() -> tuple[dict[str, str], ...]:
    import csv
    import io

    from mbridge_launch.planner.calibration_rows import csv_path

    text = csv_path().read_text(encoding="utf-8")
    return tuple(csv.DictReader(io.StringIO(text, newline="")))


@lru_cache(maxsize=64)
def shipped_for(arch_name: str, system: str, world: int, precision: str) -> tuple["Row", ...]:
    """The shipped calibration rows (catalog/perf_calibration.csv) of one architecture, system, GPU
    count and precision (Options.measured); () when NVIDIA published none. Only the records of the
    system and GPU count are parsed further, so a request without rows costs one CSV read."""
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.knowledge.vocabulary import normalize_precision
    from mbridge_launch.planner.calibration_rows import rows_of_records

    def same(record: dict[str, str]) -> bool:
        if (record.get("system") or "").strip() != system or (record.get("num_gpus") or "").strip() != str(world):
            return False
        try:
            if normalize_precision(record.get("precision") or "") != precision:
                return False
        except Exception:  # noqa: BLE001 - a record that does not parse is not this request's
            return False
        arch = load_arch((record.get("model") or "").strip())
        return arch is not None and arch.name == arch_name

    records = [r for r in _shipped_records() if same(r)]
    if not records:
        return ()
    rows, _ = rows_of_records(records, "perf_calibration.csv", strict=False)
    return tuple(rows)
