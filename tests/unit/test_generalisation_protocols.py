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


def test_splits_of_rows_gives_both_protocols():
    splits = g.splits_of([row(r) for r in RELEASES])
    assert [s.protocol for s in splits].count(g.LORO) == 4
    assert [s.protocol for s in splits].count(g.TIME) == 3
    assert splits[-1].label == "25.09+25.11+26.02 -> 26.02.01"


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


def test_one_refit_serves_every_split_with_the_same_training_releases():
    splits = g.splits_of([row(r) for r in RELEASES])
    fits = g.fits_needed(splits)
    assert len(fits) == 6  # 4 + 3 splits, the last time-ordered one trains as leave-26.02.01-out
    assert [s.protocol for s in fits[("25.09", "25.11", "26.02")]] == [g.LORO, g.TIME]
    assert sum(len(group) for group in fits.values()) == len(splits)
    assert {s for group in fits.values() for s in group} == set(splits)
    assert [len(train) for train in fits] == sorted((len(train) for train in fits), reverse=True)


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


# stand-ins for one refit start and one scoring (module level: the worker processes unpickle them)
OBJECTIVE = {0: 3.0, 1: 1.0, 2: 2.0, 3: 1.0}  # seeds 1 and 3 tie: the first one wins, as in fit_ranked


def fake_start(task: tuple) -> tuple:
    train, seed = task[0], task[1]
    return train, seed, OBJECTIVE[seed], f"cal of {'+'.join(train)} seed {seed}"


def fake_score(task: tuple) -> list:
    splits, cal = task
    return [(s, [cal]) for s in splits]


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_all_scores_every_split_with_its_refit_best_start(monkeypatch, jobs):
    monkeypatch.setattr(g, "_run_start", fake_start)
    monkeypatch.setattr(g, "_score", fake_score)
    splits = g.splits_of([row(r) for r in RELEASES])
    done = g.run_all(splits, iters=1, rounds=1, restarts=4, jobs=jobs)
    assert [s for s, _ in done] == splits  # every split, in the splits' order
    for s, cals in done:
        assert cals == [f"cal of {'+'.join(s.train)} seed 1"]


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
                                 0.0, corrected) for r, err, corrected in zip(rows, (0.012, -0.3, 0.02),
                                                                              (True, False, True))])]
    errors = g.measured_errors(done, rows)
    entries = [dt._row_entry(r, None, None, None) for r in rows]
    assert [errors[dt.row_key(e)] for e in entries] == [0.012, None, 0.02]  # not corrected: no figure
    previous = {"rows": [{**e, dt.MEASURED_FIELD: errors[dt.row_key(e)]} for e in entries],
                "measured_settings": {"iters": 800}}
    rebuilt = dt.carry_measured({"rows": [dict(e) for e in reversed(entries)]}, previous)
    assert [e.get(dt.MEASURED_FIELD) for e in rebuilt["rows"]] == [0.02, None, 0.012]
    assert rebuilt["measured_settings"] == {"iters": 800}
    # the shipped table's rows are told apart by the key the errors are written by
    keys = [dt.row_key(e) for e in json.loads(dt.TARGET.read_text(encoding="utf-8"))["rows"]]
    assert len(set(keys)) == len(keys)
