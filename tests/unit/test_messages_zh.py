"""Chinese complete (issue 33, item 9): every zh message's own text (placeholders' values are not
checked) holds no Latin word outside the glossary's kept terms (/work/shared/reference/glossary-zh.md:
identifiers, flags, file names, units, tool and product names stay as they are), and the sentences
the issue quotes read right for one node and in their clause order; words of the tool interpolated
into zh text (retry advice, recipe kind, domain dimensions) are Chinese too."""

from __future__ import annotations

import re
import string

from mbridge_launch.base.i18n import messages, msg, t

# Kept untranslated: product, tool and format names, units, hardware; words a user types (command
# names, dataset and precision names, config values) are identifiers, kept like flags.
KEPT = frozenset("""
Slurm sbatch srun squeue sacct scancel scontrol sinfo salloc slurmctld slurmdbd slurmd slurmstepd NeMo-Run NeMo
Megatron Bridge Core Megatron-LM Megatron-Core LoRA DoRA NaN Inf NVLink InfiniBand RoCE Hugging Face Pyxis Enroot
submitit torchrun Python pip uv PyTorch torch Transformer Engine NCCL CUDA Xid ECC HBM SQLite YAML JSON Jinja2 Hydra
GiB GB MiB MB KiB TB TiB ms s h min token tokens TFLOPS PFLOPS FLOPs FLOPS Tensor Cores bf16 fp16 fp8 mxfp8 nvfp4
NVIDIA Hopper Blackwell Ampere Docker Apptainer git mbridge-launch Llama Qwen DeepSeek Mixtral GPT-OSS GLM Nemotron
Gemma Mistral Mamba Whisper Kubernetes Pod MoE FSDP Lustre GPFS NFS ext4 tmpfs HF tulu3 squad jsonl mock dmesg
ibstat nvidia-smi cgroup stdout stderr UTC venv logits wheel whl zip pickle sqsh graphs rank x vs
recommend plan tune catalog verify preflight submit estimate runs show diff status cancel rollback watch logs
diagnose doctor calibrate checkpoints versions sync idx bin metadata true false null none yes no sft lora dora peft
pretrain selective full fp8cs fp8mx fp8sc fp8ds k id job python import export source install library benchmark all
megatron-indexed local-jsonl alltoall allgather deepep hybridep flex llama qwen deepseek slurm gb200 gb300 segment
""".split())
TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:[-.'+/][A-Za-z0-9_]+)*")

# zh texts that still carry English words, found by this test when it was written (issue 33):
# each to be translated or its word added to KEPT with a reason. The list may only shrink: a key
# that becomes clean fails the test until it is taken off, a new key with English fails at once.
KNOWN_ENGLISH = frozenset("""
catalog.finding.architecture_unset
catalog.finding.in_batch_packing_mbs1
catalog.finding.name_irregular
catalog.finding.recompute_modules_unknown
catalog.finding.seq_length_from_hf
catalog.none
change.reason.recompute_modules
ckpt.trackers_disagree
diagnose.cause.gpu_oom
diagnose.cause.host_oom
diagnose.cause.port_in_use
diagnose.fix.port_in_use
executors.log_dir_backslash
executors.nemo_run_home_unsafe
executors.sbatch_arg_long_form
help.common.lang
help.estimate.moe_token_drop
help.estimate.pp_layout
help.estimate.recompute_layers
journal.reason.bad_mode
journal.reason.bad_tracker
ledger.reconciled_lost
number.not_digits
number.not_whole
pitfall.cuda_graph_rng
planner.domain.basis
planner.domain.loo.measured
planner.domain.loo.model
planner.domain.loo.system
planner.domain.tie_basis_measured_median
planner.rule.cp_hierarchical
planner.rule.ep_nvlink
planner.rule.in_batch_packing_mbs
planner.rule.packing_mbs
planner.split_problem.layout_decoders
planner.split_problem.layout_mtp
planner.split_problem.layout_mtp_place
preflight.data.hf_not_cached.hint
preflight.data.jsonl_keys.hint
preflight.entry.missing
preflight.entry.missing_submit_dir
preflight.nodes.topology_unavailable
preflight.path.save_space.hint
preflight.plan.memory_oom.hint
preflight.plan.world_mismatch
preflight.policy.account
preflight.policy.partition
recommend.hf_config_no_recipe
scope.model
shipped.change.gpus
shipped.change.recompute
signal.batch_only
yaml.alias
""".split())


def _own_text(template: str) -> str:
    return "".join(literal for literal, _, _, _ in string.Formatter().parse(template))


def latin_words(template: str) -> list[str]:
    """The Latin words of a zh template's own text that are not kept terms."""
    text = re.sub(r"`[^`]*`", " ", _own_text(template))  # code in backticks
    text = re.sub(r"mbridge-launch(?: [A-Za-z0-9_\-./=<>:\[\]|]+)*", " ", text)  # a command line
    text = re.sub(r"(?<![A-Za-z0-9])--?[A-Za-z][\w\-]*(?:=\S*)?", " ", text)  # flags
    text = re.sub(r"%\(\w+\)[rsd]|%[rsd]", " ", text)  # argparse's own placeholders
    text = re.sub(r"\S*/\S*", " ", text)  # paths, tokens/s
    found = []
    for m in TOKEN.finditer(text):
        word = m.group(0)
        if word in KEPT or word.rstrip("s") in KEPT or word.lower() in KEPT:
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
    new = {k: v for k, v in found.items() if k not in KNOWN_ENGLISH}
    assert not new, "English words in zh.yaml (translate them, or keep a term in KEPT with a reason):\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(new.items()))
    cleaned = sorted(KNOWN_ENGLISH - set(found))
    assert not cleaned, f"now Chinese: take these off KNOWN_ENGLISH: {cleaned}"


def test_the_checker_finds_english_prose():
    assert latin_words("请运行 the command again") == ["the", "command", "again"]
    assert latin_words("使用 --yes 或 `mbridge-launch status RUN`，TP={tp} 在 8 块 GPU 上，见 plan.yaml") == []


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
