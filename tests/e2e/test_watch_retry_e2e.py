"""The watcher job after a failure, on the local Slurm cluster: a node that fails under a running
job (`scontrol update State=DOWN`) is diagnosed `node_failure`, and the run is resubmitted through
the gate with that node excluded, resuming from its checkpoint on the other node; a software error
(an import error at start) is diagnosed and not resubmitted."""

from __future__ import annotations

import json
import time

import pytest

from gate_fixtures import log_text, unique, write_plan
from mbridge_launch.plan.model import load_plan, save_plan
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.runs import ledger as L

WATCHER_ENV = {"MBRIDGE_LAUNCH_WATCHER_POLL": "0.3"}
AUTO = {"enabled": True, "on_nan": True, "spike_factor": None, "window": 5, "max_rollbacks": 2,
        "watcher_partition": "cpu"}


def _plan(base_plan, shared_dir, name, *, iters, env):
    path = write_plan(base_plan, shared_dir, name, iters=iters, save_interval=10, auto_rollback=AUTO, env=env)
    plan = load_plan(path)
    data = plan.canonical_dict()
    # a failed job must stay failed (no Slurm requeue) so that the watcher sees it end
    data["cluster"].update(requeue=False, nodes=1)
    from mbridge_launch.plan.model import plan_from_dict

    return save_plan(plan_from_dict(data), path)


def _submit(mbl, plan, shared_dir, tmp_path):
    db = shared_dir / "ledger.sqlite3"
    env = {**WATCHER_ENV, "MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}
    first = mbl.run("submit", str(plan), "--yes", "--script-dir", str(shared_dir), "--ledger", str(db), "--format", "json",
                    env=env)
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["watcher_job_id"], first.stderr
    return db, answer["job_ids"][0], answer["watcher_job_id"]


def _node_of(cluster, job: str) -> str:
    out = cluster.run(["squeue", "-h", "-j", job, "-o", "%N"], check=False).stdout.strip()
    return out


@pytest.mark.slurm
def test_e2e_a_failed_node_is_excluded_and_the_run_resumes_elsewhere(base_plan, slurm_env, slurm_cluster, shared_dir,
                                                                     tmp_path, mbl):
    name = unique("wretry-node")
    plan = _plan(base_plan, shared_dir, name, iters=90, env={"MBL_STANDIN_ITER_SECONDS": "0.2"})
    db, job, watcher = _submit(mbl, plan, shared_dir, tmp_path)
    save = shared_dir / "ckpt"
    slurm_cluster.wait_state(watcher, "RUNNING", timeout=120)
    deadline = time.monotonic() + 120
    while C.latest_complete(save) is None or C.latest_complete(save) < 10:
        assert time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.2)
    node = _node_of(slurm_cluster, job)
    assert node.startswith("h100-"), node
    try:
        slurm_cluster.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=mbl-test-node-failure"])
        assert slurm_cluster.wait(job, timeout=120) == "NODE_FAIL"
        deadline = time.monotonic() + 240
        while True:
            with L.Ledger.open(db) as ledger:
                runs = ledger.list_runs(limit=None)
            if len(runs) == 2 and runs[0].job_ids and slurm_cluster.state(runs[0].job_ids[0]) == "COMPLETED":
                break
            watch_logs = "".join(p.read_text() for p in (shared_dir / "logs").glob(f"{name}-watch-*.out"))
            assert time.monotonic() < deadline, (runs, watch_logs[-3000:], log_text(shared_dir)[-2000:])
            time.sleep(1)
    finally:
        slurm_cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
    second = runs[0]
    assert f"--exclude={node}" in second.plan().cluster.sbatch_args
    shown = slurm_cluster.run(["sacct", "-n", "-X", "-j", second.job_ids[0], "-o", "NodeList%40"], check=False).stdout
    assert node not in shown and "h100-" in shown, shown
    with L.Ledger.open(db) as ledger:
        [diag] = [e["detail"] for e in ledger.events(runs[1].id) if e["kind"] == "diagnosis"]
        assert diag["cause"] == "node_failure" and diag["exclude_nodes"] == [node], diag
        [conf] = ledger.confirmations(second.id)
        assert (conf["action"], conf["method"]) == ("resubmit", "auto-rollback")
    resumed = [line for line in log_text(shared_dir).splitlines() if "loading checkpoint" in line]
    assert resumed and int(resumed[-1].rsplit("iteration", 1)[1].split()[0]) >= 10
    assert C.resolve_resume(save).iteration == 90


@pytest.mark.slurm
def test_e2e_a_software_error_is_diagnosed_and_not_resubmitted(base_plan, slurm_env, slurm_cluster, shared_dir,
                                                               tmp_path, mbl):
    name = unique("wretry-import")
    plan = _plan(base_plan, shared_dir, name, iters=30,
                 env={"MBL_STANDIN_ITER_SECONDS": "0.2", "MBL_STANDIN_IMPORT_ERROR": "megatron.core.transformer"})
    db, job, watcher = _submit(mbl, plan, shared_dir, tmp_path)
    assert slurm_cluster.wait(job, timeout=180) == "FAILED"
    assert slurm_cluster.wait(watcher, timeout=180) == "COMPLETED"
    with L.Ledger.open(db) as ledger:
        [run] = ledger.list_runs(limit=None)  # not resubmitted
        [diag] = [e["detail"] for e in ledger.events(run.id) if e["kind"] == "diagnosis"]
    assert diag["cause"] == "import_error" and diag["retry"] == "no", diag
    watch_logs = "".join(p.read_text() for p in (shared_dir / "logs").glob(f"{name}-watch-*.out"))
    assert "is not resubmitted: cause import_error" in watch_logs, watch_logs[-2000:]
