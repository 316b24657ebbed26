"""What the Megatron Bridge tier does NOT verify: checks that pass only because of its stand-ins.

The tier runs the real megatron-bridge 0.6.2 / megatron-core 0.19.2 code, but three things are not
real: Transformer Engine (an import shim, shim/transformer_engine), the GPU (fake_gpu.py) and the
Hugging Face config.json files (hf_cache.py, written from catalog/models.yaml). A result that
depends on one of them is a result about the stand-in. Every entry: (id, stand-in, what passes
or is decided because of it, where in the real code).

A report of the tier prints this list beside its counts; a reviewer reads it before trusting a
"validated". `te_shim_served` in build_recipe.py's final line lists every TE name the shim handed
out in that run, which bounds what the TE entries below can have touched.
"""

from __future__ import annotations

NOT_VERIFIED: tuple[tuple[str, str, str, str], ...] = (
    # ---- Transformer Engine shim (shim/transformer_engine/__init__.py: __version__ = "2.17.1")
    ("te-version-gates", "te-shim",
     ("every is_te_min_version()/get_te_version() gate answers as for TE 2.17.1 (the version Megatron "
     "Bridge 0.6.x locks), not for the TE of the user's container: e.g. MoE grouped GEMM (>=1.11), "
     "fp8/fp4 recipes (>=2.7.0.dev0 for fp4), CUDA graph scopes (>=2.10 / 2.14), TP comm overlap "
     "(>=2.7 / 2.12), fine-grained activation offloading (>=2.10 needs NVTE_CPU_OFFLOAD_V1=1), "
     "precision-aware optimizer param remainders (>=2.1)"),
     ("megatron.core.transformer.transformer_config, optimizer.optimizer_config, "
     "megatron.bridge.training.{config,mixed_precision,comm_overlap}")),
    ("te-have-te", "te-shim",
     ("HAVE_TE is True in megatron-core and megatron-bridge: every `if not HAVE_TE: raise` check "
     "(transformer_impl='transformer_engine', TE layer specs, comm overlap 'TE required') passes"),
     "megatron.core.extensions.transformer_engine, megatron.bridge.training.comm_overlap"),
    ("te-fused-adam-signature", "te-shim",
     ("use_precision_aware_optimizer: the assertion that TE's FusedAdam accepts master_weight_dtype, "
     "exp_avg_dtype, exp_avg_sq_dtype, use_decoupled_grad passes because the shim copies TE 2.17's "
     "signature"),
     "megatron.core.optimizer.optimizer_config.OptimizerConfig.__post_init__"),
    ("te-feature-probes", "te-shim",
     ("any hasattr()/try-import probe of a TE name succeeds (the shim serves every name), so a "
     "feature that the user's TE lacks is taken as present (e.g. te.pytorch.GroupedLinear, "
     "cpu_offload.is_cpu_offload_enabled, module.grouped_linear._GroupedLinear)"),
     "megatron.bridge.peft.utils (safe_import_from), megatron.core.extensions.transformer_engine"),
    ("te-kernels", "te-shim",
     ("nothing TE computes is exercised: no layer is instantiated, so shape constraints enforced "
     "by TE kernels at model construction or first step (FP8 dims divisible by 16, cuDNN "
     "attention support for a head dim / sliding window, MXFP8 block sizes) are not checked"),
     "transformer_engine (real) at model build time"),
    # ---- the fake GPU (fake_gpu.py)
    ("gpu-flex-dispatcher", "fake-gpu",
     ("MoE flex dispatcher backends (deepep/hybridep/ncclep): accepted or replaced by alltoall from "
     "the fake device's name and compute capability (table in fake_gpu.GPU_TYPES), not from a real "
     "driver; DeepEP/HybridEP kernels themselves are not imported"),
     "megatron.bridge.training.flex_dispatcher_backend"),
    ("gpu-rubin", "fake-gpu",
     ("r100 / vr200 recipes: the device name and compute capability (11.0) are assumptions; a "
     "decision that depends on them is not evidence"),
     "fake_gpu.GPU_TYPES"),
    ("gpu-memory", "fake-gpu",
     ("nothing checks that the layout fits in GPU memory: validation never allocates (the memory "
     "side of the issue is the estimate_training_memory comparison, a separate step)"),
     "-"),
    ("gpu-is-available", "fake-gpu",
     ("torch.cuda.is_available() is True while a recipe builds and validates: a check that would "
     "skip itself on a CPU-only machine runs, one that needs a real device fails loudly "
     "(reported as an error, never as validated)"),
     "fake_gpu.fake_gpu"),
    # ---- HF config.json files (hf_cache.py)
    ("hf-config-defaults", "hf-cache",
     ("keys that catalog/models.yaml does not give (norm eps, rope scaling of Llama 3.1/3.2, "
     "attention bias, MoE router details, vision towers of VLMs, ...) take the transformers "
     "config class defaults: anything the provider derives from them (and validation checks) is "
     "about those defaults, not the real model"),
     "tests/bridge/data/hf_models.json, transformers configuration_*.py"),
    ("hf-config-defaults-2026-models", "hf-cache",
     ("keys the bridge reads that no published source gave for these 2026 models, taken from the "
     "config class defaults: DeepSeek-V4-Flash compress ratios / layer_types, hash-routed layers, "
     "hc_* and o_groups (the class's own checkpoint is V4-Flash-Base); GLM-5.1/5.2 index_n_heads, "
     "index_head_dim (GLM-5 defaults); Qwen3.5 dense 0.8B/2B/4B/9B linear-attention heads "
     "(linear_num_key/value_heads) and 2B/4B/9B max_position_embeddings; Step-3.5-Flash vocab_size "
     "and MTP depth, Step-3.5/3.7 moe_layers_enum, attention_other_setting and sliding windows "
     "(the bridge's Step35Config); MiniMax-M3 vocab, dense/shared widths and indexer (transformers' "
     "minimax_m3_vl, checkpoint MiniMax-M3-preview); EXAONE-4.5 max_position_embeddings and vision "
     "tower; Qwen3-Omni audio/vision/talker parts; K-EXAONE sliding window and layer_types"),
     "tests/bridge/data/hf_models.json (hf_source per id), catalog/models.yaml part A2"),
    ("hf-config-not-written", "hf-cache",
     ("recipes whose HF id has no architecture in models.yaml, or needs remote code (auto_map), "
     "are not checked at all (reported as not checkable, with the reason)"),
     "hf_cache.plan()"),
    # ---- placeholder paths (run_plan.py: plan conformance)
    ("plan-placeholder-paths", "tier",
     ("a Plan's checkpoint.pretrained_checkpoint (a cluster path) is replaced by an empty placeholder "
     "directory, and a library SFT/LoRA/DoRA Plan that sets none gets one (PEFT validation requires "
     "it; finetune()'s setup raises FileNotFoundError when nothing is loadable): the 'Pretrained "
     "checkpoint ... does not exist' assertion passes because of the placeholder, and nothing "
     "checks what the checkpoint holds (setup's checkpoint_exists / is_hf_checkpoint_dir); data paths, checkpoint.save/load are passed as "
     "written (validation does not open them)"),
     "megatron.bridge.training.config.CheckpointConfig.finalize, ConfigContainer.validate (PEFT)"),
    # ---- what the tier never does
    ("no-process-group", "tier",
     ("no torch.distributed process group and no model build: checks done in initialize / "
     "setup / model provide (parallel_state grid, pipeline layout against real layer objects, "
     "dataset files, tokenizer files, checkpoint paths) are not run"),
     "megatron.bridge.training.{initialize,setup}"),
)


def as_lines() -> list[str]:
    return [f"{i}: [{s}] {what} ({where})" for i, s, what, where in NOT_VERIFIED]


if __name__ == "__main__":
    print("\n".join(as_lines()))
