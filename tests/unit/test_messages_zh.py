"""Chinese complete (issue 33, item 9): every zh message's own text (placeholders' values are not
checked) holds no Latin word outside the glossary's kept terms (/work/shared/reference/glossary-zh.md:
identifiers, flags, file names, units, tool and product names stay as they are), and the sentences
the issue quotes read right for one node and in their clause order; words of the tool interpolated
into zh text (retry advice, recipe kind, domain dimensions) are Chinese too."""

from __future__ import annotations

import re
import string

from mbridge_launch.base.i18n import messages, msg, t

# Kept untranslated: product, tool and format names, units, hardware; the names a user types (the
# tool's subcommands, goal, dataset and precision names) are identifiers, kept like flags. "x" is the
# multiplication sign of layouts (TP x PP), "token" and "rank" the terms Chinese users write (glossary:
# 每 GPU 每秒 token 数). Ordinary words (all, job, install, none, yes ...) are not kept: a message that
# shows one as a value the user types puts it in backticks (`--kind all`, `yes`), else translates it.
KEPT = frozenset("""
Slurm sbatch srun squeue sacct scancel scontrol sinfo salloc slurmctld slurmdbd slurmd slurmstepd NeMo-Run NeMo
Megatron Bridge Core Megatron-LM Megatron-Core LoRA DoRA NaN Inf NVLink InfiniBand RoCE Hugging Face Pyxis Enroot
submitit torchrun Python pip uv PyTorch torch Transformer Engine NCCL CUDA Xid ECC HBM SQLite YAML JSON Jinja2 Hydra
GiB GB MiB MB KiB TB TiB ms s h min token tokens TFLOPS PFLOPS FLOPs FLOPS Tensor Cores bf16 fp16 fp8 mxfp8 nvfp4
NVIDIA Hopper Blackwell Ampere Docker Apptainer git mbridge-launch Llama Qwen DeepSeek Mixtral GPT-OSS GLM Nemotron
Gemma Mistral Mamba Whisper Kubernetes Pod MoE FSDP Lustre GPFS NFS ext4 tmpfs HF FlashAttention dmesg ibstat
nvidia-smi cgroup stdout stderr venv logits wheel zip pickle x rank
recommend plan tune catalog verify preflight submit estimate runs show diff status cancel rollback watch logs
diagnose doctor calibrate checkpoints versions sync
pretrain sft lora dora peft fp8cs fp8mx fp8sc fp8ds mock squad tulu3 jsonl megatron-indexed local-jsonl
alltoall allgather deepep hybridep flex llama qwen deepseek slurm gb200 gb300
""".split())
TOKEN = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9_]*(?:[-.'+/][A-Za-z0-9_]+)*")

def _own_text(template: str) -> str:
    return "".join(literal for literal, _, _, _ in string.Formatter().parse(template))


def latin_words(template: str) -> list[str]:
    """The Latin words of a zh template's own text that are not kept terms."""
    text = re.sub(r"`[^`]*`", " ", _own_text(template))  # code in backticks
    text = re.sub(r"mbridge-launch(?: [A-Za-z0-9_\-./=<>:\[\]|]+)*", " ", text)  # a command line
    text = re.sub(r"(?<![A-Za-z0-9])--?[A-Za-z][\w\-]*(?:=\S*)?", " ", text)  # flags
    text = re.sub(r"%\(\w+\)[rsd]|%[rsd]", " ", text)  # argparse's own placeholders
    text = re.sub(r"\S*/\S*", " ", text)  # paths, tokens/s
    text = re.sub(r"[A-Za-z0-9_.\-]+=[A-Za-z0-9_.\-*,]+", " ", text)  # a setting: dataset.pad_to_max_length=true
    text = re.sub(r"(?<![\w.])\.[A-Za-z]\w*", " ", text)  # a file's suffix: .bin, .idx, .metadata
    text = re.sub(r"\b[a-z]+:[A-Z][A-Z0-9_]*", " ", text)  # a typed form with its placeholder: job:JOBID
    found = []
    for m in TOKEN.finditer(text):
        word = m.group(0)
        if word in KEPT or word.rstrip("s") in KEPT:
            continue
        if re.fullmatch(r"[A-Z0-9_\-]+", word) or "_" in word or "." in word:
            continue  # acronyms (TP, GPU), environment names, placeholders in capitals, identifiers, file names
        if re.search(r"[A-Z].*[A-Z]", word) or re.fullmatch(r"[a-z]?\d+[a-zA-Z]*", word):
            continue  # CamelCase class names; 8gpu, h100, 128k
        found.append(word)
    return found


def _english_keys() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, entry in messages("zh").items():
        for form in (entry.values() if isinstance(entry, dict) else [entry]):
            words = latin_words(form)
            if words:
                out.setdefault(key, []).extend(words)
    return out


def test_every_zh_message_is_chinese_but_for_kept_terms():
    found = _english_keys()
    assert not found, "English words in zh.yaml (translate them, put a value the user types in backticks, or keep a " \
        "true term in KEPT with a reason):\n" + "\n".join(f"{k}: {v}" for k, v in sorted(found.items()))


def test_the_checker_finds_english_prose():
    assert latin_words("请运行 the command again") == ["the", "command", "again"]
    assert latin_words("使用 --yes 或 `mbridge-launch status RUN`，TP={tp} 在 8 块 GPU 上，见 plan.yaml") == []
    # ordinary words are not kept because a command shares their name; a value the user types is in backticks
    assert latin_words("写入 Plan，默认 none，请输入 yes，all 全部") == ["Plan", "none", "yes", "all"]
    assert latin_words("激活重计算=none") == ["none"]  # a Chinese word is no config key
    assert latin_words("默认 `none`，请输入 `yes`，设置 train.exit_signal_handler=true，.bin 与 .idx，4k、128k，job:JOBID") == []


def test_a_single_node_is_not_told_that_each_node_writes_a_part():
    one = t("preflight.path.save_node_local", lang="zh", what="检查点目录", path="/tmp/x", why="tmpfs", count=1)
    assert "1 个节点会各自写入" not in one and "看不到" in one


def test_not_asking_slurm_is_its_own_clause():
    text = t("preflight.path.save_owner_basis", lang="zh", path="/ckpt",
             how=t("preflight.path.save_owner_basis.recorded", lang="zh"))
    assert "Slurm检查" not in text and text.endswith("未询问 Slurm")


def test_words_of_the_tool_interpolated_into_zh_are_chinese():
    assert [t(f"diagnose.retry_name.{code}", lang="zh") for code in ("resubmit", "rollback", "no")] == ["重新提交", "回滚", "否"]
    from mbridge_launch.planner.domain import dimension_names

    assert dimension_names(("goal", "seq_length"), "zh") == "目标、序列长度"
    assert dimension_names(("goal", "seq_length"), "en") == "goal, seq_length"
    kind = msg("recommend.no_recipe_for_model", kind=msg("card.kind_short.library"), model="m", version="0.6.2",
               closest="a").render("zh")
    assert "library" not in kind and "库配方" in kind
