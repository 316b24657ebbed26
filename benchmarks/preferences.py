"""Validate the hand-set ranking preferences of planner/search.py on the published rows.

    python benchmarks/preferences.py [--no-write]

The ranking adds to log predicted speed a few hand-set terms (search.ranking_terms): the EP
credit (EP_CREDIT), the CP charge at short sequences (CP_CHARGE, CP_NEEDED_ABOVE) and the memory
charge (MEMORY_PRESSURE above MEMORY_COMFORT of HBM). For each term, two protocols:

- leave-one-model-out and leave-one-release-out (the rows carry `model` and `release`);
- on the training rows, the term's value is chosen from a small grid that includes 0 (the term
  removed), maximising the share of rows whose published (TP, PP, CP, EP) is the first choice
  (ties: the top-3 share, then the smaller magnitude); the other terms keep their values;
- the held-out rows are then ranked with that value and with 0.

The throughput constants are the committed ones (throughput.CAL): they were fitted on every row,
so this validates the preference terms, not the constants.

Fast: each request (model, system, GPUs, GBS, sequence, precision, variant) is searched once,
every (MBS, VP, recompute) variant of every rule-valid grid kept with the inputs of the terms
(log speed, memory fraction, EP, CP, sequence, pitfalls); each setting only re-ranks them in
Python, exactly as search._rank_key does (best variant per grid, then grids). Writes the
`## Ranking preferences` section of benchmarks/RESULTS.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_rows import GRAD_BYTES, Row, load_rows  # noqa: E402
from mbridge_launch.planner import search as S  # noqa: E402
from mbridge_launch.planner.pitfall_rules import layout_pitfalls, ranked_count  # noqa: E402
from mbridge_launch.planner.throughput import CAL, step_model  # noqa: E402

HEADING = "## Ranking preferences"


@dataclass(frozen=True)
class Setting:
    """The values of the preference terms a ranking uses (search.py's names)."""

    ep_credit: float
    cp_charge: float
    cp_needed_above: int
    memory_comfort: float
    memory_pressure: float


def committed() -> Setting:
    """The values search.py ships (0 for a term it has removed)."""
    return Setting(getattr(S, "EP_CREDIT", 0.0), getattr(S, "CP_CHARGE", 0.0), getattr(S, "CP_NEEDED_ABOVE", 8192),
                   getattr(S, "MEMORY_COMFORT", 0.8), getattr(S, "MEMORY_PRESSURE", 0.0))


# Each term: the Setting field it sets and its grid (0 = the term removed). The grids span the
# committed value by a few factors each way.
TERMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "EP_CREDIT": ("ep_credit", (0.0, 0.005, 0.01, 0.02, 0.04, 0.08)),
    "CP_CHARGE": ("cp_charge", (0.0, 0.0025, 0.005, 0.01, 0.015, 0.03)),
    "MEMORY_PRESSURE": ("memory_pressure", (0.0, 0.1, 0.3, 0.6, 1.0, 2.0)),
}


@dataclass(frozen=True)
class Variant:
    """One (MBS, VP, recompute) choice of a grid with what the ranking terms read."""

    grid: tuple  # (TP, PP, CP, EP, ETP, FSDP)
    log_speed: float
    memory_fraction: float
    ep: int
    cp: int
    seq: int
    pitfalls: int
    tail: tuple  # search._rank_key's tie-breaks: model-parallel size, EP, FSDP, VP, MBS


def _request_key(row: Row) -> tuple:
    L = row.layout
    return (row.model, row.system, L.world, L.gbs, L.seq_length, row.precision, row.mtp_layers, row.token_drop)


def variants(row: Row) -> list[Variant]:
    """Every variant search() weighs for the row's request (no pruning: the ranking under any
    setting is then exact)."""
    L0 = row.layout
    opts = S.Options(mtp_layers=row.mtp_layers, moe_token_drop=row.token_drop, grad_bytes=GRAD_BYTES)
    model = step_model(row.arch, row.hw, row.precision, "pretrain", mtp_layers=row.mtp_layers,
                       moe_token_drop=row.token_drop, grad_bytes=GRAD_BYTES, cal=CAL)
    out = []
    for grid in S.feasible_grids(row.arch, row.hw, L0.world or 1, gbs=L0.gbs, seq_length=L0.seq_length,
                                 precision=row.precision, options=opts):
        for trial, memory in S.grid_variants(row.arch, row.hw, grid, row.precision, "pretrain", opts):
            step = model.step(trial)
            frac = memory.total / memory.hbm_gb if memory.hbm_gb else 0.0
            out.append(Variant(
                grid=(trial.tp, trial.pp, trial.cp, trial.ep, trial.etp_size, trial.fsdp),
                log_speed=math.log(step.tokens_per_sec_per_gpu), memory_fraction=frac, ep=trial.ep, cp=trial.cp,
                seq=trial.seq_length, pitfalls=ranked_count(layout_pitfalls(trial, row.arch, row.hw)),
                tail=(trial.tp * trial.pp * trial.cp, trial.ep, trial.fsdp, trial.vp_size, trial.mbs)))
    return out


def utility(v: Variant, s: Setting) -> float:
    """search.utility under setting `s` (the same formula, the terms' values as parameters)."""
    u = v.log_speed - s.memory_pressure * max(0.0, v.memory_fraction - s.memory_comfort)
    u += s.ep_credit * math.log2(max(v.ep, 1))
    if v.seq <= s.cp_needed_above:
        u -= s.cp_charge * math.log2(max(v.cp, 1))
    return u


def ranked_grids(vs: list[Variant], s: Setting) -> list[tuple]:
    """The grids in search()'s order under `s`: each grid's best variant, then by the same key."""
    best: dict[tuple, tuple] = {}
    for v in vs:
        key = (v.pitfalls, -round(utility(v, s), 9), *v.tail)
        if v.grid not in best or key < best[v.grid]:
            best[v.grid] = key
    return [g for g, _ in sorted(best.items(), key=lambda item: item[1])]


def published_rank(row: Row, grids: list[tuple]) -> int | None:
    """Where the published (TP, PP, CP, EP) comes (1 = first choice), as accuracy.py reads it."""
    L = row.layout
    want = (L.tp, L.pp, L.cp, L.ep)
    return next((i + 1 for i, g in enumerate(grids) if g[:4] == want), None)


@dataclass
class Score:
    first: int = 0
    top3: int = 0
    n: int = 0

    def add(self, rank: int | None) -> None:
        self.n += 1
        self.first += rank == 1
        self.top3 += rank is not None and rank <= 3

    def text(self) -> str:
        if not self.n:
            return "-"
        return f"{self.first}/{self.n} ({100 * self.first / self.n:.1f}%), top 3 {self.top3}/{self.n}"


def score(ranks: dict[int, int | None], rows: Iterable[Row]) -> Score:
    out = Score()
    for r in rows:
        out.add(ranks[r.index])
    return out


def choose(value_ranks: dict[float, dict[int, int | None]], train: list[Row]) -> float:
    """The grid value with the most first choices on `train` (then top 3, then the smaller magnitude)."""
    def key(value: float) -> tuple:
        s = score(value_ranks[value], train)
        return (-s.first, -s.top3, abs(value))
    return min(value_ranks, key=key)


@dataclass
class Protocol:
    name: str
    chosen: list[tuple[str, float]]  # (held-out group, chosen value)
    with_value: Score
    with_zero: Score

    @property
    def improves(self) -> bool:
        """Held-out first choices up, or equal with more top-3 placements."""
        a, b = self.with_value, self.with_zero
        return (a.first, a.top3) > (b.first, b.top3)


def held_out(rows: list[Row], attr: str, value_ranks: dict[float, dict[int, int | None]]) -> Protocol:
    groups = sorted({getattr(r, attr) for r in rows})
    chosen, with_value, with_zero = [], Score(), Score()
    for g in groups:
        train = [r for r in rows if getattr(r, attr) != g]
        test = [r for r in rows if getattr(r, attr) == g]
        value = choose(value_ranks, train)
        chosen.append((g, value))
        for r in test:
            with_value.add(value_ranks[value][r.index])
            with_zero.add(value_ranks[0.0][r.index])
    return Protocol(f"leave-one-{attr}-out", chosen, with_value, with_zero)


def ranks_under(rows: list[Row], cache: dict[tuple, list[Variant]], s: Setting) -> dict[int, int | None]:
    by_request: dict[tuple, list[tuple]] = {}
    out = {}
    for r in rows:
        key = _request_key(r)
        if key not in by_request:
            by_request[key] = ranked_grids(cache[key], s)
        out[r.index] = published_rank(r, by_request[key])
    return out


def run(progress: Callable[[str], None] = print) -> tuple[str, dict[str, bool]]:
    start = time.time()
    rows = [r for r in load_rows() if r.valid]  # a layout that breaks the rules is never ranked
    cache: dict[tuple, list[Variant]] = {}
    for r in rows:
        key = _request_key(r)
        if key not in cache:
            cache[key] = variants(r)
    progress(f"{len(rows)} rows, {len(cache)} requests searched once ({time.time() - start:.0f} s)")
    base = committed()
    base_ranks = ranks_under(rows, cache, base)
    lines = [HEADING + " (`python benchmarks/preferences.py`)", "",
             (f"Each hand-set ranking term of `planner/search.py`, validated on the {len(rows)} rule-valid published rows "
              f"({len(cache)} requests): leave-one-model-out and leave-one-release-out, the term's value chosen on the "
              "training rows from a grid that includes 0 (most first choices, then top 3, then the smaller magnitude; "
              "the other terms at their committed values), the held-out rows ranked with that value and with 0. "
              "The throughput constants are the committed ones, fitted on every row: this validates the preference "
              "terms, not the constants. A term is kept only if it improves the held-out first-choice count (or, "
              "equal there, the top-3 count) over 0 in both protocols. MEMORY_PRESSURE's committed value is the one "
              "the folds choose (set from this benchmark), so the committed ranking's figure below is in-sample; "
              "the held-out columns are not. Removed terms show as 0 in the committed column."), "",
             f"Committed ranking ({_setting_text(base)}): published layout first {score(base_ranks, rows).text()}.", "",
             "| term | committed | grid | protocol | chosen per held-out group | held-out with chosen | held-out with 0 | improves |",
             "|---|---|---|---|---|---|---|---|"]
    verdicts: dict[str, bool] = {}
    in_sample: list[str] = []
    for term, (fld, grid) in TERMS.items():
        value_ranks = {v: ranks_under(rows, cache, replace(base, **{fld: v})) for v in grid}
        protocols = [held_out(rows, attr, value_ranks) for attr in ("model", "release")]
        verdicts[term] = all(p.improves for p in protocols)
        for p in protocols:
            chosen = ", ".join(f"{g}: {v:g}" for g, v in p.chosen)
            lines.append(f"| {term} | {getattr(base, fld):g} | {', '.join(f'{v:g}' for v in grid)} | {p.name} | {chosen} | "
                         f"{p.with_value.text()} | {p.with_zero.text()} | {'yes' if p.improves else 'no'} |")
        all_rows = {v: score(r, rows) for v, r in value_ranks.items()}
        in_sample.append(f"{term}: " + ", ".join(f"{v:g} -> {s.first}" for v, s in all_rows.items()))
        progress(f"{term}: in-sample first choices per value "
                 + ", ".join(f"{v:g}: {s.first}" for v, s in all_rows.items())
                 + f"; kept: {verdicts[term]}")
    lines += ["", "In-sample first choices (all rows) per value: " + "; ".join(in_sample) + ".",
              "", "Verdict: " + "; ".join(f"{term} {'kept' if ok else 'removed (no held-out gain)'}"
                                          for term, ok in verdicts.items()) + ".",
              f"(took {time.time() - start:.0f} s)", ""]
    return "\n".join(lines), verdicts


def _setting_text(s: Setting) -> str:
    return (f"EP_CREDIT={s.ep_credit:g}, CP_CHARGE={s.cp_charge:g} up to {s.cp_needed_above} tokens, "
            f"MEMORY_PRESSURE={s.memory_pressure:g} above {s.memory_comfort:.0%} of HBM")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    text, _ = run()
    print(text)
    if not args.no_write:
        from results_file import write_section

        write_section(HEADING, text, before="## Physical bounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
