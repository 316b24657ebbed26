"""Generalisation of the planner across container releases, with two baselines.

    python benchmarks/generalisation.py [--quick] [--jobs N] [--no-write] [--iters N] [--rounds N] [--restarts N]

The published rows carry their container release (25.09, 25.11, 26.02, 26.02.01). Three protocols,
each refitting the constants exactly as accuracy.py's leave-one-out does (fit_ranked from the
physical defaults, regression + ranking term, the same iterations, rounds and restarts):

1. leave-one-release-out: fit on every other release, predict the held-out release's rows;
2. leave-one-release-line-out: the same with a release and its patch releases held out together
   (26.02 with 26.02.01), so that no row is corrected by its near-twin (reported, no target);
3. time-ordered: fit on the releases up to R, predict the next one (one step per later release).

For every predicted row: the tokens/s error of the published layout (with the refit constants and
the lightest recompute the memory model lets fit, as accuracy.py), the rank of the published
(TP, PP, CP, EP) in `search(..., Options(cal=refit, ...), top=10)` (accuracy.rank_of_published with
the refit constants), and whether it lies in the near-tie set (planner.near_tie.near_tie_set
within the band planner.domain.assess gives the request: the band `plan` uses, computed from a
calibration-domain table of the training releases alone, training_domain.py, so that the held-out
rows shape neither their constants nor their tolerance). Baselines in the
same table: the median-MFU table of accuracy.py fitted on the training releases only, and
copy-the-last-layout (the same model, system, GPU count and precision in the latest training
release that has it: its tokens/s is the prediction, its layout the "first choice").
Writes the `## Generalisation across releases` section of benchmarks/RESULTS.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import TOP, _baseline_predict, pct  # noqa: E402
from calibration_rows import GRAD_BYTES, Row, load_rows  # noqa: E402
from fitting import RESTARTS  # noqa: E402
from refits import Fit, run_fits  # noqa: E402
from training_domain import corrected_predict, domain_fits, inner_fits, training_table  # noqa: E402

HEADING = "## Generalisation across releases"
QUICK = (300, 2, 1)  # --quick: iterations, ranking rounds, starts per refit (domain_table.py's --quick)
LORO = "leave-one-release-out"
LINE = "leave-one-release-line-out"
TIME = "time-ordered"
PROTOCOLS = (LORO, LINE, TIME)  # the report's columns, in this order


# The split logic and the copy-the-last-layout baseline read only release, model, system,
# precision, variant, tokens_per_sec and layout (world, tp, pp, cp, ep, gbs, seq_length) of a row:
# the tests pass stand-ins with these attributes.
RowLike = Any


# ---------------------------------------------------------------------- the splits
def release_key(release: str) -> tuple[int, ...]:
    """Container releases in time order: "25.09" < "25.11" < "26.02" < "26.02.01"."""
    return tuple(int(part) for part in release.split("."))


def releases_of(rows: Sequence[RowLike]) -> list[str]:
    return sorted({r.release for r in rows}, key=release_key)


@dataclass(frozen=True)
class Split:
    protocol: str  # one of PROTOCOLS
    train: tuple[str, ...]  # releases the constants are fitted on
    test: str  # the release predicted
    also: tuple[str, ...] = ()  # further releases predicted with it (a release line's patch releases)

    @property
    def tests(self) -> tuple[str, ...]:
        return (self.test, *self.also)

    @property
    def label(self) -> str:
        return f"{'+'.join(self.train)} -> {'+'.join(self.tests)}"


def leave_one_release_out(releases: Sequence[str]) -> list[Split]:
    ordered = sorted(releases, key=release_key)
    return [Split(LORO, tuple(r for r in ordered if r != held), held) for held in ordered]


def release_line(release: str) -> str:
    """The release a patch release belongs to ("26.02.01" -> "26.02"): a patch of a release ships
    nearly the same software, so predicting one from the other is easier than a new release."""
    return ".".join(release.split(".")[:2])


def leave_one_release_line_out(releases: Sequence[str]) -> list[Split]:
    """Leave-one-release-out with a release and its patch releases held out together (26.02 and
    26.02.01): no held-out row is corrected by its near-twin. A line of one release gives the
    leave-one-release-out split again, so the column covers every row."""
    ordered = sorted(releases, key=release_key)
    lines: dict[str, list[str]] = {}
    for r in ordered:
        lines.setdefault(release_line(r), []).append(r)
    return [Split(LINE, tuple(r for r in ordered if r not in held), held[0], tuple(held[1:]))
            for held in lines.values()]


def time_ordered(releases: Sequence[str]) -> list[Split]:
    """Fit on the releases up to R, predict the next: one split per release after the first."""
    ordered = sorted(releases, key=release_key)
    return [Split(TIME, tuple(ordered[:i]), ordered[i]) for i in range(1, len(ordered))]


def splits_of(rows: Sequence[RowLike]) -> list[Split]:
    releases = releases_of(rows)
    return leave_one_release_out(releases) + leave_one_release_line_out(releases) + time_ordered(releases)


def counterpart(row: RowLike, train: Sequence[RowLike]) -> RowLike | None:
    """Copy-the-last-layout: the row of the same (model, system, GPU count, precision) in the
    latest training release that has one, else None. Within that release the closest row wins:
    the same variant, then the same GBS and sequence length, then one with a measured tokens/s
    (a release may publish a model twice, e.g. with and without token drop)."""
    L = row.layout
    same = [x for x in train if (x.model, x.system, x.layout.world, x.precision) == (row.model, row.system, L.world,
                                                                                      row.precision)]
    if not same:
        return None
    latest = max((x.release for x in same), key=release_key)
    pool = [x for x in same if x.release == latest]
    return max(pool, key=lambda x: (x.variant == row.variant, x.layout.gbs == L.gbs,
                                    x.layout.seq_length == L.seq_length, x.tokens_per_sec is not None))


def grid(layout: Any) -> tuple[int, int, int, int]:
    return (layout.tp, layout.pp, layout.cp, layout.ep)


# ---------------------------------------------------------------------- one split
@dataclass(frozen=True)
class RowResult:
    protocol: str
    split: str
    index: int
    label: str
    valid: bool
    error: float | None  # planner, refit constants (None: no measured tokens/s)
    mfu_error: float | None  # median-MFU table of the training releases
    copy_error: float | None  # copy-the-last-layout (None: no counterpart or it has no tokens/s)
    has_copy: bool  # a counterpart exists in the training releases
    copy_first: bool  # the counterpart's layout is the published (TP, PP, CP, EP)
    rank: int | None  # of the published grid in search(top=TOP); None = not in the first TOP
    first: str  # the planner's first choice
    in_tie: bool
    tie_size: int
    band: float  # the near-tie band (fraction)
    corrected: bool = False  # measured rows of the training releases corrected the estimate
    # the published layout's tie distance (domain_table.gap_among the first GAP_TOP candidates, as
    # the training releases' table measures it; None for an invalid published layout)
    gap: float | None = None


def _ranked(rows: list[Row], cal, table,
            evidence_rows: Sequence[Row] = ()) -> dict[int, tuple[int | None, str, bool, int, float, float | None]]:
    """accuracy.rank_of_published with the refit constants (Options.cal), plus the near-tie set
    within the request's near-tie tolerance (planner.domain.tie_band, as `plan`) from `table`
    (the training releases' own calibration-domain table, training_domain.py): per row index
    (rank, first choice, in the set, set size, tolerance, the published layout's tie distance as the
    nested table measures it, among GAP_TOP candidates). One search per request: its first TOP
    candidates are those of a search for TOP (the search's pruning keeps the same top)."""
    from domain_table import GAP_TOP, gap_among
    from mbridge_launch.knowledge.vocabulary import normalize_goal
    from mbridge_launch.planner.domain import assess
    from mbridge_launch.planner.near_tie import near_tie_set
    from mbridge_launch.planner.search import Options, search

    goal = normalize_goal("pretrain")  # every published row pretrains
    cache: dict[tuple, list] = {}
    out = {}
    for row in rows:
        L = row.layout
        world = L.world or 0  # every published row names its GPU count
        key = (row.model, row.system, world, L.gbs, L.seq_length, row.precision, row.mtp_layers, row.token_drop)
        if key not in cache:
            res = search(row.arch, row.hw, world, gbs=L.gbs, seq_length=L.seq_length, precision=row.precision,
                         options=Options(cal=cal, mtp_layers=row.mtp_layers, moe_token_drop=row.token_drop,
                                         grad_bytes=GRAD_BYTES, measured=tuple(evidence_rows)),
                         top=GAP_TOP)
            cache[key] = res.candidates
        listed = cache[key]
        cands = listed[:TOP]
        want = grid(L)
        rank = next((i + 1 for i, c in enumerate(cands) if grid(c.layout) == want), None)
        first = cands[0].layout if cands else None
        chosen = f"TP{first.tp} PP{first.pp} CP{first.cp} EP{first.ep}" if first else "-"
        band = assess(row.model, row.arch, row.hw.name, row.precision, goal, L.seq_length, world, table,
                      measured=bool(cands) and cands[0].twin is not None).near_tie().within
        ties = near_tie_set(cands, band)
        gap = gap_among(row, listed) if row.valid else None
        out[row.index] = (rank, chosen, rank is not None and any(r == rank for r, _ in ties), len(ties), band, gap)
    return out


# measured evidence (planner.measured): the training releases' rows of the same configuration
# correct the estimate and rank their layouts first, as `plan` does with the shipped rows;
# MBL_NO_EVIDENCE=1 scores the throughput model alone (the figures of the model without it)
EVIDENCE = os.environ.get("MBL_NO_EVIDENCE") != "1"


@dataclass(frozen=True)
class Strength:
    """How hard each refit fits (accuracy.py's procedure): Nelder-Mead iterations per round,
    ranking rounds, starts."""

    iters: int
    rounds: int
    restarts: int

    def fit(self, train: tuple[str, ...]) -> Fit:
        return Fit(train, self.iters, self.rounds, self.restarts)


def domain_settings() -> dict[str, Any]:
    """The strength of the shipped calibration-domain table's refits (its `settings`): the
    training releases' own table is computed the same way."""
    from mbridge_launch.planner.domain import load_table

    shipped = load_table().settings
    return {k: int(shipped[k]) for k in ("iters", "rounds", "restarts")}


def split_fits(split: Split, rows: Sequence[Row], strength: Strength, domain: dict[str, Any]) -> list[Fit]:
    """Every refit scoring `split` needs: the constants its rows are predicted with, and those of
    its training releases' own calibration-domain table (training_domain.py)."""
    return [strength.fit(split.train), *inner_fits(split.train, strength.iters, strength.rounds, strength.restarts),
            *domain_fits(split.train, rows, domain)]


def score_split(split: Split, rows: list[Row], cals: dict[Fit, Any], strength: Strength,
                domain: dict[str, Any], table: Any = None) -> list[RowResult]:
    """Every row of the split's test releases, predicted with the constants fitted on its training
    releases; the near-tie tolerance from the table of the training releases alone (`table`, that
    table when the caller has it already)."""
    cal = cals[strength.fit(split.train)]
    train = [r for r in rows if r.release in split.train]
    test = [r for r in rows if r.release in split.tests]
    evidence_rows = train if EVIDENCE else []
    if table is None:
        table = training_table(split.train, rows, cals, domain, strength.iters, strength.rounds, strength.restarts)
    ranked = _ranked(test, cal, table, evidence_rows)
    measured_train = [r for r in train if r.tokens_per_sec]
    out = []
    for r in test:
        tps = r.tokens_per_sec
        predicted, corrected = corrected_predict(r, cal, evidence_rows)
        err = predicted / tps - 1 if tps else None
        mfu = _baseline_predict(r, measured_train) / tps - 1 if tps and measured_train else None
        twin = counterpart(r, train)
        copy = twin.tokens_per_sec / tps - 1 if twin is not None and twin.tokens_per_sec and tps else None
        rank, chosen, in_tie, size, band, gap = ranked[r.index]
        out.append(RowResult(split.protocol, split.label, r.index, r.label, r.valid, err, mfu, copy, twin is not None,
                             twin is not None and grid(twin.layout) == grid(r.layout), rank, chosen, in_tie, size,
                             band, corrected, gap))
    return out


def score_splits(splits: Sequence[Split], rows: list[Row], cals: dict[Fit, Any], strength: Strength,
                 domain: dict[str, Any]) -> list[tuple[Split, list[RowResult]]]:
    """score_split for splits that share their training releases: the training releases' table is
    built once, and splits that also predict the same releases (a protocol's split that another
    protocol has too, e.g. the last time-ordered step and leave-out-the-latest) are scored once,
    their rows relabelled."""
    from dataclasses import replace

    assert len({s.train for s in splits}) == 1, "one training set per call"
    train = splits[0].train
    table = training_table(train, rows, cals, domain, strength.iters, strength.rounds, strength.restarts)
    scored: dict[tuple[str, ...], list[RowResult]] = {}
    out = []
    for split in splits:
        if split.tests not in scored:
            scored[split.tests] = score_split(split, rows, cals, strength, domain, table)
        out.append((split, [replace(r, protocol=split.protocol, split=split.label) for r in scored[split.tests]]))
    return out


def _score(task: tuple) -> list[tuple[Split, list[RowResult]]]:
    splits, cals, strength, domain = task
    return score_splits(splits, load_rows(), cals, strength, domain)


def run_all(splits: list[Split], strength: Strength, jobs: int, cache: Path | None = None,
            cached_only: bool = False, domain: dict[str, Any] | None = None) -> list[tuple[Split, list[RowResult]]]:
    """Every split's predictions: the refits of every split first (refits.run_fits: one refit
    serves every split that needs it, starts spread over `jobs` processes, kept in `cache`), then
    the splits scored in parallel. With `cached_only`, nothing is fitted and only the splits whose
    refits are all in `cache` are scored (the report names the others)."""
    domain = domain_settings() if domain is None else domain
    rows = load_rows()
    needed = {s: split_fits(s, rows, strength, domain) for s in splits}
    cals = run_fits([f for fits in needed.values() for f in fits], jobs, cache, cached_only,
                    log=lambda line: print(line, flush=True))
    ready = [s for s in splits if all(f in cals for f in needed[s])]
    by_train: dict[tuple[str, ...], list[Split]] = {}
    for s in ready:
        by_train.setdefault(s.train, []).append(s)
    # one task per training set (its table built once), with the refits its splits need
    tasks = [(group, {f: cals[f] for s in group for f in needed[s]}, strength, domain) for group in by_train.values()]
    begun = time.time()
    scored: dict[Split, list[RowResult]] = {}

    def collect(results) -> None:
        for group in results:
            for split, res in group:
                scored[split] = res
                print(f"  scored {split.protocol} {split.label}: {len(res)} rows ({time.time() - begun:.0f} s)",
                      flush=True)

    if jobs <= 1 or len(tasks) <= 1:
        collect(map(_score, tasks))
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:  # shut down (workers joined) when scored
            collect(pool.map(_score, tasks))
    return [(s, scored[s]) for s in ready]  # in the order of `splits`


# ---------------------------------------------------------------------- figures
def _median_abs(values: list[float]) -> float | None:
    return statistics.median(abs(v) for v in values) if values else None


def _p(value: float | None) -> str:
    return "-" if value is None else pct(value)


def _share(hits: int, total: int) -> str:
    return f"{pct(hits / total)} ({hits}/{total})" if total else "- (0 rows)"


@dataclass(frozen=True)
class Figures:
    rows: int
    measured: int
    valid: int
    error: float | None
    mfu_error: float | None
    copy_error: float | None
    copy_measured: int  # measured rows with a measured counterpart
    no_copy: int  # rows without a counterpart in the training releases
    first: int
    top3: int
    in_tie: int
    tie_median: float | None
    tie_capped: int  # valid rows whose set runs to the end of the TOP listed candidates (it may be larger)
    band_median: float | None  # of the near-tie bands
    copy_first: int
    copy_valid: int  # valid rows with a counterpart
    first_with_copy: int  # the planner's first choices on those rows (the same rows as the baseline)
    error_with_copy: float | None = None  # the planner's median error on the rows the copy baseline predicts
    mfu_with_copy: float | None = None  # the median-MFU table's on those rows
    copy_or_mfu: float | None = None  # copy-the-last-layout, the median-MFU table where it has no counterpart
    error_without_copy: float | None = None  # the planner's median error on the rows copy cannot predict


def figures(results: list[RowResult]) -> Figures:
    measured = [r for r in results if r.error is not None]
    valid = [r for r in results if r.valid]
    copies = [r.copy_error for r in measured if r.copy_error is not None]
    return Figures(
        rows=len(results), measured=len(measured), valid=len(valid),
        error=_median_abs([r.error for r in measured if r.error is not None]),
        mfu_error=_median_abs([r.mfu_error for r in measured if r.mfu_error is not None]),
        copy_error=_median_abs(copies), copy_measured=len(copies), no_copy=sum(not r.has_copy for r in results),
        first=sum(r.rank == 1 for r in valid), top3=sum(r.rank is not None and r.rank <= 3 for r in valid),
        in_tie=sum(r.in_tie for r in valid),
        tie_median=statistics.median(r.tie_size for r in valid) if valid else None,
        tie_capped=sum(r.tie_size >= TOP for r in valid),
        band_median=statistics.median(r.band for r in valid) if valid else None,
        copy_first=sum(r.copy_first for r in valid if r.has_copy), copy_valid=sum(r.has_copy for r in valid),
        first_with_copy=sum(r.rank == 1 for r in valid if r.has_copy),
        error_with_copy=_median_abs([r.error for r in measured if r.copy_error is not None and r.error is not None]),
        mfu_with_copy=_median_abs([r.mfu_error for r in measured if r.copy_error is not None and r.mfu_error is not None]),
        copy_or_mfu=_median_abs([r.copy_error if r.copy_error is not None else r.mfu_error for r in measured
                                 if r.copy_error is not None or r.mfu_error is not None]),
        error_without_copy=_median_abs([r.error for r in measured if r.copy_error is None and r.error is not None]))


def _verdict(ok: bool | None) -> str:
    return "" if ok is None else (" (met)" if ok else " (not met)")


def below_both(f: Figures) -> bool | None:
    """The acceptance comparison: the planner's median error below each baseline's on the rows
    that baseline predicts (the median-MFU table: every measured row; copy-the-last-layout: the
    rows with a measured counterpart, where the planner's own median is taken on the same rows).
    A median over other rows than the baseline's would compare the rows, not the predictors."""
    pairs = [(f.error, f.mfu_error), (f.error_with_copy, f.copy_error)]
    known = [(mine, theirs) for mine, theirs in pairs if mine is not None and theirs is not None]
    return all(mine < theirs for mine, theirs in known) if known else None


def _error_cell(f: Figures) -> str:
    if f.error is None:
        return "-"
    return (f"{pct(f.error)} against the median-MFU table's {_p(f.mfu_error)} on the same {f.measured} measured rows; "
            f"{_p(f.error_with_copy)} against copy-the-last-layout's {_p(f.copy_error)} on the {f.copy_measured} rows "
            f"copy predicts{_verdict(below_both(f))}")


def report(done: list[tuple[Split, list[RowResult]]], settings: dict[str, Any], seconds: float,
           missing: Sequence[Split] = (), note: str = "") -> str:
    protocols = [p for p in PROTOCOLS if any(s.protocol == p for s, _ in done)]
    fig = {p: figures([r for s, res in done if s.protocol == p for r in res]) for p in protocols}
    quick = settings["quick"]
    full = (settings["iters"], settings["rounds"], settings["restarts"]) == (800, 2, RESTARTS)
    lines = [f"{HEADING} (`python benchmarks/generalisation.py`)", "",
             (f"Refits: {settings['iters']} Nelder-Mead iterations per round, {settings['rounds']} ranking rounds, "
              f"{settings['restarts']} start(s) per refit, {settings['jobs']} process(es)"
              + (f"; refits read from the cache of a finished run, {seconds:.0f} s to score" if settings.get("cached")
                 else f", {seconds:.0f} s in all")
              + (" (`--quick`: fewer iterations and one start, not accuracy.py's full strength)." if quick else
                 " (accuracy.py's leave-one-out settings)." if full else " (not accuracy.py's full strength).")), "",
             ("Predicted rows (with a measured tokens/s; with a valid published layout: the rank and near-tie "
              "figures count these): " + "; ".join(f"{p} {fig[p].rows} ({fig[p].measured}; {fig[p].valid})"
                                                    for p in protocols) + "."
              + ("" if not missing else " Not finished at these settings (left out of the figures): "
                 + "; ".join(f"{s.protocol} {s.label}" for s in missing) + ".")), "",
             *([note.strip(), ""] if note.strip() else []),
             "| measure | target | " + " | ".join(protocols) + " |", "|---|---|" + "---|" * len(protocols)]

    def tie_cell(f: Figures) -> str:
        return _share(f.in_tie, f.valid) + _verdict(f.in_tie >= 0.9 * f.valid if f.valid else None)

    def size_cell(f: Figures) -> str:
        if f.tie_median is None:
            return "-"
        return (f"{f.tie_median:g}{_verdict(f.tie_median <= 3)}; {f.tie_capped} of {f.valid} sets run to the end of "
                f"the {TOP} listed (they may be larger); median band {_p(f.band_median)}")

    def copy_cell(f: Figures) -> str:
        return (f"{_p(f.copy_error)} ({f.copy_measured} measured rows with a measured counterpart; "
                f"{f.no_copy} rows without a counterpart)")

    def same_rows_cell(f: Figures) -> str:
        """The planner against both baselines on exactly the rows the copy baseline predicts."""
        if f.error_with_copy is None:
            return "-"
        return (f"{_p(f.error_with_copy)} ({f.copy_measured} rows; median-MFU table {_p(f.mfu_with_copy)}, copy "
                f"{_p(f.copy_error)})")

    def across_cell(f: Figures) -> str:
        """The planner on every measured row against copy on its own rows only: two row sets."""
        if f.error is None or f.copy_error is None:
            return "-"
        word = "lower" if f.error < f.copy_error else "higher"
        return (f"{_p(f.error)} ({f.measured} rows) against {_p(f.copy_error)} ({f.copy_measured} rows): {word}; "
                f"the planner's median on the {f.measured - f.copy_measured} measured rows copy cannot predict is "
                f"{_p(f.error_without_copy)}")

    def measure(name: str, target: str, cell) -> str:
        return f"| {name} | {target} | " + " | ".join(cell(fig[p]) for p in protocols) + " |"

    lines += [
        measure("published layout in the near-tie set", ">= 90%", tie_cell),
        measure("median near-tie set size", "<= 3", size_cell),
        measure("planner tokens/s/GPU median abs error, against each baseline on the rows it predicts",
                "below both baselines", _error_cell),
        measure("planner tokens/s/GPU median abs error, every measured row", "-",
                lambda f: f"{_p(f.error)} ({f.measured} rows)"),
        measure("baseline: median-MFU table, median abs error", "-", lambda f: _p(f.mfu_error)),
        measure("baseline: copy-the-last-layout, median abs error", "-", copy_cell),
        measure("baseline: copy-the-last-layout, else the median-MFU table (every measured row)", "-",
                lambda f: _p(f.copy_or_mfu)),
        measure("planner first choice = published", "goal 70%", lambda f: _share(f.first, f.valid)),
        measure("planner top 3 holds published", "goal 90%", lambda f: _share(f.top3, f.valid)),
        measure("baseline: copy-the-last-layout first choice = published", "-",
                lambda f: (f"{_share(f.copy_first, f.copy_valid)} (rows with a counterpart; "
                           f"{_share(f.copy_first, f.valid)} of all valid)")),
        measure("planner tokens/s/GPU median abs error on the copy baseline's rows", "-", same_rows_cell),
        measure("for reference, across row sets: the planner on every measured row, copy on its own rows", "-",
                across_cell),
        measure("planner first choice on the same rows (those with a counterpart)", "-",
                lambda f: _share(f.first_with_copy, f.copy_valid)), ""]
    domain = settings.get("domain") or {}
    dom = (f"{domain.get('restarts', '?')} start(s) of {domain.get('iters', '?')} iterations, "
           f"{domain.get('rounds', '?')} rounds")
    lines += [
        ("How it is read: every refit repeats accuracy.py's leave-one-out procedure (fit_ranked from the physical "
         "defaults, regression plus ranking term) on the training releases only; the held-out rows' tokens/s are "
         "estimated for the published layout with the lightest recompute that fits, and `search` ranks the grids "
         f"with the refit constants (`Options(cal=...)`, top {TOP}). Measured evidence (planner.measured, as `plan`, "
         "`estimate` and `recommend` use the shipped rows): the training releases' rows of the same model, system, GPU "
         "count, precision and variant correct every estimate by the measured / predicted of one row (the same grid "
         "first, then the newest release, as `plan` picks it; the release nearest the held-out one erred more), and "
         "a layout such a row ran ranks first; `MBL_NO_EVIDENCE=1` scores the throughput model alone. The near-tie "
         "set is symmetric: a layout predicted more than the tolerance faster than a measured first is the model's "
         "disagreement, listed but not a tie. The near-tie set holds every measured layout and the listed candidates "
         "predicted within the request's near-tie tolerance of the first (planner.near_tie.near_tie_set with "
         "planner.domain.assess(..., measured=...).near_tie(), as `plan`): the 90% quantile of how far from the "
         "first the published layouts of the nearest rows were predicted (planner.near_tie.tie_distance; 0 for a "
         "measured layout) by held-out predictions made as the request's: leave-one-release-out with the other "
         "releases' measured rows as evidence where such rows correct the estimates (gap_measured), else "
         "leave-one-system/model-out refits (gap_loso, gap_lomo). `plan` reads these "
         "from catalog/calibration-domain.json, computed over every release; here each split computes them again "
         "from its training releases alone, by the same procedures (training_domain.py: domain_table.py's refits "
         f"without each system and each model at the shipped table's strength, {dom}; leave-one-release-out "
         "within the training releases, at this run's strength, for loro_measured and gap_measured), so the held-out release "
         "shapes neither the constants its rows are predicted with nor the tolerance they are scored with. "
         "The median-MFU baseline is accuracy.py's table (same system, precision and model, else coarser groups) "
         "over the training releases' rows. Copy-the-last-layout takes the row of the same model, system, GPU count "
         "and precision in the latest training release that has one (same variant, GBS and sequence first); in "
         "leave-one-release-out that release may be later than the held-out one. Leave-one-release-line-out "
         "holds a release out with its patch releases (26.02 with 26.02.01; a release without patches as in "
         "leave-one-release-out), so neither is corrected by, nor copies, its near-twin. Rows without a counterpart are "
         "left out of its error and first-choice figures (counted above) and scored for the planner anyway; the "
         "baseline has no top 3 (one layout)."), ""]
    lines += ["Per split:", "",
              ("| protocol | train -> predict | rows (valid) | planner median | MFU-table median | copy median "
               "(no counterpart) | first | top 3 | in near-tie set | median set size |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for split, res in done:
        f = figures(res)
        lines.append(f"| {split.protocol} | {split.label} | {f.rows} ({f.valid}) | {_p(f.error)} | {_p(f.mfu_error)} | "
                     f"{_p(f.copy_error)} ({f.no_copy}) | {_share(f.first, f.valid)} | {_share(f.top3, f.valid)} | "
                     f"{_share(f.in_tie, f.valid)} | {'-' if f.tie_median is None else f'{f.tie_median:g}'} |")
    lines.append("")
    lines += [("Per row, leave-one-release-out (error with the refit constants; rank of the published grid, "
               f"'>{TOP}' = not in the first {TOP}; near-tie set size and band; '*' = invalid published layout, "
               "left out of the rank figures):"), "",
              "| row | error | MFU table | copy | rank | plan's first | in set | set size | band |",
              "|---|---|---|---|---|---|---|---|---|"]

    def signed(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:+.1f}%"

    for split, res in done:
        if split.protocol != LORO:
            continue
        for r in res:
            lines.append(f"| {r.label}{'' if r.valid else ' *'} | {signed(r.error)} | {signed(r.mfu_error)} | "
                         f"{signed(r.copy_error) if r.has_copy else 'none'} | {r.rank or f'>{TOP}'} | {r.first} | "
                         f"{'yes' if r.in_tie else 'no'} | {r.tie_size} | {pct(r.band)} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK[0]} iterations, {QUICK[1]} rounds, {QUICK[2]} start per refit (a fast look)")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--iters", type=int, default=800, help="Nelder-Mead iterations per refit round (accuracy.py: 800)")
    parser.add_argument("--rounds", type=int, default=2, help="ranking-term rounds per refit (accuracy.py: 2)")
    parser.add_argument("--restarts", type=int, default=RESTARTS, help=f"starts per refit (accuracy.py: {RESTARTS})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for the refits")
    parser.add_argument("--cache", type=Path, help="keep every finished refit start here and reuse it (resume a run)")
    parser.add_argument("--note", default="", help="a sentence added to the section (e.g. why these settings)")
    parser.add_argument("--cached-only", action="store_true",
                        help="fit nothing: report the splits whose refits are all in --cache, name the others")
    args = parser.parse_args()
    if args.cached_only and args.cache is None:
        parser.error("--cached-only needs --cache")
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.iters, args.rounds, args.restarts = QUICK
    start = time.time()
    rows = load_rows()
    splits = splits_of(rows)
    strength, domain = Strength(args.iters, args.rounds, args.restarts), domain_settings()
    print(f"{len(splits)} splits; constants: {args.restarts} start(s) of {args.iters} iterations per refit; the "
          f"training releases' domain tables: {domain['restarts']} start(s) of {domain['iters']}", flush=True)
    done = run_all(splits, strength, args.jobs, args.cache, args.cached_only, domain)
    seconds = time.time() - start
    settings = {"iters": args.iters, "rounds": args.rounds, "restarts": args.restarts, "jobs": args.jobs,
                "quick": args.quick, "cached": args.cached_only, "domain": domain}
    missing = [s for s in splits if s not in {d for d, _ in done}]
    text = report(done, settings, seconds, missing, note=args.note)
    print(text)
    print(f"(generalisation benchmark took {seconds:.0f} s)")
    if not args.no_write:
        from results_file import write_section

        write_section(HEADING, text, before="## Physical bounds")
        if EVIDENCE and not any(s.protocol == LORO for s in missing):
            path = write_measured_errors(done, rows, settings)
            print(f"wrote the leave-one-release-out errors of corrected estimates into {path}")
    return 0


def measured_errors(done: list[tuple[Split, list[RowResult]]],
                    rows: Sequence[Row]) -> dict[tuple, tuple[float | None, float | None]]:
    """Per domain-table row key (domain_table.row_key): the leave-one-release-out error of the
    estimate corrected by the other releases' measured rows and the published layout's tie
    distance with that evidence ((None, None) where none corrected it)."""
    from domain_table import key_of_row

    by_index = {r.index: r for r in rows}
    out: dict[tuple, tuple[float | None, float | None]] = {}
    for split, results in done:
        if split.protocol != LORO:
            continue
        for res in results:
            if res.error is not None:
                corrected = res.corrected
                out[key_of_row(by_index[res.index])] = (
                    round(res.error, 4) if corrected else None,
                    round(res.gap, 4) if corrected and res.gap is not None else None)
    return out


def write_measured_errors(done: list[tuple[Split, list[RowResult]]], rows: Sequence[Row], settings: dict) -> Path:
    """Write `loro_measured` and `gap_measured` into catalog/calibration-domain.json (planner.domain's
    band and near-tie tolerance of corrected estimates). They do not depend on the tolerances this
    run read from the file, so a second run writes the same values."""
    import json

    from domain_table import GAP_FIELD, MEASURED_FIELD, TARGET, row_key
    from mbridge_launch.base.atomic import atomic_write_text

    figures = measured_errors(done, rows)
    doc = json.loads(TARGET.read_text(encoding="utf-8"))
    keys = [row_key(entry) for entry in doc["rows"]]
    if len(set(keys)) != len(keys):  # two rows one key: a figure would land on the wrong row
        raise SystemExit(f"{TARGET}: rows that domain_table.ROW_KEY does not tell apart; widen ROW_KEY")
    for entry in doc["rows"]:
        entry[MEASURED_FIELD], entry[GAP_FIELD] = figures.get(row_key(entry), (None, None))
    doc["measured_settings"] = {k: settings[k] for k in ("iters", "rounds", "restarts", "quick")}
    atomic_write_text(TARGET, json.dumps(doc, indent=1) + "\n")
    return TARGET


if __name__ == "__main__":
    sys.exit(main())
