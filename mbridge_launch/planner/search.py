"""Search the parallel layouts of a model on a GPU count, best predicted tokens/s/GPU first.

Enumerates TP, PP, CP, EP, ETP (the grid), then for each valid grid the micro-batch size, the
virtual pipeline size, the recompute level and distributed optimizer vs Megatron-FSDP. Grids
that break a rule are rejected with the rule's code; layouts that do not fit in memory with the
lightest recompute that could work are rejected as RULE_MEMORY. Rejections are aggregated by
rule with one example each.

Cost: the grids are products of divisors that the model and the GPU count both allow, and each
grid's inner choices are bounded (recompute stops at the first level that fits, MBS and VP are
small sets), so the work grows with the number of divisors, not with the GPU count.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Generic, Iterable, TypeVar

from mbridge_launch.knowledge.hardware import Hardware
from mbridge_launch.knowledge.models import ModelArch
from mbridge_launch.planner.memory import HEADROOM, MemoryBreakdown, estimate_memory, static_memory
from mbridge_launch.planner.pipeline_split import settle
from mbridge_launch.planner.pitfall_rules import CODES as PITFALL_CODES
from mbridge_launch.planner.pitfall_rules import PRICED, grid_pitfalls, layout_pitfalls, ranked_count
from mbridge_launch.planner.recipe_settings import run_layout
from mbridge_launch.planner.recompute import RECOMPUTE_ORDER, recompute_levels  # noqa: F401 - re-exported
from mbridge_launch.planner.rules import Layout, Violation, check_layout, chunk_layers, divisors, evolve, valid_tp
from mbridge_launch.planner.throughput import CAL, Calibration, StepEstimate, estimate_step, step_model

MBS_CHOICES = (1, 2, 4, 8)
VP_MAX = 8
T = TypeVar("T")


class _Figure(Generic[T]):
    """A figure of a Candidate read from one of its parts, e.g. `_Figure[float]("step.mfu")`."""

    def __init__(self, path: str) -> None:
        self._read = attrgetter(path)

    def __get__(self, candidate: Any, owner: Any = None) -> T:
        return self._read(candidate)


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    memory: MemoryBreakdown
    step: StepEstimate
    notes: tuple[str, ...] = ()
    # the layout pitfalls it carries (planner.pitfall_rules): the ranking puts fewer first
    pitfalls: tuple[Violation, ...] = ()
    # why the chosen layout still carries a pitfall: code -> "unavoidable" (no layout that fits
    # avoids it) or "fewest" (each layout that avoids it carries more pitfalls); set on the best
    kept_pitfalls: tuple[tuple[str, str], ...] = ()
    # the measured row (planner.measured.Measured) of the request's configuration that corrected
    # the step estimate (None: the model's own figure)
    twin: Any = None

    @property
    def measured(self) -> Any:
        """The twin when it ran this very (TP, PP, CP, EP): the layout is measured, it ranks first."""
        return self.twin if self.twin is not None and self.twin.ran(self.layout) else None

    @property
    def pitfall_codes(self) -> tuple[str, ...]:
        return tuple(p.code for p in self.pitfalls)

    @property
    def grid(self) -> tuple:
        L = self.layout
        return (L.tp, L.pp, L.cp, L.ep, L.etp_size, L.fsdp)

    # Flat view used by recommend, the Plan's estimates and the JSON output.
    fits = _Figure[bool]("memory.fits")
    memory_total_gb = _Figure[float]("memory.total")
    step_time_s = _Figure[float]("step.step_time_s")
    tokens_per_sec_per_gpu = _Figure[float]("step.tokens_per_sec_per_gpu")
    model_tflops_per_gpu = _Figure[float]("step.model_tflops_per_gpu")
    mfu = _Figure[float]("step.mfu")

    @property
    def memory_limit_gb(self) -> float | None:
        return HEADROOM * self.memory.hbm_gb if self.memory.hbm_gb else None

    @property
    def memory_gb(self) -> dict[str, float]:
        return self.memory.as_dict()


@dataclass
class Rejection:
    """Layouts rejected for one reason: how many, one example and the rule (its message is what
    `plan`, `recommend` and the JSON print beside the code)."""

    code: str
    count: int
    example: str
    violation: Violation | None = None

    def message(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import t

        if self.violation is not None:
            return self.violation.message(lang)
        return t(_REJECTION_KEYS.get(self.code, "planner.rule.generic"), lang=lang, code=self.code)

    def describe(self, lang: str | None = None) -> str:
        """'CODE xN (e.g. EXAMPLE): message', the one-line form of the no-layout errors."""
        from mbridge_launch.base.i18n import t

        return t("planner.rejection_reason", lang=lang, code=self.code, count=self.count,
                 example=self.example or "-", message=self.message(lang))


# Rejections that stand for no single rule violation: their messages.
_REJECTION_KEYS = {"RULE_MEMORY": "planner.rule.memory", "PRUNED_SLOWER": "planner.rule.pruned"}


def rejection_summary(rejected: dict[str, Rejection], limit: int = 3, lang: str | None = None) -> str:
    """The `limit` most frequent rejections, each with its message, for a no-layout error."""
    from mbridge_launch.base.i18n import t

    top = sorted(rejected.values(), key=lambda r: -r.count)[:limit]
    return t("planner.rejection_sep", lang=lang).join(r.describe(lang) for r in top) or "-"


@dataclass
class SearchResult:
    candidates: list[Candidate]
    rejected: dict[str, Rejection] = field(default_factory=dict)
    evaluated: int = 0
    # pitfall codes some fitting layout did without (planner.pitfall_rules)
    avoidable: set[str] = field(default_factory=set)

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def pitfall_reasons(self, candidate: Candidate) -> tuple[tuple[str, str], ...]:
        """Why `candidate`, the best of its search, keeps each of its pitfalls: "unavoidable" when
        no layout that fits did without it, else "fewest" (those that did carry more pitfalls);
        "priced" for a pitfall the step model weighs through the predicted speed (PRICED)."""
        return tuple((c, "priced" if c in PRICED else "fewest" if c in self.avoidable else "unavoidable")
                     for c in candidate.pitfall_codes)


@dataclass(frozen=True)
class Options:
    """What the caller fixes of the layout (None: search it), and the step model's options."""

    recompute: str | None = None
    fsdp: bool | None = None
    mbs: int | None = None
    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    ep: int | None = None
    # the step model's options (throughput.step_model)
    grad_bytes: float = 4.0  # 2.0: gradients reduced in bf16 (ddp.grad_reduce_in_fp32=false)
    mtp_layers: int | None = None
    moe_token_drop: bool = False
    # the throughput constants (None: the shipped ones, throughput.CAL); a user's `calibrate`
    # file or a benchmark's leave-one-out refit
    cal: Calibration | None = None
    # measured evidence (planner.measured): calibration rows (calibration_rows.Row); those of the
    # request's configuration correct the estimates and their layouts rank first; `own_measured`:
    # the user's rows (a calibration file's measured_rows), preferred to NVIDIA's
    measured: tuple = ()
    own_measured: tuple = ()
    # the recipe settings the written Plan runs with (planner.recipe_settings.memory_settings'
    # changes, as (Layout field, value) pairs): every layout is estimated as run_layout makes it
    settings: tuple = ()


def _rule(code: str, key: str, fld: str, **params: Any) -> Violation:
    """The Violation of a rejection the search decides itself (not from check_layout)."""
    return Violation(code=code, key=key, params=params, field=fld)


def _reject(result: SearchResult, code: str, example: str, violation: Violation | None = None) -> None:
    entry = result.rejected.get(code)
    if entry is None:
        result.rejected[code] = Rejection(code, 1, example, violation)
    else:
        entry.count += 1


def _grid_label(tp: int, pp: int, cp: int, ep: int, etp: int, fsdp: bool = False) -> str:
    text = f"TP={tp} PP={pp} CP={cp} EP={ep}" + (f" ETP={etp}" if etp > 1 else "")
    return text + (" FSDP" if fsdp else "")


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def _grids(arch: ModelArch, hw: Hardware, gpus: int, seq: int, opts: Options) -> Iterable[tuple[int, int, int, int, int]]:
    """Candidate (TP, PP, CP, EP, ETP), natural values only: the rules judge them."""
    world_divs = set(divisors(gpus))
    tps = [opts.tp] if opts.tp else [t for t in sorted(set(valid_tp(arch)) | set(_powers_of_two(64))) if t in world_divs]
    pps = [opts.pp] if opts.pp else [p for p in sorted(world_divs) if p <= arch.num_layers]
    cps = [opts.cp] if opts.cp else [c for c in _powers_of_two(32) if c in world_divs and seq // (2 * c) >= 512]
    if arch.is_moe:
        eps = [opts.ep] if opts.ep else [e for e in divisors(arch.num_moe_experts or 1) if e in world_divs]
    else:
        eps = [opts.ep or 1]
    for tp in tps:
        # expert TP = 1: Megatron's guidance for MoE (experts are split by EP; splitting their small
        # GEMMs by TP as well costs more than it saves). The caller may still estimate ETP > 1.
        # With EP = 1 the layout leaves ETP unset and is estimated as the run has it: ETP = TP.
        etps = (1,)
        for pp in pps:
            for cp in cps:
                if gpus % (tp * pp * cp):
                    continue
                for ep in eps:
                    for etp in etps:
                        yield tp, pp, cp, ep, etp


# Precisions Megatron-FSDP runs with (Megatron Core 0.19.2 / Megatron Bridge 0.6.2), so the search
# offers FSDP for each of them:
# - FP8 tensorwise/delayed (fp8cs, fp8ds), blockwise (fp8sc) and MXFP8 (fp8mx) weights are
#   gathered as TE quantized tensors: megatron/core/distributed/fsdp/src/megatron_fsdp/
#   mixed_precision.py (is_float8tensor, is_blockwise_float8tensor, fp8_need_transpose_data: the
#   MXFP8 transpose buffers of param_and_grad_buffer.py) and mcore_fsdp_adapter.py (the MXFP8
#   fine-grained param-gather hook);
# - NVFP4 (nvfp4) runs with bf16 primary weights: megatron/bridge/perf_recipes/nemotronh/common.py
#   sets fp4_param_gather=False ("Megatron-FSDP's ParamAndGradBuffer has no NVFP4 packed-storage
#   support") for its NVFP4 Megatron-FSDP recipes (nemotronh gb200/gb300 Nemotron 3 Ultra).
#   planner.memory still charges NVFP4 weights at fp4 size (WEIGHT_BYTES) under FSDP.
FSDP_PRECISIONS = ("bf16", "fp8cs", "fp8ds", "fp8sc", "fp8mx", "nvfp4")


def _fsdp_choices(arch: ModelArch, pp: int, options: Options, precision: str = "bf16") -> list[bool]:
    """Megatron-FSDP is searched for dense models with PP=1 (its rule) in FSDP_PRECISIONS; MoE
    models keep the distributed optimizer unless the caller asks for FSDP: no Megatron Bridge MoE
    recipe uses FSDP with expert parallelism."""
    if options.fsdp is not None:
        return [options.fsdp]
    return [False, True] if pp == 1 and not arch.is_moe and precision in FSDP_PRECISIONS else [False]


def _vp_choices(arch: ModelArch, pp: int) -> list[int | None]:
    """No VP, plus the VP sizes that split the layers evenly (powers of two when the pipeline
    split is uneven anyway), each virtual stage keeping at least one layer."""
    if pp == 1:
        return [None]
    per_stage = arch.num_layers / pp
    out: list[int | None] = [None]
    for vp in range(2, VP_MAX + 1):
        if per_stage / vp < 1:
            break
        even = arch.num_layers % (pp * vp) == 0
        if even or (arch.num_layers % pp != 0 and vp in (2, 4, 8)):
            out.append(vp)
    return out


def _static_layout(grid: Layout, options: Options) -> Layout:
    """The grid with the recipe's settings, for static_memory's lower bound: every variant of the
    grid runs them, except per-layer CUDA graphs (off beside full recompute, which the bound
    assumes) and CPU offloading (off beside recompute: static_memory weighs both ways)."""
    if not options.settings:
        return grid
    return evolve(run_layout(grid, dict(options.settings)), cuda_graph_scope=None)


def search(
    arch: ModelArch,
    hw: Hardware,
    gpus: int,
    *,
    gbs: int,
    seq_length: int,
    precision: str = "bf16",
    goal: str = "pretrain",
    options: Options = Options(),
    top: int | None = None,
) -> SearchResult:
    """Rank the layouts of `arch` on `gpus` GPUs of `hw`. With `top`, grids whose optimistic
    bound cannot reach the top-K are skipped (branch and bound): same answer, less work."""
    result = SearchResult(candidates=[])
    model = step_model(arch, hw, precision, goal, mtp_layers=options.mtp_layers, moe_token_drop=options.moe_token_drop,
                       grad_bytes=options.grad_bytes, cal=options.cal or CAL)
    limit = HEADROOM * hw.hbm_gb
    matches = _evidence(arch, hw, gpus, precision, options)
    if matches:
        top_kept, top = top, None  # measured layouts rank first whatever the model predicts: no pruning
    pending: list[tuple[float, Layout]] = []
    for tp, pp, cp, ep, etp in _grids(arch, hw, gpus, seq_length, options):
        base = Layout(
            tp=tp, pp=pp, cp=cp, ep=ep, etp=etp if etp > 1 else None, sp=tp > 1, mbs=1, gbs=gbs,
            seq_length=seq_length, world=gpus, gpus_per_node=hw.gpus_per_node,
            cp_comm_type="p2p" if cp > 1 else None, uneven_pp=arch.num_layers % pp != 0,
        )
        violations = [v for v in check_layout(base, arch, hw) if v.severity == "error" and v.code != "RULE_GBS"]
        if violations:
            _reject(result, violations[0].code, _grid_label(tp, pp, cp, ep, etp), violations[0])
            continue
        if tp > hw.nvlink_domain:
            _reject(result, "RULE_TP_NVLINK", _grid_label(tp, pp, cp, ep, etp),
                    _rule("RULE_TP_NVLINK", "planner.rule.tp_nvlink", "tp", tp=tp, domain=hw.nvlink_domain,
                          gpu=hw.label, valid=", ".join(str(d) for d in divisors(hw.nvlink_domain))))
            continue
        dp = base.dp
        mbs_ok = [m for m in ([options.mbs] if options.mbs else MBS_CHOICES) if gbs % (m * dp) == 0]
        if not mbs_ok:
            smallest = options.mbs or MBS_CHOICES[0]
            _reject(result, "RULE_GBS", _grid_label(tp, pp, cp, ep, etp) + f" DP={dp}",
                    _rule("RULE_GBS", "planner.rule.gbs", "gbs", gbs=gbs, mbs=smallest, dp=dp, unit=smallest * dp,
                          valid=", ".join(str(smallest * dp * k) for k in (1, 2, 4, 8, 16))))
            continue
        for fsdp in _fsdp_choices(arch, pp, options, precision):
            if fsdp and pp > 1:
                _reject(result, "RULE_FSDP_PP", _grid_label(tp, pp, cp, ep, etp, True),
                        _rule("RULE_FSDP_PP", "planner.rule.fsdp_pp", "pp", pp=pp, valid="1"))
                continue
            grid = evolve(base, fsdp=fsdp)
            if static_memory(arch, _static_layout(grid, options), precision=precision, goal=goal,
                             grad_bytes=options.grad_bytes) > limit:
                _reject(result, "RULE_MEMORY", _grid_label(tp, pp, cp, ep, etp, fsdp),
                        _rule("RULE_MEMORY", "planner.rule.memory", "recompute"))
                continue
            bound = model.bound(evolve(grid, mbs=max(mbs_ok)))  # grows with the micro-batch
            pending.append((bound, grid))

    pending.sort(key=lambda item: -item[0])
    best_per_grid: list[Candidate] = []
    # min-heap of the best `top` (-pitfalls, utility) so far: leaders[0] is the worst of them
    leaders: list[tuple[int, float]] = []
    skipped = 0
    first_skipped = ""
    for bound, grid in pending:
        # a grid's pitfalls are a lower bound of its layouts' (VP and MBS only add PP_WITHOUT_VP)
        floor = ranked_count(grid_pitfalls(grid, arch, hw)) if top and len(leaders) >= top else 0
        if top and len(leaders) >= top and (-floor, math.log(bound)) < leaders[0]:
            skipped += 1
            first_skipped = first_skipped or _grid_label(grid.tp, grid.pp, grid.cp, grid.ep, grid.etp_shown, grid.fsdp)
            continue
        found = _best_inner(arch, hw, model, grid, precision, goal, options, result)
        if found is not None:
            best_per_grid.append(found)
            if top:
                heapq.heappush(leaders, _prune_key(found))
                if len(leaders) > top:
                    heapq.heappop(leaders)
    if skipped:
        result.rejected["PRUNED_SLOWER"] = Rejection("PRUNED_SLOWER", skipped, first_skipped)
    if matches:
        best_per_grid = [_with_evidence(arch, hw, model, c, matches, precision, goal, options) for c in best_per_grid]
        top = top_kept
    ranked = sorted(best_per_grid, key=_rank_key)
    result.candidates = ranked[:top] if top else ranked
    if result.candidates and result.candidates[0].pitfalls:
        first = result.candidates[0]
        result.candidates[0] = replace(first, kept_pitfalls=result.pitfall_reasons(first))
    return result


# Ranking utility: predicted speed, minus a charge for running close to the memory limit
# (allocator fragmentation, dropless-MoE imbalance and version drift make near-full layouts
# fragile): above MEMORY_COMFORT of HBM, each 10% of HBM costs MEMORY_PRESSURE/10 in log speed.
# MEMORY_PRESSURE is the value benchmarks/preferences.py chooses on the training rows (RESULTS.md
# "Ranking preferences", 128 rule-valid published rows, the committed throughput constants): 1.0
# in all 9 leave-one-model-out and all 4 leave-one-release-out folds; held out, the published
# layout then comes first in 64/128 rows in both protocols, against 44/128 without the charge
# (top 3: 94 against 80). It was a hand-set 0.3 before (54/128 first in-sample).
#
# Removed, because the same benchmark found no held-out gain (no term is there for show):
# - the EP credit (+0.02 log speed per doubling of EP): leave-one-model-out the chosen credit
#   ranks fewer held-out rows first than none (59 vs 64/128); its gain came from DeepSeek-V3's
#   rows alone, and only while they were in the training set;
# - the CP charge at sequences up to 8192 tokens (-0.005 per doubling of CP): with the memory
#   charge at 1.0 no value of it changes a single first choice (64/128 at every value, 0 to 0.03;
#   held out 64 and 63 vs 64/128); its earlier gain stood in for the memory charge.
MEMORY_COMFORT = 0.8
MEMORY_PRESSURE = 1.0


def ranking_terms(memory_fraction: float, layout: Layout | None = None) -> dict[str, float]:
    """What `utility` adds to log speed, term by term (log-speed units; 0 = neutral): the memory
    charge (the one term benchmarks/preferences.py validates). `plan` uses it to say why a faster
    layout ranks below a slower one. `layout` is accepted for callers that pass it; no term reads
    it since the layout preferences were removed."""
    return {"memory": -MEMORY_PRESSURE * max(0.0, memory_fraction - MEMORY_COMFORT)}


def utility(tokens_per_sec: float, memory_fraction: float, layout: Layout | None = None) -> float:
    """Ranking score: log predicted speed and the memory-pressure charge."""
    return math.log(tokens_per_sec) + sum(ranking_terms(memory_fraction, layout).values())


def _prune_key(c: Candidate) -> tuple[int, float]:
    """(-pitfalls, utility) of a candidate: what the pruning compares a grid's bound with (its
    rank key's pitfall and utility terms; pruning is off where measured rows rank first)."""
    frac = c.memory.total / c.memory.hbm_gb if c.memory.hbm_gb else 0.0
    return (-ranked_count(c.pitfalls), round(utility(c.step.tokens_per_sec_per_gpu, frac, c.layout), 9))


def _rank_key(c: Candidate) -> tuple:
    L = c.layout
    # a layout measured on this configuration comes first (planner.measured: why; among several,
    # the corrected speed decides: newest release first put the published layout first less often
    # held out, 102 vs 104 of 128); then the fewest layout pitfalls (pitfall_rules: what
    # NVIDIA's tuning avoids, which the step model does not see, so no predicted speed outweighs
    # it) and the best utility (_prune_key); among equals, the simpler layout (less model
    # parallelism, no FSDP)
    fewest_pitfalls, best_utility = _prune_key(c)
    return (c.measured is None, -fewest_pitfalls, -best_utility, L.tp * L.pp * L.cp, L.ep,
            L.fsdp, L.vp_size, L.mbs)


def _evidence(arch: ModelArch, hw: Hardware, gpus: int, precision: str, opts: Options) -> tuple:
    """The measured rows of the request's configuration, each with the model's prediction of its
    own layout under the search's constants (planner.measured)."""
    if not opts.measured and not opts.own_measured:
        return ()
    from mbridge_launch.planner.measured import evidence, matching

    def of(rows: tuple, own: bool) -> tuple:
        mine = matching(rows, arch.name, hw.name, gpus, precision, opts.mtp_layers, opts.moe_token_drop)
        return evidence(mine, opts.cal, own) if mine else ()

    return of(opts.measured, False) + of(opts.own_measured, True)


def _with_evidence(arch: ModelArch, hw: Hardware, model, cand: Candidate, matches: tuple, precision: str, goal: str,
                   opts: Options) -> Candidate:
    """`cand` corrected by its twin; when a row ran its very grid, the row's own micro-batch and
    virtual pipeline size (with the lightest recompute that fits) replace the model's choice."""
    from mbridge_launch.planner.measured import correct, twin_for

    twin = twin_for(cand.layout, matches)
    L = cand.layout
    if twin is not None and twin.ran(L):
        ran = twin.row.layout
        if (ran.mbs, ran.vp_size) != (L.mbs, L.vp_size) and L.gbs % (ran.mbs * L.dp) == 0:
            grid = evolve(L, mbs=1, vp=None, recompute="none", recompute_layers=None)
            for trial, memory in grid_variants(arch, hw, grid, precision, goal, replace(opts, mbs=ran.mbs)):
                if trial.vp_size == ran.vp_size:
                    cand = Candidate(trial, memory, model.step(trial), cand.notes,
                                     tuple(layout_pitfalls(trial, arch, hw)))
                    break
    step, _ = correct(cand.step, cand.layout, matches, model.mfu_ceiling)
    return replace(cand, step=step, twin=twin_for(cand.layout, matches))


def _best_inner(arch: ModelArch, hw: Hardware, model, grid: Layout, precision: str, goal: str,
                opts: Options, result: SearchResult) -> Candidate | None:
    best: Candidate | None = None
    for trial, memory in grid_variants(arch, hw, grid, precision, goal, opts, result):
        step = model.step(trial)
        pitfalls = tuple(layout_pitfalls(trial, arch, hw))
        result.avoidable.update(set(PITFALL_CODES) - {p.code for p in pitfalls})
        cand = Candidate(trial, memory, step, ("uneven_pp",) if trial.uneven_pp else (), pitfalls)
        if best is None or _rank_key(cand) < _rank_key(best):
            best = cand
    return best


def grid_variants(arch: ModelArch, hw: Hardware, grid: Layout, precision: str, goal: str,
                  opts: Options = Options(), result: SearchResult | None = None, *,
                  grad_bytes: float | None = None) -> Iterable[tuple[Layout, MemoryBreakdown]]:
    """Every (MBS, VP) of a rule-valid grid with the lightest recompute that fits in memory;
    `grad_bytes` replaces the options' (the calibration fit enumerates layouts, it does not search)."""
    if grad_bytes is not None:
        opts = replace(opts, grad_bytes=grad_bytes)
    dp = grid.dp
    mbs_choices = [opts.mbs] if opts.mbs else MBS_CHOICES
    recomputes = [opts.recompute] if opts.recompute else list(RECOMPUTE_ORDER)
    settings = dict(opts.settings)
    for mbs in mbs_choices:
        if grid.gbs % (mbs * dp):
            continue
        fitted_any = False
        for vp in _vp_choices(arch, grid.pp):
            # the concrete pipeline split where layers do not divide PP x VP (pipeline_split)
            layout = settle(evolve(grid, mbs=mbs, vp=vp), arch)
            for recompute, layers in recompute_levels(recomputes, chunk_layers(arch.num_layers, layout),
                                                       partial=not opts.recompute):
                trial = evolve(layout, recompute=recompute, recompute_layers=layers)
                if settings:
                    trial = run_layout(trial, settings)  # as the written Plan runs it
                memory = estimate_memory(arch, trial, hw.hbm_gb, precision=precision, goal=goal, grad_bytes=opts.grad_bytes)
                if result is not None:
                    result.evaluated += 1
                if memory.fits:
                    fitted_any = True
                    yield trial, memory
                    break
        if not fitted_any:
            if result is not None:
                _reject(result, "RULE_MEMORY", _grid_label(grid.tp, grid.pp, grid.cp, grid.ep, grid.etp_shown, grid.fsdp) + f" MBS={mbs}",
                        _rule("RULE_MEMORY", "planner.rule.memory", "recompute"))
            break  # a larger micro-batch needs even more memory


def feasible_grids(arch: ModelArch, hw: Hardware, gpus: int, *, gbs: int, seq_length: int, precision: str = "bf16",
                   goal: str = "pretrain", options: Options = Options(), grad_bytes: float | None = None) -> list[Layout]:
    """The grids (MBS=1 placeholders) that pass the rules and whose memory lower bound fits;
    `grad_bytes` replaces the options' (as grid_variants)."""
    if grad_bytes is not None:
        options = replace(options, grad_bytes=grad_bytes)
    grids: list[Layout] = []
    limit = HEADROOM * hw.hbm_gb
    for tp, pp, cp, ep, etp in _grids(arch, hw, gpus, seq_length, options):
        base = Layout(
            tp=tp, pp=pp, cp=cp, ep=ep, etp=etp if etp > 1 else None, sp=tp > 1, mbs=1, gbs=gbs,
            seq_length=seq_length, world=gpus, gpus_per_node=hw.gpus_per_node,
            cp_comm_type="p2p" if cp > 1 else None, uneven_pp=arch.num_layers % pp != 0,
        )
        if tp > hw.nvlink_domain or any(v.severity == "error" and v.code != "RULE_GBS" for v in check_layout(base, arch, hw)):
            continue
        for fsdp in _fsdp_choices(arch, pp, options, precision):
            grid = evolve(base, fsdp=fsdp)
            if static_memory(arch, grid, precision=precision, goal=goal, grad_bytes=options.grad_bytes) <= limit:
                grids.append(grid)
    return grids


def estimate_layout(
    layout: Layout,
    arch: ModelArch,
    hardware: Hardware,
    *,
    precision: str = "bf16",
    goal: str = "pretrain",
    mtp_layers: int | None = None,
    moe_token_drop: bool = False,
    grad_bytes: float = 4.0,
    cal: Calibration | None = None,
    measured: tuple = (),
    own_measured: tuple = (),
) -> Candidate | None:
    """Memory breakdown and step estimate of one given layout (rules are the caller's business:
    see rules.check_layout). `.fits` says whether it fits in HBM with the headroom. Returns None
    when the architecture lacks fields the estimates need (arch.missing). `measured`, `own_measured`:
    as Options (planner.measured), the estimate corrected as `search` corrects its candidates."""
    if arch is None or arch.missing:
        return None
    if layout.world is None:
        layout = evolve(layout, world=layout.tp * layout.pp * layout.cp)
    memory = estimate_memory(arch, layout, hardware.hbm_gb, precision=precision, goal=goal, grad_bytes=grad_bytes)
    step = estimate_step(arch, hardware, layout, precision, goal, mtp_layers=mtp_layers, moe_token_drop=moe_token_drop,
                         grad_bytes=grad_bytes, cal=cal or CAL)
    twin = None
    if measured or own_measured:
        from mbridge_launch.planner.measured import correct, twin_for

        opts = Options(mtp_layers=mtp_layers, moe_token_drop=moe_token_drop, cal=cal, measured=measured,
                       own_measured=own_measured)
        matches = _evidence(arch, hardware, layout.world or 0, precision, opts)
        from mbridge_launch.planner.throughput import mfu_ceiling

        step, _ = correct(step, layout, matches, mfu_ceiling(precision))
        twin = twin_for(layout, matches)
    return Candidate(layout, memory, step, ("uneven_pp",) if layout.uneven_pp else (),
                     tuple(layout_pitfalls(layout, arch, hardware)), twin=twin)
