"""Dataclass defaults of the Megatron Core / Megatron-LM classes that Megatron Bridge builds on.

The Megatron Bridge wheel does not contain megatron-core, yet recipes read fields they never set
(for example `cfg.model.context_parallel_size` before assigning it) and the catalog reports
fields a recipe leaves at the Megatron default (an unset `expert_model_parallel_size` is 1).
The tables below are the simple literal defaults of those dataclasses, copied from the
megatron-core 0.16.1 sources (ModelParallelConfig, TransformerConfig, MLATransformerConfig,
DistributedDataParallelConfig, OptimizerConfig). The Megatron-LM `megatron.training.config`
classes are not in megatron-core; only the handful of fields the recipes read are listed for
them, with Megatron-LM's argument defaults. Fields missing here stay unknown to the extractor.
"""

from __future__ import annotations

MODEL_PARALLEL_CONFIG: dict[str, object] = {
    'tensor_model_parallel_size': 1, 'pipeline_model_parallel_comm_backend': None,
    'pipeline_model_parallel_size': 1, 'virtual_pipeline_model_parallel_size': None, 'sequence_parallel': False,
    'context_parallel_size': 1, 'hierarchical_context_parallel_sizes': None, 'max_seqlen_per_dp_cp_rank': None,
    'hybrid_context_parallel': False, 'expert_model_parallel_size': 1, 'expert_tensor_parallel_size': None,
    'moe_extended_tp': False, 'perform_initialization': True, 'use_cpu_initialization': False, 'fp16': False,
    'bf16': False, 'timers': None, 'finalize_model_grads_func': None, 'grad_scale_func': None, 'no_sync_func':
    None, 'grad_sync_func': None, 'param_sync_func': None, 'deterministic_mode': False, 'enable_autocast':
    False, 'autocast_dtype': None, 'num_microbatches_with_partial_activation_checkpoints': None,
    'gradient_accumulation_fusion': False, 'async_tensor_model_parallel_allreduce': True, 'use_te_rng_tracker':
    False, 'tp_comm_overlap': False, 'tp_comm_bulk_wgrad': True, 'tp_comm_bulk_dgrad': True,
    'tp_comm_overlap_ag': True, 'tp_comm_overlap_rs': True, 'tp_comm_overlap_rs_dgrad': False,
    'tp_comm_split_ag': True, 'tp_comm_atomic_ag': False, 'tp_comm_split_rs': True, 'tp_comm_atomic_rs': False,
    'cross_entropy_loss_fusion': False, 'cross_entropy_fusion_impl': 'native', 'tp_comm_overlap_disable_qkv':
    False, 'tp_comm_overlap_disable_fc1': False, 'tp_comm_bootstrap_backend': 'nccl',
    'overlap_moe_expert_parallel_comm': False, 'delay_wgrad_compute': False,
    'ep_overlap_early_attn_memory_release': False, 'pipeline_dtype': None, 'variable_seq_lengths': False,
    'overlap_p2p_comm': False, 'batch_p2p_comm': True, 'batch_p2p_sync': True, 'use_ring_exchange_p2p': False,
    'deallocate_pipeline_outputs': False, 'defer_embedding_wgrad_compute': False, 'wgrad_deferral_limit': 0,
    'overlap_p2p_comm_warmup_flush': False, 'microbatch_group_size_per_vp_stage': None, 'mtp_standalone': False,
    'cpu_offloading': False, 'cpu_offloading_num_layers': 0, 'cpu_offloading_activations': True,
    'cpu_offloading_weights': False, 'cpu_offloading_double_buffering': False, 'barrier_with_L1_time': True,
}

TRANSFORMER_CONFIG: dict[str, object] = {
    'num_layers': 0, 'mtp_num_layers': None, 'mtp_loss_scaling_factor': 0.1,
    'num_layers_in_first_pipeline_stage': None, 'num_layers_in_last_pipeline_stage': None,
    'pipeline_model_parallel_layout': None, 'account_for_embedding_in_pipeline_split': False,
    'account_for_loss_in_pipeline_split': False, 'hidden_size': 0, 'num_attention_heads': 0, 'softmax_scale':
    None, 'softmax_type': 'vanilla', 'num_query_groups': None, 'ffn_hidden_size': None, 'kv_channels': None,
    'hidden_dropout': 0.1, 'attention_dropout': 0.1, 'fp32_residual_connection': False,
    'apply_residual_connection_post_layernorm': False, 'layernorm_epsilon': 1e-05,
    'layernorm_zero_centered_gamma': False, 'add_bias_linear': True, 'add_qkv_bias': False, 'gated_linear_unit':
    False, 'activation_func_fp8_input_store': False, 'glu_linear_offset': 0.0, 'activation_func_clamp_value':
    None, 'num_moe_experts': None, 'rotary_interleaved': False, 'window_size': None, 'window_attn_skip_freq':
    None, 'normalization': 'LayerNorm', 'qk_layernorm': False, 'qk_l2_norm': False, 'qk_clip': False,
    'qk_clip_alpha': 0.5, 'qk_clip_threshold': 100, 'log_max_attention_logit': False, 'attention_output_gate':
    False, 'test_mode': False, 'calculate_per_token_loss': False, 'multi_latent_attention': False,
    'no_rope_freq': None, 'experimental_attention_variant': None, 'dsa_indexer_n_heads': None,
    'dsa_indexer_head_dim': None, 'dsa_indexer_topk': None, 'dsa_indexer_loss_coeff': None,
    'dsa_indexer_use_sparse_loss': False, 'linear_attention_freq': None, 'linear_conv_kernel_dim': 4,
    'linear_key_head_dim': 128, 'linear_value_head_dim': 128, 'linear_num_key_heads': 16,
    'linear_num_value_heads': 32, 'init_method': None, 'output_layer_init_method': None, 'init_method_std':
    0.02, 'embedding_init_method': None, 'embedding_init_method_std': None, 'init_model_with_meta_device':
    False, 'apply_query_key_layer_scaling': False, 'attention_softmax_in_fp32': True,
    'disable_bf16_reduced_precision_matmul': False, 'bias_activation_fusion': False, 'masked_softmax_fusion':
    False, 'persist_layer_norm': False, 'memory_efficient_layer_norm': False, 'bias_dropout_fusion': False,
    'apply_rope_fusion': False, 'use_fused_weighted_squared_relu': False, 'fused_single_qkv_rope': False,
    'recompute_granularity': None, 'recompute_method': None, 'recompute_num_layers': None,
    'distribute_saved_activations': False, 'recompute_modules': None, 'fp8': None, 'fp8_recipe': 'delayed',
    'fp8_param': False, 'fp8_quantizer_factory': None, 'fp8_margin': 0, 'fp8_interval': 1,
    'fp8_amax_history_len': 1, 'fp8_amax_compute_algo': 'most_recent', 'fp8_wgrad': True,
    'fp8_dot_product_attention': False, 'fp8_multi_head_attention': False, 'tp_only_amax_red': False,
    'first_last_layers_bf16': False, 'num_layers_at_start_in_bf16': 1, 'num_layers_at_end_in_bf16': 1,
    'use_kitchen': False, 'use_kitchen_attention': False, 'kitchen_attention_backend': 'sdpa', 'fp4': None,
    'fp4_recipe': 'nvfp4', 'fp4_param': False, 'fp4_quantizer_factory': None,
    'moe_shared_expert_intermediate_size': None, 'moe_shared_expert_gate': False, 'moe_shared_expert_overlap':
    False, 'moe_layer_freq': 1, 'moe_ffn_hidden_size': None, 'moe_router_load_balancing_type': 'aux_loss',
    'moe_router_topk': 2, 'moe_enable_routing_replay': False, 'moe_router_topk_limited_devices': None,
    'moe_router_padding_for_quantization': False, 'moe_router_padding_for_fp8': False, 'moe_router_num_groups':
    None, 'moe_router_group_topk': None, 'moe_router_pre_softmax': False, 'moe_router_topk_scaling_factor':
    None, 'moe_router_score_function': 'softmax', 'moe_router_dtype': None, 'moe_router_enable_expert_bias':
    False, 'moe_router_bias_update_rate': 0.001, 'moe_router_force_load_balancing': False, 'moe_grouped_gemm':
    False, 'moe_use_legacy_grouped_gemm': False, 'moe_aux_loss_coeff': 0.0, 'moe_z_loss_coeff': None,
    'moe_input_jitter_eps': None, 'moe_token_dropping': False, 'moe_token_dispatcher_type': 'allgather',
    'moe_enable_deepep': False, 'moe_flex_dispatcher_backend': 'deepep', 'moe_per_layer_logging': False,
    'moe_expert_capacity_factor': None, 'moe_pad_expert_input_to_capacity': False, 'moe_token_drop_policy':
    'probs', 'moe_layer_recompute': False, 'moe_permute_fusion': False, 'moe_router_fusion': False,
    'moe_apply_probs_on_input': False, 'moe_latent_size': None, 'moe_deepep_num_sms': 20,
    'moe_hybridep_num_sms': 16, 'cp_comm_type': None, 'enable_cuda_graph': False,
    'cuda_graph_use_single_mempool': False, 'cuda_graph_retain_backward_graph': False,
    'cuda_graph_warmup_steps': 3, 'external_cuda_graph': False, 'cuda_graph_impl': 'none', 'cuda_graph_scope':
    'full', 'clone_scatter_output_in_embedding': True, 'disable_parameter_transpose_cache': False,
    'config_logger_dir': '', 'flash_decode': False, 'batch_invariant_mode': False, 'use_te_activation_func':
    False, 'use_te_rng_tracker': False, 'inference_rng_tracker': False, 'inference_sampling_seed': 42,
    'symmetric_ar_type': None, 'use_inference_optimized_layers': False, 'inference_fuse_tp_communication':
    False, 'mrope_section': None, 'is_hybrid_model': False, 'mamba_state_dim': 128, 'mamba_head_dim': 64,
    'mamba_num_groups': 8, 'mamba_num_heads': None, 'use_mamba_mem_eff_path': True, 'mlp_chunks_for_prefill': 1,
    'heterogeneous_block_specs': False, 'hetereogenous_dist_checkpoint': False, 'quant_recipe': None,
    'transformer_impl': 'transformer_engine', 'fine_grained_activation_offloading': False, 'offload_modules': [],
}

MLA_TRANSFORMER_CONFIG: dict[str, object] = {
    'multi_latent_attention': True, 'q_lora_rank': 512, 'kv_lora_rank': 512, 'qk_head_dim': 128,
    'qk_pos_emb_head_dim': 64, 'v_head_dim': 128, 'normalization': 'RMSNorm', 'rope_type': 'yarn',
    'rotary_base': 10000, 'rotary_percent': 1.0, 'rotary_scaling_factor': 40,
    'original_max_position_embeddings': 4096, 'beta_fast': 32, 'beta_slow': 1, 'mscale': 1.0, 'mscale_all_dim':
    0.0, 'cache_mla_latents': False,
}

DDP_CONFIG: dict[str, object] = {
    'grad_reduce_in_fp32': False, 'overlap_grad_reduce': False, 'overlap_param_gather': False,
    'align_param_gather': False, 'use_distributed_optimizer': False, 'num_distributed_optimizer_instances': 1,
    'check_for_nan_in_grad': False, 'check_for_large_grads': False, 'bucket_size': None,
    'pad_buckets_for_high_nccl_busbw': False, 'reduce_scatter_with_fp32_accumulation': False,
    'average_in_collective': False, 'fp8_param_gather': False, 'reuse_grad_buf_for_mxfp8_param_ag': False,
    'use_megatron_fsdp': False, 'use_custom_fsdp': False, 'data_parallel_sharding_strategy': 'no_shard',
    'gradient_reduce_div_fusion': True, 'suggested_communication_unit_size': None, 'preserve_fp32_weights':
    True, 'keep_fp8_transpose_cache': False, 'nccl_ub': False, 'fsdp_double_buffer': False,
    'outer_dp_sharding_strategy': 'no_shard', 'disable_symmetric_registration': False,
    'fsdp_manual_registration': False, 'delay_wgrad_compute': False,
}

OPTIMIZER_CONFIG: dict[str, object] = {
    'lr': None, 'min_lr': None, 'decoupled_lr': None, 'decoupled_min_lr': None, 'weight_decay': 0.01,
    'apply_wd_to_qk_layernorm': False, 'fp8_recipe': None, 'fp16': False, 'bf16': False,
    'reuse_grad_buf_for_mxfp8_param_ag': False, 'use_precision_aware_optimizer': False,
    'store_param_remainders': True, 'optimizer': 'adam', 'loss_scale': None, 'min_loss_scale': 1.0,
    'loss_scale_window': 1000, 'hysteresis': 2, 'adam_beta1': 0.9, 'adam_beta2': 0.999, 'adam_eps': 1e-08,
    'decoupled_weight_decay': True, 'sgd_momentum': 0.9, 'muon_momentum': 0.95, 'muon_split_qkv': True,
    'muon_use_nesterov': False, 'muon_scale_mode': 'spectral', 'muon_fp32_matmul_prec': 'medium',
    'muon_num_ns_steps': 5, 'muon_tp_mode': 'blockwise', 'muon_extra_scale_factor': 1.0,
    'use_distributed_optimizer': False, 'overlap_param_gather': False,
    'overlap_param_gather_with_optimizer_step': False, 'optimizer_cpu_offload': False,
    'optimizer_offload_fraction': 0.0, 'use_torch_optimizer_for_cpu_offload': False,
    'overlap_cpu_optimizer_d2h_h2d': False, 'pin_cpu_grads': True, 'pin_cpu_params': True, 'clip_grad': 1.0,
    'log_num_zeros_in_grad': False, 'barrier_with_L1_time': False, 'timers': None, 'config_logger_dir': '',
}

# megatron.training.config (Megatron-LM); only fields the recipes read before setting them.
RNG_CONFIG: dict[str, object] = {"seed": 1234, "te_rng_tracker": False, "data_parallel_random_init": False}
TRAINING_CONFIG: dict[str, object] = {
    "micro_batch_size": None, "global_batch_size": None, "rampup_batch_size": None, "train_iters": None,
    "train_samples": None, "exit_interval": None, "manual_gc": False, "manual_gc_interval": 0,
}
RERUN_STATE_MACHINE_CONFIG: dict[str, object] = {"check_for_nan_in_loss": True}
VALIDATION_CONFIG: dict[str, object] = {"eval_interval": 1000, "eval_iters": 100, "skip_train": False}

# class name -> tables merged in order (later tables override earlier ones)
_BY_CLASS: dict[str, tuple[dict[str, object], ...]] = {
    "ModelParallelConfig": (MODEL_PARALLEL_CONFIG,),
    "TransformerConfig": (MODEL_PARALLEL_CONFIG, TRANSFORMER_CONFIG),
    "MLATransformerConfig": (MODEL_PARALLEL_CONFIG, TRANSFORMER_CONFIG, MLA_TRANSFORMER_CONFIG),
    "HeterogeneousTransformerConfig": (MODEL_PARALLEL_CONFIG, TRANSFORMER_CONFIG),
    "DistributedDataParallelConfig": (DDP_CONFIG,),
    "OptimizerConfig": (OPTIMIZER_CONFIG,),
    "RNGConfig": (RNG_CONFIG,),
    "TrainingConfig": (TRAINING_CONFIG,),
    "RerunStateMachineConfig": (RERUN_STATE_MACHINE_CONFIG,),
    "ValidationConfig": (VALIDATION_CONFIG,),
}

# Fields of a Hugging Face derived model provider that the conversion does not touch: the
# execution settings. Everything else (layers, heads, vocab...) comes from the HF config.json and
# is unknown to a static reader unless the recipe sets it.
EXECUTION_FIELDS: frozenset[str] = frozenset(MODEL_PARALLEL_CONFIG) | frozenset(
    {
        "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
        "pipeline_model_parallel_layout", "account_for_embedding_in_pipeline_split",
        "account_for_loss_in_pipeline_split", "recompute_granularity", "recompute_method",
        "recompute_num_layers", "recompute_modules", "cuda_graph_impl", "cuda_graph_scope",
        "cuda_graph_warmup_steps", "cp_comm_type", "moe_router_force_load_balancing",
        "fine_grained_activation_offloading", "offload_modules", "use_transformer_engine_op_fuser",
    }
)


def external_defaults(qualname: str) -> dict[str, object] | None:
    """Defaults for an external (megatron.core / megatron.training) class, by qualified name."""
    if not qualname.startswith(("megatron.core.", "megatron.training.")):
        return None
    tables = _BY_CLASS.get(qualname.rsplit(".", 1)[-1])
    if tables is None:
        return None
    merged: dict[str, object] = {}
    for table in tables:
        merged.update(table)
    return merged
