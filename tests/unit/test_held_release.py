"""A job submitted held whose release got no answer (submitit: `scontrol release` during an
outage, or cut by Ctrl-C) is never left held forever (issue 32): the submission records
`release_pending`, and the next refresh of the run releases it once, when Slurm answers; a dead
submitter's job found by reconciliation whose release got no answer is recorded the same way."""

from __future__ import annotations

import time
from types import SimpleNamespace

from mbridge_launch.runs import ledger as L
from mbridge_launch.runs import reconcile as R
from mbridge_launch.runs.reconcile import JobInfo, SlurmUnavailable, reconcile_submitting, refresh_runs


class FakeSlurm:
    def __init__(self, jobs):
        self.jobs = list(jobs)

    def job_states(self, job_ids):
        return {j.job_id: j for j in self.jobs if j.job_id in job_ids}

    def find_jobs(self, *, name, token, since):
        return [j for j in self.jobs if token and token == j.comment]


def _release_answers(monkeypatch, answers):
    """_finish_interrupted as the executor's release: each call takes the next answer (an
    exception is raised, anything else returned); the calls are counted."""
    calls = []

    def finish(run, job_id):
        calls.append(job_id)
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    monkeypatch.setattr(R, "_finish_interrupted", finish)
    return calls


def _held(job_id, token=""):
    return JobInfo(job_id, "held-run", "PENDING", time.time(), comment=token, reason="JobHeldUser")


def test_a_pending_release_is_given_once_when_slurm_answers(tmp_path, monkeypatch):
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        with ledger.submission(name="held-run", plan_hash="h", plan_yaml="x", executor="submitit") as sub:
            sub.call_scheduler(lambda: SimpleNamespace(job_ids=["77"], release_pending=True))
        run = ledger.get_run(sub.record.id)
        assert ledger.release_pending(run.id)
        calls = _release_answers(monkeypatch, [SlurmUnavailable("scontrol: no answer"), None])
        slurm = FakeSlurm([_held("77")])
        refresh_runs(ledger, slurm, [run])  # Slurm still silent for the release: still due
        assert ledger.release_pending(run.id) and calls == ["77"]
        refresh_runs(ledger, slurm, [ledger.get_run(run.id)])  # released now
        assert not ledger.release_pending(run.id) and calls == ["77", "77"]
        refresh_runs(ledger, slurm, [ledger.get_run(run.id)])  # held by someone else now: left alone
        assert calls == ["77", "77"]


def test_a_job_held_without_a_pending_release_is_left_alone(tmp_path, monkeypatch):
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        with ledger.submission(name="held-run", plan_hash="h", plan_yaml="x", executor="submitit") as sub:
            sub.call_scheduler(lambda: SimpleNamespace(job_ids=["78"]))
        calls = _release_answers(monkeypatch, [None])
        refresh_runs(ledger, FakeSlurm([_held("78")]), [ledger.get_run(sub.record.id)])
        assert calls == []  # a user's own `scontrol hold` is theirs


def test_a_release_that_cancels_the_job_says_why(tmp_path, monkeypatch):
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        with ledger.submission(name="held-run", plan_hash="h", plan_yaml="x", executor="submitit") as sub:
            sub.call_scheduler(lambda: SimpleNamespace(job_ids=["79"], release_pending=True))
        _release_answers(monkeypatch, ["the job's pickle is missing"])
        refresh_runs(ledger, FakeSlurm([_held("79")]), [ledger.get_run(sub.record.id)])
        run = ledger.get_run(sub.record.id)
        assert run.state == L.CANCELLED and "pickle" in run.error


def test_reconcile_records_a_release_that_got_no_answer(tmp_path, monkeypatch):
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        record = ledger.begin_submission(name="held-run", plan_hash="h", plan_yaml="x", executor="submitit")
        ledger.mark_scheduler_called(record.id)
        ledger.mark_submit_failed(record.id, "interrupted", definite=False)
        _release_answers(monkeypatch, [SlurmUnavailable("scontrol: no answer")])
        [result] = reconcile_submitting(ledger, FakeSlurm([_held("80", record.job_token)]))
        assert (result.outcome, result.job_ids) == ("submitted", ["80"])
        assert ledger.release_pending(record.id)
