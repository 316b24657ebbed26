"""The automatic-rollback watcher: unit tests with a fake Slurm, and end-to-end on the local
Slurm cluster with the stand-in trainer (NaN at iteration K is rolled back and the run finishes;
a requeued job resumes from its latest checkpoint)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from checkpoint_fixtures import log_line, make_save_dir
from mbridge_launch.base.errors import CheckFailed
from mbridge_launch.plan.model import AutoRollback
from mbridge_launch.plan.resubmission import SEED_KEY, SKIP_KEY, auto_rollback_plan, resubmission_plan, skip_plan
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.ledger import AUTO_ROLLBACK_METHOD
from mbridge_launch.watch.watcher import Watcher, _exclusive
from plan_fixtures import single_node_h100, with_changes
from watch_fixtures import FakeSlurm, e2e_plan


def resubmit_skipping_batch(ledger, run, to_iter, trigger, submit=None):
    """A resubmission hook WITHOUT the gate's preflight and card (the watcher's loop is under test
    here, the gate in test_gate.py): the ledger before and after the scheduler call, as a child."""
    if submit is None:
        from mbridge_launch.executors.launch import render_plan, schedule

        def submit(plan, executor, work_dir):
            return schedule(render_plan(plan, executor, work_dir))
    plan = auto_rollback_plan(run.plan(), to_iter, trigger)
    with ledger.submission(name=run.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(), executor=run.executor,
                           plan_path=None, cluster=run.cluster, job_name=run.job_name, work_dir=run.work_dir,
                           save_dir=run.save_dir, parent_run_id=run.id) as sub:
        ledger.record_confirmation(sub.record.id, "resubmit", AUTO_ROLLBACK_METHOD,
                                   {"reason": "plan.auto_rollback", "convergence_change": {SKIP_KEY: trigger.iteration}})
        return sub.done(submit(plan, run.executor, run.work_dir))


@dataclass
class FakeSubmitted:
    job_ids: list
    log_paths: list
    script_path: Path | None = None
    raw_output: str = ""


@dataclass
class Harness:
    tmp: Path
    ledger: L.Ledger
    slurm: FakeSlurm
    save: Path
    cancelled: list = field(default_factory=list)
    submitted_plans: list = field(default_factory=list)

    def cancel(self, run):
        self.cancelled.append(run.job_ids[0])
        self.slurm.states[run.job_ids[0]] = "CANCELLED by 0"

    def submit(self, plan, executor, workdir):
        self.submitted_plans.append(plan)
        job = str(100 + len(self.submitted_plans))
        log = self.tmp / f"job-{job}.log"
        # the resubmitted job resumes from the rollback and trains cleanly to the end
        log.write_text(" loading checkpoint from x at iteration 20\n" +
                       "".join(log_line(i, f"{5 - i / 100:.6E}", total=40) for i in range(21, 41)))
        self.slurm.states[job] = "COMPLETED"
        return FakeSubmitted([job], [str(log)])

    def watcher(self, **kw):
        return Watcher(self.ledger, resubmit=lambda lg, run, to, trig: resubmit_skipping_batch(
            lg, run, to, trig, submit=self.submit), cancel=self.cancel, query=self.slurm, poll_s=0.01,
            refresh_s=0.0, **kw)


def plan_yaml(tmp: Path, save: Path, **auto) -> tuple[str, str]:
    plan = with_changes(single_node_h100(), checkpoint={"save": str(save), "load": None, "save_interval": 10},
                        auto_rollback=AutoRollback(enabled=True, **auto).model_dump())
    return plan.to_yaml(), plan.plan_hash()


@pytest.fixture
def harness(tmp_path):
    save = make_save_dir(tmp_path, (10, 20, 30))
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        yield Harness(tmp_path, ledger, FakeSlurm(), save)


def start_run(h: Harness, losses: list[str], **auto) -> L.RunRecord:
    text, digest = plan_yaml(h.tmp, h.save, **auto)
    log = h.tmp / "job-1.log"
    log.write_text("".join(log_line(i, v, total=40) for i, v in enumerate(losses, start=1)))
    run = h.ledger.begin_submission(name="demo", plan_hash=digest, plan_yaml=text, executor="fake",
                                    save_dir=str(h.save), work_dir=str(h.tmp))
    run = h.ledger.mark_submitted(run.id, ["1"], log_paths=[str(log)])
    h.slurm.states["1"] = "RUNNING"
    return run


def test_nan_rolls_back_before_trigger_and_resubmits(harness):
    h = harness
    run = start_run(h, [f"{9 - i / 10:.6E}" for i in range(24)] + ["nan"] * 8)  # NaN from iteration 25
    result = h.watcher().watch(run)
    assert result.outcome == "finished" and result.run.state == L.COMPLETED
    assert h.cancelled == ["1"]
    assert [(r["to_iter"], r["trigger"]["kind"], r["trigger"]["iteration"]) for r in result.rollbacks] == [(20, "nan", 25)]
    assert sorted(C.iter_dirs(h.save)) == [10, 20] and C.resolve_resume(h.save).iteration == 20
    [plan] = h.submitted_plans
    skip = [o for o in plan.overrides if o.key == SKIP_KEY]
    assert skip[0].value == "[25]" and skip[0].change_class == "convergence"
    assert plan.checkpoint.load == str(h.save)  # resumes from the rolled-back directory
    chain = h.ledger.run_chain(result.run.id)
    assert [r.job_ids for r in chain] == [["1"], ["101"]] and chain[0].state == L.CANCELLED
    [rb] = h.ledger.rollbacks(run_ids=[chain[0].id])
    assert rb.trigger["kind"] == "nan" and rb.state == "done"
    actions = [c["action"] for c in h.ledger.confirmations(chain[0].id)] + \
        [c["action"] for c in h.ledger.confirmations(chain[1].id)]
    assert actions == ["rollback", "resubmit"]


def test_spike_trigger(harness):
    h = harness
    losses = [f"{3.0 - i / 100:.6E}" for i in range(22)] + ["3.0E+01"] + ["2.5E+00"] * 5
    result = h.watcher().watch(start_run(h, losses, spike_factor=3.0, window=10))
    assert result.rollbacks[0]["trigger"]["kind"] == "spike" and result.rollbacks[0]["to_iter"] == 20


def test_max_rollbacks_stops(harness):
    h = harness
    run = start_run(h, ["5.0E+00"] * 24 + ["nan"], max_rollbacks=0)
    result = h.watcher().watch(run)
    assert result.outcome == "max_rollbacks" and h.cancelled == ["1"] and not h.submitted_plans
    assert sorted(C.iter_dirs(h.save)) == [10, 20, 30]  # nothing rolled back


def test_no_checkpoint_before_trigger(harness):
    h = harness
    result = h.watcher().watch(start_run(h, ["5.0E+00", "nan"]))
    assert result.outcome == "no_checkpoint" and sorted(C.iter_dirs(h.save)) == [10, 20, 30]


def test_report_only_and_clean_finish(harness):
    h = harness
    run = start_run(h, ["5.0E+00"] * 5 + ["inf"])
    result = h.watcher(act=False).watch(run)
    assert result.outcome == "triggered" and result.trigger.kind == "inf" and not h.cancelled
    clean = h.watcher()
    h.slurm.states["1"] = "COMPLETED"
    (h.tmp / "job-1.log").write_text("".join(log_line(i, "4.0E+00") for i in range(1, 10)))
    assert clean.watch(h.ledger.get_run(run.id)).outcome == "finished"


def test_one_watcher_per_run(harness):
    h = harness
    run = start_run(h, ["5.0E+00"])
    with _exclusive(h.ledger.path.parent / f"watch-{run.id}.lock", run.name):
        with pytest.raises(CheckFailed) as err:
            h.watcher().watch(run)
    assert err.value.key == "watch.already_watching"


def test_resubmission_plan_accumulates_and_sets_seed():
    plan = with_changes(single_node_h100(), checkpoint={"load": None})
    once = skip_plan(plan, 25, "r")
    twice = skip_plan(once, 31, "r")
    assert [o.value for o in twice.overrides if o.key == SKIP_KEY] == ["[25,31]"]
    assert twice.plan_hash() != plan.plan_hash() and twice.checkpoint.load == plan.checkpoint.save
    seeded = resubmission_plan(twice, reason="new seed", seed=1234)
    again = resubmission_plan(seeded, reason="newer seed", seed=99)
    assert [(o.key, o.value, o.change_class) for o in again.overrides if o.key in (SKIP_KEY, SEED_KEY)] == \
        [(SKIP_KEY, "[25,31]", "convergence"), (SEED_KEY, "99", "convergence")]


def test_watch_command(tmp_path, mbl):
    """The CLI on a finished job (fake sacct says COMPLETED): report-only without auto_rollback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a row as the ledger's query reads it without --json: id, state, submit, reason, name, comment
    (bin_dir / "sacct").write_text("#!/bin/sh\nprintf '1\\037COMPLETED\\0372026-11-29T20:00:00\\037None\\037demo\\037\\n'\n")
    (bin_dir / "squeue").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    save = make_save_dir(tmp_path, (10, 20))
    plan = with_changes(single_node_h100(), checkpoint={"save": str(save)})
    log = tmp_path / "job.log"
    db = tmp_path / "l.db"
    with L.Ledger.open(db) as ledger:
        run = ledger.begin_submission(name="demo", plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                      executor="fake", save_dir=str(save))
        ledger.mark_submitted(run.id, ["1"], log_paths=[str(log)])
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def watch(*extra):
        return mbl.run("watch", "demo", "--ledger", db, "--poll", "0.05", *extra, env=env, timeout=60)

    log.write_text("".join(log_line(i, "4.0E+00") for i in range(1, 20)) + log_line(20, "nan"))
    bad = watch()
    assert bad.returncode == 1 and "reporting only" in bad.stderr and "nan at iteration 20" in bad.stderr
    assert sorted(C.iter_dirs(save)) == [10, 20]  # not acted upon
    log.write_text("".join(log_line(i, "4.0E+00") for i in range(1, 21)))
    good = watch("--format", "json")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["outcome"] == "finished"


# ---------------------------------------------------------------------- end to end on Slurm
def submit_recorded(ledger: L.Ledger, plan, workdir: Path) -> L.RunRecord:
    """Submission recorded like the gate does (write before and after), through the executor's
    render and schedule directly: the gate is not part of these tests."""
    from mbridge_launch.executors.launch import render_plan, schedule

    with ledger.submission(name=plan.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(), executor="sbatch",
                           work_dir=str(workdir), save_dir=L.plan_save_dir(plan, workdir)) as sub:
        return sub.done(schedule(render_plan(plan, "sbatch", workdir)))


@pytest.mark.slurm
def test_e2e_nan_is_rolled_back_and_the_run_finishes(slurm_env, shared_dir, tmp_path):
    from mbridge_launch.runs.reconcile import SacctQuery

    env = {"MBL_STANDIN_NAN_AT": "25", "MBL_STANDIN_ITER_SECONDS": "0.05"}
    plan, save = e2e_plan(shared_dir, "nan-e2e", train_iters=40, save_interval=10, env=env, auto=True)
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        run = submit_recorded(ledger, plan, shared_dir)
        watcher = Watcher(ledger, resubmit=resubmit_skipping_batch, query=SacctQuery(), poll_s=0.2, refresh_s=1.0,
                          cancel_timeout_s=120)
        result = watcher.watch(run)
        chain = ledger.run_chain(result.run.id)
        logs = "\n".join(p.read_text() for r in chain for p in map(Path, r.log_paths) if p.exists())
        assert result.outcome == "finished" and result.run.state == L.COMPLETED, (result, logs[-3000:])
        assert [r["to_iter"] for r in result.rollbacks] == [20], result.rollbacks
        assert result.rollbacks[0]["trigger"]["iteration"] == 25
        assert len(chain) == 2 and chain[0].state in (L.CANCELLED, L.FAILED, L.COMPLETED)
    report = C.list_checkpoints(save)
    assert report.resume.loadable and report.resume.iteration == 40
    assert all(c.complete for c in report.checkpoints)
    moved = report.rolled_back[0].iterations
    assert moved and min(moved) > 20  # the poisoned timeline was moved aside, never deleted


@pytest.mark.slurm
def test_e2e_requeue_resumes_from_latest_checkpoint(slurm_env, slurm_cluster, shared_dir, tmp_path):
    plan, save = e2e_plan(shared_dir, "requeue-e2e", train_iters=60, save_interval=10,
                          env={"MBL_STANDIN_ITER_SECONDS": "0.1"}, auto=False)
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        run = submit_recorded(ledger, plan, shared_dir)
        job = run.job_ids[0]
        deadline = time.monotonic() + 120
        while C.latest_complete(save) is None or C.latest_complete(save) < 20:
            assert time.monotonic() < deadline, "no checkpoint written"
            time.sleep(0.2)
        slurm_cluster.run(["scontrol", "requeue", job])
        state = slurm_cluster.wait(job, timeout=240)
        assert state == "COMPLETED"
    logs = "".join(p.read_text() for p in sorted((shared_dir / "logs").glob("*")) if p.is_file())
    resumed = [line for line in logs.splitlines() if "loading checkpoint" in line]
    assert resumed, logs[-3000:]
    resumed_at = int(resumed[-1].rsplit("iteration", 1)[1].split()[0])
    assert resumed_at >= 20
    assert C.resolve_resume(save).iteration == 60 and not C.rolled_back_dirs(save)
