"""sbatch adapter: golden scripts, bash -n, the node check program run locally with a fake
nvidia-smi / scontrol, segment and feature gating, refusals, Slurm error parsing, the CLI dry run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.base import i18n
from mbridge_launch.base.errors import UserError
from mbridge_launch.executors import batch_script, common, get_executor, node_check
from mbridge_launch.plan.model import save_plan
from mbridge_launch.slurm import commands as slurm_cli

pytestmark = pytest.mark.usefixtures("english")

REPO = Path(__file__).resolve().parents[2]


def _bash_n(text: str, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text(text)
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", sorted(pf.GOLDEN_PLANS))
def test_golden_script(name, tmp_path):
    plan = pf.GOLDEN_PLANS[name]()
    rendered = get_executor("sbatch").render(plan)
    pf.assert_golden(f"sbatch/{name}.sh", rendered.text)
    _bash_n(rendered.text, tmp_path)
    # the header names the tool, version, plan hash and the exact submit command
    head = rendered.text.splitlines()[:4]
    assert "mbridge-launch 0.1.0" in head[1]
    assert plan.plan_hash() in head[2]
    assert head[3] == "# Submit with: " + " ".join(rendered.submit_command)
    assert rendered.submit_command == ["sbatch", "--parsable", f"{plan.name}-{plan.plan_hash()}.sbatch"]


def test_rendering_is_pure_and_deterministic(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = pf.two_node_h100()
    first = get_executor("sbatch").render(plan)
    assert get_executor("sbatch").render(plan).text == first.text
    assert list(tmp_path.iterdir()) == []  # rendering wrote nothing


def test_srun_native_shape_and_features():
    text = get_executor("sbatch").render(pf.two_node_h100()).text
    assert "#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n" in text
    assert "#SBATCH --exclusive\n#SBATCH --requeue\n#SBATCH --signal=TERM@60\n" in text
    assert "#SBATCH --export=NEMO_HOME,HF_HOME,HF_TOKEN,WANDB_API_KEY\n" in text
    # the site has neither Pyxis nor --segment (Slurm 23.02 profile): neither is rendered
    assert "--segment" not in text and "--container" not in text
    train = text.splitlines()[-1]
    assert train.startswith("srun --export=ALL --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 --mpi=pmix")
    assert "checkpoint.save=/lustre/ckpt/llama3-70b-pretrain checkpoint.load=/lustre/ckpt/llama3-70b-pretrain" in train
    assert '-%j-restart"${SLURM_RESTART_COUNT:-0}".log' in train


def test_gb200_profile_renders_segment_and_container():
    text = get_executor("sbatch").render(pf.four_node_gb200()).text
    assert "#SBATCH --segment=4\n" in text
    assert "--container-image=nvcr.io/nvidia/nemo:25.11 --container-mounts=/lustre:/lustre" in text
    assert "export NCCL_NET_GDR_C2C=1\n" in text and "export CUDA_DEVICE_MAX_CONNECTIONS=32\n" in text


@pytest.mark.parametrize("nodes,expected", [(1, 1), (4, 4), (18, 18), (20, 10), (36, 18), (19, 1)])
def test_segment_follows_nvidia_rule_on_nvl72(nodes, expected):
    plan = pf.with_changes(pf.four_node_gb200(), cluster={"nodes": nodes})
    assert common.segment(plan) == expected


def test_segment_only_where_the_site_supports_it():
    gb200 = pf.four_node_gb200()
    no_segment = pf.with_changes(gb200, cluster={"profile": {**gb200.cluster.profile.model_dump(), "segment": False}})
    assert common.segment(no_segment) is None
    assert "--segment" not in get_executor("sbatch").render(no_segment).text
    explicit = pf.with_changes(gb200, cluster={"segment": 2})
    assert common.segment(explicit) == 2
    assert common.segment(pf.two_node_h100()) is None  # 8-GPU nodes: no NVL72 rule


def test_benchmark_recipe_has_no_dataset_flag():
    train = get_executor("sbatch").render(pf.benchmark_recipe()).text.splitlines()[-1]
    assert "--dataset" not in train and "--mode" not in train
    assert "train.train_iters=50" in train


def test_node_check_script_alone(tmp_path):
    text = batch_script.node_check_script(pf.four_node_gb200())
    _bash_n(text, tmp_path)
    assert "#SBATCH --job-name=llama3-70b-gb200-node-check" in text
    assert "#SBATCH --ntasks-per-node=1" in text and "#SBATCH --gpus-per-node=4" in text
    assert "run_recipe.py" not in text and "--requeue" not in text


def test_node_check_job_asks_for_its_own_time_limit_not_the_plans():
    plan = pf.four_node_gb200()
    assert plan.cluster.time != "00:07:00"
    text = batch_script.node_check_script(plan, time="00:07:00")
    assert "#SBATCH --time=00:07:00" in text and f"#SBATCH --time={plan.cluster.time}" not in text


# ------------------------------------------------------------------ the node check program itself
def _fake_tools(tmp_path: Path, gpu_lines: list[str] | None, gres: str = "gpu:h100:8") -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if gpu_lines is not None:
        listing = "\n".join(f"GPU {i}: {name} (UUID: GPU-{i})" for i, name in enumerate(gpu_lines))
        names = "\n".join(gpu_lines)
        (bin_dir / "nvidia-smi").write_text(
            "#!/bin/bash\nif [ \"$1\" = -L ]; then cat <<'E'\n" + listing + "\nE\nelse cat <<'E'\n" + names + "\nE\nfi\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    (bin_dir / "scontrol").write_text(f"#!/bin/bash\necho 'NodeName=n1 Arch=x86_64 Gres={gres} State=IDLE'\n")
    (bin_dir / "scontrol").chmod(0o755)
    tools = "/usr/bin:/bin"
    return {"PATH": f"{bin_dir}:{tools}", "SLURMD_NODENAME": "n1", "SLURM_GPUS_ON_NODE": "8"}


def _run_check(plan, env) -> subprocess.CompletedProcess:
    return subprocess.run(node_check.node_check_argv(plan), env=env, capture_output=True, text=True)


def test_node_check_passes_with_matching_nvidia_smi(tmp_path):
    proc = _run_check(pf.two_node_h100(), _fake_tools(tmp_path, ["NVIDIA H100 80GB HBM3"] * 8))
    assert proc.returncode == 0, proc.stderr
    assert "node check n1: 8 x NVIDIA H100 80GB HBM3 GPUs, as the plan expects (nvidia-smi)" in proc.stdout


def test_node_check_fails_on_missing_gpu(tmp_path):
    proc = _run_check(pf.two_node_h100(), _fake_tools(tmp_path, ["NVIDIA H100 80GB HBM3"] * 7))
    assert proc.returncode == 1
    assert "node check n1: expected 8 x h100 GPUs, found 7 x NVIDIA H100 80GB HBM3 (nvidia-smi)" in proc.stderr


def test_node_check_type_is_a_whole_word(tmp_path):
    # a B200 plan must not accept GB200 GPUs just because "gb200" contains "b200"
    plan = pf.with_changes(pf.four_node_gb200(), cluster={"gpu_type": "b200"})
    proc = _run_check(plan, _fake_tools(tmp_path, ["NVIDIA GB200"] * 4))
    assert proc.returncode == 1
    assert "expected 4 x b200 GPUs, found 4 x NVIDIA GB200" in proc.stderr


def test_node_check_without_nvidia_smi_uses_slurm(tmp_path):
    env = _fake_tools(tmp_path, None, gres="gpu:gb200:4(S:0-1)")
    env["SLURM_GPUS_ON_NODE"] = "4"
    ok = _run_check(pf.four_node_gb200(), env)
    assert ok.returncode == 0, ok.stderr
    assert "4 x gb200 GPUs, as the plan expects (SLURM_GPUS_ON_NODE, scontrol show node)" in ok.stdout
    wrong = _run_check(pf.two_node_h100(), env)
    assert wrong.returncode == 1
    assert "expected 8 x h100 GPUs, found 4 x gb200" in wrong.stderr


def test_node_check_messages_follow_the_language(tmp_path):
    i18n.set_lang("zh")
    proc = _run_check(pf.two_node_h100(), _fake_tools(tmp_path, ["NVIDIA H100 80GB HBM3"] * 7))
    assert "节点检查 n1：预期 8 块 h100 GPU，实际为 7 块" in proc.stderr


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("changes,key", [
    *pf.UNSAFE_VALUES,
    ({"cluster": {"sbatch_args": ["reservation=x"]}}, "executors.sbatch_arg_not_option"),
])
def test_unsafe_values_are_refused(changes, key):
    plan = pf.with_changes(pf.two_node_h100(), **changes)
    with pytest.raises(UserError) as err:
        get_executor("sbatch").render(plan)
    assert err.value.key == key
    assert err.value.render("en") and "\n" not in err.value.render("en").replace("\\n", "")


def test_secret_value_in_env_vars_is_refused():
    plan = pf.with_changes(pf.two_node_h100(), top={"env_vars": {"HF_TOKEN": "hf_abc"}})
    with pytest.raises(UserError) as err:
        get_executor("sbatch").render(plan)
    assert err.value.key == "executors.secret_value_in_env"


def test_torchrun_shape_is_single_node_only():
    plan = pf.with_changes(pf.two_node_h100(), launch={"shape": "torchrun"})
    with pytest.raises(UserError) as err:
        get_executor("sbatch").render(plan)
    assert err.value.key == "executors.torchrun_multi_node"


# ------------------------------------------------------------------ Slurm output parsing
def test_slurm_reason_is_one_line():
    stderr = ("sbatch: error: Batch job submission failed: Requested node configuration is not available\n")
    assert slurm_cli.slurm_reason(stderr) == "Requested node configuration is not available"
    noisy = "sbatch: warning: x\nsbatch: error: invalid partition specified: nope\n"
    assert slurm_cli.slurm_reason(noisy) == "invalid partition specified: nope"
    assert slurm_cli.parse_job_id("1234\n") == "1234"
    assert slurm_cli.parse_job_id("1234;lab\n") == "1234"


def test_sbatch_refusal_becomes_submission_error(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/bash\necho 'sbatch: error: Batch job submission failed: "
                                    "Requested node configuration is not available' >&2\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    plan = pf.with_changes(pf.moe_ep(), launch={"log_dir": str(tmp_path / "logs")})
    with pytest.raises(UserError) as err:
        executor = get_executor("sbatch")
        executor.schedule(executor.render(plan, tmp_path))
    assert err.value.exit_code == 4
    assert err.value.render("en") == "Slurm refused the job: Requested node configuration is not available"
    assert "Batch job submission failed" in err.value.raw_output


# ------------------------------------------------------------------ CLI and registry
def test_cli_dry_run_prints_script_and_submits_nothing(tmp_path, mbl):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "sbatch-was-called"
    (bin_dir / "sbatch").write_text(f"#!/bin/bash\ntouch {marker}\necho 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    plan_path = save_plan(pf.two_node_h100(), tmp_path / "plan.yaml")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = mbl.run("submit", plan_path, "--executor", "sbatch", "--dry-run", "--script-dir", tmp_path / "work",
                   "--no-cluster-checks", env=env, cwd=tmp_path)
    # the plan's launch.workdir (/lustre/src/Megatron-Bridge) is not on this machine: a real submit
    # would be refused, the dry run says so (exit 1) and still prints the exact script
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("# dry run: nothing was submitted. Executor sbatch; submit command: sbatch --parsable")
    assert proc.stdout.splitlines()[1].startswith("# dry run: a real submit would be refused: ")
    assert "path.workdir_missing" in proc.stderr
    assert get_executor("sbatch").render(pf.two_node_h100()).text in proc.stdout
    assert not marker.exists() and not (tmp_path / "work").exists()


def test_registry_imports_no_heavy_library():
    code = ("import sys, mbridge_launch.executors as e; e.get_executor('sbatch'); "
            "print(sorted(m for m in ('nemo_run', 'submitit') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_container_flags_only_with_pyxis():
    plan = pf.four_node_gb200()
    assert plan.cluster.container_image and plan.cluster.profile.pyxis
    assert "--container-image=" in get_executor("sbatch").render(plan).text
    no_pyxis = pf.with_changes(plan, cluster={"profile": {**plan.cluster.profile.model_dump(), "pyxis": False}})
    text = get_executor("sbatch").render(no_pyxis).text
    assert "--container" not in text and "--no-container-mount-home" not in text
