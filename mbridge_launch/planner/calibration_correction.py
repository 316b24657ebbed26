"""What `mbridge-launch calibrate` does to the throughput constants: one closed-form correction
from the rows it is given, no search.

The throughput model's constants (throughput.Calibration) are fitted once, on NVIDIA's published
rows, by the research code in benchmarks/ (fitting.py: Nelder-Mead over a robust loss with
priors and a ranking term, minutes of CPU). The wheel ships the result (throughput.CAL) and their
physical ranges (throughput.BOUNDS), not the optimizer. A user's rows (their cluster, their
software release) differ from those constants mostly by a few offsets the rows themselves can
identify: how fast GEMMs of a precision run on a GPU generation, attention, expert GEMMs, host
latency, exposed communication. So calibrate solves ONE bounded, ridge-regularised linear least
squares problem (Gauss-Newton's first step; closed form):

  r_i      = log(measured_i / predicted_i)                 the log error of row i
  J_ik     = d log(predicted_i) / d log(constant_k)        by a finite difference (the model's
                                                            own sensitivity: 0 for a constant the
                                                            row does not exercise)
  w_i      = 1 / sqrt(1 + ((r_i - median r) / DELTA)^2)   pseudo-Huber weight around the rows'
                                                            median error at the start (a row far
                                                            from the others pulls linearly: a bad
                                                            run cannot drag every constant)
  delta    = argmin  sum_i w_i (r_i - J_i . delta)^2 + RIDGE * n * sum_k delta_k^2
  constant_k <- constant_k * exp(delta_k), inside BOUNDS[k]

bounded by an active set: a constant the solution would push out of its physical range is held at
that bound and the others are solved again (at most one linear solve per constant). The ridge keeps every constant the rows cannot tell apart where it was (a column of zeros gets
delta 0; two constants that only ever act together share the change). The model is not linear in
its constants, so the step is checked, not trusted: the correction is evaluated at full, half and
a quarter of its length and the start itself, and the one with the lowest robust loss on the rows
is written (a calibration never ends worse on the rows it is given than the one in use). How it
predicts releases it was not given, against the old optimizer: benchmarks/RESULTS.md, "Calibrate".
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

from mbridge_launch.planner.calibration_rows import GRAD_BYTES, Row, with_fitting_recompute
from mbridge_launch.planner.throughput import BOUNDS, CAL, Calibration, constant, estimate_step, out_of_bounds

# pseudo-Huber scale of the log error: the same as the constants' fit (benchmarks/fitting.py)
DELTA = 0.06
# ridge weight per row on the log change of a constant: moving one constant by 10% costs as much
# as RIDGE x 0.01 per row, so a change the rows do not ask for clearly is not made
RIDGE = 0.01
# the finite-difference step, in the log of a constant (a 2% change: small against the effects,
# large against float rounding)
_STEP = 0.02
# the share of the correction tried, longest first (the model is not linear in its constants)
_SHARES = (1.0, 0.5, 0.25)


@dataclass(frozen=True)
class Accuracy:
    median: float  # median |relative error| of tokens/s
    within_15: float  # share of rows within 15%
    rows: int


@dataclass(frozen=True)
class CalibrateFit:
    cal: Calibration
    before: Accuracy  # the start's accuracy on the rows
    after: Accuracy
    objective_before: float  # the robust loss (loss()) of the start on the rows
    objective_after: float
    kept_start: bool  # no share of the correction lowered the loss: the start is returned unchanged
    moved: tuple[str, ...] = ()  # the constants the correction changed
    seconds: float = 0.0


def corrected_names() -> list[str]:
    """The constants calibrate may change: every constant BOUNDS marks fitted (the references,
    Blackwell's generation, the x86 host and the link efficiency, stay)."""
    return [name for name, b in BOUNDS.items() if b.fitted]


def prepared(rows: Sequence[Row]) -> list[tuple[Row, object]]:
    """Rows with a measured tokens/s, paired with the layout (and recompute) to estimate."""
    return [(r, with_fitting_recompute(r)) for r in rows if r.tokens_per_sec]


def predict(row: Row, layout, cal: Calibration) -> float:
    est = estimate_step(row.arch, row.hw, layout, row.precision, mtp_layers=row.mtp_layers,
                        moe_token_drop=row.token_drop, cal=cal, grad_bytes=GRAD_BYTES)
    return est.tokens_per_sec_per_gpu


def accuracy(items: Sequence[tuple[Row, object]], cal: Calibration) -> Accuracy:
    errs = [abs(predict(r, L, cal) / (r.tokens_per_sec or math.nan) - 1) for r, L in items]
    if not errs:
        return Accuracy(0.0, 0.0, 0)
    return Accuracy(statistics.median(errs), sum(e <= 0.15 for e in errs) / len(errs), len(errs))


def loss(items: Sequence[tuple[Row, object]], cal: Calibration) -> float:
    """Mean pseudo-Huber loss of the log errors (quadratic below DELTA, linear above)."""
    total = 0.0
    for row, layout in items:
        err = math.log(predict(row, layout, cal) / (row.tokens_per_sec or math.nan))
        total += DELTA * DELTA * (math.sqrt(1.0 + (err / DELTA) ** 2) - 1.0)
    return total / max(len(items), 1)


def at_bounds(cal: Calibration, share: float = 0.01) -> list[str]:
    """The fitted constants within `share` of their range of a bound, as "name=value (low|high)"
    (the rows press them against physics: the model lacks something there)."""
    out = []
    for name, b in BOUNDS.items():
        if not b.fitted:
            continue
        v = constant(cal, name)
        edge = b.high - b.low
        if v <= b.low + share * edge or v >= b.high - share * edge:
            out.append(f"{name}={v:.4g} ({'low' if v <= b.low + share * edge else 'high'})")
    return out


def with_constant(cal: Calibration, name: str, value: float) -> Calibration:
    """`cal` with constant `name` ("group.key" for the dict fields) set to `value`."""
    group, _, key = name.partition(".")
    changes: dict[str, Any] = {group: {**getattr(cal, group), key: value} if key else value}
    return replace(cal, **changes)


def scaled_constants(cal: Calibration, names: Sequence[str], logs: Sequence[float]) -> Calibration:
    """`cal` with constant names[k] multiplied by exp(logs[k]), each clamped to its BOUNDS range."""
    for name, d in zip(names, logs):
        if d:
            b = BOUNDS[name]
            cal = with_constant(cal, name, min(max(constant(cal, name) * math.exp(d), b.low), b.high))
    return cal


def _distinct(items: Sequence[tuple[Row, object]]) -> list[tuple[Row, object, list[float]]]:
    """Items that estimate the same thing (a layout measured twice), predicted once."""
    groups: dict[tuple, tuple[Row, object, list[float]]] = {}
    for row, layout in items:
        key = (row.model, row.system, row.precision, row.mtp_layers, row.token_drop, repr(layout))
        groups.setdefault(key, (row, layout, []))[2].append(float(row.tokens_per_sec or 0.0))
    return list(groups.values())


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a x = b for a symmetric positive definite `a` (the ridge makes it so): Gaussian
    elimination with partial pivoting, a few dozen unknowns (the project has no numpy)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        pivot = m[c][c]
        for r in range(c + 1, n):
            f = m[r][c] / pivot
            if f:
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for c in range(n - 1, -1, -1):
        x[c] = (m[c][n] - sum(m[c][k] * x[k] for k in range(c + 1, n))) / m[c][c]
    return x


def _weights(residuals: Sequence[float]) -> list[float]:
    """Pseudo-Huber weights of the residuals around their median: a row far from the others pulls
    linearly, not quadratically (one bad run cannot drag every constant), while a cluster that is
    uniformly off keeps full weight on every row (the offset is what calibrate is for)."""
    centre = statistics.median(residuals) if residuals else 0.0
    return [1.0 / math.sqrt(1.0 + ((r - centre) / DELTA) ** 2) for r in residuals]


def _sensitivities(groups, start: Calibration, names: Sequence[str]) -> list[list[float]]:  # noqa: ANN001
    """One column per constant: d log(prediction) / d log(constant) of every distinct row, by a
    central difference of _STEP (inside the constant's range; 0 for a constant at 0 or pinned)."""
    columns: list[list[float]] = []
    for name in names:
        value = constant(start, name)
        b = BOUNDS[name]
        up, down = min(value * math.exp(_STEP), b.high), max(value * math.exp(-_STEP), b.low)
        if value <= 0 or up <= down:
            columns.append([0.0] * len(groups))
            continue
        hi, lo = with_constant(start, name, up), with_constant(start, name, down)
        span = math.log(up / down)
        columns.append([(math.log(predict(row, layout, hi)) - math.log(predict(row, layout, lo))) / span
                        for row, layout, _ in groups])
    return columns


def _room(start: Calibration, name: str) -> tuple[float, float]:
    """How far constant `name` may move, in the log of its value: (down, up), down <= 0 <= up."""
    value, b = constant(start, name), BOUNDS[name]
    if value <= 0:
        return 0.0, 0.0
    return math.log(max(b.low, 1e-300) / value) if b.low > 0 else -math.inf, math.log(b.high / value)


def correction(items: Sequence[tuple[Row, object]], start: Calibration = CAL,
               ridge: float = RIDGE, names: Sequence[str] | None = None) -> tuple[list[str], list[float]]:
    """The log change of each constant in `names` (default corrected_names()) that the rows ask for:
    the weighted ridge least squares of the module docstring, bounded. A constant the solution
    would push out of its range is held at that bound and the others solved again without it
    (an active set: at most one solve per constant, each a closed-form linear solve)."""
    names = list(corrected_names() if names is None else names)
    groups = _distinct(items)
    base = [math.log(predict(row, layout, start)) for row, layout, _ in groups]
    columns = _sensitivities(groups, start, names)
    samples = [(g, math.log(m) - base[g]) for g, (_, _, measured) in enumerate(groups) for m in measured]
    weights = _weights([r for _, r in samples])
    rooms = [_room(start, name) for name in names]
    fixed: dict[int, float] = {}  # constant index -> its log change, held at a bound
    while True:
        free = [k for k in range(len(names)) if k not in fixed and any(columns[k])]
        ata = [[0.0] * len(free) for _ in free]
        atr = [0.0] * len(free)
        for (g, r), w in zip(samples, weights):
            left = r - sum(columns[k][g] * d for k, d in fixed.items())
            for i, ki in enumerate(free):
                ji = columns[ki][g]
                if ji:
                    atr[i] += w * ji * left
                    for j, kj in enumerate(free):
                        ata[i][j] += w * ji * columns[kj][g]
        for i in range(len(free)):
            ata[i][i] += ridge * max(len(samples), 1)
        solution = _solve(ata, atr) if free else []
        logs = [fixed.get(k, 0.0) for k in range(len(names))]
        out = []
        for i, k in enumerate(free):
            low, high = rooms[k]
            logs[k] = solution[i]
            if not low <= solution[i] <= high:
                out.append((max(solution[i] - high, low - solution[i]), k))
        if not out:
            return names, logs
        # the constant that leaves its range furthest is held at its bound; the rest solved again
        _, k = max(out)
        low, high = rooms[k]
        fixed[k] = high if logs[k] > high else low


def calibrate(rows: Sequence[Row], start: Calibration = CAL, ridge: float = RIDGE) -> CalibrateFit:
    """The closed-form correction of `start` on `rows` (module docstring), the share of it with the
    lowest robust loss on the rows, or `start` when none lowers it. ValueError when no row has a
    measured tokens/s (the caller says so first)."""
    began = time.monotonic()
    items = prepared(rows)
    if not items:
        raise ValueError("no row with a measured tokens/s")
    names, logs = correction(items, start, ridge)
    before = loss(items, start)
    best, best_loss = start, before
    for share in _SHARES:
        candidate = scaled_constants(start, names, [share * d for d in logs])
        value = loss(items, candidate)
        if value < best_loss and not out_of_bounds(candidate):
            best, best_loss = candidate, value
    kept = best is start
    moved = tuple(n for n in names if constant(best, n) != constant(start, n))
    return CalibrateFit(cal=best, before=accuracy(items, start), after=accuracy(items, best),
                        objective_before=before, objective_after=best_loss, kept_start=kept, moved=moved,
                        seconds=time.monotonic() - began)
