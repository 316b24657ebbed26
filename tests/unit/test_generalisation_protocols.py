"""The split logic of benchmarks/generalisation.py (which releases train and which is predicted,
per protocol) and the copy-the-last-layout baseline's choice of counterpart, on stand-in rows:
no fit runs here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import generalisation as g  # noqa: E402

RELEASES = ["26.02.01", "25.09", "26.02", "25.11"]  # out of order on purpose


def row(release: str, model: str = "llama3_8b", system: str = "h100", gpus: int = 8, precision: str = "fp8cs",
        tp: int = 1, pp: int = 1, variant: str = "", gbs: int = 128, seq: int = 8192,
        tps: float | None = 1000.0) -> SimpleNamespace:
    layout = SimpleNamespace(world=gpus, tp=tp, pp=pp, cp=1, ep=1, gbs=gbs, seq_length=seq)
    return SimpleNamespace(release=release, model=model, system=system, precision=precision, variant=variant,
                           layout=layout, tokens_per_sec=tps)


def test_releases_sort_in_time_order_not_as_text():
    assert g.releases_of([row(r) for r in RELEASES]) == ["25.09", "25.11", "26.02", "26.02.01"]
    assert g.release_key("26.02.01") > g.release_key("26.02") > g.release_key("25.11")


def test_leave_one_release_out_trains_on_every_other_release():
    splits = g.leave_one_release_out(RELEASES)
    assert [s.test for s in splits] == ["25.09", "25.11", "26.02", "26.02.01"]
    for s in splits:
        assert s.protocol == g.LORO
        assert s.test not in s.train
        assert sorted(s.train + (s.test,), key=g.release_key) == sorted(RELEASES, key=g.release_key)


def test_time_ordered_trains_on_the_past_and_predicts_the_next_release():
    splits = g.time_ordered(RELEASES)
    assert [(s.train, s.test) for s in splits] == [
        (("25.09",), "25.11"),
        (("25.09", "25.11"), "26.02"),
        (("25.09", "25.11", "26.02"), "26.02.01"),
    ]
    for s in splits:
        assert s.protocol == g.TIME
        assert all(g.release_key(r) < g.release_key(s.test) for r in s.train)


def test_splits_of_rows_gives_every_protocol():
    splits = g.splits_of([row(r) for r in RELEASES])
    assert [s.protocol for s in splits].count(g.LORO) == 4
    assert [s.protocol for s in splits].count(g.LINE) == 3
    assert [s.protocol for s in splits].count(g.TIME) == 3
    assert splits[-1].label == "25.09+25.11+26.02 -> 26.02.01"


def test_a_release_line_is_held_out_with_its_patch_releases():
    """26.02.01 is a patch of 26.02: they are held out together, so neither corrects the other;
    a release without patches is held out alone; every release is predicted exactly once."""
    splits = g.leave_one_release_line_out(RELEASES)
    assert [(s.train, s.tests) for s in splits] == [
        (("25.11", "26.02", "26.02.01"), ("25.09",)),
        (("25.09", "26.02", "26.02.01"), ("25.11",)),
        (("25.09", "25.11"), ("26.02", "26.02.01")),
    ]
    assert sorted(r for s in splits for r in s.tests) == sorted(RELEASES)
    assert splits[-1].label == "25.09+25.11 -> 26.02+26.02.01"


def test_the_release_line_protocol_needs_no_refit_of_its_own():
    """Its splits train on release sets the other protocols fit anyway (the whole line out is the
    time-ordered step before the line): scoring it costs no refit."""
    from calibration_rows import load_rows

    rows = load_rows()
    others = {f for s in g.splits_of(rows) if s.protocol != g.LINE
              for f in g.split_fits(s, rows, g.Strength(1, 1, 1), {"iters": 1, "rounds": 1, "restarts": 1})}
    for split in g.leave_one_release_line_out(g.releases_of(rows)):
        assert set(g.split_fits(split, rows, g.Strength(1, 1, 1), {"iters": 1, "rounds": 1, "restarts": 1})) <= others


def test_counterpart_is_the_same_request_in_the_latest_training_release():
    held = row("26.02.01", tp=2)
    older, newer = row("25.09", tp=4), row("26.02", tp=1)
    other_system = row("26.02", system="b200", tp=8)
    other_gpus = row("26.02", gpus=16, tp=8)
    other_precision = row("26.02", precision="bf16", tp=8)
    assert g.counterpart(held, [older, newer, other_system, other_gpus, other_precision]) is newer
    assert g.counterpart(held, [older, other_system]) is older  # the latest release that HAS the request


def test_counterpart_none_when_no_training_release_has_the_request():
    held = row("25.11", model="qwen3_30b_a3b")
    assert g.counterpart(held, [row("25.09"), row("26.02", model="qwen3_30b_a3b", gpus=16)]) is None


@pytest.mark.parametrize("field, value", [("variant", "tokendrop"), ("gbs", 256), ("seq", 4096)])
def test_counterpart_prefers_the_closest_row_within_the_release(field, value):
    held = row("26.02", **{field: value})
    close, far = row("25.11", tp=2, **{field: value}), row("25.11", tp=4)
    assert g.counterpart(held, [far, close]) is close
    assert g.counterpart(held, [close, far]) is close


def test_counterpart_prefers_a_row_with_a_measured_speed():
    held = row("26.02")
    unmeasured, measured = row("25.11", tp=2, tps=None), row("25.11", tp=4)
    assert g.counterpart(held, [unmeasured, measured]) is measured


STRENGTH = g.Strength(iters=1, rounds=1, restarts=4)
DOMAIN = {"iters": 1, "rounds": 1, "restarts": 1}


def test_no_refit_of_a_split_sees_the_held_out_release():
    """The constants, the inner leave-one-release-out and the domain table's refits of a split
    are all fitted on its training releases (training_domain.py): the held-out release shapes
    neither the predictions nor the near-tie tolerance."""
    rows = [row(r, system=system, model=model) for r in RELEASES for system in ("h100", "b200")
            for model in ("llama3_8b", "qwen3_30b_a3b")]
    for split in g.splits_of(rows):
        fits = g.split_fits(split, rows, STRENGTH, DOMAIN)
        assert all(split.test not in f.train and set(f.train) <= set(split.train) for f in fits)
        assert fits[0] == STRENGTH.fit(split.train)  # the constants the rows are predicted with
        inner = [f for f in fits[1:] if f.drop is None]
        assert sorted(f.train for f in inner) == sorted(
            tuple(x for x in split.train if x != held) for held in split.train) if len(split.train) > 1 else not inner
        held_out = sorted(f.drop for f in fits if f.drop is not None)
        assert held_out == [("model", "llama3_8b"), ("model", "qwen3_30b_a3b"), ("system", "b200"), ("system", "h100")]
        assert all(f.train == split.train for f in fits if f.drop is not None)


def test_one_refit_serves_every_split_that_needs_it():
    rows = [row(r) for r in RELEASES]
    splits = g.splits_of(rows)
    by_split = {s: g.split_fits(s, rows, STRENGTH, DOMAIN) for s in splits}
    last_time, loro_latest = splits[-1], splits[3]
    assert (last_time.protocol, loro_latest.protocol) == (g.TIME, g.LORO)
    assert by_split[last_time] == by_split[loro_latest]  # same training releases, same refits
    distinct = {f for fits in by_split.values() for f in fits if f.drop is None}
    # the constants of 6 training sets (4 + 3 splits, one shared) and of the inner splits: every
    # pair of releases (C(4, 2) = 6, 25.09+25.11 a time-ordered split's own) and 25.11 alone
    # (25.09 alone is a time-ordered split's own)
    assert len(distinct) == 6 + 5 + 1


def result(valid: bool = True, error: float | None = 0.1, rank: int | None = 1, in_tie: bool = True,
           size: int = 2, has_copy: bool = True, copy_first: bool = False) -> g.RowResult:
    return g.RowResult(g.LORO, "a -> b", 0, "row", valid, error, 0.2, 0.05 if has_copy else None, has_copy,
                       copy_first, rank, "TP1 PP1 CP1 EP1", in_tie, size, 0.1)


def test_figures_count_rank_and_near_tie_on_valid_rows_only():
    f = g.figures([result(rank=1, size=2), result(rank=3, size=g.TOP, in_tie=False, has_copy=False),
                   result(rank=None, in_tie=False, size=4, copy_first=True), result(valid=False, rank=1, error=-0.3)])
    assert (f.rows, f.measured, f.valid) == (4, 4, 3)
    assert (f.first, f.top3, f.in_tie) == (1, 2, 1)
    assert f.tie_median == 4 and f.tie_capped == 1
    assert f.error == pytest.approx(0.1)  # median of |0.1|, |0.1|, |0.1|, |-0.3|
    assert (f.no_copy, f.copy_valid, f.copy_first, f.first_with_copy) == (1, 2, 1, 1)


def test_the_report_has_a_column_per_protocol_with_its_own_figures():
    done = [(g.Split(g.LORO, ("a",), "b"), [result(rank=1), result(rank=1)]),
            (g.Split(g.LINE, ("a",), "b", ("c",)), [result(rank=2, in_tie=False, size=5)]),
            (g.Split(g.TIME, ("a",), "b"), [result(rank=None, in_tie=False, size=7)])]
    settings = {"iters": 1, "rounds": 1, "restarts": 1, "jobs": 1, "quick": True, "cached": True,
                "domain": {"iters": 1, "rounds": 1, "restarts": 1}}
    text = g.report(done, settings, 1.0)
    lines = text.splitlines()
    assert f"| measure | target | {g.LORO} | {g.LINE} | {g.TIME} |" in lines
    size = next(x for x in lines if x.startswith("| median near-tie set size |"))
    cells = [c.strip() for c in size.strip("|").split("|")]
    assert [c.split(" ")[0] for c in cells[2:]] == ["2", "5", "7"]
    first = next(x for x in lines if x.startswith("| planner first choice = published |"))
    assert [c.strip() for c in first.strip("|").split("|")][2:] == ["100.0% (2/2)", "0.0% (0/1)", "0.0% (0/1)"]
    assert "| leave-one-release-line-out | a -> b+c |" in text


# stand-ins for one refit start and one scoring (module level: the worker processes unpickle them)
OBJECTIVE = {0: 3.0, 1: 1.0, 2: 2.0, 3: 1.0}  # seeds 1 and 3 tie: the first one wins, as in fit_ranked


def fake_start(task: tuple) -> tuple:
    fit, seed = task[0], task[1]
    return fit, seed, OBJECTIVE[seed] if fit.restarts > 1 else 0.0, f"cal of {fit.label} seed {seed}"


def fake_score(task: tuple) -> list:
    splits, cals, strength, _domain = task
    assert len({s.train for s in splits}) == 1  # one task per training set
    return [(split, sorted(cals.values()) + [cals[strength.fit(split.train)]]) for split in splits]


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_all_scores_every_split_with_the_best_start_of_each_of_its_refits(monkeypatch, jobs):
    import refits

    monkeypatch.setattr(refits, "run_start", fake_start)
    monkeypatch.setattr(g, "_score", fake_score)
    splits = g.splits_of([row(r) for r in RELEASES])
    done = g.run_all(splits, STRENGTH, jobs=jobs, domain=DOMAIN)
    assert [s for s, _ in done] == splits  # every split, in the splits' order
    for s, cals in done:
        assert cals[-1] == f"cal of {'+'.join(s.train)} seed 1"  # the constants its rows are predicted with
        # every refit it needs, each its best start (domain refits: one start, seed 0)
        assert all(c.endswith("seed 1") or (" without " in c and c.endswith("seed 0")) for c in cals)


def test_splits_sharing_training_releases_build_one_table_and_score_each_prediction_once(monkeypatch):
    """The last time-ordered step predicts what leave-out-the-latest predicts from the same releases,
    and a release without patches is its own release line: one table per training set, one scoring
    per (training, predicted) pair, the rows relabelled for each protocol."""
    tables, scorings = [], []
    monkeypatch.setattr(g, "training_table", lambda train, *a: tables.append(train) or f"table of {train}")

    def fake_split(split, rows, cals, strength, domain, table=None):
        scorings.append((split.train, split.tests, table))
        return [result()]

    monkeypatch.setattr(g, "score_split", fake_split)
    splits = g.splits_of([row(r) for r in RELEASES])
    by_train: dict = {}
    for s in splits:
        by_train.setdefault(s.train, []).append(s)
    done = [pair for group in by_train.values() for pair in g.score_splits(group, [], {}, STRENGTH, DOMAIN)]
    assert sorted(tables) == sorted(by_train) and len(tables) == len(set(tables))
    assert len(scorings) == len({(s.train, s.tests) for s in splits}) < len(splits)
    assert all(table == f"table of {train}" for train, _, table in scorings)
    assert {(s.protocol, s.label) for s, _ in done} == {(s.protocol, s.label) for s in splits}
    assert all((r.protocol, r.split) == (s.protocol, s.label) for s, res in done for r in res)


def test_figures_put_both_baselines_on_the_copy_rows_and_fall_back_to_the_table():
    rows = [result(error=0.01), result(error=0.03), result(error=0.5, has_copy=False)]  # copy 5%, MFU 20%
    f = g.figures(rows)
    assert f.error_with_copy == pytest.approx(0.02) and f.mfu_with_copy == pytest.approx(0.2)
    # copy where a counterpart exists, else the median-MFU table: |0.05|, |0.05|, |0.2|
    assert f.copy_or_mfu == pytest.approx(0.05)


def test_the_errors_of_corrected_estimates_go_to_their_own_rows_and_survive_a_domain_table_rewrite():
    import domain_table as dt
    from mbridge_launch.planner.calibration_rows import load_rows

    rows = [r for r in load_rows() if r.tokens_per_sec][:3]
    split = g.Split(g.LORO, ("x",), rows[0].release)
    done = [(split, [g.RowResult(g.LORO, "", r.index, r.label, True, err, None, None, False, False, 1, "", True, 1,
                                 0.0, corrected, gap)
                     for r, err, corrected, gap in zip(rows, (0.012, -0.3, 0.02), (True, False, True),
                                                      (0.0, 0.04, 0.031))])]
    figures = g.measured_errors(done, rows)
    entries = [dt._row_entry(r, None, None, None) for r in rows]
    # (loro_measured, gap_measured); not corrected: no figure
    assert [figures[dt.row_key(e)] for e in entries] == [(0.012, 0.0), (None, None), (0.02, 0.031)]
    previous = {"rows": [{**e, dt.MEASURED_FIELD: figures[dt.row_key(e)][0], dt.GAP_FIELD: figures[dt.row_key(e)][1]}
                         for e in entries],
                "measured_settings": {"iters": 800}}
    rebuilt = dt.carry_measured({"rows": [dict(e) for e in reversed(entries)]}, previous)
    assert [e.get(dt.MEASURED_FIELD) for e in rebuilt["rows"]] == [0.02, None, 0.012]
    assert [e.get(dt.GAP_FIELD) for e in rebuilt["rows"]] == [0.031, None, 0.0]
    assert rebuilt["measured_settings"] == {"iters": 800}
    # the shipped table's rows are told apart by the key the errors are written by
    keys = [dt.row_key(e) for e in json.loads(dt.TARGET.read_text(encoding="utf-8"))["rows"]]
    assert len(set(keys)) == len(keys)


def test_the_acceptance_compares_each_baseline_on_the_rows_it_predicts():
    """Below both baselines: the planner's median against the table's on every measured row, and
    against copy's on the rows copy predicts; a worse planner fails either comparison."""
    rows = [result(error=0.01), result(error=0.03), result(error=0.5, has_copy=False)]  # copy 5%, MFU 20%
    f = g.figures(rows)
    assert f.error == pytest.approx(0.03) and f.error_with_copy == pytest.approx(0.02)
    assert f.error_without_copy == pytest.approx(0.5)
    assert g.below_both(f) is True
    worse_than_copy = g.figures([result(error=0.06), result(error=0.07), result(error=0.01, has_copy=False)])
    assert g.below_both(worse_than_copy) is False  # 6.5% on copy's rows against its 5%
    worse_than_table = g.figures([result(error=0.01), result(error=0.3, has_copy=False),
                                  result(error=0.4, has_copy=False)])
    assert g.below_both(worse_than_table) is False  # 30% on every row against the table's 20%


def test_a_split_is_scored_with_its_training_releases_table():
    """score_split end to end on the real rows of one time-ordered step (25.09 -> 25.11), the
    committed constants standing in for every refit: every held-out row scored, with a near-tie
    tolerance from the table of 25.09 alone."""
    from mbridge_launch.planner.calibration_rows import load_rows
    from mbridge_launch.planner.throughput import CAL

    rows = load_rows()
    split = g.Split(g.TIME, ("25.09",), "25.11")
    strength = g.Strength(1, 1, 1)
    cals = {f: CAL for f in g.split_fits(split, rows, strength, DOMAIN)}
    results = g.score_split(split, rows, cals, strength, DOMAIN)
    held_out = [r for r in rows if r.release == "25.11"]
    assert [r.index for r in results] == [r.index for r in held_out]
    assert all(r.error is not None for r in results if r.valid)
    assert all(0.0 <= r.band <= 1.0 and r.tie_size >= 1 for r in results)
    assert any(r.corrected for r in results)  # 25.09's rows correct the configurations it measured
    # the published layout's tie distance (written as gap_measured) is the nested table's measure,
    # and the near-tie set holds the published layout exactly when the distance is within the band
    from domain_table import published_gap

    by_index = {r.index: r for r in held_out}
    train = tuple(r for r in rows if r.release == "25.09")
    searched: dict = {}
    for res in results:
        gap = published_gap(by_index[res.index], CAL, searched, train)
        assert res.gap == gap
        if res.valid and res.rank is not None:
            assert res.in_tie == (gap <= res.band + 1e-12)


def test_a_refit_cache_key_ignores_comments_and_docstrings_not_code(tmp_path):
    """The cache of refits is named by the planner's code: an edit to a comment or a docstring keeps
    it, an edit to what runs does not (a one-character change of a constant)."""
    from refits import meaning_of

    def write(name: str, text: str):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return meaning_of(path)

    base = write("a.py", '"""Module."""\nX = 1  # one\n\n\nclass C:\n    """C."""\n\n    def f(self):\n        """f."""\n        return X\n')
    reworded = write("b.py", '"""Module, reworded."""\nX = 1  # still one\n\n\nclass C:\n    """Another."""\n\n    def f(self):\n        return X\n')
    changed = write("c.py", '"""Module."""\nX = 2  # one\n\n\nclass C:\n    """C."""\n\n    def f(self):\n        """f."""\n        return X\n')
    only_doc = write("d.py", 'def g():\n    """only a docstring."""\n')
    assert base == reworded and base != changed
    assert only_doc == write("e.py", "def g():\n    pass\n")
