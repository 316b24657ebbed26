"""`recommend -o PLAN.yaml` with every cluster flag: each lands in the Plan and in the sbatch
script rendered from it (`submit --dry-run`), where the flag belongs."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.plan.model import Mount, load_plan

pytestmark = pytest.mark.usefixtures("english")

FLAGS = [
    "--model", "llama3_8b", "--gpus", "16", "--name", "l3-8b-run1", "--account", "acct", "--partition", "batch",
    "--time", "08:00:00", "--container-image", "nvcr.io/nvidia/nemo:25.09", "--mount", "/lustre:/lustre",
    "--mount", "/scratch", "--env", "HF_TOKEN", "--env", "WANDB_PROJECT", "--save-dir", "/lustre/ckpt",
    "--dataset", "megatron-indexed", "--data-path", "0.7:/lustre/data/web_text_document",
    "--data-path", "0.3:/lustre/data/code_text_document", "train.train_iters=2000",
]


@pytest.fixture
def plan_and_script(tmp_path, capsys):
    out = tmp_path / "plan.yaml"
    assert main(["recommend", *FLAGS, "-o", str(out)]) == 0
    capsys.readouterr()
    # the verdict depends on this machine (no /lustre here); this test is about the script
    code = main(["submit", str(out), "--executor", "sbatch", "--dry-run", "--no-cluster-checks", "--format", "json"])
    rendered = json.loads(capsys.readouterr().out)
    assert code == (0 if rendered["would_submit"] else 1)
    return load_plan(out), rendered["text"]


def test_flags_land_in_the_plan(plan_and_script):
    plan, _ = plan_and_script
    c = plan.cluster
    assert plan.name == "l3-8b-run1"
    assert (c.account, c.partition, c.time, c.nodes, c.gpus_per_node) == ("acct", "batch", "08:00:00", 2, 8)
    assert c.container_image == "nvcr.io/nvidia/nemo:25.09" and c.profile.pyxis
    assert c.container_mounts == [Mount(source="/lustre", target="/lustre"), Mount(source="/scratch", target="/scratch")]
    assert c.env == ["WANDB_PROJECT"] and c.secrets == ["HF_TOKEN"]
    assert plan.checkpoint.save == plan.checkpoint.load == "/lustre/ckpt/l3-8b-run1"
    assert plan.dataset.selector == "megatron-indexed"
    assert plan.dataset.data_paths == ["/lustre/data/web_text_document", "/lustre/data/code_text_document"]
    assert plan.dataset.weights == [0.7, 0.3]
    assert any(o.key == "train.train_iters" and o.value == "2000" and o.change_class == "convergence"
               for o in plan.overrides)


def test_flags_land_in_the_sbatch_script(plan_and_script):
    plan, text = plan_and_script
    for line in ("#SBATCH --job-name=l3-8b-run1", "#SBATCH --account=acct", "#SBATCH --partition=batch",
                 "#SBATCH --time=08:00:00", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=8",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --export=WANDB_PROJECT,HF_TOKEN"):
        assert line + "\n" in text, line
    train = text.rstrip().splitlines()[-1]
    assert "--container-image=nvcr.io/nvidia/nemo:25.09" in train
    assert "--container-mounts=/lustre:/lustre,/scratch:/scratch" in train
    assert "--container-env=WANDB_PROJECT,HF_TOKEN," in train  # names only, then the perf env names
    assert "dataset.data_path=[0.7,/lustre/data/web_text_document,0.3,/lustre/data/code_text_document]" in train
    assert "checkpoint.save=/lustre/ckpt/l3-8b-run1 checkpoint.load=/lustre/ckpt/l3-8b-run1" in train
    assert "train.train_iters=2000" in train and "--dataset megatron-indexed" in train
    assert plan.plan_hash() in text.splitlines()[2]


@pytest.mark.parametrize("support", [False, True])
def test_nvl72_segment_only_with_site_support(tmp_path, capsys, support):
    out = tmp_path / "plan.yaml"
    extra = ["--segment-support"] if support else []
    assert main(["recommend", "--model", "llama3_8b", "--gpus", "16", "--gpu-type", "gb200", *extra, "-o", str(out)]) == 0
    capsys.readouterr()
    plan = load_plan(out)
    assert (plan.cluster.nodes, plan.cluster.gpus_per_node) == (4, 4)
    assert plan.cluster.segment == (4 if support else None) and plan.cluster.profile.segment is support
    # exit 1 here (no room for an 8B checkpoint on this disk, no Megatron Bridge checkout): the
    # dry run still prints the script, which is what this test reads
    assert main(["submit", str(out), "--executor", "sbatch", "--dry-run", "--no-cluster-checks"]) in (0, 1)
    assert ("#SBATCH --segment=4\n" in capsys.readouterr().out) is support
