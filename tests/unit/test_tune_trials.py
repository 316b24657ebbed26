"""`tune`'s trials and its rewrite of the Plan, without a cluster: the near-tie set read from a
Plan (the planner's own search, domain band and near_tie_set), --max-layouts, each trial Plan
(overrides, mock data, its own checkpoint directory, length, time limit), and the tuned Plan (the
winning layout as execution-class overrides, GBS kept, a tune record, preflight still passes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cli_helpers import run_cli
from gate_fixtures import recommend_base_plan
from mbridge_launch.base.errors import UserError
from mbridge_launch.plan.changecontrol import EXECUTION, classify
from mbridge_launch.plan.model import load_plan, plan_from_dict, save_plan
from mbridge_launch.planner.rules import evolve
from mbridge_launch.tune import result as R
from mbridge_launch.tune import session as S
from mbridge_launch.tune import trials as T


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory) -> Path:
    """`recommend -o` for Llama 3.2 1B on 2 H100 (the e2e tests' request) with the user's own
    layout: the 1-GPU recipe's MBS 1 and GBS 512. recommend takes the planner's first layout (and
    weak-scales GBS) unless the user sets the layout, so the user sets it here: the near-tie set
    holds several layouts and the Plan's own (MBS 1) is not the planner's first."""
    directory = tmp_path_factory.mktemp("tune")
    data = recommend_base_plan(directory, "train.micro_batch_size=1", "train.global_batch_size=512")
    assert data["parallelism"]["mbs"] == 1 and data["parallelism"]["gbs"] == 512  # the user's layout kept
    return save_plan(plan_from_dict(data), directory / "plan.yaml")


@pytest.fixture
def plan(plan_path):
    return load_plan(plan_path)


def _expected_near_ties(plan):
    from mbridge_launch.planner.domain import assess
    from mbridge_launch.planner.near_tie import near_tie_set
    from mbridge_launch.planner.search import Options, search

    req = T.plan_request(plan)
    # with the Plan's recipe settings, as the planner's entry point estimates every layout
    settings = tuple(T._planner_request(req).settings.items())
    found = search(req.arch, req.hardware, req.gpus, gbs=req.gbs, seq_length=req.seq_length, precision=req.precision,
                   goal=req.goal, top=20, options=Options(settings=settings))
    band = assess(req.model, req.arch, req.hardware.name, req.precision, req.goal, req.seq_length, req.gpus).band
    return near_tie_set(found.candidates, band.median)


def test_the_near_tie_set_of_the_plans_request_in_the_planners_order_with_its_own_layout(plan):
    expected = _expected_near_ties(plan)
    assert len(expected) >= 3  # the premise: the planner cannot separate several layouts here
    layouts = T.near_tie_layouts(plan, max_layouts=4)
    assert len(layouts) == 4
    assert [item.rank for item in layouts[:3]] == [rank for rank, _ in expected[:3]]
    assert [item.candidate for item in layouts[:3]] == [c for _, c in expected[:3]]
    own = [item for item in layouts if item.own]
    assert len(own) == 1 and own[0] is layouts[-1]  # the recipe's MBS 1 is not among the first three
    assert T.same_layout(own[0].candidate.layout, plan.parallelism)
    assert own[0].candidate.tokens_per_sec_per_gpu > 0  # the planner's estimate of it, for the card


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_max_layouts_caps_the_set_and_keeps_the_plans_own(plan, cap):
    layouts = T.near_tie_layouts(plan, max_layouts=cap)
    assert len(layouts) == cap
    assert layouts[-1].own and sum(item.own for item in layouts) == 1


def test_max_layouts_below_one_is_bad_input(plan):
    with pytest.raises(UserError) as err:
        T.near_tie_layouts(plan, max_layouts=0)
    assert err.value.key == "tune.max_layouts"


def test_each_trial_is_a_short_mock_run_of_its_layout_in_its_own_directory(plan, tmp_path):
    layouts = T.near_tie_layouts(plan, max_layouts=4)
    trials = T.trial_plans(plan, layouts, tmp_path / "session", steps=12, time_limit="00:07:00")
    saves = set()
    for trial in trials:
        p = trial.plan
        assert p.name == f"{plan.name}-tune-{trial.index}"
        assert p.dataset.selector == "mock" and not p.dataset.data_paths
        iters = [o for o in p.overrides if o.key == "train.train_iters"]
        assert [o.value for o in iters] == ["12"]
        assert p.cluster.time == "00:07:00" and not p.auto_rollback.enabled
        assert p.checkpoint.save == p.checkpoint.load
        save = Path(p.checkpoint.save)
        assert save.is_relative_to(tmp_path / "session") and not save.exists()
        own_dir = Path(plan.checkpoint.save)
        assert not save.is_relative_to(own_dir) and save != own_dir
        saves.add(save)
        assert T.same_layout(p.parallelism, trial.layout.candidate.layout)
        assert p.parallelism.gbs == plan.parallelism.gbs and p.parallelism.seq_length == plan.parallelism.seq_length
        for o in p.overrides:
            if o.source == "tune" and o.key != "train.train_iters":
                assert o.change_class == EXECUTION == classify(o.key).change_class
        assert p.tune is None
    assert len(saves) == len(trials)
    # the layout reaches the trainer: the planner's first choice runs with its MBS
    first = trials[0].plan
    mbs = [o.value for o in first.overrides if o.key == "train.micro_batch_size"]
    assert mbs == [str(layouts[0].candidate.layout.mbs)] != [str(plan.parallelism.mbs)]
    assert T.gpu_hours_total(trials) == pytest.approx(len(trials) * plan.cluster.total_gpus * 7 / 60)


def test_trial_roots_are_new_each_session(plan):
    assert T.trial_root(plan) != T.trial_root(plan)
    assert T.trial_root(plan).parent == Path(plan.checkpoint.save).parent


def test_steps_below_one_is_bad_input(plan, tmp_path):
    with pytest.raises(UserError):
        T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=1), tmp_path, steps=0)


def _outcome(trial, step, state="completed", problem=None):
    return S.Outcome(trial, run_id=trial.index, job_id=str(100 + trial.index), state=state, step_time_s=step,
                     tokens_per_sec_per_gpu=None if step is None else 1000 / step, peak_memory_gb=10.0, problem=problem)


def test_the_fastest_measured_trial_wins_ties_go_to_the_planners_order(plan, tmp_path):
    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=4), tmp_path)
    outcomes = [_outcome(trials[0], 0.03), _outcome(trials[1], 0.02), _outcome(trials[2], 0.02),
                _outcome(trials[3], None, "failed", "gpu_oom on rank 0: out of memory")]
    assert S.fastest(outcomes) is outcomes[1]
    assert S.fastest([outcomes[3]]) is None


def test_the_tuned_plan_runs_the_winner_as_execution_changes_with_gbs_kept(plan, plan_path, tmp_path):
    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=4), tmp_path)
    outcomes = [_outcome(t, 0.04 - 0.005 * t.index) for t in trials[:3]] + [_outcome(trials[3], 0.05)]
    winner = S.fastest(outcomes)
    assert winner is outcomes[2] and not winner.trial.layout.own
    record = R.tune_record(outcomes, winner, 30)
    new = R.tuned_plan(plan, winner, record)
    assert T.same_layout(new.parallelism, winner.trial.layout.candidate.layout)
    assert new.parallelism.gbs == plan.parallelism.gbs and new.parallelism.seq_length == plan.parallelism.seq_length
    before = {o.key: o for o in plan.overrides}
    changed = [o for o in new.overrides if before.get(o.key) != o]
    assert changed and all(o.change_class == EXECUTION == classify(o.key).change_class for o in changed)
    assert all(o.source == "tune" for o in changed)
    assert [o for o in new.overrides if o.change_class == "convergence"] == \
        [o for o in plan.overrides if o.change_class == "convergence"]
    assert new.dataset == plan.dataset and new.checkpoint == plan.checkpoint  # the Plan's own run, not a trial's
    assert new.estimates.tokens_per_sec_per_gpu == round(winner.trial.layout.candidate.tokens_per_sec_per_gpu)
    assert new.tune.winner == winner.trial.plan.name
    assert [t.won for t in new.tune.trials] == [o is winner for o in outcomes]
    assert new.tune.trials[2].step_time_s == pytest.approx(0.025) and new.tune.trials[2].job_id == "103"
    out = tmp_path / "tuned.yaml"
    R.write_tuned(plan, new, out)
    assert load_plan(out) == new  # the schema reads the record back
    proc = run_cli("preflight", str(out), "--no-cluster")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_when_the_plans_own_layout_wins_only_the_record_changes(plan, tmp_path):
    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=2), tmp_path)
    outcomes = [_outcome(trials[0], 0.03), _outcome(trials[1], 0.01)]
    new = R.tuned_plan(plan, S.fastest(outcomes), R.tune_record(outcomes, outcomes[1], 30))
    assert new.model_copy(update={"tune": None}) == plan
    assert new.tune.winner == trials[1].plan.name and new.plan_hash() != plan.plan_hash()


def test_a_layout_with_another_gbs_is_refused_as_a_convergence_change(plan):
    from mbridge_launch.tune.layout_change import apply_layout

    req = T.plan_request(plan)
    cand = T.near_tie_layouts(plan, max_layouts=2)[0].candidate
    other = dataclasses.replace(cand, layout=evolve(cand.layout, gbs=plan.parallelism.gbs * 2))
    with pytest.raises(UserError) as err:
        apply_layout(plan, other, req.arch, req.precision)
    assert err.value.key == "tune.convergence_change"


def test_a_plan_never_tuned_keeps_its_hash(plan, plan_path):
    text = plan_path.read_text()
    assert plan.plan_hash() in text.splitlines()[0]
    assert "tune" not in plan.canonical_dict()


def test_dry_run_prints_the_trials_and_their_gpu_hours(plan_path):
    import json

    proc = run_cli("tune", str(plan_path), "--dry-run", "--format", "json", "--max-layouts", "3")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["dry_run"] and len(answer["trials"]) == 3
    assert answer["gpu_hours"] == pytest.approx(3 * 2 * 15 / 60)
    assert load_plan(plan_path).tune is None  # nothing written


@pytest.mark.parametrize("args, key", [(("--max-layouts", "0"), "at least 1"), (("--time-limit", "soon"), "soon"),
                                       (("--steps", "0"), "at least 1")])
def test_bad_options_are_one_line_and_exit_2(plan_path, args, key):
    proc = run_cli("tune", str(plan_path), "--dry-run", *args)
    assert proc.returncode == 2 and key in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- measuring a trial run
def _ledger_run(ledger, tmp_path, trial, state, log=None):
    run = ledger.begin_submission(name=trial.plan.name, plan_hash=trial.plan.plan_hash(),
                                  plan_yaml=trial.plan.to_yaml(), executor="fake", work_dir=str(tmp_path))
    run = ledger.mark_submitted(run.id, [str(700 + run.id)], log_paths=[str(log)] if log else [])
    return ledger.set_state(run.id, state)


def test_a_trial_is_measured_from_its_log_and_a_failed_one_left_out_with_its_diagnosis(plan, tmp_path):
    from mbridge_launch.runs import ledger as L
    from mbridge_launch.runs.records import COMPLETED, FAILED
    from standin.speed import memory_line
    from standin.train import log_line

    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=3), tmp_path / "s", steps=10)
    good = tmp_path / "good.log"
    lines = [log_line(i, 10, i * 8, 20.0 + (5.0 if i <= 3 else 0.0), 1e-4, 8, 3.0, 1.0, 0, 0) for i in range(1, 11)]
    lines.insert(1, memory_line(0, 1, 42.5))
    good.write_text("\n".join(lines) + "\n")
    oom = tmp_path / "oom.log"
    oom.write_text("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                   "total capacity of 79.10 GiB of which 1.05 GiB is free.\n")
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        runs = [_ledger_run(ledger, tmp_path, trials[0], COMPLETED, good),
                _ledger_run(ledger, tmp_path, trials[1], FAILED, oom),
                _ledger_run(ledger, tmp_path, trials[2], COMPLETED)]
        outcomes = [S.measure(S.Outcome(trial, run_id=run.id), run, ledger) for trial, run in zip(trials, runs)]
    measured, failed, silent = outcomes
    assert measured.measured and measured.step_time_s == pytest.approx(0.020)  # warm-up iterations skipped
    p = trials[0].plan.parallelism
    assert measured.tokens_per_sec_per_gpu == pytest.approx(p.gbs * p.seq_length / (0.020 * 2))
    assert measured.peak_memory_gb == pytest.approx(42.5, rel=1e-3)
    assert not failed.measured and "gpu_oom" in failed.problem and "\n" not in failed.problem
    assert not silent.measured and "warm-up" in silent.problem
    assert S.fastest(outcomes) is measured


# ---------------------------------------------------------------------- the one card and confirmation
def test_one_card_lists_every_trial_and_the_total_gpu_hours(plan, tmp_path):
    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=3), tmp_path, time_limit="00:30:00")
    lines = S.card_lines(plan, trials, 30, tmp_path)
    assert f"{3 * 2 * 0.5:,.2f} GPU-hours" in lines[0]
    for trial in trials:
        assert any(trial.plan.name in line and trial.layout.label in line for line in lines)


@pytest.mark.parametrize("threshold, answer, expected", [
    (100.0, "yes", "typed-yes"), (100.0, "NAME", "typed-name"), (0.5, "NAME", "typed-name"),
    (0.5, "yes", None), (100.0, "no", None)])
def test_the_trials_are_confirmed_once_as_the_gate_confirms_a_job(plan, tmp_path, threshold, answer, expected):
    from mbridge_launch.base.errors import CheckFailed

    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=2), tmp_path)  # 2 x 2 GPUs x 15 min = 1 h
    asked = []

    def ask(prompt):
        asked.append(prompt)
        return plan.name if answer == "NAME" else answer

    options = S.SessionOptions(threshold_gpu_hours=threshold, ask=ask, isatty=lambda: True)
    if expected is None:
        with pytest.raises(CheckFailed):
            S.confirm(plan, trials, options)
    else:
        assert S.confirm(plan, trials, options) == expected
    assert len(asked) == 1 and (plan.name in asked[0])
    assert S.confirm(plan, trials, S.SessionOptions(yes=True, isatty=lambda: False)) == "flag-yes"
    with pytest.raises(CheckFailed):
        S.confirm(plan, trials, S.SessionOptions(isatty=lambda: False))


def test_leaving_a_pipeline_layout_unsets_what_the_mapping_writes_only_when_set(plan):
    """A Plan with PP 2 x VP 2 (written by apply_layout from the planner's candidate) tuned back to a
    PP 1 layout: VP is written as null (the recipe's default would otherwise return), the
    pipeline split settings go, and every override agrees with `parallelism` (the Plan loads)."""
    from mbridge_launch.planner.search import search
    from mbridge_launch.tune.layout_change import apply_layout

    req = T.plan_request(plan)
    found = search(req.arch, req.hardware, req.gpus, gbs=req.gbs, seq_length=req.seq_length, precision=req.precision,
                   goal=req.goal, top=20).candidates
    piped = next(c for c in found if c.layout.pp == 2 and c.layout.vp)
    flat = next(c for c in found if c.layout.pp == 1 and not c.layout.fsdp and c.layout.tp == 1)
    with_vp = apply_layout(plan, piped, req.arch, req.precision)
    assert with_vp.parallelism.vp == piped.layout.vp
    back = apply_layout(with_vp, flat, req.arch, req.precision)
    values = {o.key: o.value for o in back.overrides}
    assert values["model.virtual_pipeline_model_parallel_size"] == "null" and back.parallelism.vp is None
    assert values["model.pipeline_model_parallel_size"] == "1"
    assert not [k for k in values if "pipeline_stage" in k or "pipeline_model_parallel_layout" in k]
    assert T.same_layout(back.parallelism, flat.layout) and back.parallelism.gbs == plan.parallelism.gbs
    assert all(o.change_class == EXECUTION for o in back.overrides if o.source == "tune")


def test_the_trials_follow_the_calibration_plan_uses_with_the_users_measured_rows(plan, tmp_path, monkeypatch):
    """A layout the user measured (a state-directory calibration's measured_rows, as `calibrate
    --rows` writes it) is in the trials first, as `plan` ranks it."""
    from mbridge_launch.base.paths import STATE_ENV
    from mbridge_launch.planner import calibration_file as cf
    from mbridge_launch.planner.calibration_rows import rows_of_records
    from mbridge_launch.planner.throughput import CAL

    req = T.plan_request(plan)
    last = T.near_tie_layouts(plan, max_layouts=4)[-2].candidate.layout  # not the planner's first
    record = {"release": "run:mine", "model": req.model, "system": req.hardware.name, "num_gpus": str(req.gpus),
              "precision": req.precision, "gbs": str(last.gbs), "mbs": str(last.mbs), "seq_length": str(last.seq_length),
              "tp": str(last.tp), "pp": str(last.pp), "cp": str(last.cp), "vp": str(last.vp or ""), "ep": str(last.ep),
              "tokens_per_sec_per_gpu": "1000"}
    rows, _ = rows_of_records([record], "test")
    state = tmp_path / "state"
    monkeypatch.setenv(STATE_ENV, str(state))
    cf.save(state / cf.FILE_NAME, CAL, cf.Meta(rows=1, measured=tuple(rows)))
    first = T.near_tie_layouts(plan, max_layouts=4)[0]
    assert first.rank == 1 and first.candidate.measured is not None and first.candidate.measured.own
    assert (first.candidate.layout.tp, first.candidate.layout.pp) == (last.tp, last.pp)
