"""Submission that survives any interrupt (issue 13, item 1), on the local Slurm cluster, for each
executor (sbatch, nemo-run, submitit):

- a REAL Ctrl-C (SIGINT to the process group of `mbridge-launch submit`) while the scheduler call
  runs (a test `sbatch` first on PATH runs the real one, then sleeps): the command still stops
  (exit 130), only after the job id is in the ledger; the job was not killed with it;
- a REAL kill -9 of `submit` during the same call, and kill -9 right before / right after the
  call (MBL_GATE_CRASH_AFTER=call|sbatch), and a SIGINT raised inside the window
  (MBL_GATE_INTERRUPT_AT=call): the next command shows the run with its real job and state;
- a reply without a job id after sbatch queued the job (not Slurm's refusal): `submit_failed`
  is reconciled to the job by its token;
- a hand-submitted job with the run's name is never adopted;
then `cancel` cancels the run's job and submitting the same Plan again is refused as a duplicate.
After each test every Slurm job of the run's name is in the ledger with its real state
(run_safety_checks.assert_nothing_lost).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from gate_fixtures import unique, write_plan
from run_safety_checks import assert_nothing_lost, ledger_rows, slurm_jobs_named

pytestmark = pytest.mark.slurm
EXECUTORS = ("sbatch", "nemo-run", "submitit")
LIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


@pytest.fixture
def ledger_db(slurm_env, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "ledger.sqlite3"


def slow_sbatch(directory: Path, *, hide_output: bool = False, seconds: float = 4) -> tuple[dict[str, str], Path]:
    """A `sbatch` first on PATH: the real one (its --test-only untouched), then a marker file and
    a `seconds` sleep, the window in which the test interrupts; `hide_output`: the job id is not
    printed (a reply the executor cannot read, after the job was queued)."""
    real = shutil.which("sbatch")
    assert real, "sbatch not on PATH"
    bin_dir, marker = directory / "slowbin", directory / "sbatch-returned"
    bin_dir.mkdir()
    sink = " >/dev/null" if hide_output else ""
    (bin_dir / "sbatch").write_text(
        "#!/bin/bash\n"
        f'case " $* " in *" --test-only"*) exec {real} "$@";; esac\n'
        f'{real} "$@"{sink}; rc=$?\n'
        f': > {marker}\nsleep {seconds}\nexit $rc\n')
    (bin_dir / "sbatch").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, marker


def submit_args(plan: Path, db: Path, shared: Path, executor: str) -> list[str]:
    return ["submit", str(plan), "--yes", "--ledger", str(db), "--script-dir", str(shared), "--executor", executor]


def new_plan(base_plan: dict, shared: Path, prefix: str) -> tuple[str, Path]:
    name = unique(prefix)
    # long enough to be live when cancelled, quick to end if a test stops early
    return name, write_plan(base_plan, shared, name, iters=120, env={"MBL_STANDIN_ITER_SECONDS": "0.5"})


def interrupted_submit(mbl, args: list[str], env: dict[str, str], marker: Path, sig: int, *, group: bool):
    """Start `submit`, wait until the real sbatch has returned (the wrapper still runs: the
    executor is waiting for it), then deliver `sig` (to the process group, like Ctrl-C, or to the
    process alone); returns (exit code, stderr)."""
    proc = mbl.popen(*args, env=env, start_new_session=True)
    deadline = time.monotonic() + 90
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "sbatch was never called"
        time.sleep(0.05)
    if group:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=60)  # reaped: a zombie would look like a live submitter
    return proc.returncode, err


def jobs_with_token(cluster, token: str) -> list[str]:
    """Every job Slurm has (live or finished) whose comment is this run's token."""
    live = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i\x1f%k"], check=False).stdout
    done = cluster.run(["sacct", "-X", "-n", "-P", "--delimiter=\x1f", "-o", "JobIDRaw,Comment",
                        "-S", "now-3600"], check=False).stdout
    found = {line.split("\x1f")[0] for line in (live + done).splitlines()
             if line.count("\x1f") == 1 and line.split("\x1f")[1].strip() == token}
    return sorted(found)


def the_run(db: Path, name: str) -> dict:
    [row] = [r for r in ledger_rows(db) if r["name"] == name]
    return row


def assert_recovered(mbl, cluster, db: Path, name: str, plan: Path, shared: Path, executor: str,
                     since: float) -> str:
    """The next command shows the run with its real job and state; cancel cancels it; the same
    Plan again is refused as a duplicate; nothing is lost. Returns the job id."""
    listed = mbl.run("runs", "--ledger", str(db), "--format", "json")
    assert listed.rc == 0, listed.stderr
    [run] = [r for r in listed.json() if r["name"] == name]
    token = the_run(db, name)["job_token"]
    real = jobs_with_token(cluster, token)
    assert len(real) == 1 and run["job_ids"] == real, (run, real, listed.stderr)
    job = real[0]
    assert run["state"] in ("submitted", "pending", "running"), run
    assert cluster.squeue_state(job) in LIVE  # the interrupt did not kill it
    status = mbl.run("status", name, "--ledger", str(db), "--format", "json")
    assert status.rc == 0 and status.json()["job_ids"] == [job], status.stderr
    assert_nothing_lost(cluster, db, name, since)

    again = mbl.run(*submit_args(plan, db, shared, executor))
    assert again.rc == 1 and "already submitted and not finished" in again.stderr, again.stderr
    assert jobs_with_token(cluster, token) == [job] and len(ledger_rows(db)) == 1

    cancelled = mbl.run("cancel", name, "--yes", "--wait", "--ledger", str(db))
    assert cancelled.rc == 0, cancelled.stderr
    assert cluster.wait(job, timeout=60) == "CANCELLED"
    mbl.run("runs", "--ledger", str(db))
    assert the_run(db, name)["state"] == "cancelled"
    assert_nothing_lost(cluster, db, name, since)
    return job


# ---------------------------------------------------------------------- real signals from outside
@pytest.mark.parametrize("executor", EXECUTORS)
def test_ctrl_c_during_the_scheduler_call_keeps_the_job(executor, base_plan, ledger_db, shared_dir, slurm_cluster, mbl):
    since = time.time()
    name, plan = new_plan(base_plan, shared_dir, f"rs-int-{executor}")
    # an sbatch that answers within the grace a deferred Ctrl-C gives it (slurm/commands.py,
    # INTERRUPT_GRACE_S = 2 s); one that stays silent longer is stopped and its run reconciled by
    # token (tests/e2e/test_controller_outage.py: Ctrl-C under a stopped controller within 5 s)
    env, marker = slow_sbatch(shared_dir, seconds=1)
    code, err = interrupted_submit(mbl, submit_args(plan, ledger_db, shared_dir, executor), env, marker,
                                   signal.SIGINT, group=True)
    assert code == 130 and "interrupted" in err, err  # Ctrl-C still stops the command...
    row = the_run(ledger_db, name)
    assert row["state"] == "submitted" and len(json.loads(row["job_ids"])) == 1, row  # ...after the job is recorded
    assert_recovered(mbl, slurm_cluster, ledger_db, name, plan, shared_dir, executor, since)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_kill9_during_the_scheduler_call_is_reconciled_by_token(executor, base_plan, ledger_db, shared_dir,
                                                                slurm_cluster, mbl):
    since = time.time()
    name, plan = new_plan(base_plan, shared_dir, f"rs-k9-{executor}")
    env, marker = slow_sbatch(shared_dir)
    code, _err = interrupted_submit(mbl, submit_args(plan, ledger_db, shared_dir, executor), env, marker,
                                    signal.SIGKILL, group=False)
    assert code == -signal.SIGKILL
    row = the_run(ledger_db, name)
    assert row["state"] == "submitting" and row["may_have_job"] == 1 and json.loads(row["job_ids"]) == []
    # a job submitted by hand with the very same name must not be taken for the run's job
    hand = slurm_cluster.run(["sbatch", "--parsable", "-p", "cpu", "-J", name, "-o", "/dev/null", "--wrap", "sleep 60"]).stdout.strip()
    try:
        listed = mbl.run("runs", "--ledger", str(ledger_db), "--format", "json")
        assert listed.rc == 0 and "recorded" in listed.stderr and "several" not in listed.stderr, listed.stderr
        [run] = [r for r in listed.json() if r["name"] == name]
        assert hand not in run["job_ids"] and len(run["job_ids"]) == 1
        events = [e for e in mbl.run("status", name, "--ledger", str(ledger_db), "--format", "json").json()["events"]
                  if e["kind"] == "reconcile"]
        assert events and events[0]["detail"]["found_by"] == "token"
        if executor == "submitit":
            # killed before submitit renamed the job's pickle: the held job is cancelled, with why
            # (test_submitit_killed_between_sbatch_and_its_pickle_... follows that case through)
            assert run["state"] == "cancelled" and "pickle" in run["error"], run
            assert slurm_cluster.wait(run["job_ids"][0], timeout=60) == "CANCELLED"
    finally:
        slurm_cluster.run(["scancel", hand], check=False)
    slurm_cluster.wait(hand, timeout=60)
    if executor != "submitit":
        _assert_recovered_beside(mbl, slurm_cluster, ledger_db, name, plan, shared_dir, executor, since, hand)


def _assert_recovered_beside(mbl, cluster, db, name, plan, shared, executor, since, hand: str) -> None:
    """assert_recovered, with the hand-submitted job of the same name counted as not ours: it is in
    no run of the ledger, and every other job of the name is."""
    job = assert_recovered_without_nothing_lost(mbl, cluster, db, name, plan, shared, executor)
    jobs = slurm_jobs_named(cluster, name, since)
    recorded = {j for r in ledger_rows(db) for j in json.loads(r["job_ids"] or "[]")}
    assert hand in jobs and hand not in recorded
    assert {j for j in jobs if j != hand and not jobs[j]["name"].endswith("-node-check")} <= recorded | {job}


def assert_recovered_without_nothing_lost(mbl, cluster, db, name, plan, shared, executor) -> str:
    listed = mbl.run("runs", "--ledger", str(db), "--format", "json")
    [run] = [r for r in listed.json() if r["name"] == name]
    real = jobs_with_token(cluster, the_run(db, name)["job_token"])
    assert len(real) == 1 and run["job_ids"] == real and cluster.squeue_state(real[0]) in LIVE, (run, real)
    again = mbl.run(*submit_args(plan, db, shared, executor))
    assert again.rc == 1 and "already submitted and not finished" in again.stderr, again.stderr
    assert mbl.run("cancel", name, "--yes", "--wait", "--ledger", str(db)).rc == 0
    assert cluster.wait(real[0], timeout=60) == "CANCELLED"
    mbl.run("runs", "--ledger", str(db))
    assert the_run(db, name)["state"] == "cancelled"
    return real[0]


# ---------------------------------------------------------------------- fault points of the window
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("fault", ["interrupt-before-call", "kill9-after-call"])
def test_faults_around_the_scheduler_call_keep_the_job(fault, executor, base_plan, ledger_db, shared_dir,
                                                       slurm_cluster, mbl):
    """SIGINT raised inside the window just before the scheduler is called (deferred until the
    job is recorded), and kill -9 right after the scheduler accepted the job."""
    since = time.time()
    name, plan = new_plan(base_plan, shared_dir, f"rs-{fault[:6]}-{executor}")
    env = ({"MBL_GATE_INTERRUPT_AT": "call"} if fault.startswith("interrupt") else {"MBL_GATE_CRASH_AFTER": "sbatch"})
    done = mbl.run(*submit_args(plan, ledger_db, shared_dir, executor), env=env)
    assert done.rc == (130 if fault.startswith("interrupt") else 137), done.stderr
    assert_recovered(mbl, slurm_cluster, ledger_db, name, plan, shared_dir, executor, since)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_kill9_right_before_the_call_is_lost_and_the_plan_can_go_again(executor, base_plan, ledger_db, shared_dir,
                                                                       slurm_cluster, mbl):
    since = time.time()
    name, plan = new_plan(base_plan, shared_dir, f"rs-pre-{executor}")
    crashed = mbl.run(*submit_args(plan, ledger_db, shared_dir, executor), env={"MBL_GATE_CRASH_AFTER": "call"})
    assert crashed.rc == 137, crashed.stderr
    row = the_run(ledger_db, name)
    assert row["state"] == "submitting" and row["may_have_job"] == 1 and row["scheduler_called_at"]
    listed = mbl.run("runs", "--ledger", str(ledger_db), "--format", "json")
    assert listed.rc == 0 and "marked lost" in listed.stderr, listed.stderr
    assert the_run(ledger_db, name)["state"] == "lost" and jobs_with_token(slurm_cluster, row["job_token"]) == []
    cancel = mbl.run("cancel", name, "--yes", "--ledger", str(ledger_db))
    assert cancel.rc == 0 and "nothing to cancel" in cancel.stdout
    assert_nothing_lost(slurm_cluster, ledger_db, name, since)


def test_a_reply_without_job_id_after_sbatch_is_reconciled_by_token(base_plan, ledger_db, shared_dir, slurm_cluster, mbl):
    """sbatch queued the job but its answer was lost: not Slurm's refusal, so `submit_failed` is
    reconciled by token on the next command instead of hiding a running job."""
    since = time.time()
    name, plan = new_plan(base_plan, shared_dir, "rs-noid")
    env, _marker = slow_sbatch(shared_dir, hide_output=True)
    failed = mbl.run(*submit_args(plan, ledger_db, shared_dir, "sbatch"), env=env)
    assert failed.rc == 4, failed.stderr
    row = the_run(ledger_db, name)
    assert row["state"] == "submit_failed" and row["may_have_job"] == 1
    assert_recovered(mbl, slurm_cluster, ledger_db, name, plan, shared_dir, "sbatch", since)
    events = [e["kind"] for e in json.loads(mbl.run("status", name, "--ledger", str(ledger_db), "--format",
                                                    "json").stdout)["events"]]
    assert "scheduler_called" in events and "reconcile" in events


def test_submitit_killed_between_sbatch_and_its_pickle_leaves_a_held_job_reconciled(
        mbl, slurm_cluster, base_plan, shared_dir, ledger_db):
    """submitit renames the job's pickle only after sbatch returns: the process killed in between
    (kill -9 from the `sbatch` it ran) leaves a HELD job that holds no GPUs; the next command finds
    it by token, cancels it (it could only fail after 60 s without its pickle) and says why."""
    since = time.time()
    name, plan = new_plan(base_plan, shared_dir, "rs-pickle")
    real = shutil.which("sbatch")
    bin_dir = shared_dir / "killbin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        "#!/bin/bash\n"
        f'case " $* " in *" --test-only"*) exec {real} "$@";; esac\n'
        f'{real} "$@"; rc=$?\nkill -9 $PPID\nexit $rc\n')
    (bin_dir / "sbatch").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = mbl.run(*submit_args(plan, ledger_db, shared_dir, "submitit"), env=env, timeout=120)
    assert proc.rc == -9, proc.stderr
    token = the_run(ledger_db, name)["job_token"]
    [job] = jobs_with_token(slurm_cluster, token)
    assert slurm_cluster.scontrol_job(job)["Reason"] == "JobHeldUser"  # waiting, holding nothing

    listed = mbl.run("runs", "--ledger", str(ledger_db), "--format", "json")
    assert listed.rc == 0, listed.stderr
    [run] = [r for r in listed.json() if r["name"] == name]
    assert run["job_ids"] == [job] and run["state"] == "cancelled", run
    assert "pickle" in run["error"] and "submit the plan again" in run["error"]
    assert slurm_cluster.wait(job, timeout=60) == "CANCELLED"
    never_ran = slurm_cluster.settled_sacct(job, fields=("JobIDRaw", "Start", "End", "Elapsed", "NodeList", "State"))
    assert never_ran["Elapsed"] == "00:00:00" and never_ran["NodeList"] == "None assigned", never_ran
    assert_nothing_lost(slurm_cluster, ledger_db, name, since)
    again = mbl.run(*submit_args(plan, ledger_db, shared_dir, "submitit"), timeout=120)
    assert again.rc == 0, again.stderr  # the cancelled run no longer holds the plan or its directory
    [_, second] = [r for r in ledger_rows(ledger_db) if r["name"] == name]
    second_job = json.loads(second["job_ids"])[0]
    slurm_cluster.wait_state(second_job, "RUNNING", timeout=60)  # released once its pickle was in place
    slurm_cluster.cancel(second_job)
