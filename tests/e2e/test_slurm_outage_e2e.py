"""A silent controller is said, not taken for an idle one (issue 32, "Unreachable is said").

With slurmctld AND slurmdbd stopped (SIGSTOP: they hold their sockets and answer nothing, as a hung
controller does), `mbridge-launch status RUN` and `runs` answer (their time: benchmarks/bounded_waits.py; it
was 140 s and 70 s) with the state as recorded and one line saying Slurm could not be asked and
how old that state is. Other engineers' tests share this controller: the stopped window is kept
short (both commands run at the same time) and both daemons are always continued in `finally`.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from mbridge_launch.runs import ledger as L

pytestmark = pytest.mark.slurm


def _pid(cluster, daemon: str) -> int:
    return int((cluster.dir / "run" / f"{daemon}.pid").read_text().strip())


def test_status_and_runs_say_slurm_was_not_asked_when_controller_and_accounting_are_stopped(slurm_cluster, slurm_env,
                                                                                  tmp_path, mbl):
    name = f"mbl-outage-{os.getpid()}"
    job = slurm_cluster.run(["sbatch", "--parsable", "--hold", "-p", "cpu", "-J", name, "-o", "/dev/null",
                             "--wrap", "true"]).stdout.strip()
    db = tmp_path / "ledger.db"
    with L.Ledger.open(db, create=True) as ledger:
        run = ledger.begin_submission(name=name, plan_hash="0123456789abcdef", plan_yaml=f"name: {name}\n",
                                      executor="sbatch", job_name=name)
        run = ledger.mark_submitted(run.id, [job])
    env = {"SLURM_CONF": slurm_cluster.slurm_conf}
    pids = [_pid(slurm_cluster, "slurmctld"), _pid(slurm_cluster, "slurmdbd")]
    answers = {}
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        procs = {args[0]: mbl.popen(*args, "--ledger", str(db), env=env)
                 for args in (("status", str(run.id)), ("runs",))}
        for command, proc in procs.items():
            out, err = proc.communicate(timeout=60)
            answers[command] = (proc.returncode, out, err, time.monotonic() - started)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        for proc in locals().get("procs", {}).values():
            if proc.poll() is None:
                proc.kill()
    try:
        for command, (rc, out, err, seconds) in answers.items():
            print(f"{command} with slurmctld and slurmdbd stopped: {seconds:.1f} s")
            assert rc == 0, (command, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("warning: Slurm could not be asked ("), (command, err)
            assert "states as last recorded" in lines[0] and lines[0].endswith(" ago"), lines[0]
            assert "submitted" in out and job in out, (command, out)  # the recorded state, not "no runs"
        # the controller answers again: the same command shows Slurm's state, and says nothing more
        again = mbl.run("status", str(run.id), "--ledger", str(db), env=env, timeout=120)
        assert again.rc == 0 and "could not be asked" not in again.stderr, again.stderr
        assert "pending" in again.stdout.lower(), again.stdout
    finally:
        slurm_cluster.run(["scancel", job], check=False)
