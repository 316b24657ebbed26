"""Issue 13, the watcher and the node-check job, on the local Slurm cluster:

- a NaN is acted on within 60 s while the training job holds every node of partition gb200
  exclusively: the watcher job runs on partition cpu, where the Plan puts it
  (auto_rollback.watcher_partition, from `recommend --watcher-partition`); the same Plan with the
  watcher on the training partition gets a preflight warning that names the fix;
- `cancel` of a run with a watcher: the watcher job ends and no successor watcher job appears;
- the watcher job's --output is the run's file slug in the Plan's log directory, and it starts
  (it is not FAILED at launch);
- the node-check job of `preflight --on-nodes`: its environment holds no secret, its time limit
  is its own short one, a long wait prints the job's state and Slurm's reason, and an interrupt
  (SIGINT, SIGTERM) cancels it and exits 130.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from cli_helpers import run_cli
from gate_fixtures import STANDIN, unique, write_plan
from mbridge_launch.executors.batch_script import NODE_CHECK_TIME
from mbridge_launch.runs import ledger as L
from run_safety_checks import assert_nothing_lost
from slurmcluster import FAKE_BIN

pytestmark = pytest.mark.slurm

NAN_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] iteration +(\d+)/.*lm loss: nan")


# ---------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def gb200_base(tmp_path_factory) -> dict:
    """`recommend` for 8 GB200 GPUs (2 nodes x 4: every node of partition gb200), watcher on cpu."""
    out = tmp_path_factory.mktemp("recommend-gb200") / "plan.yaml"
    proc = run_cli("recommend", "--model", "llama32_1b", "--gpus", "8", "--gpu-type", "gb200", "--goal", "pretrain",
                   "--dataset", "mock", "--name", "gb", "--partition", "gb200", "--watcher-partition", "cpu",
                   "--time", "00:10:00", "--save-dir", str(out.parent / "ckpt"), "--entry", sys.executable,
                   str(STANDIN), "-o", str(out), "train.train_iters=6", "checkpoint.save_interval=3")
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(out.read_text())
    assert (data["cluster"]["nodes"], data["cluster"]["gpus_per_node"], data["cluster"]["exclusive"]) == (2, 4, True)
    assert data["auto_rollback"]["watcher_partition"] == "cpu"  # recorded in the Plan
    return data


def _auto(watcher_partition: str | None, max_rollbacks: int = 1) -> dict:
    auto = {"enabled": True, "on_nan": True, "spike_factor": None, "window": 5, "max_rollbacks": max_rollbacks}
    if watcher_partition:
        auto["watcher_partition"] = watcher_partition
    return auto


def _submit(mbl, plan: Path, shared: Path, tmp_path: Path, env: dict | None = None) -> dict:
    db = shared / "ledger.sqlite3"  # the watcher job opens it on a compute node
    proc = mbl.run("submit", str(plan), "--yes", "--script-dir", str(shared), "--ledger", str(db), "--format", "json",
                   env={"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state"), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    submitted = json.loads(proc.stdout)
    assert submitted["watcher_job_id"], proc.stderr
    return submitted


def _runs(shared: Path) -> list[L.RunRecord]:
    with L.Ledger.open(shared / "ledger.sqlite3") as ledger:
        return ledger.list_runs(limit=None)


def _sacct_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S")


def _jobs_named(cluster, name: str) -> list[str]:
    """Every job of that exact name Slurm knows (accounting, and the queue for the newest)."""
    out = cluster.run(["sacct", "-n", "-P", "-X", "--name", name, "-S", "now-1hour", "--format=JobID"]).stdout.split()
    queued = cluster.run(["squeue", "-h", "--name", name, "-o", "%i"]).stdout.split()
    return sorted(set(out) | set(queued))


def _cancel_everything(mbl, shared: Path, cluster) -> None:
    """Cleanup: every run of the test's ledger cancelled, its jobs gone (others need the nodes)."""
    if not (shared / "ledger.sqlite3").exists():
        return
    for run in _runs(shared):
        if run.active:
            mbl.run("cancel", str(run.id), "--yes", "--ledger", str(shared / "ledger.sqlite3"))
        for job in [*run.job_ids, run.watcher_job_id]:
            if job:
                cluster.cancel(job)


# ---------------------------------------------------------------------- (a) NaN within 60 s, full exclusive partition
def test_nan_is_acted_on_within_60s_while_training_holds_every_gb200_node(gb200_base, slurm_env, slurm_cluster, shared_dir,
                                                                        tmp_path, mbl):
    name, since = unique("rs-nan"), time.time()
    # 300 iterations of 1 s: unstopped, the run would go on for five minutes after its NaN at 9
    plan = write_plan(gb200_base, shared_dir, name, iters=300, save_interval=3, auto_rollback=_auto("cpu"),
                      env={"MBL_STANDIN_NAN_AT": "9", "MBL_STANDIN_ITER_SECONDS": "1.0"})
    try:
        submitted = _submit(mbl, plan, shared_dir, tmp_path)  # the default poll: no MBRIDGE_LAUNCH_WATCHER_POLL
        job, watcher = submitted["job_ids"][0], submitted["watcher_job_id"]
        deadline = time.monotonic() + 180
        while len(_runs(shared_dir)) < 2:  # the watcher job cancelled, rolled back and resubmitted
            assert time.monotonic() < deadline, (slurm_cluster.squeue_state(job), _watch_log(shared_dir)[-3000:])
            time.sleep(1)
        assert slurm_cluster.wait(job, timeout=60) == "CANCELLED"
        held = slurm_cluster.settled_sacct(job, fields=("JobID", "Partition", "NodeList", "End"))
        assert (held["Partition"], held["NodeList"]) == ("gb200", "gb200-[1-2]")  # every node of it
        assert slurm_cluster.partition(watcher) == "cpu"
        nan_lines = [m for m in map(NAN_STAMP.search, _logs(shared_dir, job).splitlines()) if m]
        assert nan_lines and int(nan_lines[0].group(2)) == 9, _logs(shared_dir, job)[-2000:]
        latency = (_sacct_time(held["End"]) - dt.datetime.strptime(nan_lines[0].group(1), "%Y-%m-%d %H:%M:%S")).total_seconds()
        assert latency < 60, latency
        print(f"NaN log line -> training job end: {latency:.0f} s")
        first, second = sorted(_runs(shared_dir), key=lambda r: r.id)
        with L.Ledger.open(shared_dir / "ledger.sqlite3") as ledger:
            [rb] = ledger.rollbacks(run_ids=[first.id])
        assert (rb.state, rb.to_iter, rb.trigger["kind"], rb.trigger["iteration"]) == ("done", 6, "nan", 9)
        assert second.parent_run_id == first.id and second.watcher_job_id  # resubmitted with its own watcher
        assert mbl.run("runs", "--ledger", str(shared_dir / "ledger.sqlite3")).returncode == 0  # refreshes
        assert_nothing_lost(slurm_cluster, shared_dir / "ledger.sqlite3", name, since)
    finally:
        _cancel_everything(mbl, shared_dir, slurm_cluster)


def test_preflight_warns_when_the_watcher_would_queue_behind_exclusive_training(gb200_base, slurm_env, slurm_cluster,
                                                                              shared_dir, mbl):
    def codes(auto: dict) -> dict[str, str]:
        plan = write_plan(gb200_base, shared_dir, unique("rs-place"), auto_rollback=auto)
        proc = mbl.run("preflight", str(plan), "--format", "json")
        assert proc.returncode in (0, 1), proc.stderr
        return {c["code"]: c for c in proc.json()["checks"] if c["code"].startswith("cluster.watcher")}

    same = codes(_auto(None))  # the training partition gb200, whose nodes training takes --exclusive
    warning = same["cluster.watcher_same_exclusive"]
    assert warning["severity"] == "warning" and "gb200" in warning["message"]
    assert "--watcher-partition" in warning["hint"]
    assert "cluster.watcher_partition_missing" in codes(_auto("nosuch"))
    placed = codes(_auto("cpu"))
    assert set(placed) == {"cluster.watcher_placement_ok"} and placed["cluster.watcher_placement_ok"]["severity"] == "info"


def _logs(shared: Path, job: str) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((shared / "logs").glob(f"*-{job}*")) if p.is_file())


def _watch_log(shared: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((shared / "logs").glob("*-watch-*.out")))


# ---------------------------------------------------------------------- (b) cancel: no successor watcher
def test_cancel_of_a_run_with_a_watcher_leaves_no_watcher_behind(base_plan, slurm_env, slurm_cluster, shared_dir, tmp_path, mbl):
    name, since = unique("rs-cancel"), time.time()
    plan = write_plan(base_plan, shared_dir, name, iters=400, save_interval=50, auto_rollback=_auto("cpu"),
                      env={"MBL_STANDIN_ITER_SECONDS": "0.5"})
    try:
        submitted = _submit(mbl, plan, shared_dir, tmp_path, env={"MBRIDGE_LAUNCH_WATCHER_POLL": "0.5"})
        job, watcher = submitted["job_ids"][0], submitted["watcher_job_id"]
        slurm_cluster.wait_state(job, "RUNNING", timeout=120)
        slurm_cluster.wait_state(watcher, "RUNNING", timeout=60)
        time.sleep(2)  # the watcher is following the run (its SIGTERM handler is in place)
        out = mbl.run("cancel", submitted["run_id"], "--yes", "--ledger", str(shared_dir / "ledger.sqlite3"))
        assert out.returncode == 0, out.stderr
        ended = slurm_cluster.wait(watcher, timeout=60)
        assert ended in ("CANCELLED", "COMPLETED")
        assert slurm_cluster.wait(job, timeout=60) == "CANCELLED"
        time.sleep(3)  # a successor would have been submitted by now
        assert _jobs_named(slurm_cluster, f"{name}-watch") == [watcher]
        [run] = _runs(shared_dir)
        assert run.watcher_job_id == watcher  # no successor recorded either
        # it says so, unless Slurm's KillWait (5 s here) ended it first on a loaded machine
        assert "after `cancel`: no successor watcher job" in _watch_log(shared_dir) or ended == "CANCELLED"
        assert mbl.run("runs", "--ledger", str(shared_dir / "ledger.sqlite3")).returncode == 0  # refreshes
        assert_nothing_lost(slurm_cluster, shared_dir / "ledger.sqlite3", name, since)
    finally:
        _cancel_everything(mbl, shared_dir, slurm_cluster)


# ---------------------------------------------------------------------- (c) the watcher's --output
def test_watcher_output_is_the_file_slug_in_the_log_dir_and_the_job_starts(base_plan, slurm_env, slurm_cluster, shared_dir,
                                                                         tmp_path, mbl):
    name = "_" + unique("rs-slug") + "."  # a valid run name whose file slug differs from it
    plan = write_plan(base_plan, shared_dir, name, iters=12, save_interval=6, auto_rollback=_auto("cpu"),
                      env={"MBL_STANDIN_ITER_SECONDS": "0.3"})
    slug = name.strip("._")
    try:
        submitted = _submit(mbl, plan, shared_dir, tmp_path, env={"MBRIDGE_LAUNCH_WATCHER_POLL": "0.5"})
        watcher = submitted["watcher_job_id"]
        expected = shared_dir / "logs" / f"{slug}-watch-{watcher}.out"
        assert slurm_cluster.scontrol_job(watcher)["StdOut"] == str(expected)
        assert slurm_cluster.wait(watcher, timeout=120) == "COMPLETED"  # not FAILED at launch
        assert expected.is_file() and "watching" in expected.read_text()
        assert slurm_cluster.wait(submitted["job_ids"][0], timeout=60) == "COMPLETED"
    finally:
        _cancel_everything(mbl, shared_dir, slurm_cluster)


# ---------------------------------------------------------------------- (d) the node-check job
SECRET_NAME, SECRET_VALUE = "MBL_RS_NODECHECK_TOKEN", "rs-secret-value-7f3a"


def _node_check_plan(base_plan: dict, shared: Path, name: str, **cluster) -> Path:
    data = copy.deepcopy(base_plan)
    data["cluster"].update({"time": "01:00:00", "secrets": [SECRET_NAME], **cluster})
    return write_plan(data, shared, name)


def _env_dumping_nvidia_smi(directory: Path, dumps: Path) -> Path:
    """An nvidia-smi on PATH that records its environment (the job's), then answers as the
    cluster's fake one does."""
    directory.mkdir()
    dumps.mkdir()
    tool = directory / "nvidia-smi"
    tool.write_text(f'#!/bin/bash\nenv > "{dumps}/$(hostname)-$$.env"\nexec {FAKE_BIN / "nvidia-smi"} "$@"\n')
    tool.chmod(0o755)
    return directory


def test_node_check_job_environment_holds_no_secret(base_plan, slurm_env, slurm_cluster, shared_dir, tmp_path, mbl):
    import os

    name = unique("rs-nodeenv")
    plan = _node_check_plan(base_plan, shared_dir, name, env=["PATH"])
    dumps = shared_dir / "env-dumps"
    tools = _env_dumping_nvidia_smi(shared_dir / "bin", dumps)
    proc = mbl.run("preflight", str(plan), "--on-nodes", "--format", "json", timeout=180,
                   env={"PATH": f"{tools}:{os.environ['PATH']}", SECRET_NAME: SECRET_VALUE})
    checks = {c["code"] for c in proc.json()["checks"]}
    assert "nodes.node_ok" in checks, proc.stdout[-3000:]
    environments = [p.read_text() for p in dumps.glob("*.env")]
    assert environments, "nvidia-smi never ran in the node-check job"
    assert all(f"PATH={tools}:" in e for e in environments)  # the plain names it needs do reach it
    assert not [e for e in environments if SECRET_NAME in e or SECRET_VALUE in e]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_node_check_wait_reports_and_an_interrupt_cancels_the_job(base_plan, slurm_env, slurm_cluster, shared_dir, mbl, signum):
    name = unique("rs-nodewait")
    plan = _node_check_plan(base_plan, shared_dir, name, sbatch_args=["--begin=now+3600"])  # it stays PENDING
    proc = mbl.popen("preflight", str(plan), "--on-nodes", env={SECRET_NAME: SECRET_VALUE})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        waiting = None
        while waiting is None:
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)[-3000:]
            waiting = next((m for m in map(re.compile(r"node-check job (\d+): PENDING \((\w+)\)").search, list(lines)) if m), None)
            time.sleep(0.2)
        job, reason = waiting.groups()
        assert reason == "BeginTime"  # Slurm's pending reason
        assert slurm_cluster.scontrol_job(job)["TimeLimit"] == NODE_CHECK_TIME  # not the Plan's 01:00:00
        proc.send_signal(signum)
        proc.wait(timeout=60)
        reader.join(timeout=10)
        assert proc.returncode == 130, "".join(lines)[-3000:]
        assert f"node-check job {job} cancelled" in "".join(lines)
        assert slurm_cluster.scontrol_job(job)["JobState"] == "CANCELLED"
        assert slurm_cluster.run(["squeue", "-h", "-j", job, "-t", "PENDING,RUNNING"], check=False).stdout.strip() == ""
        waited = [int(m.group(1)) for m in map(re.compile(r"node-check job \d+: .*waited (\d+)s").search, lines) if m]
        assert waited and all(b - a >= 5 for a, b in zip(waited, waited[1:])), waited  # a bounded rate
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["scancel", f"--name={name}-node-check"], env=slurm_cluster.env, check=False)
