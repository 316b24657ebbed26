"""Serialised submission (issue 32, item 1) at the level of its locks, in real processes racing on
temporary ledgers with a fake scheduler (a file each "submission" appends a line to):

- eight processes submitting one plan through one ledger, or two plans that share one checkpoint
  directory: every one passes the early check first (as the gate's does, before preflight and the
  confirmation), then exactly one gets its `submitting` row (Ledger.begin_submission with the
  guard of runs/exclusive.py, under the ledger's write lock) and reaches the scheduler; the
  others are refused naming it (gate.duplicate / ownership.owned);
- eight processes, each with a ledger of its own (eight users), sharing one checkpoint directory:
  the directory's lock file lets exactly one write its claim and reach the scheduler, the others
  see that claim (ownership.claimed);
- a run whose scheduler call got no answer (submit_failed that may have a job) holds its plan and
  directory; every failure of the call but Slurm's definite refusal, a KeyboardInterrupt
  included, is recorded as "may have a job", and an unreachable Slurm during reconcile leaves the
  row alone.

Without the guard in begin_submission (or without the lock file) the racing tests see several
rows and several scheduler calls.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from functools import partial
from pathlib import Path

import pytest

from mbridge_launch.base.errors import CheckFailed, SubmissionError
from mbridge_launch.runs import exclusive as X
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.ownership import ClaimWriter, refuse_if_owned, save_dir_ownership
from mbridge_launch.runs.reconcile import JobInfo, SlurmUnavailable, reconcile_submitting

RACERS = 8


class NoSlurm:
    """A Slurm that cannot be asked (the claims of other ledgers are decided without it while
    they are young; a ledger's own runs by their recorded states)."""

    def job_states(self, job_ids):
        raise SlurmUnavailable("squeue: timeout")

    def find_jobs(self, *, name, token, since):
        raise SlurmUnavailable("squeue: timeout")


class FakeSlurm:
    def __init__(self, jobs=()):
        self.jobs = list(jobs)

    def job_states(self, job_ids):
        return {j.job_id: j for j in self.jobs if j.job_id in job_ids}

    def find_jobs(self, *, name, token, since):
        return [j for j in self.jobs if j.name == name or (token and token in j.comment)]


def _submit_like_the_gate(db: str, plan_hash: str, save_dir: str, scheduled: str, start_at: float,
                          name: str) -> str:
    """The gate's sequence: the early check, a slow step (preflight, the confirmation), then the
    serialised part (directory lock, claims again, guarded insert, claim, release), then the
    scheduler. Returns "scheduled" or the refusal's key."""
    import mbridge_launch.runs.ownership as O
    import mbridge_launch.runs.reconcile as R

    R.SacctQuery = lambda *a, **k: NoSlurm()  # no real Slurm in unit tests
    O.claim_job_state.__defaults__ = (NoSlurm(),)
    ledger = L.Ledger.open(db)
    try:
        try:
            if ledger.holding_runs(plan_hash):
                X.refuse_plan_holder(ledger.holding_runs(plan_hash)[0], plan_hash)
            refuse_if_owned(save_dir_ownership(ledger, save_dir, query=NoSlurm()), force=False)
            while time.time() < start_at:  # everyone has passed the early check: now race
                time.sleep(0.001)
            with X.directory_lock(save_dir) as lock:
                own = save_dir_ownership(ledger, save_dir, query=NoSlurm())
                refuse_if_owned(own, force=False)
                guard = partial(X.refuse_held, ledger, plan_hash, save_dir)
                with ledger.submission(name=name, plan_hash=plan_hash, plan_yaml="x", executor="fake",
                                       save_dir=save_dir, guard=guard) as sub:
                    ClaimWriter(ledger, own, plan_hash).before(sub.record, None)
                    lock.release()
                    with open(scheduled, "a") as out:  # the fake scheduler
                        out.write(f"{name} {os.getpid()}\n")
                    sub.done(type("Submitted", (), {"job_ids": [str(os.getpid())]})())
            return "scheduled"
        except CheckFailed as exc:
            return exc.key
    finally:
        ledger.close()


def _race(tmp_path: Path, *, ledgers: list[Path], hashes: list[str], save_dir: Path) -> tuple[list[str], list[str]]:
    scheduled = tmp_path / "scheduled.txt"
    scheduled.touch()
    for db in set(ledgers):
        L.Ledger.open(db).close()  # created before the race: the first open is not what is tested
    ctx = multiprocessing.get_context("fork")
    start_at = time.time() + 1.5
    with ctx.Pool(len(ledgers)) as pool:
        results = pool.starmap(_submit_like_the_gate, [
            (str(db), h, str(save_dir), str(scheduled), start_at, f"r{i}")
            for i, (db, h) in enumerate(zip(ledgers, hashes))])
    return results, scheduled.read_text().splitlines()


def test_one_plan_through_one_ledger_reaches_the_scheduler_once(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    results, scheduled = _race(tmp_path, ledgers=[db] * RACERS, hashes=["h1"] * RACERS, save_dir=tmp_path / "ckpt")
    assert results.count("scheduled") == 1 and len(scheduled) == 1, (results, scheduled)
    assert set(results) - {"scheduled"} <= {"gate.duplicate", "ownership.owned"}, results
    with L.Ledger.open(db) as ledger:
        assert len(ledger.list_runs(limit=None)) == 1


def test_two_plans_sharing_a_directory_through_one_ledger(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    hashes = [f"h{i % 2}" for i in range(RACERS)]
    results, scheduled = _race(tmp_path, ledgers=[db] * RACERS, hashes=hashes, save_dir=tmp_path / "ckpt")
    assert results.count("scheduled") == 1 and len(scheduled) == 1, (results, scheduled)
    assert "ownership.owned" in results or "gate.duplicate" in results


def test_eight_ledgers_sharing_a_directory_one_claim_wins(tmp_path):
    ledgers = [tmp_path / f"user{i}" / "ledger.sqlite3" for i in range(RACERS)]
    results, scheduled = _race(tmp_path, ledgers=ledgers, hashes=[f"h{i}" for i in range(RACERS)],
                               save_dir=tmp_path / "ckpt")
    assert results.count("scheduled") == 1 and len(scheduled) == 1, (results, scheduled)
    assert set(results) - {"scheduled"} == {"ownership.claimed"}, results
    rows = [r for db in ledgers for r in L.Ledger.open(db).list_runs(limit=None)]
    assert len(rows) == 1
    from mbridge_launch.rollback.claims import read_claim

    assert read_claim(tmp_path / "ckpt").token == rows[0].job_token  # the claim names the winner


# ---------------------------------------------------------------------- guard and holders
def _ledger(tmp_path) -> L.Ledger:
    return L.Ledger.open(tmp_path / "ledger.sqlite3")


def test_the_guard_refuses_inside_the_transaction_and_writes_no_row(tmp_path):
    with _ledger(tmp_path) as ledger:
        first = ledger.begin_submission(name="a", plan_hash="h", plan_yaml="x", executor="sbatch",
                                        save_dir=str(tmp_path / "ckpt"))
        for plan_hash, save_dir, key in (("h", None, "gate.duplicate"),
                                         ("other", str(tmp_path / "ckpt"), "ownership.owned"),
                                         ("other", str(tmp_path / "ckpt" / "sub"), "ownership.owned")):
            with pytest.raises(CheckFailed) as err:
                ledger.begin_submission(name="b", plan_hash=plan_hash, plan_yaml="x", executor="sbatch",
                                        save_dir=save_dir, guard=partial(X.refuse_held, ledger, plan_hash, save_dir))
            assert err.value.key == key and "a" in err.value.render("en") and str(first.id) in err.value.render("en")
        assert [r.id for r in ledger.list_runs(limit=None)] == [first.id]
        assert not ledger.conn.in_transaction
        # --resubmit skips the plan check (None), not the directory's
        ledger.set_state(first.id, L.CANCELLED)
        X.refuse_held(ledger, None, str(tmp_path / "ckpt"))
        X.refuse_held(ledger, "h", str(tmp_path / "ckpt"))


def test_a_scheduler_call_without_an_answer_holds_the_plan_and_the_directory(tmp_path):
    save = str(tmp_path / "ckpt")
    with _ledger(tmp_path) as ledger:
        for n, error in enumerate((TimeoutError("sbatch hung"), KeyboardInterrupt(),
                                   SubmissionError("executors.submit_no_job_id", raw_output="", executor="sbatch",
                                                   output=""))):
            with pytest.raises(type(error)), ledger.submission(name="u", plan_hash="h", plan_yaml="x",
                                                               executor="sbatch", save_dir=save) as sub:
                def fail(error=error):
                    raise error
                sub.call_scheduler(fail)
            run = ledger.get_run(sub.record.id)
            assert (run.state, run.may_have_job) == (L.SUBMIT_FAILED, 1), error
            assert X.unresolved(run) and X.holds(run)
            assert [r.id for r in ledger.active_runs_with_plan_hash("h")] == [run.id]
            for plan_hash, key in (("h", "gate.unresolved_plan"), ("other", "gate.unresolved_save_dir")):
                with pytest.raises(CheckFailed) as err:
                    X.refuse_held(ledger, plan_hash, save)
                assert err.value.key == key and "mbridge-launch runs" in err.value.render("en")
            with pytest.raises(CheckFailed) as err:  # the early ownership check says the same
                refuse_if_owned(save_dir_ownership(ledger, save, query=NoSlurm()), force=False)
            assert err.value.key == "gate.unresolved_save_dir"
            # an unreachable Slurm leaves it alone; once Slurm answers, its job is found by token
            assert [r.outcome for r in reconcile_submitting(ledger, NoSlurm())] == ["unknown"]
            assert ledger.get_run(run.id).may_have_job == 1
            slurm = FakeSlurm([JobInfo(f"424{n}", "u", "PENDING", time.time(), comment=run.job_token)])
            [found] = reconcile_submitting(ledger, slurm)
            assert (found.outcome, found.job_ids) == ("submitted", [f"424{n}"])
            ledger.set_state(run.id, L.CANCELLED)  # free for the next kind of failure


def test_only_slurms_definite_refusal_frees_the_plan(tmp_path):
    with _ledger(tmp_path) as ledger:
        with pytest.raises(SubmissionError), ledger.submission(name="r", plan_hash="h", plan_yaml="x",
                                                               executor="sbatch") as sub:
            def refuse():
                raise SubmissionError("executors.submit_refused", raw_output="sbatch: error: invalid partition",
                                      reason="invalid partition")
            sub.call_scheduler(refuse)
        run = ledger.get_run(sub.record.id)
        assert (run.state, run.may_have_job) == (L.SUBMIT_FAILED, 0) and not X.holds(run)
        X.refuse_held(ledger, "h", None)


def test_a_held_directory_lock_refuses_after_the_wait(tmp_path):
    from mbridge_launch.base.locks import lock_file

    save = tmp_path / "ckpt"
    save.mkdir()
    fd = lock_file(save / X.LOCK_NAME)
    try:
        with pytest.raises(CheckFailed) as err, X.directory_lock(str(save), wait_s=0.3):
            pass
        assert err.value.key == "gate.save_dir_busy"
    finally:
        os.close(fd)
    with X.directory_lock(str(save), wait_s=0.3) as lock:  # free again
        assert lock.fd is not None
    assert lock.fd is None
