"""Reconciliation once a job has left squeue, on a Slurm that keeps no job comments in accounting
(Slurm's default, as on the local cluster): the token is still found in the sbatch adapter's
submit line, and a job of another executor is never adopted by its name, only named as a candidate."""

from __future__ import annotations

import time

import pytest

from gate_fixtures import unique
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.reconcile import reconcile_submitting
from mbridge_launch.runs.slurm_jobs import SacctQuery

pytestmark = pytest.mark.slurm


class GoneFromSqueue(SacctQuery):
    """The real sacct; squeue answers as it does once MinJobAge has passed: without these jobs."""

    def _squeue(self):
        return []


def _finished_job(cluster, shared_dir, name: str, *extra: str) -> str:
    job = cluster.sbatch("-p", "cpu", "-J", name, "-o", str(shared_dir / "%j.out"), *extra, wrap="true")
    assert cluster.wait(job, timeout=60) == "COMPLETED"
    cluster.settled_sacct(job)
    return job


def test_token_on_the_submit_line_finds_a_job_accounting_kept_no_comment_for(slurm_env, slurm_cluster, shared_dir):
    assert not SacctQuery().comments_kept()  # the local cluster keeps Slurm's default
    name, token = unique("rs-acct"), f"mbl-{unique('t')[-6:]}0000000000"
    since = time.time()
    job = _finished_job(slurm_cluster, shared_dir, name, f"--comment={token}")
    assert slurm_cluster.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "Comment"]).stdout.strip() == ""
    [found] = GoneFromSqueue().find_jobs(name=name, token=token, since=since - 60)
    assert (found.job_id, found.state) == (job, "COMPLETED")


def test_a_finished_job_of_the_same_name_is_named_never_adopted(slurm_env, slurm_cluster, shared_dir, tmp_path):
    name = unique("rs-acct-name")
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        run = ledger.begin_submission(name=name, plan_hash="0" * 16, plan_yaml="{}", executor="nemo-run")
        ledger.mark_scheduler_called(run.id)
        ledger.conn.execute("UPDATE runs SET submitter='another-login-node:1' WHERE id=?", (run.id,))
        # the process died; a job of that name (its own, or anyone's) finished and left squeue
        job = _finished_job(slurm_cluster, shared_dir, name)
        [result] = reconcile_submitting(ledger, GoneFromSqueue(), now=time.time() + 3600, grace_s=0)
        record = ledger.get_run(run.id)
        events = [e for e in ledger.events(run.id) if e["kind"] == "reconcile_candidates"]
    assert (result.outcome, result.job_ids, result.candidates) == ("lost", [], [job])
    assert record.job_ids == [] and record.state == L.LOST
    assert events and events[0]["detail"]["job_ids"] == [job]
