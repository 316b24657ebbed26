"""Fit the throughput model's constants (mbridge_launch.planner.throughput.Calibration) on
published benchmark rows: a Nelder-Mead search over a robust log-error loss, every constant
held inside its physical range (throughput.BOUNDS) by a sigmoid reparametrisation.

Research code: it lives in benchmarks/, not in the wheel. fit_constants.py runs it on every row
and writes throughput.CAL; accuracy.py, domain_table.py, generalisation.py and refits.py refit
on subsets (held-out systems, models, releases). `mbridge-launch calibrate` does not search: it
applies the closed-form correction of mbridge_launch/planner/calibration_correction.py;
fit_for_calibrate below is the optimizer calibrate ran before, kept to compare the two
(calibrate_heldout.py). Pure Python on purpose (the project does not depend on numpy/scipy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import calibration_rows  # noqa: F401 - puts the repository root on sys.path first
from mbridge_launch.planner.calibration_correction import Accuracy, accuracy, at_bounds, predict, prepared  # noqa: F401
from mbridge_launch.planner.calibration_rows import GRAD_BYTES, Row, with_fitting_recompute  # noqa: F401
from mbridge_launch.planner.search import utility
from mbridge_launch.planner.throughput import (  # noqa: F401
    BOUNDS,
    CAL,
    Bound,
    Calibration,
    estimate_step,
    out_of_bounds,
)


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 40.0), -40.0)))


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


# Where a start value outside (or on) its range is put before the fit: this share of the range
# inside the nearer bound (a logit at the very bound has no slope for the search to follow)
_START_MARGIN = 0.02


def _bounded(b: Bound) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """(to internal, from internal) for a constant of range `b`: a sigmoid into [low, high], in
    the log of the value when the range spans more than a decade (latencies, token counts), so
    every internal value is a physical constant and the fit cannot leave the range (bounded
    optimisation by reparametrisation: the project has no scipy)."""
    log = b.low > 0 and b.high / b.low > 10.0
    lo, hi = (math.log(b.low), math.log(b.high)) if log else (b.low, b.high)

    def fwd(v: float) -> float:
        u = math.log(max(v, 1e-300)) if log else v
        share = (u - lo) / (hi - lo)
        if not 0.0 < share < 1.0:  # outside or on a bound: start just inside it
            share = min(max(share, _START_MARGIN), 1.0 - _START_MARGIN)
        return _logit(share)

    def back(x: float) -> float:
        u = lo + (hi - lo) * _sig(x)
        v = math.exp(u) if log else u
        return min(max(v, b.low), b.high)  # rounding of exp/log never leaves the range

    return fwd, back


# every constant BOUNDS marks fitted, in BOUNDS' order; the others (references) keep their value
PARAMS: list[tuple[str, tuple[Callable, Callable]]] = [(name, _bounded(b)) for name, b in BOUNDS.items() if b.fitted]


_DICTS = ("gemm_eff", "generation", "host_latency")


# Physical priors (centre, spread of the log): datasheet-style GEMM efficiencies, flash
# attention efficiency, launch latencies, ... A constant that strays one spread from its centre
# costs as much as one row mispredicted by DELTA. They keep the fit physical when the rows cannot
# tell two constants apart, which is what makes it generalise to unseen systems and models; the
# hard ranges are BOUNDS (every centre lies inside its range).
PRIORS: dict[str, tuple[float, float]] = {
    "gemm_eff.bf16": (0.75, 0.08), "gemm_eff.fp8": (0.65, 0.2), "gemm_eff.fp8mx": (0.62, 0.2),
    "gemm_eff.nvfp4": (0.50, 0.3), "attn_eff": (0.45, 0.3), "attn_half_tokens": (256.0, 0.7), "exp_share": (0.3, 0.7),
    "moe_eff": (0.6, 0.4), "moe_lowp_gain": (1.4, 0.3), "moe_half_tokens": (1500.0, 0.7),
    "elementwise": (1.3, 0.5), "generation.hopper": (0.95, 0.1), "generation.blackwell_ultra": (0.95, 0.1),
    "layer_latency_s": (2e-4, 1.0), "moe_sync_s": (5e-4, 1.0), "tp_exposed": (0.3, 0.7),
    "cp_exposed": (0.3, 0.7), "ep_exposed": (0.4, 0.7), "dp_exposed": (0.2, 1.0),
    "fsdp_exposed": (0.3, 0.7), "p2p_latency_s": (5e-5, 1.0),
    "ring_step_s": (1e-5, 1.0), "host_latency.grace": (0.8, 0.5),
}
DELTA = 0.06
# The published rows run every dense model in FP8/FP4 and only MoE models in BF16, so they cannot
# pin the dense BF16 GEMM efficiency (unconstrained, fits wander to 0.35 or 0.85); its prior is
# tight around what BF16 GEMMs reach on Hopper and Blackwell.


def prior_penalty(cal: Calibration) -> float:
    total = 0.0
    for name, (centre, spread) in PRIORS.items():
        z = (math.log(max(_get(cal, name), 1e-15)) - math.log(centre)) / spread
        total += 0.5 * z * z * DELTA * DELTA
    return total


def _get(cal: Calibration, name: str) -> float:
    group, _, key = name.partition(".")
    if group in _DICTS:
        return getattr(cal, group)[key]
    return getattr(cal, name)


def to_vector(cal: Calibration) -> list[float]:
    return [fwd(_get(cal, name)) for name, (fwd, _) in PARAMS]


def from_vector(x: Sequence[float], base: Calibration = CAL) -> Calibration:
    values: dict = {group: dict(getattr(base, group)) for group in _DICTS}
    for (name, (_, back)), xi in zip(PARAMS, x):
        group, _, key = name.partition(".")
        if group in _DICTS:
            values[group][key] = back(xi)
        else:
            values[name] = back(xi)
    return replace(base, **values)


def loss(items, cal: Calibration, delta: float = DELTA) -> float:
    """Pseudo-Huber on log errors (quadratic below `delta`, linear above: robust to the rows a
    software release made much faster or slower) plus the priors, per row."""
    total = prior_penalty(cal)
    for row, layout in items:
        err = math.log(predict(row, layout, cal) / row.tokens_per_sec)
        total += delta * delta * (math.sqrt(1.0 + (err / delta) ** 2) - 1.0)
    return total / max(len(items), 1)


def nelder_mead(f: Callable[[list[float]], float], x0: list[float], step: float = 0.5,
                iters: int = 3000, tol: float = 1e-9, stop: Callable[[], bool] | None = None) -> tuple[list[float], float]:
    """Minimise f from x0; `stop()` True ends the search early (calibrate's time limit)."""
    n = len(x0)
    simplex = [list(x0)]
    for i in range(n):
        x = list(x0)
        x[i] += step
        simplex.append(x)
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < tol or (stop is not None and stop()):
            break
        centroid = [sum(x[i] for x in simplex[:-1]) / n for i in range(n)]
        worst = simplex[-1]
        reflect = [c + (c - w) for c, w in zip(centroid, worst)]
        fr = f(reflect)
        if fr < values[0]:
            expand = [c + 2 * (c - w) for c, w in zip(centroid, worst)]
            fe = f(expand)
            simplex[-1], values[-1] = (expand, fe) if fe < fr else (reflect, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflect, fr
        else:
            contract = [c + 0.5 * (w - c) for c, w in zip(centroid, worst)]
            fc = f(contract)
            if fc < values[-1]:
                simplex[-1], values[-1] = contract, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, xs)] for xs in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    i = min(range(n + 1), key=values.__getitem__)
    return simplex[i], values[i]


def fit(rows: Sequence[Row], start: Calibration = CAL, rounds: int = 3, iters: int = 2500) -> Calibration:
    """Fit the constants on `rows`; restarts shake the simplex out of early collapses."""
    items = prepared(rows)
    x = to_vector(start)
    best = math.inf
    for r in range(rounds):
        x, value = nelder_mead(lambda v: loss(items, from_vector(v)), x, step=0.6 / (r + 1), iters=iters)
        if best - value < 1e-7:
            break
        best = value
    return physical(from_vector(x))


def physical(cal: Calibration) -> Calibration:
    """`cal`, after checking that every constant lies in its physical range (BOUNDS): a fit
    outside it is a bug of the fit, never a result to write."""
    bad = out_of_bounds(cal)
    if bad:
        raise ValueError("fitted constants outside their physical range: " + "; ".join(bad))
    return cal


# ---------------------------------------------------------------------- ranking term
# NVIDIA tuned each published layout: among the layouts that fit, it was the fastest they found.
# The ranking term asks the model to agree (the published grid ahead of every other grid, with a
# soft margin), which pins the constants that only matter for the layouts NOT chosen (latency
# per micro-batch, exposed communication, FSDP), and which the regression alone cannot see.
RANK_TAU = 0.02
RESTARTS = 5  # starts per fit (fit_constants.py and every leave-one-out refit of accuracy.py)
RANK_WEIGHT = 3.0
SHORTLIST = 12


@dataclass
class RankProblem:
    row: Row
    target: tuple
    weight: int
    variants: dict  # grid key -> list of feasible layouts (every MBS/VP with its lightest recompute)
    shortlist: list = field(default_factory=list)  # layouts evaluated during one fitting round
    flops: dict = field(default_factory=dict)  # FLOPs per token by (TP, sequence) (see _model_for)


def _grid_key(L) -> tuple:
    return (L.tp, L.pp, L.cp, L.ep, L.etp_size, L.fsdp)


def rank_problems(rows: Sequence[Row]) -> list[RankProblem]:
    from mbridge_launch.planner.search import feasible_grids, grid_variants

    problems: dict[tuple, RankProblem] = {}
    for row in rows:
        if not row.valid:
            continue
        L = row.layout
        key = (row.model, row.system, L.world, L.gbs, L.seq_length, row.precision, row.mtp_layers, row.token_drop,
               (L.tp, L.pp, L.cp, L.ep))
        if key in problems:
            problems[key].weight += 1
            continue
        variants: dict = {}
        for grid in feasible_grids(row.arch, row.hw, L.world or 0, gbs=L.gbs, seq_length=L.seq_length, precision=row.precision,
                                   grad_bytes=GRAD_BYTES):
            found = [(layout, mem.total / row.hw.hbm_gb)
                     for layout, mem in grid_variants(row.arch, row.hw, grid, row.precision, "pretrain",
                                                      grad_bytes=GRAD_BYTES)]
            if found:
                variants[_grid_key(grid)] = found
        problems[key] = RankProblem(row, (L.tp, L.pp, L.cp, L.ep), 1, variants)
    return list(problems.values())


def _model_for(p: RankProblem, cal: Calibration):
    from mbridge_launch.planner.throughput import step_model

    r = p.row
    model = step_model(r.arch, r.hw, r.precision, mtp_layers=r.mtp_layers, moe_token_drop=r.token_drop, cal=cal,
                       grad_bytes=GRAD_BYTES)
    # FLOPs per token depend on the model, TP and sequence, never on the constants: one cache per
    # problem across the fit's thousands of calibrations (each a new step model) saves ~12% of
    # an evaluation
    if isinstance(getattr(model, "_flops", None), dict):
        if model._flops:
            p.flops.update(model._flops)
        model._flops = p.flops
    return model


def refresh_shortlists(problems: list[RankProblem], cal: Calibration) -> None:
    """Keep, per problem, the best three layouts of the published grid and the best two of the
    SHORTLIST best other grids under `cal` (the others cannot move the soft maximum)."""
    for p in problems:
        model = _model_for(p, cal)
        scored = []
        target: list = []
        for key, layouts in p.variants.items():
            speeds = sorted(((utility(model.step(L).tokens_per_sec_per_gpu, f, L), i) for i, (L, f) in enumerate(layouts)),
                            reverse=True)
            if key[:4] == p.target:
                target.extend((u, layouts[i]) for u, i in speeds[:3])
                continue
            scored.append((speeds[0][0], [layouts[i] for _, i in speeds[:2]]))
        scored.sort(key=lambda item: -item[0])
        target.sort(key=lambda item: -item[0])
        p.shortlist = [[layout for _, layout in target[:3]]] + [layouts for _, layouts in scored[:SHORTLIST]]


def rank_loss(problems: list[RankProblem], cal: Calibration) -> float:
    total = weight = 0.0
    for p in problems:
        if not p.shortlist or not p.shortlist[0]:
            continue
        model = _model_for(p, cal)
        best = max(utility(model.step(L).tokens_per_sec_per_gpu, f, L) for L, f in p.shortlist[0])
        acc = 0.0
        for layouts in p.shortlist[1:]:
            alt = max(utility(model.step(L).tokens_per_sec_per_gpu, f, L) for L, f in layouts)
            acc += math.exp(min((alt - best) / RANK_TAU, 50.0))
        total += p.weight * DELTA * RANK_TAU * math.log1p(acc)
        weight += p.weight
    return total / max(weight, 1.0)


def objective(items, problems: list[RankProblem], cal: Calibration) -> float:
    """What fit_ranked minimises: regression loss (with priors) plus the weighted ranking term,
    with the shortlists of `cal` itself."""
    refresh_shortlists(problems, cal)
    return loss(items, cal) + RANK_WEIGHT * rank_loss(problems, cal)


def perturbed(start: Calibration, seed: int, spread: float = 0.4) -> Calibration:
    """`start` with every constant moved by up to +-spread in its internal (log/logit) scale;
    seed 0 is `start` itself. Deterministic, so a fit can be repeated exactly."""
    if seed == 0:
        return start
    import random

    rnd = random.Random(seed)
    return from_vector([v + rnd.uniform(-spread, spread) for v in to_vector(start)], start)


def fit_ranked(rows: Sequence[Row], start: Calibration = CAL, rounds: int = 3, iters: int = 1500,
               problems: list[RankProblem] | None = None, restarts: int = 1) -> Calibration:
    """Fit on the regression loss plus the ranking term (shortlists refreshed every round). With
    restarts > 1, Nelder-Mead runs from `start` and from restarts - 1 perturbed starts (seeds 1,
    2, ...) and the fit with the lowest objective wins: the search gets stuck in local minima."""
    items = prepared(rows)
    problems = rank_problems(rows) if problems is None else problems
    best: tuple[float, Calibration] | None = None
    for seed in range(restarts):
        x = to_vector(fit(rows, start=perturbed(start, seed), rounds=2, iters=iters))  # regression alone first
        for r in range(rounds):
            refresh_shortlists(problems, from_vector(x))
            x, _ = nelder_mead(lambda v: loss(items, from_vector(v)) + RANK_WEIGHT * rank_loss(problems, from_vector(v)),
                               x, step=0.5 / (r + 1), iters=iters)
        cal = from_vector(x)
        value = objective(items, problems, cal) if restarts > 1 else 0.0
        if best is None or value < best[0]:
            best = (value, cal)
    assert best is not None  # restarts >= 1: the loop ran
    return physical(best[1])


# ---------------------------------------------------------------------- the optimizer calibrate ran before
# Until issue 34, `mbridge-launch calibrate` ran this in the wheel: the same procedure as
# fit_ranked (regression with priors first, then rounds of regression plus the ranking term with
# refreshed shortlists, every constant inside BOUNDS), sized to finish 300 rows in well under a
# minute on 2 cores. Measured (calibrate_speed.py, then): one objective evaluation costs ~5 ms of
# regression for 129 distinct rows and ~50 ms of ranking term for their 85 ranking problems;
# building the problems (the memory model over every feasible layout) ~15 s and one shortlist
# refresh ~3 s, single-threaded. Hence: one start (the calibration in use), fewer iterations than
# fit_constants.py's restarts, identical rows' predictions computed once, and the problems,
# refreshes and ranking term split over the cores (fork; serial where fork is not available).
# Kept here as the baseline calibrate_heldout.py compares the closed-form correction with.
CALIBRATE_ITERS = 400  # regression-only Nelder-Mead iterations
CALIBRATE_ROUNDS = 2  # rounds of the ranking term
CALIBRATE_RANK_ITERS = 150  # Nelder-Mead iterations per round
# seconds after which the searches stop early (the command must finish 300 rows within 60 s; the
# rest is start-up, reading the rows and writing the file)
CALIBRATE_TIME_LIMIT = 45.0


@dataclass(frozen=True)
class OptimizerFit:
    cal: Calibration
    before: Accuracy  # the start's accuracy on the rows
    after: Accuracy
    objective_before: float
    objective_after: float
    kept_start: bool  # the start had the lower objective: it is returned unchanged
    problems: int  # ranking problems (distinct published grids)
    seconds: float = 0.0


def _grouped(items: Sequence[tuple[Row, object]]) -> list[tuple[Row, object, list[float]]]:
    """Items that estimate the same thing (same row but its tokens/s, same layout), predicted once:
    repeated runs of one layout, and the benchmark's perturbed copies."""
    groups: dict[tuple, tuple[Row, object, list[float]]] = {}
    for row, layout in items:
        key = (row.model, row.system, row.precision, row.mtp_layers, row.token_drop, repr(layout))
        if key not in groups:
            groups[key] = (row, layout, [])
        groups[key][2].append(float(row.tokens_per_sec or 0.0))
    return list(groups.values())


def _grouped_loss(groups, count: int, cal: Calibration, delta: float = DELTA) -> float:
    """loss() over grouped items (the same value, each prediction computed once)."""
    total = prior_penalty(cal)
    for row, layout, measured in groups:
        pred = math.log(predict(row, layout, cal))
        for m in measured:
            err = pred - math.log(m)
            total += delta * delta * (math.sqrt(1.0 + (err / delta) ** 2) - 1.0)
    return total / max(count, 1)


# State a forked worker inherits (set just before the pool starts; never pickled).
_SHARED: dict = {}


def _jobs() -> int:
    import multiprocessing
    import os

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def _pool(jobs: int):
    import multiprocessing

    return multiprocessing.get_context("fork").Pool(jobs)


# fewer ranking problems than this are not worth forking for (a worker costs ~0.1 s to start)
_PARALLEL_MIN = 8


def _chunks(n: int, jobs: int) -> list[list[int]]:
    return [list(range(i, n, jobs)) for i in range(jobs) if i < n]


def _problems_of(indices: list[int]) -> list[RankProblem]:
    return rank_problems([_SHARED["rows"][i] for i in indices])


def _problem_key(row: Row) -> tuple:
    L = row.layout
    return (row.model, row.system, L.world, L.gbs, L.seq_length, row.precision, row.mtp_layers, row.token_drop,
            (L.tp, L.pp, L.cp, L.ep))


def _distinct(rows: Sequence[Row]) -> tuple[list[Row], dict[tuple, int]]:
    """The first valid row of each ranking problem, and each problem's weight (how many valid rows
    share its key), as rank_problems counts them."""
    weights: dict[tuple, int] = {}
    firsts: list[Row] = []
    for r in rows:
        if not r.valid:
            continue
        key = _problem_key(r)
        if key not in weights:
            firsts.append(r)
        weights[key] = weights.get(key, 0) + 1
    return firsts, weights


def _weighted(built: list[RankProblem], weights: dict[tuple, int]) -> list[RankProblem]:
    for p in built:
        p.weight = weights[_problem_key(p.row)]
    return built


def parallel_rank_problems(rows: Sequence[Row], jobs: int,
                           meanwhile: Callable[[], object] | None = None) -> list[RankProblem]:
    """rank_problems(rows), the distinct problems built on `jobs` forked processes while this one
    runs `meanwhile()` (calibrate's regression-only search, which needs no problems)."""
    firsts, weights = _distinct(rows)
    if jobs <= 1 or len(firsts) < _PARALLEL_MIN:
        if meanwhile is not None:
            meanwhile()
        return _weighted(rank_problems(firsts), weights)
    _SHARED["rows"] = firsts
    try:
        with _pool(jobs) as pool:
            pending = pool.map_async(_problems_of, _chunks(len(firsts), jobs))
            if meanwhile is not None:
                meanwhile()
            built = [p for part in pending.get() for p in part]
    finally:
        _SHARED.pop("rows", None)
    return _weighted(built, weights)


def _shortlists_of(indices: list[int]) -> list[list]:
    problems = [_SHARED["problems"][i] for i in indices]
    refresh_shortlists(problems, _SHARED["cal"])
    return [p.shortlist for p in problems]


def _refresh(problems: list[RankProblem], cal: Calibration, jobs: int) -> None:
    if jobs <= 1 or len(problems) < _PARALLEL_MIN:
        refresh_shortlists(problems, cal)
        return
    _SHARED.update(problems=problems, cal=cal)
    try:
        chunks = _chunks(len(problems), jobs)
        with _pool(jobs) as pool:
            for indices, lists in zip(chunks, pool.map(_shortlists_of, chunks)):
                for i, shortlist in zip(indices, lists):
                    problems[i].shortlist = shortlist
    finally:
        _SHARED.clear()


def _rank_part(args: tuple[list[int], list[float]]) -> tuple[float, float]:
    """A worker's share of rank_loss: (weighted sum, weight) over its problems."""
    indices, x = args
    problems = [_SHARED["problems"][i] for i in indices]
    weight = float(sum(p.weight for p in problems if p.shortlist and p.shortlist[0]))
    return rank_loss(problems, from_vector(x, _SHARED["base"])) * max(weight, 1.0), weight


def _ranked_round(groups, count: int, problems: list[RankProblem], x: list[float], base: Calibration, step: float,
                  iters: int, jobs: int, stop: Callable[[], bool]) -> list[float]:
    """One round of Nelder-Mead on the regression plus the ranking term, the ranking term's
    problems split over `jobs` forked workers (the regression runs meanwhile in this process)."""
    if jobs <= 1 or len(problems) < _PARALLEL_MIN:
        def f(v: list[float]) -> float:
            cal = from_vector(v, base)
            return _grouped_loss(groups, count, cal) + RANK_WEIGHT * rank_loss(problems, cal)

        return nelder_mead(f, x, step=step, iters=iters, stop=stop)[0]
    _SHARED.update(problems=problems, base=base)
    try:
        chunks = _chunks(len(problems), jobs)
        with _pool(jobs) as pool:
            def fp(v: list[float]) -> float:
                pending = pool.map_async(_rank_part, [(c, list(v)) for c in chunks])
                reg = _grouped_loss(groups, count, from_vector(v, base))
                parts = pending.get()
                total, weight = sum(p[0] for p in parts), sum(p[1] for p in parts)
                return reg + RANK_WEIGHT * total / max(weight, 1.0)

            return nelder_mead(fp, x, step=step, iters=iters, stop=stop)[0]
    finally:
        _SHARED.clear()


def fit_for_calibrate(rows: Sequence[Row], start: Calibration = CAL, iters: int = CALIBRATE_ITERS,
                      rounds: int = CALIBRATE_ROUNDS, rank_iters: int = CALIBRATE_RANK_ITERS,
                      jobs: int | None = None, time_limit: float | None = CALIBRATE_TIME_LIMIT,
                      progress: Callable[[str], None] | None = None) -> OptimizerFit:
    """fit_ranked's procedure from `start` (the calibration in use) in calibrate's budget: the
    start's objective, regression with priors, `rounds` of regression plus ranking term with
    refreshed shortlists, the fit's objective; the start is kept when the fit does not lower the
    objective on these rows (so a calibration never gets worse on the rows it is given). The
    Nelder-Mead searches stop early when `time_limit` seconds (from the call) would otherwise be
    passed, keeping the time the last shortlist refresh needs. ValueError when no row has a
    measured tokens/s (the caller says so first)."""
    import time

    began = time.monotonic()
    jobs = _jobs() if jobs is None else max(1, jobs)
    say = progress or (lambda stage: None)
    items = prepared(rows)
    if not items:
        raise ValueError("no row with a measured tokens/s")
    groups = _grouped(items)
    count = len(items)
    base = start

    def objective_of(cal: Calibration) -> float:
        _refresh(problems, cal, jobs)
        return _grouped_loss(groups, count, cal) + RANK_WEIGHT * rank_loss(problems, cal)

    reserve = 0.0  # what the final shortlist refresh needs, once one has been timed

    def stop() -> bool:
        return time_limit is not None and time.monotonic() - began > time_limit - reserve

    x = to_vector(start)

    def regression() -> None:
        # steps of a refinement: the start is a fitted calibration (fit_constants.py explores from
        # the physical defaults with 0.6 and restarts)
        nonlocal x
        say("regression")
        x = nelder_mead(lambda v: _grouped_loss(groups, count, from_vector(v, base)), x, step=0.3, iters=iters,
                        stop=stop)[0]

    say("problems")
    problems = parallel_rank_problems(rows, jobs, meanwhile=regression)
    say("start")
    t0 = time.monotonic()
    before = objective_of(start)
    reserve = 1.5 * (time.monotonic() - t0)  # the final refresh, with a margin
    for r in range(rounds):
        if stop():
            break
        say(f"round {r + 1}")
        _refresh(problems, from_vector(x, base), jobs)
        x = _ranked_round(groups, count, problems, x, base, 0.2 / (r + 1), rank_iters, jobs, stop)
    fitted = from_vector(x, base)
    say("compare")
    after = objective_of(fitted)
    kept = before <= after or bool(out_of_bounds(fitted))
    chosen = start if kept else physical(fitted)
    return OptimizerFit(cal=chosen, before=accuracy(items, start), after=accuracy(items, chosen),
                        objective_before=before, objective_after=before if kept else after, kept_start=kept,
                        problems=len(problems), seconds=time.monotonic() - began)
