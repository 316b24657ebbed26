"""Whether an estimate is inside the throughput model's calibrated domain, and its error band.

The domain is what the published rows the constants were fitted on cover
(catalog/calibration-domain.json, written by `python benchmarks/domain_table.py`, never by
hand): systems, precisions (per architecture kind: the rows run dense models only in FP8/FP4),
model families (per kind), goals, sequence lengths and GPU counts. Each row carries the
leave-one-system-out and leave-one-model-out relative error of its tokens/s estimate
(benchmarks/accuracy.py's refits: fit without the row's system, or model, then predict it).

`domain_of(...)` says, per dimension, inside or outside and why; `error_band(...)` gives the
median and 90th percentile of the absolute held-out errors of the nearest calibrated rows:

- which held-out error: leave-one-system-out when the request's system has no row (a new system is
  what that refit measures), leave-one-model-out when its model has no row but its system has, and
  otherwise (both seen, or both new) the larger of the two per row: the committed constants saw
  the request's own rows, so their in-sample error would understate what a new release does;
- "nearest": the rows of the same system, precision and family (family = recipe family and
  architecture kind), else the first of these that has at least MIN_ROWS rows: system + family,
  precision + family, family, system + precision, system, precision, every row (NEAREST_TIERS);
- outside the domain the band widens by WIDEN for every outside dimension the held-out error does
  not already measure (leave-one-system-out measures a new system, leave-one-model-out a new
  family), capped at MAX_BAND, and the text says "extrapolated" with the reasons;
- an estimate corrected by measured rows of its own configuration (planner.measured; `measured=`)
  takes the leave-one-release-out error of such corrected estimates instead (loro_measured, held
  out "measured"; benchmarks/generalisation.py writes it): the measured rows already stand for
  the system, GPU count, precision and model.

Per regime (regime_of: tuned pretraining, fine-tuning, long context >= LONG_CONTEXT tokens) the
table also holds the error measured on runs the constants were not fitted on
(`regimes`, written by benchmarks/external_throughput.py: external sets such as MLPerf Training
submissions and releases the calibration rows do not hold, pooled with the rows' own held-out
errors). That error is the band's floor: the printed band is never narrower than what the
request's regime measured elsewhere (a regime with no figures takes the widest measured one).
A band whose p90 is wider than RELIABLE_BAND is "no reliable estimate" (ErrorBand.reliable):
its figures are not to rank layouts by.

The near-tie tolerance (`tie_band`) is one rule for every request: the TIE_COVERAGE quantile of
how far from the first the published layouts of the nearest rows were predicted by held-out
refits (planner.near_tie.tie_distance), made the way the request's own estimate is made: by the
leave-one-system/model-out refits (gap_loso, gap_lomo) for the model alone, and by
leave-one-release-out with the other releases' measured rows as evidence (gap_measured) for an
estimate corrected by measured rows. A table without gap_measured (an older file) gives a
corrected estimate the median of its error band instead.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from mbridge_launch.base.i18n import t
from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.knowledge.vocabulary import FINETUNE_GOALS

DOMAIN_FILE = "calibration-domain.json"
MIN_ROWS = 3  # a band from fewer rows is one row's luck, not an error rate
WIDEN = 1.5  # per outside dimension the held-out error does not measure
MAX_BAND = 1.0  # a band of +-100% says "unknown"; wider says nothing more
DIMENSIONS = ("system", "precision", "family", "goal", "seq_length", "gpus")
REGIMES = ("pretrain", "small_batch", "long_context")
LONG_CONTEXT = 32768  # tokens per sequence from which a run is long-context (its own regime)
# at most this many micro-batches per step and pipeline: the step is latency-bound (pipeline fill,
# exposed gradient reduction, launch overheads), as fine-tuning at small GBS and MLPerf's
# strong-scaled runs are; tuned pretraining runs many
SMALL_BATCH_MICROBATCHES = 2
RELIABLE_BAND = 0.5  # a p90 band wider than +-50% is no reliable estimate: not to rank by


def regime_of(goal: str, seq_length: int, microbatches: int | None = None) -> str:
    """The throughput regime of a request: long context (>= LONG_CONTEXT tokens), fine-tuning
    (SFT, LoRA, DoRA) or any run of few micro-batches per step (`microbatches`: of the layout
    estimated, None when unknown), else tuned pretraining."""
    if seq_length >= LONG_CONTEXT:
        return "long_context"
    if goal in FINETUNE_GOALS or (microbatches is not None and microbatches <= SMALL_BATCH_MICROBATCHES):
        return "small_batch"
    return "pretrain"


def dimension_names(dims: tuple[str, ...] | list[str], lang: str | None = None) -> str:
    """The dimensions a band widened for, in words of `lang` (a field name is not a Chinese word)."""
    from mbridge_launch.base.i18n import t

    return t("planner.domain.dim_sep", lang=lang).join(t(f"planner.domain.dim.{d}", lang=lang) for d in dims)
# (attributes the rows must share with the request), nearest first
NEAREST_TIERS: tuple[tuple[str, ...], ...] = (
    ("system", "precision", "family"), ("system", "family"), ("precision", "family"), ("family",),
    ("system", "precision"), ("system",), ("precision",), (),
)


def architecture_kind(arch: ModelArch | None) -> str:
    """"hybrid" (Mamba layers), "moe" (routed experts) or "dense": the rows fit each differently."""
    if arch is None:
        return "dense"
    if arch.hybrid_layer_pattern:
        return "hybrid"
    return "moe" if arch.num_moe_experts else "dense"


@lru_cache(maxsize=1)
def _catalog_families() -> dict[str, str]:
    try:
        from mbridge_launch.knowledge.catalog import load_catalog

        return {str(r.model): r.family for r in load_catalog().recipes if getattr(r, "model", None) and r.family}
    except Exception:  # noqa: BLE001 - no catalog: fall back to the name's stem
        return {}


def model_family(model: str) -> str:
    """The model's recipe family in the catalog ("llama" for llama3_8b), else the letters its
    name starts with ("mistral" for mistral_7b): Hugging Face configs have no recipe."""
    family = _catalog_families().get(model)
    if family:
        return family
    stem = re.match(r"[a-z]+", (model or "").lower().rsplit("/", 1)[-1])
    return stem.group(0) if stem else "unknown"


@dataclass(frozen=True)
class CalibrationRow:
    model: str
    family: str
    kind: str
    system: str
    precision: str
    goal: str
    seq_length: int
    gpus: int
    loso: float | None  # relative error of tokens/s, leave-one-system-out refit
    lomo: float | None  # leave-one-model-out refit
    in_sample: float | None = None  # with the committed constants (for reference only)
    # the held-out refit's predicted shortfall of the published layout against its first choice,
    # 1 - tokens/s(published grid) / tokens/s(first): how far below the first the layout NVIDIA
    # found fastest was predicted (0: it was first; 1.0: not among the candidates listed). The
    # near-tie set's tolerance comes from these, not from the absolute error: a bias common to
    # every layout of a request (the system, the model) does not move their order.
    gap_loso: float | None = None
    gap_lomo: float | None = None
    release: str = ""  # the container release the row was published for (benchmarks hold one out)
    # leave-one-release-out error of the estimate corrected by the measured rows of the same
    # configuration in the other releases (planner.measured; benchmarks/generalisation.py writes
    # it): None when no other release measured the row's configuration
    loro_measured: float | None = None
    # the published layout's tie distance (planner.near_tie.tie_distance: 0 when it was among the
    # measured layouts) under that same leave-one-release-out with measured evidence; None as above
    gap_measured: float | None = None

    def held_out(self, kind: str) -> float | None:
        """|error| of the held-out refit `kind` ("system", "model" or "worst" of the two)."""
        values = {"system": [self.loso], "model": [self.lomo], "worst": [self.loso, self.lomo],
                  "measured": [self.loro_measured]}[kind]
        known = [abs(v) for v in values if v is not None]
        return max(known) if known else None

    def held_out_gap(self, kind: str) -> float | None:
        """The published layout's predicted shortfall under the held-out refit `kind` (as held_out)."""
        values = {"system": [self.gap_loso], "model": [self.gap_lomo], "worst": [self.gap_loso, self.gap_lomo],
                  "measured": [self.gap_measured]}[kind]
        known = [v for v in values if v is not None]
        return max(known) if known else None


@dataclass(frozen=True)
class RegimeBand:
    """The held-out |error| of tokens/s of one regime on runs the constants were not fitted on
    (benchmarks/external_throughput.py): median and 90th percentile over `rows` runs."""

    median: float
    p90: float
    rows: int


@dataclass(frozen=True)
class Table:
    rows: tuple[CalibrationRow, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    constants: str = ""  # digest of the constants the errors were computed with
    # regime -> estimate kind ("model"; "measured": corrected by measured rows) -> its band
    regimes: dict[str, dict[str, RegimeBand]] = field(default_factory=dict)

    def values(self, name: str) -> list:
        return sorted({getattr(r, name) for r in self.rows})

    def regime_band(self, regime: str, kind: str) -> tuple[str, RegimeBand] | None:
        """(regime measured, band) of `regime` for estimates of `kind`; a regime without figures
        takes the widest measured one of that kind (its error is unknown, not small)."""
        own = self.regimes.get(regime, {}).get(kind)
        if own is not None:
            return regime, own
        measured = [(name, bands[kind]) for name, bands in self.regimes.items() if kind in bands]
        return max(measured, key=lambda item: item[1].p90) if measured else None


def domain_path() -> Path:
    from mbridge_launch.base.resources import catalog_dir

    return catalog_dir() / DOMAIN_FILE


@lru_cache(maxsize=4)
def load_table(path: str | None = None) -> Table:
    """The calibration domain table (package data; `path` for tests). A missing or unreadable file
    gives an empty table: every dimension is then outside and the band is MAX_BAND, the honest
    answer when nothing says what was calibrated (an estimate does not fail for it)."""
    try:
        return table_of(json.loads(Path(path or domain_path()).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return Table(())


def table_of(data: dict[str, Any]) -> Table:
    """The Table of a calibration-domain document (the file's JSON; benchmarks build one per
    held-out split from the training releases alone). Unknown row keys are ignored."""
    names = {f.name for f in fields(CalibrationRow)}
    rows = tuple(CalibrationRow(**{k: v for k, v in row.items() if k in names}) for row in data.get("rows", []))
    regimes = {str(regime): {str(kind): RegimeBand(float(b["median"]), float(b["p90"]), int(b["rows"]))
                             for kind, b in dict(kinds).items()}
               for regime, kinds in dict(data.get("regimes", {})).items()}
    return Table(rows, dict(data.get("settings", {})), str(data.get("constants", "")), regimes)


def constants_digest() -> str:
    """A digest of the committed throughput constants: the table is stale when they changed."""
    from mbridge_launch.planner.throughput import CAL

    return hashlib.sha256(repr(CAL).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------- the request and its domain
@dataclass(frozen=True)
class Request:
    model: str
    family: str
    kind: str
    system: str
    precision: str
    goal: str
    seq_length: int
    gpus: int
    microbatches: int | None = None  # per step and pipeline, of the layout estimated (None: unknown)

    @classmethod
    def of(cls, model: str, arch: ModelArch | None, system: str, precision: str, goal: str, seq_length: int,
           gpus: int, microbatches: int | None = None) -> Request:
        return cls(model, model_family(model), architecture_kind(arch), system, precision, goal, seq_length, gpus,
                   microbatches)

    @property
    def family_key(self) -> str:
        return f"{self.family} {self.kind}"


@dataclass(frozen=True)
class Dimension:
    name: str
    value: str
    inside: bool
    reason_key: str | None = None  # message key of why it is outside
    params: tuple[tuple[str, Any], ...] = ()

    def reason(self, lang: str | None = None) -> str | None:
        if not self.reason_key:
            return None
        params = dict(self.params)
        for name in ("kind", "kinds"):  # architecture kinds are the tool's words: shown in the reader's language
            if name in params:
                params[name] = kind_names(params[name], lang)
        return t(self.reason_key, lang=lang, **params)


def kind_names(kinds: str, lang: str | None = None) -> str:
    """Architecture kinds ("moe", "dense, hybrid") in words of `lang`; English keeps the tool's words."""
    return ", ".join(t(f"planner.domain.kind.{k}", lang=lang) if k in ("dense", "moe", "hybrid") else k
                     for k in kinds.split(", "))


def scope_text(scope: tuple[tuple[str, str], ...], lang: str | None = None) -> str:
    """The attributes the basis rows share ("h100 llama dense"), the family's kind in words of `lang`."""
    if not scope:
        return t("planner.domain.scope_all", lang=lang)
    words = []
    for name, value in scope:
        if name == "family" and " " in value:
            family, kind = value.rsplit(" ", 1)
            value = f"{family} {kind_names(kind, lang)}"
        words.append(value)
    return " ".join(words)


@dataclass(frozen=True)
class Domain:
    request: Request
    dimensions: tuple[Dimension, ...]
    current: bool = True  # the table was computed with the committed constants

    @property
    def inside(self) -> bool:
        return all(d.inside for d in self.dimensions)

    @property
    def outside(self) -> list[str]:
        return [d.name for d in self.dimensions if not d.inside]

    def why(self, lang: str | None = None) -> str:
        sep = t("planner.domain.why_sep", lang=lang)
        return sep.join(d.reason(lang) or "" for d in self.dimensions if not d.inside)

    def as_json(self) -> dict[str, Any]:
        return {"inside": self.inside, "outside": self.outside,
                "dimensions": {d.name: {"value": d.value, "inside": d.inside, "reason": d.reason("en")}
                               for d in self.dimensions},
                "calibration": {"file": DOMAIN_FILE, "current": self.current}}


def _kinds_of(rows: list[CalibrationRow], match: Any) -> list[str]:
    return sorted({r.kind for r in rows if match(r)})


def _span(rows: tuple[CalibrationRow, ...], name: str) -> tuple[int, int]:
    values = [getattr(r, name) for r in rows]
    return (min(values), max(values)) if values else (0, 0)


def domain_of(model: str, arch: ModelArch | None, system: str, precision: str, goal: str, seq_length: int,
              gpus: int, table: Table | None = None, microbatches: int | None = None) -> Domain:
    """Inside or outside the calibrated domain, per dimension, with the reason when outside."""
    table = table or load_table()
    req = Request.of(model, arch, system, precision, goal, seq_length, gpus, microbatches)
    rows = list(table.rows)
    dims = []
    systems = table.values("system")
    dims.append(Dimension("system", system, system in systems, None if system in systems else
                          "planner.domain.why.system", (("value", system), ("known", ", ".join(systems)))))
    precisions = table.values("precision")
    kinds = _kinds_of(rows, lambda r: r.precision == precision)
    if precision not in precisions:
        dims.append(Dimension("precision", precision, False, "planner.domain.why.precision_absent",
                              (("value", precision), ("known", ", ".join(precisions)))))
    elif req.kind not in kinds:
        dims.append(Dimension("precision", precision, False, "planner.domain.why.precision_kind",
                              (("value", precision), ("kind", req.kind), ("kinds", ", ".join(kinds)))))
    else:
        dims.append(Dimension("precision", precision, True))
    families = sorted({r.family for r in rows})
    fam_kinds = _kinds_of(rows, lambda r: r.family == req.family)
    if req.family not in families:
        dims.append(Dimension("family", req.family_key, False, "planner.domain.why.family_absent",
                              (("value", req.family), ("known", ", ".join(families)))))
    elif req.kind not in fam_kinds:
        dims.append(Dimension("family", req.family_key, False, "planner.domain.why.family_kind",
                              (("family", req.family), ("kind", req.kind), ("kinds", ", ".join(fam_kinds)))))
    else:
        dims.append(Dimension("family", req.family_key, True))
    goals = table.values("goal")
    dims.append(Dimension("goal", goal, goal in goals, None if goal in goals else "planner.domain.why.goal",
                          (("value", goal), ("known", ", ".join(goals)))))
    for name, key in (("seq_length", "planner.domain.why.seq"), ("gpus", "planner.domain.why.gpus")):
        low, high = _span(table.rows, name)
        value = seq_length if name == "seq_length" else gpus
        inside = low <= value <= high
        dims.append(Dimension(name, str(value), inside, None if inside else key,
                              (("value", value), ("low", low), ("high", high))))
    return Domain(req, tuple(dims), table.constants == constants_digest())


# ---------------------------------------------------------------------- the error band
@dataclass(frozen=True)
class ErrorBand:
    median: float
    p90: float
    rows: int
    loo: str  # "system", "model" or "worst"
    scope: tuple[tuple[str, str], ...]  # the attributes the basis rows share with the request
    widen: float = 1.0
    widened_for: tuple[str, ...] = ()
    regime: str = ""  # the request's regime (regime_of)
    # the regime whose runs from other sources set the floor ("" when the table has none), and
    # how many runs measured it
    floor_regime: str = ""
    floor_rows: int = 0

    @property
    def reliable(self) -> bool:
        """False when 90% of held-out runs are not within +-RELIABLE_BAND: no reliable estimate,
        not to rank layouts by."""
        return self.p90 <= RELIABLE_BAND

    def basis(self, lang: str | None = None) -> str:
        scope = scope_text(self.scope, lang)
        text = t("planner.domain.basis", lang=lang, loo=t(f"planner.domain.loo.{self.loo}", lang=lang), rows=self.rows,
                 scope=scope)
        if self.widened_for:
            text += t("planner.domain.widened", lang=lang, factor=self.widen, dims=dimension_names(self.widened_for, lang))
        if self.floor_regime:
            text += t("planner.domain.regime_floor", lang=lang, rows=self.floor_rows,
                      regime=t(f"planner.domain.regime.{self.floor_regime}", lang=lang))
        return text

    def as_json(self) -> dict[str, Any]:
        return {"median": round(self.median, 4), "p90": round(self.p90, 4), "basis": self.basis("en"),
                "rows": self.rows, "held_out": self.loo, "scope": dict(self.scope), "widen": round(self.widen, 4),
                "widened_for": list(self.widened_for), "regime": self.regime, "reliable": self.reliable,
                "regime_floor": {"regime": self.floor_regime, "rows": self.floor_rows} if self.floor_regime else None}


def _loo_kind(req: Request, table: Table, measured: bool = False, field: str = "loro_measured") -> str:
    if measured and any(getattr(r, field) is not None for r in table.rows):
        return "measured"
    system_seen = req.system in table.values("system")
    model_seen = req.model in table.values("model")
    if not system_seen and model_seen:
        return "system"
    if system_seen and not model_seen:
        return "model"
    return "worst"


def _p90(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def _nearest(domain: Domain, table: Table, value: Any, measured: bool = False,
             field: str = "loro_measured") -> tuple[str, tuple[str, ...], list[float], float, list[str]]:
    """(held-out kind, tier, the rows' values, widening factor, dimensions widened for): the
    values `value(row, kind)` of the nearest calibrated rows (module docstring: which held-out
    refit, which rows, how it widens outside the domain); `measured` with a table whose `field`
    has figures: the leave-one-release-out of corrected estimates."""
    req = domain.request
    loo = _loo_kind(req, table, measured, field)
    attrs = {"system": lambda r: r.system == req.system, "precision": lambda r: r.precision == req.precision,
             "family": lambda r: (r.family, r.kind) == (req.family, req.kind)}
    chosen: tuple[str, ...] = ()
    found: list[float] = []
    for tier in NEAREST_TIERS:
        found = [e for r in table.rows if all(attrs[a](r) for a in tier) and (e := value(r, loo)) is not None]
        if len(found) >= MIN_ROWS or not tier:
            chosen = tier
            break
    # a measured row of the request's own system, GPU count, precision and model stands in for
    # what those dimensions would extrapolate
    covered = {"system": {"system"}, "model": {"family"}, "worst": {"system", "family"},
               "measured": {"system", "gpus", "precision", "family"}}[loo]
    outside = domain.outside
    uncovered = [d for d in outside if d not in covered]
    if loo == "worst" and "system" in outside and "family" in outside:
        uncovered.append("family")  # the worse of the two refits measures one new dimension, not both
    return loo, chosen, found, WIDEN ** len(uncovered), uncovered


def _scope(domain: Domain, tier: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    req = domain.request
    values = {"system": req.system, "precision": req.precision, "family": req.family_key}
    return tuple((a, values[a]) for a in tier)


def error_band(domain: Domain, table: Table | None = None, measured: bool = False) -> ErrorBand:
    """The held-out error of the nearest calibrated rows (module docstring: which error, which
    rows, how it widens outside the domain). `measured`: the estimate is corrected by measured
    rows of its configuration (planner.measured), so the error is that of such corrected
    estimates on held-out releases (CalibrationRow.loro_measured), where the table has it."""
    table = table or load_table()
    loo, chosen, errors, factor, uncovered = _nearest(domain, table, lambda r, kind: r.held_out(kind), measured)
    median = min(statistics.median(errors) * factor, MAX_BAND) if errors else MAX_BAND
    p90 = min(_p90(sorted(errors)) * factor, MAX_BAND) if errors else MAX_BAND
    req = domain.request
    regime = regime_of(req.goal, req.seq_length, req.microbatches)
    floor = table.regime_band(regime, "measured" if loo == "measured" else "model")
    floor_regime, floor_rows = "", 0
    if floor is not None:  # never narrower than the regime's error on runs from other sources
        floor_regime, band = floor
        floor_rows = band.rows
        median, p90 = min(max(median, band.median), MAX_BAND), min(max(p90, band.p90), MAX_BAND)
    return ErrorBand(median, max(p90, median), len(errors), loo, _scope(domain, chosen), factor, tuple(uncovered),
                     regime, floor_regime, floor_rows)


# ---------------------------------------------------------------------- the near-tie tolerance
TIE_COVERAGE = 0.9  # the share of held-out published layouts the near-tie set is to hold


@dataclass(frozen=True)
class TieBand:
    """How far below the first a layout may be predicted and still be a near-tie: the
    TIE_COVERAGE quantile of the held-out refits' predicted shortfall of the published layout
    (CalibrationRow.gap_*) over the nearest rows, widened outside the domain like the error
    band. Without gap figures (an older table) it falls back to the error band's median."""

    within: float
    rows: int
    loo: str
    scope: tuple[tuple[str, str], ...]
    widen: float = 1.0
    widened_for: tuple[str, ...] = ()
    measured: bool = True  # False: the error band's median stands in (no gap figures)
    # True: the estimates are corrected by measured rows (planner.measured); the set holds every
    # measured layout and those within the tolerance of corrected estimates (gap_measured; an
    # older table: the median held-out error of corrected estimates, `measured` False)
    evidence: bool = False

    def basis(self, lang: str | None = None) -> str:
        scope = scope_text(self.scope, lang)
        key = ("planner.domain.tie_basis_measured" if self.evidence and self.measured else
               "planner.domain.tie_basis_measured_median" if self.evidence else
               "planner.domain.tie_basis" if self.measured else "planner.domain.basis")
        text = t(key, lang=lang, loo=t(f"planner.domain.loo.{self.loo}", lang=lang), rows=self.rows, scope=scope,
                 coverage=TIE_COVERAGE)
        if self.widened_for:
            text += t("planner.domain.widened", lang=lang, factor=self.widen, dims=dimension_names(self.widened_for, lang))
        return text


def tie_band(domain: Domain, table: Table | None = None, band: ErrorBand | None = None) -> TieBand:
    """The near-tie tolerance (TieBand; the rule in the module docstring). With a `band` of
    estimates corrected by measured rows (loo "measured"), the quantile is over the tie distances
    of corrected estimates (gap_measured), and the set holds every measured layout besides; a
    table without those figures gives that band's median."""
    table = table or load_table()
    evidence = band is not None and band.loo == "measured"
    if evidence and not any(r.gap_measured is not None for r in table.rows):
        assert band is not None
        return TieBand(band.median, band.rows, band.loo, band.scope, band.widen, band.widened_for, measured=False,
                       evidence=True)
    loo, chosen, gaps, factor, uncovered = _nearest(domain, table, lambda r, kind: r.held_out_gap(kind), evidence,
                                                    "gap_measured")
    if not gaps:
        band = band or error_band(domain, table)
        return TieBand(band.median, band.rows, band.loo, band.scope, band.widen, band.widened_for, measured=False,
                       evidence=evidence)
    ordered = sorted(gaps)
    # the smallest tolerance that holds TIE_COVERAGE of the rows' published layouts
    index = min(len(ordered) - 1, max(0, math.ceil(TIE_COVERAGE * len(ordered)) - 1))
    within = min(ordered[index] * factor, MAX_BAND)
    return TieBand(within, len(gaps), loo, _scope(domain, chosen), factor, tuple(uncovered), evidence=evidence)


# ---------------------------------------------------------------------- what estimates carry
@dataclass(frozen=True)
class Assessment:
    domain: Domain
    band: ErrorBand
    tie: TieBand | None = None  # the near-tie tolerance (plan's near-tie set)

    def near_tie(self) -> TieBand:
        """The near-tie tolerance: `tie`, else (an Assessment built without it) from the table."""
        return self.tie if self.tie is not None else tie_band(self.domain, band=self.band)

    def text(self, lang: str | None = None) -> str:
        """"inside the calibrated domain (error ±X%)" or "extrapolated: <why> (error band ±Y%)"."""
        b = self.band
        if self.domain.inside:
            text = t("planner.domain.inside", lang=lang, median=b.median, p90=b.p90, basis=b.basis(lang))
        else:
            text = t("planner.domain.extrapolated", lang=lang, why=self.domain.why(lang), median=b.median, p90=b.p90,
                     basis=b.basis(lang))
        if not b.reliable:
            text += " " + t("planner.domain.no_reliable", lang=lang, p90=b.p90, limit=RELIABLE_BAND)
        return text

    def as_json(self) -> dict[str, Any]:
        return {"domain": self.domain.as_json(), "error_band": self.band.as_json()}


def assess(model: str, arch: ModelArch | None, system: str, precision: str, goal: str, seq_length: int, gpus: int,
           table: Table | None = None, measured: bool = False, microbatches: int | None = None) -> Assessment:
    """The domain and the error band of one request (what `estimate` and `plan` print);
    `measured`: its estimate is corrected by measured rows of its configuration (error_band);
    `microbatches`: per step and pipeline of the layout estimated (its regime, regime_of)."""
    table = table or load_table()
    domain = domain_of(model, arch, system, precision, goal, seq_length, gpus, table, microbatches)
    band = error_band(domain, table, measured)
    return Assessment(domain, band, tie_band(domain, table, band))
