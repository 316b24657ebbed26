"""The scenario matrix: requests a Megatron Bridge user makes, over dense, MoE, hybrid (Mamba) and
vision-language models, every supported GPU type, every goal, GPU counts that are and are not a
recipe's own (1, 2, 12, 24, 48, 96 and powers of two) and sequence lengths from 2k to 128k.

Each row is the `recommend` arguments of one request; `scenario_chain.run_chain` carries it along
the main path (recommend -o -> preflight --no-cluster -> estimate of the written layout -> submit
--dry-run with every executor) and lists every contradiction between the steps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    id: str
    family: str  # dense | moe | hybrid | vlm (what the table must cover)
    args: tuple[str, ...]  # recommend arguments (without -o / --format)


# fine-tuning starts from a Megatron checkpoint, which preflight requires: a path on the shared
# storage a user names (absent on the test machine: a fact of the machine, not of the Plan)
FINETUNE_GOALS = ("sft", "lora", "dora")


def _s(id: str, family: str, *args: str) -> Scenario:
    goal = args[args.index("--goal") + 1] if "--goal" in args else "pretrain"
    if goal in FINETUNE_GOALS:
        args = (*args, "--pretrained-checkpoint", f"/lustre/checkpoints/{id}")
    return Scenario(id, family, tuple(args))


SCENARIOS: tuple[Scenario, ...] = (
    # ---- dense: recipes at their own counts, other counts, every system, every goal, 2k..128k
    _s("llama3-8b-own-2gpu", "dense", "--model", "llama3_8b", "--gpus", "2"),
    _s("llama3-8b-default-count", "dense", "--model", "llama3_8b"),
    _s("llama3-8b-8xh100", "dense", "--model", "llama3_8b", "--gpus", "8"),
    _s("llama3-8b-lora-1gpu", "dense", "--model", "llama3_8b", "--gpus", "1", "--goal", "lora"),
    _s("llama3-8b-sft-16xh200", "dense", "--model", "llama3_8b", "--gpus", "16", "--gpu-type", "h200", "--goal", "sft"),
    _s("llama3-8b-24xh100", "dense", "--model", "llama3_8b", "--gpus", "24"),
    _s("llama3-8b-128k", "dense", "--model", "llama3_8b", "--gpus", "8", "--seq-length", "131072"),
    _s("llama3-8b-12gpus-h100", "dense", "--model", "llama3_8b", "--gpus", "12"),
    _s("llama3-8b-fp8mx-b200", "dense", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "b200", "--precision", "fp8mx"),
    _s("llama3-70b-64xh100", "dense", "--model", "llama3_70b", "--gpus", "64"),
    _s("llama3-70b-sft-24xh100", "dense", "--model", "llama3_70b", "--gpus", "24", "--goal", "sft"),
    _s("llama3-70b-lora-own-8", "dense", "--model", "llama3_70b", "--gpus", "8", "--goal", "lora"),
    _s("llama3-70b-48xb200-8k", "dense", "--model", "llama3_70b", "--gpus", "48", "--gpu-type", "b200", "--seq-length", "8192"),
    _s("llama3-70b-64xgb200-64k", "dense", "--model", "llama3_70b", "--gpus", "64", "--gpu-type", "gb200", "--seq-length", "65536"),
    _s("llama3-70b-lora-1gpu", "dense", "--model", "llama3_70b", "--gpus", "1", "--goal", "lora"),
    _s("llama31-405b-own-256", "dense", "--model", "llama31_405b", "--gpus", "256"),
    _s("llama31-405b-128xgb200", "dense", "--model", "llama31_405b", "--gpus", "128", "--gpu-type", "gb200"),
    _s("llama31-405b-lora-own-32", "dense", "--model", "llama31_405b", "--gpus", "32", "--goal", "lora"),
    _s("llama31-405b-sft-96xb300", "dense", "--model", "llama31_405b", "--gpus", "96", "--gpu-type", "b300", "--goal", "sft"),
    _s("llama31-8b-24xh100", "dense", "--model", "llama31_8b", "--gpus", "24"),
    _s("qwen3-8b-own-4", "dense", "--model", "qwen3_8b", "--gpus", "4"),
    _s("qwen3-8b-dora-8xgb300", "dense", "--model", "qwen3_8b", "--gpus", "8", "--gpu-type", "gb300", "--goal", "dora"),
    _s("qwen3-14b-sft-12xgb200", "dense", "--model", "qwen3_14b", "--gpus", "12", "--gpu-type", "gb200", "--goal", "sft"),
    _s("qwen3-32b-sft-own-16", "dense", "--model", "qwen3_32b", "--gpus", "16", "--goal", "sft"),
    _s("qwen3-4b-lora-2xb300", "dense", "--model", "qwen3_4b", "--gpus", "2", "--gpu-type", "b300", "--goal", "lora"),
    _s("qwen25-7b-sft-2xh200", "dense", "--model", "qwen25_7b", "--gpus", "2", "--gpu-type", "h200", "--goal", "sft"),
    _s("qwen25-72b-32k", "dense", "--model", "qwen25_72b", "--gpus", "32", "--seq-length", "32768"),
    _s("gemma2-27b-own-16", "dense", "--model", "gemma2_27b", "--gpus", "16"),
    _s("gemma3-1b-1gpu", "dense", "--model", "gemma3_1b", "--gpus", "1"),
    _s("llama32-1b-sft-2k-b200", "dense", "--model", "llama32_1b", "--gpus", "1", "--gpu-type", "b200", "--goal", "sft",
       "--seq-length", "2048"),
    _s("gpt3-175b-own-32", "dense", "--model", "gpt3_175b", "--gpus", "32"),
    _s("llama3-8b-benchmark-8", "dense", "--model", "llama3_8b", "--gpus", "8", "--benchmark"),
    # ---- mixture of experts
    _s("dsv3-256xgb200", "moe", "--model", "DeepSeek-V3", "--gpus", "256", "--gpu-type", "gb200"),
    _s("dsv3-own-1024", "moe", "--model", "deepseek_v3", "--gpus", "1024"),
    _s("dsv3-own-256", "moe", "--model", "deepseek_v3", "--gpus", "256"),
    _s("dsv3-96xgb200", "moe", "--model", "deepseek_v3", "--gpus", "96", "--gpu-type", "gb200"),
    _s("dsv3-benchmark-256xgb200", "moe", "--model", "deepseek_v3", "--gpus", "256", "--gpu-type", "gb200", "--benchmark"),
    _s("dsv2-lite-own-8", "moe", "--model", "deepseek_v2_lite", "--gpus", "8"),
    _s("dsv2-lite-16xb200", "moe", "--model", "deepseek_v2_lite", "--gpus", "16", "--gpu-type", "b200"),
    _s("qwen3-30b-a3b-own-16", "moe", "--model", "qwen3_30b_a3b", "--gpus", "16"),
    _s("qwen3-30b-a3b-own-gb200-8", "moe", "--model", "qwen3_30b_a3b", "--gpus", "8", "--gpu-type", "gb200"),
    _s("qwen3-30b-a3b-lora-own-4", "moe", "--model", "qwen3_30b_a3b", "--gpus", "4", "--goal", "lora"),
    _s("qwen3-30b-a3b-sft-48xh200", "moe", "--model", "qwen3_30b_a3b", "--gpus", "48", "--gpu-type", "h200", "--goal", "sft"),
    _s("qwen3-30b-a3b-32k-32", "moe", "--model", "qwen3_30b_a3b", "--gpus", "32", "--seq-length", "32768"),
    _s("qwen3-235b-own-256", "moe", "--model", "qwen3_235b_a22b", "--gpus", "256"),
    _s("qwen3-235b-sft-own-64", "moe", "--model", "qwen3_235b_a22b", "--gpus", "64", "--goal", "sft"),
    _s("qwen3-235b-lora-own-16", "moe", "--model", "qwen3_235b_a22b", "--gpus", "16", "--goal", "lora"),
    _s("qwen3-235b-128xgb300", "moe", "--model", "qwen3_235b_a22b", "--gpus", "128", "--gpu-type", "gb300"),
    _s("gpt-oss-20b-sft-own-8", "moe", "--model", "gpt_oss_20b", "--gpus", "8", "--goal", "sft"),
    _s("gpt-oss-120b-64xb200", "moe", "--model", "gpt_oss_120b", "--gpus", "64", "--gpu-type", "b200"),
    _s("olmoe-7b-own-8", "moe", "--model", "olmoe_7b", "--gpus", "8"),
    _s("moonlight-16b-own-16", "moe", "--model", "moonlight_16b", "--gpus", "16"),
    _s("glm45-air-own-32", "moe", "--model", "glm45_air_106b", "--gpus", "32"),
    _s("kimi-k2-own-512", "moe", "--model", "kimi_k2", "--gpus", "512"),
    _s("qwen3-next-80b-own-32", "moe", "--model", "qwen3_next_80b_a3b", "--gpus", "32"),
    # ---- hybrid (Mamba)
    _s("nemotronh-8b-own-2", "hybrid", "--model", "nemotronh_8b", "--gpus", "2"),
    _s("nemotronh-8b-sft-8xb200", "hybrid", "--model", "nemotronh_8b", "--gpus", "8", "--gpu-type", "b200", "--goal", "sft"),
    _s("nemotronh-47b-own-8", "hybrid", "--model", "nemotronh_47b", "--gpus", "8"),
    _s("nemotronh-56b-16xgb200", "hybrid", "--model", "nemotronh_56b", "--gpus", "16", "--gpu-type", "gb200"),
    _s("nemotronh-4b-lora-h200", "hybrid", "--model", "nemotronh_4b", "--gpus", "1", "--gpu-type", "h200", "--goal", "lora"),
    _s("nemotron-nano-9b-v2-sft-own-2", "hybrid", "--model", "nemotron_nano_9b_v2", "--gpus", "2", "--goal", "sft"),
    _s("nemotron-3-nano-own-8", "hybrid", "--model", "nemotron_3_nano", "--gpus", "8"),
    _s("nemotron-3-super-own-16", "hybrid", "--model", "nemotron_3_super", "--gpus", "16"),
    # ---- vision-language
    _s("qwen25-vl-7b-sft-own-2", "vlm", "--model", "qwen25_vl_7b", "--gpus", "2", "--goal", "sft"),
    _s("qwen25-vl-7b-lora-1", "vlm", "--model", "qwen25_vl_7b", "--gpus", "1", "--goal", "lora"),
    _s("qwen3-vl-30b-sft-own-8", "vlm", "--model", "qwen3_vl_30b_a3b", "--gpus", "8", "--goal", "sft"),
    _s("gemma3-vl-12b-sft-4xb200", "vlm", "--model", "gemma3_vl_12b", "--gpus", "4", "--gpu-type", "b200", "--goal", "sft"),
    _s("qwen25-vl-72b-sft-own-32", "vlm", "--model", "qwen25_vl_72b", "--gpus", "32", "--goal", "sft"),
    _s("qwen3-vl-8b-pretrain-4xgb300", "vlm", "--model", "qwen3_vl_8b", "--gpus", "4", "--gpu-type", "gb300"),
    # ---- the first command a new user runs
    _s("smoke-test", "dense", "--smoke-test"),
)
