"""The planner's one entry point: a request and the calibration in use -> one PlanResult.

`plan`, `estimate`, `tune` and `recommend` all ask the planner here, so that they cannot give two
answers to one request: the same constants (the calibration in use), the same measured rows
(NVIDIA's published rows of the request's configuration and the user's own), the same search
options, the same domain and error band, the same near-tie set and the same NVIDIA layout.
Renderers only render a PlanResult; no other module builds search options or calls the search
(tests/unit/test_planner_entry.py reads every module of the package to keep it so).

- `plan_request(request, calibration)`: the ranked candidates and what goes with them.
- `estimate_request(request, layout, calibration)`: one given layout (with the request's recipe
  settings on the fields it leaves unset), estimated and assessed the same way (what
  `estimate`, recommend's kept layouts and tune's own layout need).
- `smallest_fitting_gpus(request, calibration)`: when memory rules every layout out, the
  smallest doubling of the GPU count at which the planner finds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mbridge_launch.knowledge.hardware import Hardware
from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.planner.calibration_file import Source
from mbridge_launch.planner.domain import MAX_BAND, Assessment, ErrorBand, TieBand, assess
from mbridge_launch.planner.memory import GRAD_BYTES
from mbridge_launch.planner.near_tie import cannot_rank, near_tie_set, shown
from mbridge_launch.planner.rules import Layout
from mbridge_launch.planner.search import Candidate, Options, Rejection, SearchResult, estimate_layout, search
from mbridge_launch.planner.throughput import CAL, Calibration

# doublings tried when nothing fits: 64x takes one 8-GPU node to 512 GPUs
GROWTH_STEPS = 6


@dataclass(frozen=True)
class PlanRequest:
    """What is asked of the planner: the model on a GPU count of one system, at a global batch and
    sequence length, precision and goal; what the caller fixes of the layout (None: searched) and
    the step model's options; `top`: how many candidates to rank (None: all)."""

    model: str
    arch: ModelArch
    hardware: Hardware
    gpus: int
    gbs: int
    seq_length: int
    precision: str = "bf16"
    goal: str = "pretrain"
    recompute: str | None = None
    fsdp: bool | None = None
    mbs: int | None = None  # a fixed micro-batch size (sequence packing runs at MBS=1)
    grad_bytes: float = GRAD_BYTES
    mtp_layers: int | None = None
    moe_token_drop: bool = False
    top: int | None = 5
    # the catalog recipe the written Plan runs (recommend's selected recipe; for `plan`, the
    # library recipe recommend would select): every layout is estimated with its memory
    # settings (planner.recipe_settings), as preflight reads them back from the Plan. None: the
    # planner's defaults
    recipe: Any = field(default=None, hash=False)

    @property
    def settings(self) -> dict[str, Any]:
        """The recipe's memory settings as Layout fields (recipe_settings.memory_settings); a
        gradient dtype the caller asks for (plan --bf16-grads) replaces the recipe's."""
        from mbridge_launch.planner.recipe_settings import memory_settings

        found = memory_settings(getattr(self.recipe, "features", None), self.precision) if self.recipe else {}
        if self.grad_bytes != GRAD_BYTES:
            found["grad_bytes"] = self.grad_bytes
        return found


@dataclass(frozen=True)
class CalibrationInUse:
    """The throughput constants and where they come from (a --calibration file, the state
    directory's, or the shipped ones); the Source carries the user's measured rows."""

    constants: Calibration
    source: Source


def calibration_in_use(explicit: str | None = None) -> CalibrationInUse:
    """--calibration FILE, else the state directory's calibration, else the shipped constants:
    what every command ranks and estimates with (calibration_file.resolve)."""
    from mbridge_launch.planner.calibration_file import resolve

    constants, source = resolve(explicit)
    return CalibrationInUse(constants, source)


def shipped_calibration() -> CalibrationInUse:
    """The shipped constants and no user rows (a caller that must not read the state directory)."""
    return CalibrationInUse(CAL, Source("shipped", None))


@dataclass
class PlanResult:
    """The planner's whole answer to one request."""

    request: PlanRequest
    calibration: CalibrationInUse
    candidates: list[Candidate]  # best first (search._rank_key)
    rejected: dict[str, Rejection]
    evaluated: int
    # the request's domain and held-out error band (planner.domain), computed once for the request
    assessment: Assessment
    # (rank, candidate) of the layouts the model cannot tell from the first (planner.near_tie)
    near_tie: list[tuple[int, Candidate]] = field(default_factory=list)
    # False when the set may go on past the listed candidates (its last is the last listed and
    # the list was cut at `top`)
    near_tie_complete: bool = True
    nvidia: Any = None  # nvidia_layout.NvidiaOption: NVIDIA's published layout for the request, or None
    # the measured rows (planner.measured) that corrected the listed estimates, NVIDIA's or the user's
    evidence: tuple = ()
    _search: SearchResult | None = None

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def domain(self) -> Any:
        return self.assessment.domain

    @property
    def band(self) -> ErrorBand:
        return self.assessment.band

    @property
    def tie(self) -> TieBand:
        return self.assessment.near_tie()

    @property
    def reliable(self) -> bool:
        """False when the error band's p90 is wider than planner.domain.RELIABLE_BAND (or at its
        cap): no reliable estimate, and the layouts are not to be ranked by these figures."""
        return self.band.reliable and self.band.median < MAX_BAND

    @property
    def near_tie_unranked(self) -> bool:
        """True when the model cannot rank the near-tie set (planner.near_tie.cannot_rank: the
        tolerance is as wide as "no reliable estimate" or the set too large): plan says so, lists
        near_tie_shown and points to `tune`."""
        return cannot_rank(self.tie.within, len(self.near_tie))

    @property
    def near_tie_shown(self) -> list[tuple[int, Candidate]]:
        """The part of the near-tie set plan lists (all of it, or a bounded part when unranked)."""
        return shown(self.near_tie, self.near_tie_unranked)

    def pitfall_reasons(self, candidate: Candidate) -> tuple[tuple[str, str], ...]:
        """Why `candidate` keeps each of its layout pitfalls (search.SearchResult.pitfall_reasons)."""
        return self._search.pitfall_reasons(candidate) if self._search is not None else ()


@dataclass(frozen=True)
class LayoutEstimate:
    """One given layout, estimated (None: the architecture lacks what the estimates need) and
    assessed like a PlanResult's candidates."""

    candidate: Candidate | None
    assessment: Assessment


def _options(request: PlanRequest, calibration: CalibrationInUse) -> Options:
    """The search's options for a request: the one place they are built (module docstring)."""
    from mbridge_launch.planner.measured import shipped_for

    return Options(recompute=request.recompute, fsdp=request.fsdp, mbs=request.mbs, grad_bytes=request.grad_bytes,
                   mtp_layers=request.mtp_layers, moe_token_drop=request.moe_token_drop,
                   cal=calibration.constants,
                   # NVIDIA's published rows of this very configuration, and the user's own in the
                   # calibration in use, correct the estimates and rank the layouts they ran first
                   measured=shipped_for(request.arch.name, request.hardware.name, request.gpus, request.precision),
                   own_measured=calibration.source.measured,
                   settings=tuple(request.settings.items()))


def _search(request: PlanRequest, calibration: CalibrationInUse, gpus: int | None = None) -> SearchResult:
    r = request
    return search(r.arch, r.hardware, gpus or r.gpus, gbs=r.gbs, seq_length=r.seq_length, precision=r.precision,
                  goal=r.goal, options=_options(replace(r, gpus=gpus or r.gpus), calibration), top=r.top)


def _assess(request: PlanRequest, measured: bool, layout: Layout | None = None) -> Assessment:
    """The domain and band of `request`; `layout`: the one estimated (plan: the first
    candidate), whose micro-batches per step pick the band's regime (planner.domain.regime_of)."""
    r = request
    return assess(r.model, r.arch, r.hardware.name, r.precision, r.goal, r.seq_length, r.gpus, measured=measured,
                  microbatches=layout.microbatches if layout is not None and layout.world else None)


def plan_request(request: PlanRequest, calibration: CalibrationInUse | None = None, *,
                 nvidia: bool = True) -> PlanResult:
    """The ranked candidates of `request` under `calibration` (None: the calibration in use), the
    near-tie set, the domain and band, NVIDIA's layout (`nvidia`: look it up) and the evidence."""
    calibration = calibration or calibration_in_use()
    found = _search(request, calibration)
    candidates = found.candidates
    # the band of estimates corrected by measured rows where the first one is (planner.measured)
    assessment = _assess(request, measured=bool(candidates) and candidates[0].twin is not None,
                         layout=candidates[0].layout if candidates else None)
    ties = near_tie_set(candidates, assessment.near_tie().within)
    cut = request.top is not None and len(candidates) >= request.top
    complete = not (ties and ties[-1][0] == len(candidates) and cut)
    evidence: list = []
    for c in candidates:
        if c.twin is not None and all(c.twin.row is not e.row for e in evidence):
            evidence.append(c.twin)
    option = _nvidia(request, calibration, candidates) if nvidia and candidates else None
    return PlanResult(request, calibration, candidates, found.rejected, found.evaluated, assessment, ties, complete,
                      option, tuple(evidence), found)


def _nvidia(request: PlanRequest, calibration: CalibrationInUse, candidates: list[Candidate]) -> Any:
    """NVIDIA's tuned layout (a 0.6.2 benchmark recipe of this model, system, GPU count and
    precision), estimated like the candidates; it never enters the ranking."""
    from mbridge_launch.planner.nvidia_layout import nvidia_option, shipped_recipes

    r = request
    return nvidia_option(shipped_recipes(), r.model, r.arch, r.hardware, r.gpus, precision=r.precision, goal=r.goal,
                         gbs=r.gbs, seq_length=r.seq_length, candidates=candidates, grad_bytes=r.grad_bytes,
                         cal=calibration.constants)


def estimate_request(request: PlanRequest, layout: Layout, calibration: CalibrationInUse | None = None) -> LayoutEstimate:
    """`layout` (at the request's GPU count) estimated with the calibration and measured rows the
    search would use, and the request's domain and band."""
    calibration = calibration or calibration_in_use()
    opts = _options(replace(request, gpus=layout.world or request.gpus), calibration)
    if opts.settings:
        from mbridge_launch.planner.recipe_settings import run_layout

        layout = run_layout(layout, dict(opts.settings))  # as the Plan runs it, as the search estimates
    r = request
    candidate = estimate_layout(layout, r.arch, r.hardware, precision=r.precision, goal=r.goal,
                                mtp_layers=r.mtp_layers, moe_token_drop=r.moe_token_drop, grad_bytes=r.grad_bytes,
                                cal=opts.cal, measured=opts.measured, own_measured=opts.own_measured)
    return LayoutEstimate(candidate, _assess(request, measured=candidate is not None and candidate.twin is not None,
                                             layout=layout))


def smallest_fitting_gpus(request: PlanRequest, calibration: CalibrationInUse | None = None,
                          limit: int | None = None) -> tuple[int, bool]:
    """(count, True): the smallest doubling of the request's GPU count (up to GROWTH_STEPS of them
    and `limit`) at which a layout fits with the same GBS and sequence length; (last count tried,
    False) when none does."""
    calibration = calibration or calibration_in_use()
    count = request.gpus
    one = replace(request, top=1)
    for _ in range(GROWTH_STEPS):
        count *= 2
        if limit is not None and count > limit:
            break
        if _search(one, calibration, gpus=count).candidates:
            return count, True
    return count, False
