"""Issue 13 item 6, end to end on the local cluster: the fake Pyxis (tests/cluster/fake_pyxis.c)
runs the training step in the image mbl/python3 (tests/cluster/make-image.sh), where only the
image and cluster.container_mounts are visible. For each executor a Plan whose mounts leave out the
stand-in trainer's directory fails with python's own error in the job's log, and the same Plan with
that directory mounted completes and writes its checkpoints through the mount. The stand-in runs
on the image's python3 (/usr/bin/python3), not on the test's venv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.executors import BUILTINS
from mbridge_launch.executors.launch import render_plan, schedule
from mbridge_launch.plan.model import Plan

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("english")]
TESTS_DIR = Path(__file__).resolve().parents[1]
STANDIN = TESTS_DIR / "standin_trainer.py"
IMAGE = "mbl/python3"  # made by tests/cluster/make-image.sh at cluster start
ENTRY = ["python3", str(STANDIN)]  # the image's python3: the venv is not in the image


def container_plan(base: Path, mounts: list[Path]) -> Plan:
    """One node, one GPU, 4 iterations of the stand-in, checkpoints every 2, in the test image."""
    return pf.with_changes(
        pf.moe_ep(),
        cluster={"partition": "h100", "account": None, "time": "00:05:00", "nodes": 1, "gpus_per_node": 1,
                 "gpu_type": "h100", "env": ["MBL_STANDIN_REPORT_DIR", "MBL_STANDIN_ITER_SECONDS"],
                 "container_image": IMAGE, "profile": {"pyxis": True},
                 "container_mounts": [{"source": str(m), "target": str(m)} for m in mounts]},
        parallelism={"dp": 1, "tp": 1, "pp": 1, "ep": 1, "cp": 1},
        checkpoint={"save": str(base / "ckpt"), "load": str(base / "ckpt"), "save_interval": 2},
        launch={"entry": ENTRY, "log_dir": str(base / "logs")},
        top={"overrides": [{"key": "train.train_iters", "value": "4", "class": "convergence"}]},
    )


def _logs(base: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(base.rglob("*"))
                     if p.is_file() and p.suffix in (".out", ".err", ".log"))


@pytest.fixture
def standin_env(monkeypatch, shared_dir):
    # inside the fixed run's mounted directory: elsewhere it would land in the task's private /tmp
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(shared_dir / "fixed" / "report"))
    monkeypatch.setenv("MBL_STANDIN_ITER_SECONDS", "0.01")


@pytest.mark.parametrize("executor", list(BUILTINS))
def test_unmounted_trainer_fails_and_mounted_one_checkpoints(executor, slurm_cluster, slurm_env, shared_dir,
                                                             standin_env):
    broken_dir, fixed_dir = shared_dir / "broken", shared_dir / "fixed"
    broken_dir.mkdir()
    fixed_dir.mkdir()
    # only the run's own directory is mounted: the trainer (in the repository) is not in the image
    broken = pf.with_changes(container_plan(broken_dir, [broken_dir]), top={"name": f"ctr-broken-{executor}"})
    job = schedule(render_plan(broken, executor, broken_dir / "work")).job_ids[0]
    assert slurm_cluster.wait(job, timeout=90) == "FAILED", _logs(broken_dir)[-3000:]
    logs = _logs(broken_dir)
    # python's own error from inside the image (the sbatch adapter's srun resolves /usr/bin/python3)
    assert f"python3: can't open file '{STANDIN}': [Errno 2] No such file or directory" in logs, logs[-3000:]
    assert not (broken_dir / "ckpt").exists()

    # the fix the preflight names: mount the trainer's directory too
    fixed = pf.with_changes(container_plan(fixed_dir, [fixed_dir, TESTS_DIR]), top={"name": f"ctr-fixed-{executor}"})
    submitted = schedule(render_plan(fixed, executor, fixed_dir / "work"))
    state = slurm_cluster.wait(submitted.job_ids[0], timeout=90)
    assert state == "COMPLETED", _logs(fixed_dir)[-3000:]
    ckpt = fixed_dir / "ckpt"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    assert (ckpt / "iter_0000002" / ".metadata").is_file() and (ckpt / "iter_0000004" / ".metadata").is_file()
    if executor == "nemo-run":  # the step log is in launch.log_dir and in the run's log paths
        step_log = next(p for p in submitted.log_paths if p.name.endswith("-restart0.log"))
        assert step_log.parent == fixed_dir / "logs"
        assert "successfully saved checkpoint from iteration       4" in step_log.read_text()
    record = json.loads((fixed_dir / "report" / "rank-0.json").read_text())
    assert record["env"]["FAKE_PYXIS_CONTAINER_IMAGE"] == IMAGE and record["status"] == "completed"
