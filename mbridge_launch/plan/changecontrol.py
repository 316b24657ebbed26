"""Change control: is a setting part of the convergence contract, an execution detail, or a
benchmark-only shortcut? Dataset, seeds, sequence length, global batch and token budget,
optimizer and schedule, precision, packing, MoE routing and PEFT settings make a new experiment;
parallelism, recompute, offload, distributed optimizer/FSDP, overlap, fusions, CUDA graphs and
checkpoint I/O only change how it runs (MBS too, while GBS stays fixed); mock data and forced
load balancing are for benchmarks only.

Used by recommend (changes from recipe defaults), preflight (listing convergence overrides) and the
gate (the plan card). Keys no rule names are treated as convergence changes: the safe side (a key
that is no field at all is refused before this: plan/overrides.unknown_override; one added on
purpose with Hydra's `+key` is classed here as an added key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CONVERGENCE = "convergence"
EXECUTION = "execution"
BENCHMARK_ONLY = "benchmark_only"


@dataclass(frozen=True)
class Classification:
    change_class: str
    reason_key: str  # message key (change.reason.*) in messages/en.yaml and zh.yaml


# Checked in order; the first matching pattern wins. Patterns match the full dotted key.
_RULES: list[tuple[str, str, str]] = [
    # benchmark-only shortcuts
    (r"model\.moe_router_force_load_balancing", BENCHMARK_ONLY, "change.reason.force_balance"),
    (r"dataset\.mock|dataset=mock", BENCHMARK_ONLY, "change.reason.mock"),
    (r"train\.(manual_gc.*|exit_interval|exit_duration_in_mins|exit_signal.*)", EXECUTION, "change.reason.runtime"),
    # execution mapping: parallelism, memory, overlap, fusions, graphs, checkpoint I/O, logging
    (r"model\.(tensor|pipeline|virtual_pipeline|context|expert|expert_tensor)_model_parallel_size", EXECUTION, "change.reason.parallelism"),
    (r"model\.(context_parallel_size|expert_tensor_parallel_size|sequence_parallel|cp_comm_type)", EXECUTION, "change.reason.parallelism"),
    (r"model\.(num_layers_in_(first|last)_pipeline_stage|pipeline_model_parallel_layout|account_for_.*_in_pipeline_split)", EXECUTION, "change.reason.parallelism"),
    (r"model\.(recompute_.*|cpu_offloading.*|fine_grained_activation_offloading.*|activation_offload.*)", EXECUTION, "change.reason.memory"),
    (r"(ddp|dist|comm_overlap)\..*", EXECUTION, "change.reason.distributed"),
    (r"optimizer\.(use_distributed_optimizer|overlap_.*|use_precision_aware_optimizer)", EXECUTION, "change.reason.distributed"),
    (r"model\.(.*overlap.*|.*fusion.*|.*fused.*|cuda_graph.*|enable_cuda_graph|use_te_rng_tracker|moe_token_dispatcher_type|moe_grouped_gemm|moe_permute_fusion|moe_enable_deepep|moe_flex_dispatcher_backend|use_transformer_engine_op_fuser|external_cuda_graph)", EXECUTION, "change.reason.kernels"),
    # the TE RNG tracker is the same switch as model.use_te_rng_tracker (Bridge keeps both in sync)
    (r"rng\.te_rng_tracker", EXECUTION, "change.reason.kernels"),
    (r"(model|ddp|dist)\.use_megatron_fsdp|ddp\.data_parallel_sharding_strategy|checkpoint\.(?!pretrained_checkpoint).*", EXECUTION, "change.reason.io"),
    (r"(logger|profiling|ft|straggler|nvrx_straggler|inprocess_restart|tensor_inspect)\..*", EXECUTION, "change.reason.observability"),
    (r"train\.micro_batch_size", EXECUTION, "change.reason.mbs"),
    (r"train\.(eval_interval|eval_iters)", EXECUTION, "change.reason.eval"),
    (r"rerun_state_machine\..*", EXECUTION, "change.reason.observability"),
    # convergence contract
    (r"checkpoint\.pretrained_checkpoint", CONVERGENCE, "change.reason.init"),
    (r"dataset\..*enable_offline_packing.*|dataset\.packed_sequence.*|.*packed_sequence_specs.*", CONVERGENCE, "change.reason.packing"),
    (r"(dataset|train)\..*seq_length|model\.seq_length", CONVERGENCE, "change.reason.seq_length"),
    (r"dataset\..*", CONVERGENCE, "change.reason.dataset"),
    (r"train\.(global_batch_size|train_iters|train_samples|rampup_batch_size)", CONVERGENCE, "change.reason.batch_budget"),
    (r"rng\..*", CONVERGENCE, "change.reason.seed"),
    (r"(optimizer|scheduler)\..*", CONVERGENCE, "change.reason.optimizer"),
    (r"mixed_precision(\..*)?|model\.(fp8.*|fp4.*|bf16|fp16|params_dtype)", CONVERGENCE, "change.reason.precision"),
    (r"model\.moe_(router_.*|token_drop.*|expert_capacity_factor|pad_expert_input_to_capacity|aux_loss_coeff|z_loss_coeff)", CONVERGENCE, "change.reason.moe_routing"),
    (r"peft\..*", CONVERGENCE, "change.reason.peft"),
]
_COMPILED = [(re.compile(p + r"$"), c, r) for p, c, r in _RULES]


def classify(key: str, gbs_fixed: bool = True) -> Classification:
    """The class of changing `key`. MBS is an execution setting only while GBS stays fixed."""
    added = key.startswith("+")
    key = key.lstrip("+~")
    for pattern, change_class, reason in _COMPILED:
        if pattern.match(key):
            if key == "train.micro_batch_size" and not gbs_fixed:
                return Classification(CONVERGENCE, "change.reason.mbs_gbs_moved")
            return Classification(change_class, reason)
    if added:  # Hydra's +key: the user adds a key the configuration does not have, on purpose
        return Classification(CONVERGENCE, "change.reason.added_key")
    return Classification(CONVERGENCE, "change.reason.unknown")
