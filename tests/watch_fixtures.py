"""Helpers for the watcher tests (tests/e2e/test_watch.py, test_watch_job.py) and the ledger's
end-to-end test: a fake Slurm status source, and a small plan for the local cluster with the
stand-in trainer."""

from __future__ import annotations

import sys
from pathlib import Path

from mbridge_launch.plan.model import AutoRollback, plan_from_dict
from mbridge_launch.runs.reconcile import JobInfo
from plan_fixtures import single_node_h100, with_changes

ROOT = Path(__file__).resolve().parents[1]


class FakeSlurm:
    """A Slurm status source whose job states are whatever the test puts in `states`."""

    def __init__(self):
        self.states: dict[str, str] = {}

    def job_states(self, job_ids):
        return {j: JobInfo(j, "x", self.states[j], None) for j in job_ids if j in self.states}

    def find_jobs(self, *, name, token, since):
        return []


def e2e_plan(shared: Path, name: str, *, train_iters: int, save_interval: int, env: dict, auto: bool, tmp_env=None):
    """A one-node, 2-GPU plan on the h100 partition running the stand-in trainer, everything under
    `shared`; (plan, its checkpoint directory)."""
    save = shared / "ckpt"
    plan = with_changes(
        single_node_h100(),
        top={"name": name},
        cluster={"partition": "h100", "nodes": 1, "gpus_per_node": 2, "time": "00:10:00", "env": [], "secrets": [],
                 "account": None, "signal": "TERM@30"},
        checkpoint={"save": str(save), "load": str(save), "save_interval": save_interval, "pretrained_checkpoint": None},
        launch={"shape": "srun", "entry": [sys.executable, str(ROOT / "tests" / "standin_trainer.py")],
                "workdir": str(shared), "log_dir": str(shared / "logs"), "setup": []},
        env_vars=env,
        auto_rollback=AutoRollback(enabled=auto, on_nan=True, spike_factor=None, window=5, max_rollbacks=2).model_dump(),
    )
    data = plan.canonical_dict()
    data["overrides"] = [o for o in data["overrides"] if o["key"] != "train.train_iters"] + [
        {"key": "train.train_iters", "value": str(train_iters), "class": "convergence", "reason": "test"}]
    return plan_from_dict(data), save
