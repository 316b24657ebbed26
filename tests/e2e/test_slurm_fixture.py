"""The cluster fixture's lifecycle rules (no cluster needed): who stops a shared cluster."""

from __future__ import annotations

import os
import subprocess

import slurmcluster


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_not_running_without_pidfile(tmp_path):
    assert not slurmcluster.is_running(tmp_path)


def test_release_leaves_a_cluster_it_did_not_start(tmp_path, monkeypatch):
    monkeypatch.delenv("MBL_KEEP_SLURM", raising=False)
    (tmp_path / "leases").mkdir()
    (tmp_path / "leases" / str(os.getpid())).write_text("")
    assert slurmcluster.release(tmp_path).startswith("left running (not started")
    assert not (tmp_path / "leases" / str(os.getpid())).exists()


def test_release_waits_for_other_live_sessions(tmp_path, monkeypatch):
    monkeypatch.delenv("MBL_KEEP_SLURM", raising=False)
    leases = tmp_path / "leases"
    leases.mkdir()
    (tmp_path / slurmcluster.STARTED_BY_PYTEST).write_text("x")
    for pid in (os.getpid(), 1, _dead_pid()):  # us, a live other session (pid 1), a dead one
        (leases / str(pid)).write_text("")
    assert slurmcluster.release(tmp_path) == "left running for sessions [1]"
    assert sorted(p.name for p in leases.iterdir()) == ["1"]  # ours and the dead one are gone
    monkeypatch.setenv("MBL_KEEP_SLURM", "1")
    assert slurmcluster.release(tmp_path).startswith("kept")


def test_last_session_out_stops_a_cluster_a_session_started(tmp_path, monkeypatch):
    monkeypatch.delenv("MBL_KEEP_SLURM", raising=False)
    (tmp_path / "leases").mkdir()
    (tmp_path / slurmcluster.STARTED_BY_PYTEST).write_text("x")
    (tmp_path / "run").mkdir()  # stop-cluster.sh finds no pid files there: nothing to kill
    assert slurmcluster.release(tmp_path) == "stopped"
    assert not (tmp_path / slurmcluster.STARTED_BY_PYTEST).exists()
