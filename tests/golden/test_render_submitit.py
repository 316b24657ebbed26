"""submitit adapter: pinned sbatch text and task command, parameters from the Plan, nothing in
slurm_setup, and the task wrapper run locally (node check, setup, exec with verbatim argv)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.base.errors import UserError
from mbridge_launch.executors import get_executor
from mbridge_launch.executors import submitit as submitit_adapter

submitit = pytest.importorskip("submitit")


pytestmark = pytest.mark.usefixtures("english")

def _stable(text: str) -> str:
    # submitit runs its tasks with the submitting interpreter; pin it for the golden file
    return text.replace(shlex.quote(sys.executable), "PYTHON")


@pytest.mark.parametrize("name", sorted(pf.GOLDEN_PLANS))
def test_golden_submission(name, tmp_path):
    rendered = get_executor("submitit").render(pf.GOLDEN_PLANS[name]())
    pf.assert_golden(f"submitit/{name}.sh", _stable(rendered.text))
    script = tmp_path / "s.sh"
    script.write_text(rendered.text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_parameters_come_from_the_plan():
    params = submitit_adapter.slurm_parameters(pf.four_node_gb200())
    assert params["nodes"] == 4 and params["tasks_per_node"] == 4 and params["gpus_per_node"] == 4
    assert params["timeout_min"] == 360 and params["slurm_partition"] == "gb200"
    extra = params["slurm_additional_parameters"]
    assert extra["export"] == "NEMO_HOME,HF_TOKEN" and extra["segment"] == 4 and extra["requeue"] is True
    assert "slurm_setup" not in params  # raw shell by design: never carries a Plan value
    assert "--container-image=nvcr.io/nvidia/nemo:25.11" in params["slurm_srun_args"]


@pytest.mark.parametrize("value,minutes", [("30", 30), ("04:00:00", 240), ("1-00:00:00", 1440),
                                           ("2-12", 3600), ("10:30", 11), ("00:00:30", 1)])
def test_slurm_time_minutes(value, minutes):
    assert submitit_adapter.slurm_time_minutes(value) == minutes


def test_folder_is_beside_the_logs_or_checkpoints(tmp_path):
    assert submitit_adapter.folder_for(pf.two_node_h100(), tmp_path) == Path("/lustre/logs/llama3-70b-pretrain/submitit")
    no_logs = pf.with_changes(pf.two_node_h100(), launch={"log_dir": None})
    assert submitit_adapter.folder_for(no_logs, tmp_path) == Path("/lustre/ckpt/submitit")
    neither = pf.with_changes(pf.benchmark_recipe(), launch={"log_dir": None})
    with pytest.raises(UserError) as err:
        submitit_adapter.folder_for(neither, tmp_path)
    assert err.value.key == "executors.no_shared_folder"


def _fake_gpu_path(tmp_path: Path, count: int) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lines = "\n".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: x)" for i in range(count))
    (bin_dir / "nvidia-smi").write_text(
        f"#!/bin/bash\nif [ \"$1\" = -L ]; then printf '%s\\n' '{lines}' | tr '|' '\\n'\n"
        "else echo 'NVIDIA H100 80GB HBM3'; fi\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def _task_plan(tmp_path: Path):
    # (no line break: Hydra's override grammar has none, so the Plan refuses it in an override value)
    hostile = "a b;$(touch " + str(tmp_path / "canary") + ")`id`'\""
    echo = [sys.executable, "-c", "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ.get('NCCL_NVLS_ENABLE'), os.environ.get('SETUP_RAN')]))"]
    return hostile, pf.with_changes(
        pf.moe_ep(),
        launch={"entry": echo, "setup": ["export SETUP_RAN=yes"]},
        top={"overrides": [{"key": "logger.name", "value": hostile, "class": "execution"}]},
    )


def test_task_command_checks_the_node_then_runs_the_trainer_verbatim(tmp_path):
    hostile, plan = _task_plan(tmp_path)
    proc = subprocess.run(submitit_adapter.task_command(plan), capture_output=True, text=True,
                          env={"PATH": _fake_gpu_path(tmp_path, 8), "SLURMD_NODENAME": "n1"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "node check n1: 8 x NVIDIA H100 80GB HBM3 GPUs" in lines[0]
    argv, nvls, setup_ran = json.loads(lines[-1])
    assert argv[-1] == f"logger.name={hostile}" and nvls == "0" and setup_ran == "yes"
    assert not (tmp_path / "canary").exists()


def test_task_command_stops_before_the_trainer_on_a_bad_node(tmp_path):
    _, plan = _task_plan(tmp_path)
    proc = subprocess.run(submitit_adapter.task_command(plan), capture_output=True, text=True,
                          env={"PATH": _fake_gpu_path(tmp_path, 7), "SLURMD_NODENAME": "n1"})
    assert proc.returncode == 1
    assert "expected 8 x h100 GPUs, found 7 x NVIDIA H100 80GB HBM3" in proc.stderr
    assert proc.stdout.strip() == ""  # the trainer never ran


def test_short_sbatch_options_are_refused_for_dict_based_executors():
    plan = pf.with_changes(pf.two_node_h100(), cluster={"sbatch_args": ["-Cgpu"]})
    for name in ("submitit", "nemo-run"):
        with pytest.raises(UserError) as err:
            get_executor(name).render(plan) if name == "submitit" else \
                get_executor(name, nemorun_home="/shared/nemorun-home").render(plan)
        assert err.value.key == "executors.sbatch_arg_long_form"
