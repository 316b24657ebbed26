"""Ledger repair and status details (issue 13, items 3 and 7), on the local Slurm cluster:

- `runs adopt RUN JOBID`, `runs mark-lost RUN`, `runs forget RUN`: confirmed like cancel (no
  terminal and no --yes: refused), a reason required, each recorded as an event and in the
  confirmations table (who, when, how, why); adopt checks that the job exists and that no other run
  holds it; forget keeps the row (`runs --all`) while hiding it from `runs` and the duplicate guard;
- `status` shows Slurm's pending reason, the restart (requeue) count and the watcher job's state,
  in text and JSON;
- hand-submitted jobs whose names hold '|' (even one that looks like a whole squeue row, or holds
  a run's token) break neither status nor reconciliation;
- `cancel` of a run without a job says so (and how to adopt one) instead of "cancelled".
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gate_fixtures import unique, write_plan
from mbridge_launch.runs import ledger as L
from run_safety_checks import assert_nothing_lost

pytestmark = pytest.mark.slurm


@pytest.fixture
def db(slurm_env, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "ledger.sqlite3"


def hand_job(cluster, name: str, *extra: str, command: str = "sleep 120") -> str:
    """A job submitted by hand (not by the tool), on the CPU partition."""
    return cluster.run(["sbatch", "--parsable", "-p", "cpu", "-J", name, "-o", "/dev/null", *extra, "--wrap", command]).stdout.strip()


def recorded_run(db: Path, name: str, *, plan_hash: str | None = None, state: str | None = None,
                 submitter: str | None = None) -> L.RunRecord:
    """A run row as a submission leaves it (submitting), optionally moved to `state`."""
    with L.Ledger.open(db) as ledger:
        run = ledger.begin_submission(name=name, plan_hash=plan_hash or unique("hash"), plan_yaml=f"name: {name}\n",
                                      executor="sbatch")
        if submitter:
            ledger.conn.execute("UPDATE runs SET submitter=? WHERE id=?", (submitter, run.id))
        if state:
            ledger.set_state(run.id, state, error="test")
        return ledger.get_run(run.id)


def confirmations(db: Path, run_id: int) -> list[tuple[str, str, str]]:
    with L.Ledger.open(db) as ledger:
        return [(c["action"], c["method"], c["detail"].get("reason")) for c in ledger.confirmations(run_id)]


def test_adopt_is_confirmed_checked_and_recorded(db, slurm_cluster, mbl):
    name = unique("rs-adopt")
    run = recorded_run(db, name, state=L.SUBMIT_FAILED)  # lost its job id: nothing to reconcile
    job = hand_job(slurm_cluster, f"{name}|by hand", "--begin=now+3600")  # pending, a '|' in its name
    other = recorded_run(db, unique("rs-other"), state=L.SUBMIT_FAILED)
    ledger = ["--ledger", str(db)]
    try:
        no_tty = mbl.run("runs", "adopt", name, job, "--reason", "found in squeue", *ledger)
        assert no_tty.rc == 1 and "no terminal" in no_tty.stderr
        no_reason = mbl.run("runs", "adopt", name, job, "--yes", *ledger)
        assert no_reason.rc == 2 and "--reason" in no_reason.stderr
        bad = mbl.run("runs", "adopt", name, "12x", "--yes", "--reason", "r", *ledger)
        assert bad.rc == 2 and "JOBID '12x'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
        missing = mbl.run("runs", "adopt", name, "987654321", "--yes", "--reason", "r", *ledger)
        assert missing.rc == 1 and "Slurm has no job 987654321" in missing.stderr

        adopted = mbl.run("runs", "adopt", name, job, "--yes", "--reason", "found in squeue", *ledger, "--format", "json")
        assert adopted.rc == 0, adopted.stderr
        assert (adopted.json()["state"], adopted.json()["job_ids"]) == ("pending", [job])
        assert confirmations(db, run.id) == [("adopt", "flag-yes", "found in squeue")]
        status = mbl.run("status", name, *ledger, "--format", "json").json()
        assert [e for e in status["events"] if e["kind"] == "adopt"][0]["detail"]["reason"] == "found in squeue"
        assert status["pending_reason"] == "BeginTime" and status["slurm_state"] == "PENDING"

        taken = mbl.run("runs", "adopt", str(other.id), job, "--yes", "--reason", "r", *ledger)
        assert taken.rc == 1 and f"already belongs to run {name}" in taken.stderr
        assert confirmations(db, other.id) == []
    finally:
        slurm_cluster.run(["scancel", job], check=False)
    assert slurm_cluster.wait(job, timeout=60) == "CANCELLED"
    mbl.run("runs", *ledger)
    assert_nothing_lost(slurm_cluster, db, name, time.time() - 600)


def test_mark_lost_and_forget_are_recorded_and_forget_keeps_the_row(db, slurm_cluster, mbl):
    ledger = ["--ledger", str(db)]
    # a submission another login node left `submitting` a moment ago: reconcile waits for it
    lost_name, gone_name = unique("rs-lost"), unique("rs-gone")
    stuck = recorded_run(db, lost_name, submitter="other-login-node:1")
    plan_hash = unique("hash")
    gone = recorded_run(db, gone_name, plan_hash=plan_hash, submitter="other-login-node:2")
    refused = mbl.run("runs", "mark-lost", lost_name, "--reason", "node rebooted", *ledger)
    assert refused.rc == 1 and "no terminal" in refused.stderr

    marked = mbl.run("runs", "mark-lost", lost_name, "--yes", "--reason", "node rebooted", *ledger)
    assert marked.rc == 0 and "marked lost" in marked.stdout, marked.stderr
    forgot = mbl.run("runs", "forget", gone_name, "--yes", "--reason", "test row", *ledger)
    assert forgot.rc == 0 and "forgotten" in forgot.stdout, forgot.stderr

    with L.Ledger.open(db) as led:
        assert led.get_run(stuck.id).state == L.LOST and led.get_run(gone.id).state == L.FORGOTTEN
        assert led.active_runs_with_plan_hash(plan_hash) == []  # the duplicate guard no longer sees it
        kinds = {e["kind"] for e in led.events(stuck.id)} | {e["kind"] for e in led.events(gone.id)}
        assert {"mark_lost", "forget"} <= kinds
    assert confirmations(db, stuck.id) == [("mark-lost", "flag-yes", "node rebooted")]
    assert confirmations(db, gone.id) == [("forget", "flag-yes", "test row")]
    listed = {r["name"] for r in mbl.run("runs", *ledger, "--format", "json").json()}
    everything = {r["name"] for r in mbl.run("runs", "--all", *ledger, "--format", "json").json()}
    assert gone_name not in listed and lost_name in listed and {gone_name, lost_name} <= everything


def test_mark_lost_is_refused_while_the_job_runs(db, slurm_cluster, mbl):
    name = unique("rs-live")
    run = recorded_run(db, name, state=L.SUBMIT_FAILED)
    job = hand_job(slurm_cluster, name, "--begin=now+3600")
    try:
        assert mbl.run("runs", "adopt", name, job, "--yes", "--reason", "r", "--ledger", str(db)).rc == 0
        live = mbl.run("runs", "mark-lost", name, "--yes", "--reason", "r", "--ledger", str(db))
        assert live.rc == 1 and f"still has live Slurm jobs ({job})" in live.stderr
        assert confirmations(db, run.id) == [("adopt", "flag-yes", "r")]
    finally:
        slurm_cluster.run(["scancel", job], check=False)


def _pending_reason(slurm_cluster, job: str, timeout: float = 30.0) -> str:
    """squeue's pending reason of `job` once the scheduler has given one: right after a requeue
    slurmctld lists the job as pending with reason "None" until its next pass (seen once in CI)."""
    deadline = time.monotonic() + timeout
    while True:
        reason = slurm_cluster.run(["squeue", "-h", "-j", job, "-o", "%r"]).stdout.strip()
        if (reason and reason != "None") or time.monotonic() > deadline:
            return reason
        time.sleep(0.5)


def test_status_shows_pending_reason_restarts_and_the_watcher_state(db, slurm_cluster, mbl):
    name = unique("rs-status")
    run = recorded_run(db, name, state=L.SUBMIT_FAILED)
    job = hand_job(slurm_cluster, name, "--requeue")
    watcher = hand_job(slurm_cluster, f"{name}-watch", "--hold", command="sleep 5")
    try:
        slurm_cluster.wait_state(job, "RUNNING", timeout=60)
        slurm_cluster.run(["scontrol", "requeue", job])  # restart count 1, pending again
        assert mbl.run("runs", "adopt", name, job, "--yes", "--reason", "r", "--ledger", str(db)).rc == 0
        with L.Ledger.open(db) as ledger:
            ledger.set_watcher_job(run.id, watcher)
        reason = _pending_reason(slurm_cluster, job)
        assert reason and reason != "None"
        data = mbl.run("status", name, "--ledger", str(db), "--format", "json").json()
        assert (data["pending_reason"], data["restarts"], data["watcher_state"]) == (reason, 1, "PENDING")
        text = mbl.run("status", name, "--ledger", str(db))
        assert text.rc == 0, text.stderr
        assert f"Slurm pending reason: {reason}" in text.stdout and "restarts (requeues): 1" in text.stdout
        assert f"auto-rollback watcher job: {watcher} (PENDING)" in text.stdout
        zh = mbl.run("status", name, "--ledger", str(db), lang="zh")
        assert f"Slurm 排队原因：{reason}" in zh.stdout
    finally:
        slurm_cluster.run(["scancel", job, watcher], check=False)


def test_names_with_pipes_break_neither_status_nor_reconcile(base_plan, db, shared_dir, slurm_cluster, mbl):
    """kill -9 right after sbatch, while hand-submitted jobs hold '|' in their names: one looks like
    a whole squeue row, one contains the run's token. The run is reconciled to its own job (the
    exact token in the comment), not called ambiguous, and status reads every field right."""
    since = time.time()
    name = unique("rs-pipe")
    plan = write_plan(base_plan, shared_dir, name, iters=120, env={"MBL_STANDIN_ITER_SECONDS": "0.5"})
    crashed = mbl.run("submit", str(plan), "--yes", "--ledger", str(db), "--script-dir", str(shared_dir),
                      env={"MBL_GATE_CRASH_AFTER": "sbatch"})
    assert crashed.rc == 137, crashed.stderr
    with L.Ledger.open(db) as ledger:
        [row] = ledger.list_runs(limit=None)
    hands = [hand_job(slurm_cluster, f"x|{row.job_token}|RUNNING|2020-01-01T00:00:00|{row.job_token}", "--begin=now+3600"),
             hand_job(slurm_cluster, "a|b c", "--begin=now+3600", f"--comment=not {row.job_token}")]
    try:
        out = mbl.run("status", name, "--ledger", str(db), "--format", "json")
        assert out.rc == 0 and "several Slurm jobs" not in out.stderr, out.stderr
        data = out.json()
        assert len(data["job_ids"]) == 1 and data["job_ids"][0] not in hands
        assert data["state"] in ("pending", "running") and data["slurm_state"] in ("PENDING", "RUNNING")
        with L.Ledger.open(db) as ledger:
            assert [e["detail"]["found_by"] for e in ledger.events(row.id) if e["kind"] == "reconcile"] == ["token"]
        # a run adopting such a job reads its real state and reason through '|'
        adopter = recorded_run(db, unique("rs-pipe-adopt"), state=L.SUBMIT_FAILED)
        assert mbl.run("runs", "adopt", str(adopter.id), hands[1], "--yes", "--reason", "r", "--ledger", str(db)).rc == 0
        other = mbl.run("status", str(adopter.id), "--ledger", str(db), "--format", "json").json()
        assert (other["state"], other["slurm_state"], other["pending_reason"]) == ("pending", "PENDING", "BeginTime")
        cancel = mbl.run("cancel", name, "--yes", "--wait", "--ledger", str(db))
        assert cancel.rc == 0, cancel.stderr
    finally:
        slurm_cluster.run(["scancel", *hands], check=False)
    mbl.run("runs", "--ledger", str(db))
    assert_nothing_lost(slurm_cluster, db, name, since)


def test_cancel_without_a_job_says_so_and_how_to_adopt(db, slurm_cluster, mbl):
    name = unique("rs-nojob")
    recorded_run(db, name, submitter="other-login-node:3")  # `submitting`, reconcile waits for it
    out = mbl.run("cancel", name, "--yes", "--ledger", str(db))
    assert out.rc == 1, out.stderr
    assert "has no Slurm job" in out.stderr and f"runs adopt {name} JOBID" in out.stderr
    assert "cancelled" not in out.stdout and len(out.stderr.strip().splitlines()) == 1
