"""Dataclass defaults of the Megatron Core / Megatron-LM classes that Megatron Bridge builds on.

The Megatron Bridge wheel does not contain megatron-core, yet recipes read fields they never set
(for example `cfg.model.context_parallel_size` before assigning it) and the catalog reports
fields a recipe leaves at the Megatron default (an unset `expert_model_parallel_size` is 1).
The tables below are the simple literal defaults of those dataclasses in megatron-core 0.19.2,
the release the conformance tier (tests/bridge) runs Megatron Bridge 0.6.2 with, read from its
installed dataclasses (ModelParallelConfig, TransformerConfig, MLATransformerConfig,
DistributedDataParallelConfig, OptimizerConfig); a field another table repeats keeps one entry.
0.16.1's tables differed in what the catalog reports: cuda_graph_scope was "full" (now None) and
the DeepEP/HybridEP SM counts 20/16 (now None). The Megatron-LM `megatron.training.config`
classes are not in megatron-core; only the handful of fields the recipes read are listed for
them, with Megatron-LM's argument defaults. Fields missing here stay unknown to the extractor.
"""

from __future__ import annotations

MODEL_PARALLEL_CONFIG: dict[str, object] = {
    'tensor_model_parallel_size': 1, 'tensor_parallel_num_weight_shards': None, 'gtp_weight_remat_size': 1,
    'pipeline_model_parallel_comm_backend': None, 'pipeline_model_parallel_size': 1,
    'virtual_pipeline_model_parallel_size': None, 'sequence_parallel': False, 'context_parallel_size': 1,
    'hierarchical_context_parallel_sizes': None, 'max_seqlen_per_dp_cp_rank': None,
    'hybrid_context_parallel': False, 'expert_model_parallel_size': 1, 'expert_tensor_parallel_size': None,
    'expert_tensor_parallel_num_weight_shards': None, 'expert_gtp_weight_remat_size': 1,
    'perform_initialization': True, 'use_cpu_initialization': False, 'fp16': False, 'bf16': False, 'timers':
    None, 'finalize_model_grads_func': None, 'grad_scale_func': None, 'moe_grad_scale_func': None,
    'mtp_grad_scale_func': None, 'no_sync_func': None, 'grad_sync_func': None, 'param_sync_func': None,
    'deterministic_mode': False, 'enable_autocast': False, 'autocast_dtype': None,
    'num_microbatches_with_partial_activation_checkpoints': None, 'gradient_accumulation_fusion': False,
    'use_te_rng_tracker': False, 'tp_comm_overlap': False, 'tp_comm_bulk_wgrad': True, 'tp_comm_bulk_dgrad':
    True, 'tp_comm_overlap_ag': True, 'tp_comm_overlap_rs': True, 'tp_comm_overlap_rs_dgrad': False,
    'tp_comm_split_ag': True, 'tp_comm_atomic_ag': False, 'tp_comm_split_rs': True, 'tp_comm_atomic_rs':
    False, 'cross_entropy_loss_fusion': False, 'cross_entropy_fusion_impl': 'native',
    'tp_comm_overlap_disable_qkv': False, 'tp_comm_overlap_disable_fc1': False, 'tp_comm_bootstrap_backend':
    'nccl', 'overlap_moe_expert_parallel_comm': False, 'delay_wgrad_compute': False,
    'overlap_dispatch_backward_with_experts_wgrad': False, 'ep_overlap_early_attn_memory_release': False,
    'pipeline_dtype': None, 'variable_seq_lengths': False, 'overlap_p2p_comm': False, 'batch_p2p_comm':
    True, 'batch_p2p_sync': True, 'use_ring_exchange_p2p': False, 'deallocate_pipeline_outputs': False,
    'defer_embedding_wgrad_compute': False, 'wgrad_deferral_limit': 0, 'overlap_p2p_comm_warmup_flush':
    False, 'microbatch_group_size_per_vp_stage': None, 'mtp_standalone': False, 'cpu_offloading': False,
    'cpu_offloading_num_layers': 0, '_cpu_offloading_context': None, 'cpu_offloading_activations': True,
    'cpu_offloading_weights': False, 'cpu_offloading_double_buffering': False,
    'cpu_offloading_retain_pinned_cpu_buffers': False, 'barrier_with_L1_time': True,
}

TRANSFORMER_CONFIG: dict[str, object] = {
    'num_layers': 0, 'mtp_num_layers': None, 'mtp_loss_scaling_factor': 0.1, 'mtp_use_repeated_layer':
    False, 'mtp_detach_heads': False, 'mtp_hybrid_override_pattern': None,
    'num_layers_in_first_pipeline_stage': None, 'num_layers_in_last_pipeline_stage': None,
    'pipeline_model_parallel_layout': None, 'account_for_embedding_in_pipeline_split': False,
    'account_for_loss_in_pipeline_split': False, 'hidden_size': 0, 'num_attention_heads': 0,
    'flash_attention_version': None, 'softmax_scale': None, 'softmax_type': 'vanilla', 'num_query_groups':
    None, 'ffn_hidden_size': None, 'kv_channels': None, 'hidden_dropout': 0.1, 'attention_dropout': 0.1,
    'fp32_residual_connection': False, 'apply_residual_connection_post_layernorm': False,
    'layernorm_epsilon': 1e-05, 'layernorm_zero_centered_gamma': False, 'add_bias_linear': True,
    'add_qkv_bias': False, 'gated_linear_unit': False, 'activation_func_fp8_input_store': False,
    'glu_linear_offset': 0.0, 'activation_func_clamp_value': None, 'num_moe_experts': None,
    'rotary_interleaved': False, 'window_size': None, 'window_attn_skip_freq': None, 'normalization':
    'LayerNorm', 'qk_layernorm': False, 'qk_l2_norm': False, 'qk_clip': False, 'qk_clip_alpha': 0.5,
    'qk_clip_threshold': 100, 'log_max_attention_logit': False, 'attention_output_gate': False, 'test_mode':
    False, 'calculate_per_token_loss': False, 'multi_latent_attention': False, 'no_rope_freq': None,
    'experimental_attention_variant': None, 'experimental_attention_variant_loss_scale_func': None,
    'dsa_indexer_n_heads': None, 'dsa_indexer_head_dim': None, 'dsa_indexer_topk': None,
    'dsa_indexer_topk_freq': 1, 'dsa_indexer_skip_topk_offset': 0, 'dsa_indexer_loss_coeff': None,
    'dsa_indexer_use_sparse_loss': False, 'dsa_kernel_backend': 'none', 'dsa_indexer_rope_interleaved':
    False, 'dsa_indexer_rotate_activation': True, 'dsa_indexer_scoring_relu': True,
    'dsa_indexer_k_norm_epsilon': None, 'dsa_indexer_k_norm_fp32': False, 'linear_attention_freq': None,
    'linear_conv_kernel_dim': 4, 'linear_key_head_dim': 128, 'linear_value_head_dim': 128,
    'linear_num_key_heads': 16, 'linear_num_value_heads': 32, 'init_method': None,
    'output_layer_init_method': None, 'init_method_std': 0.02, 'embedding_init_method': None,
    'embedding_init_method_std': None, 'init_model_with_meta_device': False, 'use_mup': False,
    'mup_width_mult': 1.0, 'mup_base_hidden_size': None, 'mup_embedding_mult': 1.0, 'mup_output_mult': 1.0,
    'mup_base_head_dim': None, 'mup_attn_scale_power': 1.0, 'apply_query_key_layer_scaling': False,
    'attention_softmax_in_fp32': True, 'disable_bf16_reduced_precision_matmul': False,
    'bias_activation_fusion': False, 'masked_softmax_fusion': False, 'persist_layer_norm': False,
    'memory_efficient_layer_norm': False, 'bias_dropout_fusion': False, 'apply_rope_fusion': False,
    'use_fused_weighted_squared_relu': False, 'fused_single_qkv_rope': False, 'fused_residual_rmsnorm':
    False, 'use_transformer_engine_op_fuser': False, 'recompute_granularity': None, 'recompute_method':
    None, 'recompute_num_layers': None, 'distribute_saved_activations': False, 'recompute_modules': None,
    'fp8': None, 'fp8_recipe': 'delayed', 'fp8_param': False, 'fp8_quantizer_factory': None, 'fp8_margin':
    0, 'fp8_interval': 1, 'fp8_amax_history_len': 1, 'fp8_amax_compute_algo': 'most_recent', 'fp8_wgrad':
    True, 'fp8_output_proj': False, 'fp8_dot_product_attention': False, 'fp8_multi_head_attention': False,
    'tp_only_amax_red': False, 'first_last_layers_bf16': False, 'num_layers_at_start_in_bf16': 1,
    'num_layers_at_end_in_bf16': 1, 'use_kitchen': False, 'use_kitchen_attention': False,
    'kitchen_attention_backend': 'sdpa', 'fp4': None, 'fp4_recipe': 'nvfp4', 'fp4_param': False,
    'fp4_quantizer_factory': None, 'high_priority_a2a_comm_stream': False,
    'moe_shared_expert_intermediate_size': None, 'moe_shared_expert_gate': False,
    'moe_shared_expert_overlap': False, 'use_grouped_gemm_for_shared_expert': False,
    'moe_shared_expert_glu_interleave_size': None, 'moe_layer_freq': 1, 'moe_ffn_hidden_size': None,
    'moe_router_load_balancing_type': 'aux_loss', 'moe_router_topk': 2, 'moe_enable_routing_replay': False,
    'moe_router_topk_limited_devices': None, 'moe_router_padding_for_quantization': False,
    'moe_router_padding_for_fp8': False, 'moe_router_num_groups': None, 'moe_router_group_topk': None,
    'moe_router_pre_softmax': False, 'moe_router_topk_scaling_factor': None, 'moe_router_score_function':
    'softmax', 'moe_router_dtype': None, 'moe_router_enable_expert_bias': False,
    'moe_router_bias_update_rate': 0.001, 'moe_router_quantile_balancing_ema': 0.0,
    'moe_router_force_load_balancing': False, 'moe_router_force_biased': None,
    'use_grouped_gemm_for_dense_mlp': False, 'moe_grouped_gemm': False, 'moe_single_grouped_weight': False,
    'moe_single_grouped_bias': False, 'moe_aux_loss_coeff': 0.0, 'moe_z_loss_coeff': None,
    'moe_input_jitter_eps': None, 'moe_token_dropping': False, 'moe_token_dispatcher_type': 'allgather',
    'moe_enable_deepep': False, 'moe_flex_dispatcher_backend': 'deepep', 'moe_permute_fusion_into_hybridep':
    False, 'moe_hybridep_pad_uneven_dispatch_inputs': False, 'moe_per_layer_logging': False,
    'moe_expert_capacity_factor': None, 'moe_pad_expert_input_to_capacity': False,
    'moe_pad_experts_for_cuda_graph_inference': False, 'moe_token_drop_policy': 'probs',
    'moe_layer_recompute': False, 'moe_permute_fusion': False, 'moe_router_fusion': False,
    'moe_apply_probs_on_input': False, 'moe_latent_size': None, 'moe_flex_dispatcher_num_sms': None,
    'moe_deepep_num_sms': None, 'moe_hybridep_num_sms': None, 'moe_hybridep_num_blocks_permute': None,
    'moe_hybridep_num_blocks_unpermute': None, 'moe_hybridep_num_sms_preprocessing': 108,
    'moe_ncclep_static_shape': False, 'moe_ncclep_zero_copy': False, 'moe_mlp_glu_interleave_size': None,
    'moe_expert_rank_capacity_factor': None, 'cp_comm_type': None, 'enable_cuda_graph': False,
    'cuda_graph_use_single_mempool': True, 'cuda_graph_retain_backward_graph': False,
    'cuda_graph_warmup_steps': 3, 'external_cuda_graph': False, 'cuda_graph_impl': 'none',
    'cuda_graph_modules': 'full', 'inference_cuda_graph_scope': None, 'cuda_graph_scope': None,
    'clone_scatter_output_in_embedding': True, 'disable_parameter_transpose_cache': False,
    'config_logger_dir': '', 'flash_decode': False, 'batch_invariant_mode': False, 'use_te_activation_func':
    False, 'inference_rng_tracker': False, 'inference_sampling_seed': 42, 'symmetric_ar_type': None,
    'nccl_all_reduce_for_prefill': False, 'use_inference_optimized_layers': False,
    'inference_fuse_tp_communication': False, 'inference_disable_triton_nvls_kernels': False,
    'inference_grouped_gemm_backend': 'vllm', 'inference_moe_disable_fused_quant_kernels': False,
    'inference_moe_token_dispatcher_type': 'nvls', 'mrope_section': None, 'is_hybrid_model': False,
    'mamba_state_dim': 128, 'mamba_head_dim': 64, 'mamba_num_groups': 8, 'mamba_num_heads': None,
    'mamba_training_ssm_states_dtype': None, 'use_mamba_mem_eff_path': True, 'mlp_chunks_for_prefill': 1,
    'mlp_chunks_for_training': 1, 'heterogeneous_block_specs': False, 'hetereogenous_dist_checkpoint':
    False, 'quant_recipe': None, 'transformer_impl': 'transformer_engine',
    'fine_grained_activation_offloading': False, 'offload_modules': [], 'min_offloaded_tensor_size':
    1048576, 'delay_offload_until_cuda_graph': False, 'delta_offload_bytes_across_pp_ranks': 0,
    'activation_offload_fraction': 1.0, 'moe_paged_stash': False, 'moe_paged_stash_page_size': 64,
    'moe_paged_stash_buffer_size_factor_cuda': 1.1, 'moe_paged_stash_buffer_size_factor_cpu': 0.0,
    'fine_grained_offloading_max_inflight_offloads': None,
}

MLA_TRANSFORMER_CONFIG: dict[str, object] = {
    'normalization': 'RMSNorm', 'multi_latent_attention': True, 'q_lora_rank': 512, 'kv_lora_rank': 512,
    'qk_head_dim': 128, 'qk_pos_emb_head_dim': 64, 'v_head_dim': 128, 'rope_type': 'yarn', 'rotary_base':
    10000, 'rotary_percent': 1.0, 'rotary_scaling_factor': 40, 'original_max_position_embeddings': 4096,
    'beta_fast': 32, 'beta_slow': 1, 'mscale': 1.0, 'mscale_all_dim': 0.0, 'cache_mla_latents': False,
    'mla_down_proj_fusion': False,
}

DDP_CONFIG: dict[str, object] = {
    'grad_reduce_in_fp32': False, 'overlap_grad_reduce': False, 'overlap_param_gather': False,
    'align_param_gather': False, 'use_distributed_optimizer': False, 'num_distributed_optimizer_instances':
    1, 'check_for_nan_in_grad': False, 'check_for_large_grads': False, 'bucket_size': None, 'num_buckets':
    None, 'pad_buckets_for_high_nccl_busbw': False, 'reduce_scatter_with_fp32_accumulation': False,
    'average_in_collective': False, 'fp8_param_gather': False, 'fp4_param_gather': False,
    'reuse_grad_buf_for_mxfp8_param_ag': False, 'use_megatron_fsdp': False, 'use_custom_fsdp': False,
    'data_parallel_sharding_strategy': 'no_shard', 'gradient_reduce_div_fusion': True,
    'suggested_communication_unit_size': None, 'keep_fp8_transpose_cache': False, 'nccl_ub': False,
    'fsdp_double_buffer': False, 'fsdp_db_use_persist_buf_on_alloc_fail': False,
    'fsdp_all_gather_in_start_param_sync': True, 'outer_dp_sharding_strategy': 'no_shard',
    'disable_symmetric_registration': False, 'fsdp_manual_registration': False, 'delay_wgrad_compute':
    False, 'megatron_fsdp_main_grads_dtype': None, 'megatron_fsdp_grad_comm_dtype': None,
    'megatron_fsdp_use_decoupled_grad': False, 'megatron_fsdp_cuda_graph_mode': False,
    'megatron_fsdp_enable_fine_grained_param_gather': False, 'megatron_fsdp_max_pool_double_buffer': False,
}

OPTIMIZER_CONFIG: dict[str, object] = {
    'lr': None, 'min_lr': None, 'decoupled_lr': None, 'decoupled_min_lr': None, 'weight_decay': 0.01,
    'apply_wd_to_qk_layernorm': False, 'fp8_recipe': None, 'fp16': False, 'bf16': False,
    'reuse_grad_buf_for_mxfp8_param_ag': False, 'use_precision_aware_optimizer': False,
    'store_param_remainders': True, 'optimizer': 'adam', 'loss_scale': None, 'initial_loss_scale':
    4294967296, 'min_loss_scale': 1.0, 'loss_scale_window': 1000, 'hysteresis': 2, 'adam_beta1': 0.9,
    'adam_beta2': 0.999, 'adam_eps': 1e-08, 'decoupled_weight_decay': True, 'sgd_momentum': 0.9,
    'muon_momentum': 0.95, 'muon_split_qkv': True, 'muon_nesterov': False, 'muon_scale_mode': 'spectral',
    'muon_fp32_matmul_prec': 'medium', 'muon_coefficient_type': 'quintic', 'muon_num_ns_steps': 5,
    'muon_tp_mode': 'blockwise', 'muon_extra_scale_factor': 1.0, 'muon_scalar_optimizer': 'adam',
    'lion_beta1': 0.95, 'lion_beta2': 0.98, 'soap_shampoo_beta': 0.95, 'soap_precondition_frequency': 1,
    'soap_use_kl_shampoo': True, 'adaptive_muon_moment2_method': 'adamuon', 'adaptive_muon_beta2': 0.95,
    'adaptive_muon_eps': 1e-08, 'use_distributed_optimizer': False, 'use_layer_wise_distributed_optimizer':
    False, 'overlap_param_gather': False, 'overlap_param_gather_with_optimizer_step': False,
    'optimizer_cpu_offload': False, 'optimizer_offload_fraction': 0.0,
    'use_torch_optimizer_for_cpu_offload': False, 'overlap_cpu_optimizer_d2h_h2d': False, 'pin_cpu_grads':
    True, 'pin_cpu_params': True, 'clip_grad': 1.0, 'log_num_zeros_in_grad': False, 'barrier_with_L1_time':
    False, 'timers': None, 'config_logger_dir': '', 'optimizer_cuda_graph': False,
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


# the settings a model bridge fixes on its provider that the catalog takes (hf_bridges.py; here so
# that objects.py and hf_bridges.py, which import each other's functions, share it without a cycle)
BRIDGE_FIELDS: frozenset[str] = EXECUTION_FIELDS | frozenset(
    {"moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "moe_shared_expert_overlap"}
)

