"""Refits of the throughput constants on a subset of the published rows, run in parallel and
cached on disk (generalisation.py's held-out protocols need dozens of them).

A `Fit` names the rows (the releases fitted on, less one system or model when `drop` is set) and
the strength of the fit (accuracy.py's procedure: fit_ranked from the physical defaults,
regression plus ranking term, `iters` Nelder-Mead iterations per round, `rounds` ranking rounds,
`restarts` starts). Each start is a task of its own (start `seed` is fit_ranked's loop body from
perturbed(defaults, seed)), so two processes share the starts of many fits evenly; the start with
the lowest objective wins, the first one on a tie, as in fit_ranked.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from calibration_rows import Row, load_rows
from fitting import fit_ranked, objective, perturbed, prepared, rank_problems

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, order=True)
class Fit:
    train: tuple[str, ...]  # the releases whose rows are fitted on
    iters: int
    rounds: int
    restarts: int
    drop: tuple[str, str] | None = None  # (row attribute, value): rows left out as well (a held-out system or model)

    def rows(self, rows: Sequence[Row]) -> list[Row]:
        return [r for r in rows if r.release in self.train
                and (self.drop is None or getattr(r, self.drop[0]) != self.drop[1])]

    @property
    def label(self) -> str:
        return "+".join(self.train) + (f" without {self.drop[0]}={self.drop[1]}" if self.drop else "")


def code_digest() -> str:
    """What a cached refit depends on: the rows, the row reading and the whole planner (fit,
    throughput and memory models, search). Computed once per run, when the code is loaded: the
    processes fork from it, so an edit during a run does not rename its refits. Python files count
    by their meaning (meaning_of): an edit to a comment or a docstring keeps every refit."""
    h = hashlib.sha256()
    paths = [ROOT / "benchmarks/data/perf_calibration.csv", ROOT / "benchmarks/calibration_rows.py",
             *sorted((ROOT / "mbridge_launch/planner").glob("*.py"))]
    for path in paths:
        h.update(path.name.encode() + (meaning_of(path) if path.suffix == ".py" else path.read_bytes()))
    return h.hexdigest()[:12]


def meaning_of(path: Path) -> bytes:
    """A Python file's syntax tree without its docstrings (comments are not in the tree)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def cache_file(cache: Path, fit: Fit, seed: int, digest: str) -> Path:
    drop = f"_no-{fit.drop[0]}-{fit.drop[1]}" if fit.drop else ""
    return cache / f"{'+'.join(fit.train)}{drop}_seed{seed}_i{fit.iters}_r{fit.rounds}_{digest}.pickle"


def run_start(task: tuple[Fit, int, Path | None, str]) -> tuple[Fit, int, float, Any]:
    """One start of one refit (a process of its own), saved to the cache when there is one."""
    fit, seed, cache, digest = task
    from mbridge_launch.planner.throughput import Calibration

    rows = fit.rows(load_rows())
    problems = rank_problems(rows)
    cal = fit_ranked(rows, start=perturbed(Calibration(), seed), rounds=fit.rounds, iters=fit.iters,
                     problems=problems, restarts=1)
    value = objective(prepared(rows), problems, cal) if fit.restarts > 1 else 0.0
    if cache is not None:
        path = cache_file(cache, fit, seed, digest)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps((value, cal)))
        os.replace(tmp, path)  # atomic: a killed run leaves no half-written refit
    return fit, seed, value, cal


def cached(cache: Path | None, fit: Fit, seed: int, digest: str) -> tuple[float, Any] | None:
    if cache is None:
        return None
    path = cache_file(cache, fit, seed, digest)
    if not path.exists():
        return None
    return pickle.loads(path.read_bytes())  # noqa: S301 - our own file, written by run_start


def run_fits(fits: Iterable[Fit], jobs: int, cache: Path | None = None,
             cached_only: bool = False, log: Callable[[str], None] = print) -> dict[Fit, Any]:
    """The best start's constants of every fit in `fits` (starts read from `cache` where they are
    there). With `cached_only`, nothing is fitted and the fits with a start missing are left out."""
    digest = code_digest()
    wanted = sorted(set(fits), key=lambda f: (-len(f.train), f.drop is not None, f))  # the long fits first
    starts: dict[Fit, dict[int, tuple[float, Any]]] = {f: {} for f in wanted}
    todo = []
    for fit in wanted:
        for seed in range(fit.restarts):
            hit = cached(cache, fit, seed, digest)
            if hit is not None:
                starts[fit][seed] = hit
            elif not cached_only:
                todo.append((fit, seed, cache, digest))
    log(f"{len(wanted)} refits, {sum(f.restarts for f in wanted)} starts ({len(todo)} to run, {jobs} processes)")
    begun = time.time()

    def record(fit: Fit, seed: int, value: float, cal: Any) -> None:
        starts[fit][seed] = (value, cal)
        log(f"  fit on {fit.label}, start {seed}: " + (f"objective {value:.6g}" if fit.restarts > 1 else "done")
            + f" ({time.time() - begun:.0f} s)")

    if jobs <= 1 or len(todo) <= 1:
        for task in todo:
            record(*run_start(task))
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for future in as_completed([pool.submit(run_start, task) for task in todo]):
                record(*future.result())
    return {fit: min(sorted(found.items()), key=lambda item: item[1][0])[1][1]
            for fit, found in starts.items() if len(found) == fit.restarts}
