"""Fixed Plans for executor tests, built by hand with the Plan model (no recommender): the golden
scripts are pinned on these, and the end-to-end tests derive their cluster plans from them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mbridge_launch.plan.model import (
    CatalogRef,
    CheckpointPaths,
    Cluster,
    ClusterProfile,
    DatasetSpec,
    Launch,
    Mount,
    Override,
    Parallelism,
    Plan,
    RecipeRef,
)

CATALOG = CatalogRef(source="catalog/recipes-0.6.2.yaml", version="0.6.2")
HOPPER_ENV = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NVTE_BWD_LAYERNORM_SM_MARGIN": "20",
    "NVTE_FWD_LAYERNORM_SM_MARGIN": "20",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
}
GB200_ENV = {
    **{k: v for k, v in HOPPER_ENV.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"},
    "CUDA_DEVICE_MAX_CONNECTIONS": "32",
    "NCCL_NET_GDR_C2C": "1",
    "NCCL_NET_GDR_LEVEL": "PHB",
}


def override(key: str, value: str, change_class: str = "execution", reason: str = "", source: str = "user") -> Override:
    return Override.model_validate({"key": key, "value": value, "class": change_class, "reason": reason, "source": source})


def single_node_h100() -> Plan:
    """Llama 3 8B SFT on one H100 node, torchrun shape, no container."""
    return Plan(
        name="llama3-8b-sft",
        catalog=CATALOG,
        recipe=RecipeRef(name="llama3_8b_sft_8gpu_h100_bf16_config", alias="llama3_8b_finetune_config",
                         kind="library", family="llama", model="llama3_8b"),
        mode="sft",
        dataset=DatasetSpec(selector="squad"),
        parallelism=Parallelism(tp=1, pp=1, dp=8, mbs=1, gbs=32, seq_length=4096),
        overrides=[override("train.train_iters", "1000", "convergence", "token budget")],
        cluster=Cluster(account="llm", partition="h100", nodes=1, gpus_per_node=8, gpu_type="h100",
                        time="02:00:00", env=["HF_HOME"], secrets=["HF_TOKEN"],
                        profile=ClusterProfile(slurm_version="23.02", pyxis=False, mpi=None)),
        checkpoint=CheckpointPaths(save="/lustre/ckpt/llama3-8b-sft", load="/lustre/ckpt/llama3-8b-sft",
                                   save_interval=200,
                                   pretrained_checkpoint="/lustre/models/llama3-8b"),
        launch=Launch(shape="torchrun", entry=["python", "scripts/training/run_recipe.py"],
                      workdir="/lustre/src/Megatron-Bridge", log_dir="/lustre/logs/llama3-8b-sft"),
        env_vars={k: v for k, v in HOPPER_ENV.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"},
    )


def two_node_h100() -> Plan:
    """Llama 3 70B pretraining on 2 x 8 H100 with a megatron-indexed blend, srun-native."""
    return Plan(
        name="llama3-70b-pretrain",
        catalog=CATALOG,
        recipe=RecipeRef(name="llama3_70b_pretrain_64gpu_h100_bf16_config", kind="library",
                         family="llama", model="llama3_70b"),
        mode="pretrain",
        dataset=DatasetSpec(selector="megatron-indexed",
                            data_paths=["/lustre/data/web_text_document", "/lustre/data/code_text_document"],
                            weights=[0.7, 0.3]),
        parallelism=Parallelism(tp=4, pp=2, vp=None, cp=1, dp=2, sp=True, mbs=1, gbs=64, seq_length=8192,
                                recompute="selective"),
        overrides=[
            override("model.tensor_model_parallel_size", "4", reason="fits 16 GPUs"),
            override("model.pipeline_model_parallel_size", "2", reason="fits 16 GPUs"),
            override("train.global_batch_size", "64", "convergence", "kept samples per GPU"),
        ],
        cluster=Cluster(account="llm", partition="h100", qos="normal", nodes=2, gpus_per_node=8,
                        gpu_type="h100", time="04:00:00", env=["NEMO_HOME", "HF_HOME"],
                        secrets=["HF_TOKEN", "WANDB_API_KEY"], srun_args=["--cpu-bind=none"],
                        sbatch_args=["--reservation=llm-week"],
                        profile=ClusterProfile(slurm_version="23.02", pyxis=False, mpi="pmix")),
        checkpoint=CheckpointPaths(save="/lustre/ckpt/llama3-70b-pretrain", load="/lustre/ckpt/llama3-70b-pretrain",
                                   save_interval=500),
        launch=Launch(entry=["python", "scripts/training/run_recipe.py"], workdir="/lustre/src/Megatron-Bridge",
                      log_dir="/lustre/logs/llama3-70b-pretrain", setup=["module load cuda/12.8"]),
        env_vars=dict(HOPPER_ENV),
    )


def four_node_gb200() -> Plan:
    """Llama 3 70B pretraining on 4 x 4 GB200 (NVL72): Pyxis container, mounts, --segment."""
    return Plan(
        name="llama3-70b-gb200",
        catalog=CATALOG,
        recipe=RecipeRef(name="llama3_70b_pretrain_64gpu_gb200_bf16_config", kind="library",
                         family="llama", model="llama3_70b"),
        mode="pretrain",
        dataset=DatasetSpec(selector="megatron-indexed", data_paths=["/lustre/data/web_text_document"]),
        parallelism=Parallelism(tp=4, pp=1, cp=1, dp=4, sp=True, mbs=1, gbs=64, seq_length=8192),
        cluster=Cluster(account="llm", partition="gb200", nodes=4, gpus_per_node=4, gpu_type="gb200",
                        time="06:00:00", container_image="nvcr.io/nvidia/nemo:25.11",
                        container_mounts=[Mount(source="/lustre", target="/lustre")],
                        env=["NEMO_HOME"], secrets=["HF_TOKEN"],
                        profile=ClusterProfile(slurm_version="24.11", pyxis=True, segment=True, mpi="pmix")),
        checkpoint=CheckpointPaths(save="/lustre/ckpt/llama3-70b-gb200", load="/lustre/ckpt/llama3-70b-gb200",
                                   save_interval=500),
        launch=Launch(entry=["python", "scripts/training/run_recipe.py"], workdir="/opt/Megatron-Bridge",
                      log_dir="/lustre/logs/llama3-70b-gb200"),
        env_vars=dict(GB200_ENV),
    )


def moe_ep() -> Plan:
    """Qwen3 30B-A3B MoE pretraining with expert parallelism on 2 x 8 H100."""
    return Plan(
        name="qwen3-30b-a3b-moe",
        catalog=CATALOG,
        recipe=RecipeRef(name="qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config", kind="library",
                         family="qwen", model="qwen3_30b_a3b"),
        mode="pretrain",
        dataset=DatasetSpec(selector="mock"),
        parallelism=Parallelism(tp=1, pp=1, cp=1, ep=8, etp=1, dp=16, mbs=1, gbs=256, seq_length=4096),
        overrides=[
            override("model.expert_model_parallel_size", "8", reason="experts over one node"),
            override("model.moe_token_dispatcher_type", "alltoall"),
        ],
        cluster=Cluster(account="moe", partition="h100", nodes=2, gpus_per_node=8, gpu_type="h100",
                        time="01:00:00", profile=ClusterProfile(pyxis=False, mpi=None)),
        checkpoint=CheckpointPaths(save="/lustre/ckpt/qwen3-30b-a3b-moe", load="/lustre/ckpt/qwen3-30b-a3b-moe",
                                   save_interval=1000),
        launch=Launch(entry=["python", "scripts/training/run_recipe.py"], log_dir="/lustre/logs/qwen3-moe"),
        env_vars={k: v for k, v in HOPPER_ENV.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"},
    )


def benchmark_recipe() -> Plan:
    """A benchmark (perf) recipe: owns its dataset (no --dataset), benchmark-only settings."""
    return Plan(
        name="llama3-8b-bench",
        catalog=CATALOG,
        recipe=RecipeRef(name="llama3_8b_pretrain_8gpu_h100_fp8cs_config", kind="benchmark",
                         family="llama", model="llama3_8b"),
        mode="pretrain",
        dataset=DatasetSpec(selector="mock"),
        parallelism=Parallelism(tp=1, pp=1, dp=8, mbs=1, gbs=128, seq_length=8192),
        overrides=[override("train.train_iters", "50", "benchmark_only", "timing-only schedule")],
        cluster=Cluster(account="perf", partition="h100", nodes=1, gpus_per_node=8, gpu_type="h100",
                        time="00:30:00", requeue=False, signal=None,
                        profile=ClusterProfile(pyxis=False, mpi=None)),
        checkpoint=CheckpointPaths(),
        launch=Launch(entry=["python", "scripts/performance/run_script.py"], log_dir="/lustre/logs/bench"),
        env_vars=dict(HOPPER_ENV),
    )


GOLDEN_PLANS = {
    "single_node_h100": single_node_h100,
    "two_node_h100": two_node_h100,
    "four_node_gb200": four_node_gb200,
    "moe_ep": moe_ep,
    "benchmark_recipe": benchmark_recipe,
}


def edit(plan: Plan, **changes: Any) -> Plan:
    """A copy of `plan` with dotted-path changes, e.g. edit(p, **{"cluster.time": "2:00:00"})."""
    data = plan.canonical_dict()
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return Plan.model_validate(data)


def with_changes(plan: Plan, **sections: dict[str, Any]) -> Plan:
    """`edit` by section, e.g. cluster={"nodes": 2}; top-level fields are given as top={"name": ...}."""
    return edit(plan, **{(key if section == "top" else f"{section}.{key}"): value
                         for section, fields in sections.items() for key, value in fields.items()})


# ------------------------------------------------------------------ golden files
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
REGENERATE_ENV = "MBL_REGENERATE_GOLDEN"


def assert_golden(relative: str, text: str) -> None:
    """Compare `text` with tests/golden/<relative> line by line; MBL_REGENERATE_GOLDEN=1 rewrites
    the file instead (then review the diff and commit it)."""
    path = GOLDEN_DIR / relative
    if os.environ.get(REGENERATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    hint = f"regenerate with {REGENERATE_ENV}=1 python -m pytest {os.path.relpath(_caller_file(), Path.cwd())} and review the diff"
    if not path.exists():
        raise AssertionError(f"golden file {path} is missing; {hint}")
    expected = path.read_text(encoding="utf-8").splitlines()
    actual = text.splitlines()
    for number, (want, got) in enumerate(zip(expected, actual), start=1):
        if want != got:
            raise AssertionError(f"{path}:{number} differs\n  golden:   {want!r}\n  rendered: {got!r}\n{hint}")
    if len(expected) != len(actual):
        raise AssertionError(f"{path}: golden has {len(expected)} lines, rendered {len(actual)}; {hint}")


def _caller_file() -> str:
    import inspect

    for frame in inspect.stack()[2:]:
        if Path(frame.filename).name.startswith("test_"):
            return frame.filename
    return str(GOLDEN_DIR.parent)
