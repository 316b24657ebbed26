"""End to end on the local Slurm cluster, for each executor: a 2-node x 8-GPU plan runs the
stand-in trainer with 16 ranks and finishes COMPLETED; a plan asking for more GPUs than a node has
is refused by Slurm with one clear line (CLI exit 4); a plan whose GPU type or count does not match
the nodes fails in the node check before the trainer starts."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.executors import BUILTINS
from mbridge_launch.executors.launch import render_plan, schedule
from mbridge_launch.plan.model import Plan, save_plan
from mbridge_launch.plan.trainer_args import recipe_selector

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("english")]
EXECUTORS = list(BUILTINS)  # every built-in executor (sbatch, nemo-run, submitit)


def cluster_plan(base: Path, entry: list[str], partition: str = "h100", gpus_per_node: int = 8,
                 gpu_type: str = "h100", env: tuple[str, ...] = ()) -> Plan:
    """The MoE fixture moved onto the local cluster: 2 nodes, the stand-in trainer, 4 iterations."""
    return pf.with_changes(
        pf.moe_ep(),
        cluster={"partition": partition, "account": None, "time": "00:10:00", "gpus_per_node": gpus_per_node,
                 "gpu_type": gpu_type, "env": ["MBL_STANDIN_REPORT_DIR", *env]},
        checkpoint={"save": str(base / "ckpt"), "load": str(base / "ckpt"), "save_interval": 2},
        launch={"entry": entry, "log_dir": str(base / "logs")},
        top={"overrides": [{"key": "train.train_iters", "value": "4", "class": "convergence"}]},
    )


def _all_logs(base: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(base.rglob("*"))
                     if p.is_file() and p.suffix in (".out", ".err", ".log"))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_two_nodes_sixteen_ranks_complete(executor, slurm_cluster, slurm_env, standin_entry, shared_dir, monkeypatch):
    report = shared_dir / "report"
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(report))
    plan = cluster_plan(shared_dir, standin_entry)
    submitted = schedule(render_plan(plan, executor, shared_dir / "work"))
    job_id = submitted.job_ids[0]
    state = slurm_cluster.wait(job_id, timeout=150)
    assert state == "COMPLETED", _all_logs(shared_dir)[-3000:]

    records = [json.loads(p.read_text()) for p in sorted(report.glob("rank-*.json"))]
    assert sorted(r["rank"] for r in records) == list(range(16))
    hosts = {}
    for r in records:
        env = r["env"]
        assert env["SLURM_JOB_ID"] == job_id
        assert env["SLURM_NTASKS"] == "16" and env["SLURM_NNODES"] == "2"
        assert env["SLURM_PROCID"] == str(r["rank"])
        assert env["SLURM_JOB_NODELIST"] == "h100-[1-2]"
        assert r["dist"]["world_size"] == 16 and r["dist"]["source"] == "slurm"
        assert env["NCCL_NVLS_ENABLE"] == "0"  # the plan's NVIDIA env reached every rank
        assert r["status"] == "completed", r
        # the name run_recipe.py loads the Plan's library recipe by (its alias where a benchmark
        # function shadows the canonical name, as for qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config)
        assert r["argv"][:6] == ["--recipe", recipe_selector(plan), "--mode", "pretrain", "--dataset", "mock"]
        hosts.setdefault(r["hostname"], set()).add(int(env["SLURM_LOCALID"]))
    assert hosts == {"h100-1": set(range(8)), "h100-2": set(range(8))}
    ckpt = shared_dir / "ckpt"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    assert (ckpt / "iter_0000004" / "train_state.pt").is_file()
    assert "node check h100-1: 8 x h100 GPUs" in _all_logs(shared_dir)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_more_gpus_than_a_node_has_is_one_clear_line(executor, slurm_cluster, standin_entry, shared_dir, mbl):
    plan = cluster_plan(shared_dir, standin_entry, gpus_per_node=9)
    path = save_plan(plan, shared_dir / "plan.yaml")
    # preflight already flags 9 GPUs per node; --force makes Slurm itself the judge here
    proc = mbl.run("submit", path, "--executor", executor, "--script-dir", shared_dir / "work", "--yes", "--force",
                   "--reason", "e2e: Slurm itself must refuse", "--ledger", shared_dir / "ledger.sqlite3",
                   env=slurm_cluster.env, cwd=shared_dir)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert errors == ["error: Slurm refused the job: Requested node configuration is not available"], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("executor", EXECUTORS)
def test_wrong_gpu_type_fails_in_the_node_check(executor, slurm_cluster, slurm_env, standin_entry, shared_dir,
                                                monkeypatch):
    # the plan says h100 but asks for 4 GPUs per node on the gb200 partition: Slurm allocates
    # (the request is untyped) and the node check must stop the job before the trainer starts
    report = shared_dir / "report"
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(report))
    plan = cluster_plan(shared_dir, standin_entry, partition="gb200", gpus_per_node=4, gpu_type="h100")
    job_id = schedule(render_plan(plan, executor, shared_dir / "work")).job_ids[0]
    assert slurm_cluster.wait(job_id, timeout=120) == "FAILED"
    logs = _all_logs(shared_dir)
    # either node may fail first, and srun then ends the other before it prints: any node's line will do
    assert re.search(r"node check gb200-\d: expected 4 x h100 GPUs, found 4 x gb200", logs), logs[-3000:]
    assert not report.exists() or not any(report.iterdir())
    assert not (shared_dir / "ckpt").exists()


def test_missing_gpu_fails_in_the_node_check(slurm_cluster, slurm_env, standin_entry, shared_dir, monkeypatch):
    # nvidia-smi (the harness's fake one) sees 7 GPUs where Slurm granted 8: a GPU fell off the bus
    report = shared_dir / "report"
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(report))
    monkeypatch.setenv("PATH", f"{slurm_cluster.fake_bin}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_COUNT", "7")
    plan = cluster_plan(shared_dir, standin_entry, env=("PATH", "FAKE_NVIDIA_SMI_COUNT"))
    job_id = schedule(render_plan(plan, "sbatch", shared_dir / "work")).job_ids[0]
    assert slurm_cluster.wait(job_id, timeout=120) == "FAILED"
    logs = _all_logs(shared_dir)
    # any node of the partition may be allocated (other tests share the cluster)
    assert re.search(r"node check h100-\d: expected 8 x h100 GPUs, found 7 x NVIDIA H100 80GB HBM3 \(nvidia-smi\)", logs), logs[-2000:]
    assert "the trainer was not started" in logs
    assert not report.exists() or not any(report.iterdir())


STANDIN_TORCH = Path(__file__).resolve().parents[1] / "standin_torch"


@pytest.mark.parametrize("executor", EXECUTORS)
def test_single_node_torchrun_shape_runs(executor, slurm_cluster, slurm_env, standin_entry, shared_dir, monkeypatch):
    """launch.shape torchrun on one node: one Slurm task starts torchrun (the stand-in in
    tests/standin_torch, as torch is not installed here), which starts 8 ranks with torchrun's
    variables; they train, checkpoint and finish COMPLETED."""
    report = shared_dir / "report"
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(report))
    monkeypatch.setenv("PYTHONPATH", str(STANDIN_TORCH))
    plan = pf.with_changes(cluster_plan(shared_dir, standin_entry, env=("PYTHONPATH",)),
                           cluster={"nodes": 1}, launch={"shape": "torchrun"}, parallelism={"dp": 8})
    rendered = render_plan(plan, executor, shared_dir / "render")
    assert "torch.distributed.run --standalone --nproc_per_node=8" in rendered.text
    job_id = schedule(render_plan(plan, executor, shared_dir / "work")).job_ids[0]
    assert slurm_cluster.wait(job_id, timeout=150) == "COMPLETED", _all_logs(shared_dir)[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(report.glob("rank-*.json"))]
    assert sorted(r["rank"] for r in records) == list(range(8))
    for r in records:
        assert r["dist"]["source"] == "torchrun" and r["dist"]["world_size"] == 8
        assert r["env"]["SLURM_NTASKS"] == "1" and r["env"]["SLURM_JOB_ID"] == job_id  # one task: torchrun
        assert r["status"] == "completed"
    assert (shared_dir / "ckpt" / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    assert re.search(r"node check h100-\d: 8 x h100 GPUs", _all_logs(shared_dir))


# ------------------------------------------------------------------ the executor submits what it rendered
def one_node_plan(base: Path, entry: list[str]) -> Plan:
    return pf.with_changes(cluster_plan(base, entry), cluster={"nodes": 1}, parallelism={"dp": 8})


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_job_slurm_received_is_the_rendered_one(executor, slurm_cluster, slurm_env, standin_entry, shared_dir,
                                                     monkeypatch):
    """render(plan, script_dir) then schedule(rendered, token): the batch script Slurm stored
    (`scontrol write batch_script`) is the Rendered text byte for byte, from the rendered path
    (NeMo-Run: the experiment id chosen at render, in every path; no new one), every rendered
    file is on disk as shown, the token is the job's comment, sbatch ran from the script directory
    and the process's working directory never changed (directories are passed, not chdir'ed)."""
    import subprocess

    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(shared_dir / "report"))
    elsewhere = shared_dir / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    work = shared_dir / "work"
    rendered = render_plan(one_node_plan(shared_dir, standin_entry), executor, work)
    assert rendered.script_dir == work and rendered.files and rendered.script_path is not None
    submitted = schedule(rendered, "mbl-token-e2e-" + executor)
    assert Path.cwd() == elsewhere
    [job_id] = submitted.job_ids
    try:
        stored = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"], capture_output=True, text=True,
                                env=slurm_cluster.env, timeout=30)
        assert stored.returncode == 0, stored.stderr
        assert stored.stdout == rendered.text
        job = slurm_cluster.scontrol_job(job_id)
        assert job["Comment"] == "mbl-token-e2e-" + executor
        assert job["Command"] == str(rendered.script_path)
        assert job["WorkDir"] == str(work)  # the Plan has no launch.workdir: the job starts in the script dir
        for path, text in rendered.files.items():
            assert Path(path).read_text() == text, path
        if executor == "nemo-run":
            experiment_id = rendered.choices["experiment_id"]
            assert f"/{experiment_id}/" in str(submitted.script_path) and f"/{experiment_id}/" in job["StdOut"]
            assert submitted.script_path == rendered.script_path
        assert slurm_cluster.wait(job_id, timeout=150) == "COMPLETED", _all_logs(shared_dir)[-3000:]
    finally:
        slurm_cluster.cancel(job_id)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_gate_submits_the_text_it_showed_and_recorded(executor, base_plan, slurm_cluster, slurm_env, shared_dir,
                                                          tmp_path, mbl):
    """`submit --yes` through the gate: the review copy the card points at, the ledger's
    script_text and the batch script Slurm stored are one text (the gate renders once and
    schedules that Rendered; NeMo-Run used to render a preview, then submit a new experiment)."""
    import subprocess

    from gate_fixtures import unique, write_plan
    from run_safety_checks import ledger_rows

    name = unique(f"shown-{executor[:2]}")
    plan = write_plan(base_plan, shared_dir, name)
    db = tmp_path / "ledger.sqlite3"
    proc = mbl.run("submit", plan, "--yes", "--ledger", db, "--script-dir", shared_dir / "work", "--executor",
                   executor, "--format", "json", env={"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")},
                   cwd=shared_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("{"), proc.stdout[:800]
    [job_id] = json.loads(proc.stdout)["job_ids"]
    try:
        [row] = ledger_rows(db)
        stored = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"], capture_output=True, text=True,
                                env=slurm_cluster.env, timeout=30)
        assert stored.returncode == 0, stored.stderr
        assert row["script_text"] == stored.stdout
        pattern = "*.sbatch" if executor == "sbatch" else f"{name}-*.{executor}.review.sh"
        copies = sorted((shared_dir / "work").glob(pattern))
        assert len(copies) == 1 and copies[0].read_text() == stored.stdout, copies
        assert str(copies[0]) in proc.stderr  # the card points at it
        assert Path(row["script_path"]).read_text() == stored.stdout  # the file submitted, as recorded
    finally:
        slurm_cluster.cancel(job_id)
