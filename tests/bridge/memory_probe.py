"""Megatron Bridge's own memory estimate for recipes, one JSON line per recipe (issue 15, memory side by side).

Runs INSIDE the tier's Python 3.12 environment (tests/bridge/make-env.sh), never in the project's:

    $ENV/bin/python tests/bridge/memory_probe.py NAME [NAME ...]
    $ENV/bin/python tests/bridge/memory_probe.py --all all --out /tmp/memory.jsonl

Each recipe is built and validated exactly as build_recipe.build_one does it (WORLD_SIZE and a fake
GPU of its system, the placeholder inputs a user must give, `runtime_config_update`), then
`estimate_training_memory(cfg, num_microbatches, include_activation=True)` of
megatron.bridge.training.utils.theoretical_memory_utils is called on the same ConfigContainer.
The line holds the estimate by component (bytes) and the layout and settings the estimator saw,
read from that ConfigContainer, so that benchmarks/memory_vs_bridge.py can give our memory model
the same layout. A recipe that builds but fails validation is still estimated (the failure happens
after `set_data_parallel_size`, so every field the estimator reads is set); its line says so.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build_recipe as br  # noqa: E402 - the tier's builder: the same build, environment and inputs

from mbridge_launch.catalog_sync.real_build import emit_lines  # noqa: E402


def settings(cfg: Any) -> dict[str, Any]:
    """The layout and settings the estimator (and our model) depend on, from the real config."""
    model, train = cfg.model, cfg.train
    ddp, optimizer = br.get(cfg, "ddp"), br.get(cfg, "optimizer")
    dp = br.get(cfg, "data_parallel_size")
    mbs, gbs = br.get(train, "micro_batch_size"), br.get(train, "global_batch_size")
    lineage = br.lineage(model)
    peft = br.get(cfg, "peft")
    out = {name: br.to_data(br.get(model, name)) for name in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
        "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
        "seq_length", "recompute_granularity", "recompute_method", "recompute_num_layers",
        "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage", "fp8", "fp4",
        "num_layers", "hidden_size", "num_moe_experts", "mtp_num_layers", "hybrid_override_pattern",
        "share_embeddings_and_output_weights", "gated_linear_unit", "activation_func", "multi_latent_attention")}
    out["recompute_modules"] = br.to_data(br.get(model, "recompute_modules"))
    # validation turns a str/list layout into PipelineParallelLayerLayout, which keeps what it was given
    layout = br.get(model, "pipeline_model_parallel_layout")
    out["pipeline_model_parallel_layout"] = br.to_data(getattr(layout, "input_data", layout))
    for name in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        out[name] = br.to_data(br.get(model, name))
    # 0.6.2's Nemotron-H/Nano providers are HybridModelProvider (Mamba + attention + MLP/MoE blocks)
    out["mamba"] = any("Mamba" in n or "Hybrid" in n for n in lineage) or bool(
        br.get(model, "hybrid_override_pattern") or br.get(model, "hybrid_layer_pattern"))
    out["provider"] = type(model).__name__
    out.update(micro_batch_size=mbs, global_batch_size=gbs, data_parallel_size=dp,
               num_microbatches=gbs // (mbs * dp) if mbs and gbs and dp else None)
    out["distributed_optimizer"] = bool(br.get(optimizer, "use_distributed_optimizer"))
    out["grad_reduce_in_fp32"] = br.to_data(br.get(ddp, "grad_reduce_in_fp32"))
    out["megatron_fsdp"] = bool(br.get(ddp, "use_megatron_fsdp"))
    out["optimizer_cpu_offload"] = bool(br.get(optimizer, "optimizer_cpu_offload"))
    out["precision_aware_optimizer"] = bool(br.get(optimizer, "use_precision_aware_optimizer"))
    out["peft"] = None if peft is None else type(peft).__name__
    return out


def component(c: Any) -> dict[str, Any]:
    return {"name": c.name, "parameter_count": c.parameter_count, "parameter_count_per_gpu": c.parameter_count_per_gpu,
            "bytes_per_parameter": c.bytes_per_parameter, "memory_bytes": c.memory_bytes}


def estimate(cfg: Any, num_microbatches: int | None) -> dict[str, Any]:
    from megatron.bridge.training.utils.theoretical_memory_utils import estimate_training_memory

    est = estimate_training_memory(cfg, num_microbatches, include_activation=True)
    return {"model_state": [component(c) for c in est.model_state_components],
            "weight_and_optimizer_bytes": est.weight_and_optimizer_bytes,
            "activation_bytes": est.activation.memory_bytes if est.activation is not None else None,
            "total_bytes": est.total_memory_bytes, "total_parameters": est.total_parameters,
            "assumptions": list(est.assumptions)}


def probe_one(name: str, rec: dict[str, Any] | None) -> dict[str, Any]:
    """build_recipe.build_one's steps (placeholders on), keeping the ConfigContainer to estimate it."""
    from fake_gpu import fake_gpu
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    n, hw = br.gpus_and_type(name, rec)
    out: dict[str, Any] = {"name": name, "kind": rec["kind"] if rec else None, "model": rec.get("model") if rec else None,
                           "world_size": n, "gpu_type": hw, "built": False, "validated": False}
    t0 = time.perf_counter()
    cfg, stage = None, "lookup"
    with br.scoped_environ(n), fake_gpu(hw):
        try:
            fn = br.find_function(name, rec)
            stage = "build"
            cfg = fn()
            out["built"] = True
            inputs = br.user_inputs(cfg)
            out["overrides"] = inputs
            if inputs:
                stage = "override"
                cfg = process_config_with_overrides(cfg, cli_overrides=inputs)
            stage = "validate"
            runtime_config_update(cfg)
            out["validated"] = True
        except Exception as exc:  # a failure is data: the stage and the real error
            out["stage"] = stage
            out["error"] = br.error_of(exc)
        if stage == "validate":  # validated, or failed in validation after the fields were set
            try:
                out["settings"] = settings(cfg)
                out["bridge"] = estimate(cfg, out["settings"]["num_microbatches"])
            except Exception as exc:
                out["estimate_error"] = br.error_of(exc)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="recipe function names")
    ap.add_argument("--all", choices=("library", "benchmark", "all"), help="every canonical recipe of that kind")
    ap.add_argument("--out", type=Path, help="also write the JSON lines to this file")
    args = ap.parse_args(argv)

    import hf_cache  # stdlib only, safe before setup_environment

    hf_home = hf_cache.default_home()
    hf_cache.ensure(hf_home)
    br.setup_environment(hf_home)
    br.make_placeholders(hf_home)
    catalog = br.load_catalog()
    todo = [(n, catalog.get(n)) for n in args.names] + [(r["name"], r) for r in (br.all_records(args.all) if args.all else [])]
    if not todo:
        ap.error("name at least one recipe, or --all")
    import megatron.bridge.perf_recipes  # noqa: F401
    import megatron.bridge.recipes  # noqa: F401

    br.no_config_retry_sleep()
    emit_lines((probe_one(name, rec) for name, rec in todo), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
