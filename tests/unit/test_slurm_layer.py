"""One Slurm command layer (mbridge_launch/slurm/commands.py) under the executors, preflight and the
ledger's reconcile: typed results with the raw output kept, one "cannot ask Slurm" exception,
and each caller's own reading of a failure. One Slurm time grammar (base/slurm_time.py)."""

from __future__ import annotations

import os
import stat

import pytest

from mbridge_launch.base import slurm_time
from mbridge_launch.base.errors import SubmissionError, UserError
from mbridge_launch.preflight import slurm as preflight_slurm
from mbridge_launch.runs import reconcile
from mbridge_launch.slurm import commands as slurm_cli


def fake(tmp_path, name: str, script: str):
    path = tmp_path / name
    path.write_text("#!/bin/bash\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_failure_keeps_the_raw_output_and_one_reason(tmp_path, monkeypatch):
    sbatch = fake(tmp_path, "sbatch", "echo out; echo 'sbatch: error: first' >&2; "
                                      "echo 'sbatch: error: Batch job submission failed: no nodes' >&2; exit 1\n")
    result = slurm_cli.call([sbatch, "job.sh"])
    assert not result.ok and result.returncode == 1 and result.stdout == "out\n"
    assert "error: first" in result.stderr and result.reason == "no nodes"
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(SubmissionError) as err:
        slurm_cli.sbatch(tmp_path / "job.sh", cwd=tmp_path)
    assert err.value.raw_output == result.output and err.value.exit_code == 4
    assert err.value.render("en") == "Slurm refused the job: no nodes"


def test_no_answer_is_one_exception_every_caller_knows(tmp_path, monkeypatch):
    assert preflight_slurm.SlurmUnavailable is reconcile.SlurmUnavailable is slurm_cli.SlurmUnavailable
    with pytest.raises(slurm_cli.SlurmCommandError) as err:
        slurm_cli.call([str(tmp_path / "no-such-squeue")])
    assert err.value.kind == "missing" and isinstance(err.value, slurm_cli.SlurmUnavailable)
    hang = fake(tmp_path, "scontrol", "sleep 5\n")
    with pytest.raises(slurm_cli.SlurmCommandError) as err:
        slurm_cli.call([hang, "show"], timeout=0.2)
    assert err.value.kind == "timeout"
    not_executable = tmp_path / "sinfo"
    not_executable.write_text("#!/bin/bash\n")
    with pytest.raises(slurm_cli.SlurmCommandError) as err:
        slurm_cli.call([not_executable])
    assert err.value.kind == "failed" and err.value.reason


def test_each_caller_reads_no_answer_its_own_way(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError) as err:  # executors and the CLI: one line
        slurm_cli.run_slurm(["scancel", "1"])
    assert err.value.key == "executors.slurm_missing"
    client = preflight_slurm.SlurmClient({"PATH": str(tmp_path)})
    with pytest.raises(preflight_slurm.SlurmUnavailable) as err:  # preflight: a finding's reason
        client.partitions()
    assert "scontrol" in str(err.value)
    assert reconcile.SacctQuery(user="u")._run(["squeue"]) is None  # reconcile: "cannot tell"


def test_preflight_keeps_caching_and_sends_its_environment(tmp_path):
    fake(tmp_path, "scontrol", 'echo "PartitionName=gpu Nodes=n1 State=UP MaxTime=$MBL_TEST_MAX"\n')
    client = preflight_slurm.SlurmClient({"PATH": f"{tmp_path}:{os.environ['PATH']}", "MBL_TEST_MAX": "04:00:00"})
    assert client.partitions()["gpu"].max_time == "04:00:00"
    client.partitions()
    assert client.calls == [["scontrol", "show", "partition", "-o"]]


@pytest.mark.parametrize("text,seconds,minutes", [
    ("30", 1800, 30), ("10:30", 630, 11), ("04:00:00", 14400, 240), ("2-12", 216000, 3600),
    ("1-00:00:01", 86401, 1441), ("0", 0, 1), ("UNLIMITED", None, None),
])
def test_one_slurm_time_grammar(text, seconds, minutes):
    from mbridge_launch.executors import submitit as submitit_adapter

    assert slurm_time.parse_seconds(text) == seconds and slurm_time.minutes(text) == minutes
    if minutes is None:
        with pytest.raises(UserError):  # submitit has no unlimited timeout
            submitit_adapter.slurm_time_minutes(text)
    else:
        assert submitit_adapter.slurm_time_minutes(text) == minutes


# ------------------------------------------------------------------ definite vs indefinite answers
@pytest.mark.parametrize("stderr", [
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
    "sbatch: error: slurm_persist_conn_open_without_init: failed to open persistent connection: Connection refused",
    "sbatch: error: Batch job submission failed: Zero Bytes were transmitted or received",
    "sbatch: error: Batch job submission failed: Transport endpoint is not connected",
    "sbatch: error: Batch job submission failed: Communication connection failure",
])
def test_no_answer_from_the_controller_is_indefinite(stderr):
    err = slurm_cli.submission_error(stderr + "\n")
    # the same indefinite outcome; worded "cannot reach" where sbatch says it never reached the controller
    unreachable = slurm_cli.controller_unreachable(stderr)
    assert err.key == (slurm_cli.UNREACHABLE_INDEFINITE if unreachable else "executors.submit_indefinite")
    assert err.exit_code == 4 and err.raw_output == stderr + "\n"
    text = err.render("en")
    lead = "cannot reach the Slurm controller (" if unreachable else "Slurm did not answer the submission ("
    assert text.startswith(lead) and "the job may" in text


@pytest.mark.parametrize("stderr, reason", [
    ("sbatch: error: Batch job submission failed: Invalid partition name specified", "Invalid partition name specified"),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available",
     "Requested node configuration is not available"),
    (("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size "
      "and/or time limits)"), "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
     "Invalid account or account/partition combination specified"),
])
def test_a_refusal_by_the_controller_is_definite(stderr, reason):
    err = slurm_cli.submission_error(stderr + "\n")
    assert err.key == "executors.submit_refused" and err.render("en") == f"Slurm refused the job: {reason}"


def test_a_killed_or_silent_sbatch_is_indefinite():
    assert slurm_cli.submission_error("", returncode=1).key == "executors.submit_indefinite"
    killed = slurm_cli.submission_error("sbatch: error: Invalid partition name specified\n", returncode=-9)
    assert killed.key == "executors.submit_indefinite"


def test_a_submission_that_times_out_is_indefinite_and_its_child_is_gone(tmp_path):
    marker = tmp_path / "grandchild.pid"
    sbatch = fake(tmp_path, "sbatch", f"sleep 300 & echo $! > {marker}; wait\n")
    with pytest.raises(SubmissionError) as err:
        slurm_cli.submit([sbatch, "job.sh"], cwd=tmp_path, timeout=1)
    assert err.value.key == "executors.submit_indefinite" and "did not answer within 1 s" in err.value.render("en")
    _assert_gone(int(marker.read_text()))


def _assert_gone(pid: int) -> None:
    """The process was killed with its session (a wrapper's own children too): it no longer runs
    (a zombie waiting for init counts as gone)."""
    import time

    for _ in range(50):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process {pid} still runs")


# ------------------------------------------------------------------ an interrupt inside the gate's window
@pytest.mark.parametrize("sent_from", ["this thread", "another thread"])
def test_a_deferred_interrupt_stops_a_hanging_submission_within_seconds(tmp_path, sent_from):
    """Ctrl-C while sbatch hangs (a stopped controller): the blocked SIGINT is seen pending
    (sigpending), or recorded by the window's handler when another thread takes it; sbatch gets
    its grace, is killed, the submission is indefinite, and the Ctrl-C takes effect after the
    window. Before the fix the call waited for sbatch's own timeout (60 s here)."""
    import signal
    import threading
    import time

    from mbridge_launch.base.signals import deferred_signals

    marker = tmp_path / "sbatch.pid"
    sbatch = fake(tmp_path, "sbatch", f"echo $$ > {marker}; sleep 300\n")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            if sent_from == "this thread":
                os.kill(os.getpid(), signal.SIGINT)
            else:
                timer.start()
            with pytest.raises(SubmissionError) as err:
                slurm_cli.submit([sbatch, "job.sh"], cwd=tmp_path, timeout=60)
    if sent_from == "another thread":
        timer.join()
    assert time.monotonic() - started < 5 + slurm_cli.INTERRUPT_GRACE_S  # the bound, with margin
    assert err.value.key == "executors.submit_indefinite"
    assert "was stopped by an interrupt" in err.value.render("en")
    _assert_gone(int(marker.read_text()))


def test_a_deferred_interrupt_lets_a_prompt_sbatch_answer(tmp_path):
    """A Ctrl-C while a healthy sbatch runs: it gets its grace, answers, and its job id is
    recorded (an interrupt must not turn a known job into an unknown one)."""
    import signal

    from mbridge_launch.base.signals import deferred_signals

    sbatch = fake(tmp_path, "sbatch", "sleep 0.5; echo 4242\n")
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            os.kill(os.getpid(), signal.SIGINT)
            job_id, answer = slurm_cli.submit([sbatch, "job.sh"], cwd=tmp_path)
    assert job_id == "4242" and answer.ok


@pytest.mark.parametrize("executor", ["sbatch", "nemo-run", "submitit"])
def test_every_executor_schedules_through_the_bounded_call(executor, tmp_path, monkeypatch):
    """NeMo-Run and submitit run sbatch through their own code (invoke, subprocess): their call
    goes through the Slurm layer too, so a Ctrl-C in the gate's window stops a hanging sbatch
    within seconds in every executor, and the answer is indefinite (the job may exist)."""
    import signal
    import threading
    import time

    import plan_fixtures as pf
    from mbridge_launch.base.signals import deferred_signals
    from mbridge_launch.executors.launch import render_plan, schedule

    pytest.importorskip({"sbatch": "jinja2", "nemo-run": "nemo_run", "submitit": "submitit"}[executor])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls"
    # submitit's `sbatch --test-only` is answered (the controller would); the submission hangs
    fake(bin_dir, "sbatch", f'case " $* " in *" --test-only "*) exit 0;; esac\necho "$PWD $*" >> {calls}; sleep 300\n')
    fake(bin_dir, "srun", "exit 0\n")  # submitit wants one on PATH to build its executor
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("NEMORUN_HOME", raising=False)
    plan = pf.with_changes(pf.moe_ep(), launch={"log_dir": str(tmp_path / "logs"), "workdir": None},
                           cluster={"container_image": None})
    work = tmp_path / "work"
    rendered = render_plan(plan, executor, work)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals():
            timer.start()
            with pytest.raises(SubmissionError) as err:
                schedule(rendered, "tok-123")
    timer.join()
    assert time.monotonic() - started < 1.0 + 5  # the bound after the Ctrl-C
    assert err.value.key == "executors.submit_indefinite", err.value.render("en")
    [line] = calls.read_text().splitlines()  # one sbatch call, from the script directory, with the token
    assert line.startswith(f"{work} ") and "--comment=tok-123" in line
