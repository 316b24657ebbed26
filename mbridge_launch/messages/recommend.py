MESSAGES = {
    "recommend.gpus_positive": ("--gpus must be a positive number of GPUs, got {value}", "--gpus 必须是正的 GPU 数量，当前为 {value}"),
    "recommend.seq_positive": ("--seq-length must be positive, got {value}", "--seq-length 必须为正数，当前为 {value}"),
    "recommend.no_recipe_for_goal": (
        "no library recipe for {model} with goal {goal}; goals with recipes: {available}",
        "{model} 没有目标为 {goal} 的库配方；有配方的目标：{available}",
    ),
    "recommend.no_recipe_for_model": (
        "no Megatron Bridge {kind} recipe for model {model} in catalog {version}; models with recipes include: {closest}",
        "目录 {version} 中没有模型 {model} 的 Megatron Bridge {kind} 配方；有配方的模型包括：{closest}",
    ),
    "recommend.no_benchmark": (
        "no benchmark recipe for {model} ({mode}); benchmark recipes exist for: {available}",
        "{model}（{mode}）没有性能配方；以下模型有性能配方：{available}",
    ),
    "recommend.mock_with_finetune": (
        "dataset 'mock' cannot be used with {goal}: SFT/PEFT need real examples; use one of: {choices}",
        "数据集 'mock' 不能用于 {goal}：SFT/PEFT 需要真实样本；请使用：{choices}",
    ),
    "recommend.dataset_mode": (
        "dataset '{dataset}' does not support {goal}; datasets for {goal}: {choices}",
        "数据集 '{dataset}' 不支持 {goal}；适用于 {goal} 的数据集：{choices}",
    ),
    "recommend.dataset_unknown": (
        "unknown dataset selector '{dataset}'; valid: {choices}",
        "未知的数据集选择器 '{dataset}'；有效值：{choices}",
    ),
    "recommend.benchmark_dataset": (
        "benchmark recipes own their dataset and reject --dataset (got '{dataset}')",
        "性能配方自带数据集，不接受 --dataset（当前为 '{dataset}'）",
    ),
    "recommend.no_layout": (
        "no valid parallel layout for {model} on {gpus} x {gpu_type} at sequence length {seq}: {reason}",
        "{model} 在 {gpus} 个 {gpu_type} 上、序列长度 {seq} 时没有有效的并行布局：{reason}",
    ),
    "recommend.weak_scale_impossible": (
        "benchmark {recipe} cannot be weak-scaled from {from_gpus} to {to_gpus} GPUs: {reason}",
        "性能配方 {recipe} 无法从 {from_gpus} 个 GPU 弱扩展到 {to_gpus} 个 GPU：{reason}",
    ),
    "recommend.gpus_per_node_split": (
        "{gpus} GPUs do not fill whole {gpu_type} nodes of {per_node} GPUs; use 1..{per_node} or a multiple of {per_node}",
        "{gpus} 个 GPU 无法组成完整的 {gpu_type} 节点（每节点 {per_node} 个 GPU）；请使用 1..{per_node} 或 {per_node} 的倍数",
    ),
    "recommend.gpus_raised": (
        "{recipe} does not fit its canonical {from_gpus} GPUs by the memory estimate; recommending {to_gpus} GPUs (pass --gpus to choose)",
        "按显存估算，{recipe} 在其标称的 {from_gpus} 个 GPU 上放不下；推荐使用 {to_gpus} 个 GPU（可用 --gpus 指定）",
    ),
    "recommend.override_rule": ("{reason} (from override {setting})", "{reason}（来自覆盖项 {setting}）"),
    "recommend.override_int": ("override {setting} needs a positive integer, got '{value}'", "覆盖项 {setting} 需要正整数，当前为 '{value}'"),
    # card
    "card.title": ("mbridge-launch recommendation", "mbridge-launch 推荐"),
    "card.recipe": ("Recipe", "配方"),
    "card.kind.library": ("library recipe (for real training)", "库配方（用于实际训练）"),
    "card.kind.benchmark": ("benchmark recipe (throughput only; mock data, not for real training)", "性能配方（吞吐量基准；模拟数据，不用于实际训练）"),
    "card.alias": ("legacy alias", "旧别名"),
    "card.mode": ("Goal", "目标"),
    "card.dataset": ("Dataset", "数据集"),
    "card.hardware": ("Hardware", "硬件"),
    "card.layout": ("Parallel layout", "并行布局"),
    "card.batch": ("Batch", "批大小"),
    "card.command": ("Command", "命令"),
    "card.changes": ("Changes from the recipe", "相对配方的修改"),
    "card.no_changes": ("none: the recipe runs as published", "无：按配方原样运行"),
    "card.warnings": ("Warnings", "警告"),
    "card.estimate": ("Estimate", "估算"),
    "card.catalog": ("Catalog", "目录"),
    "card.nodes": ("{nodes} node(s) x {per_node} {gpu_type} GPUs = {gpus} GPUs", "{nodes} 个节点 x {per_node} 个 {gpu_type} GPU = {gpus} 个 GPU"),
    "card.batch_line": (
        "micro batch {mbs}, global batch {gbs}, gradient accumulation {ga}, sequence length {seq}",
        "微批大小 {mbs}，全局批大小 {gbs}，梯度累积 {ga}，序列长度 {seq}",
    ),
    "card.estimate_line": (
        "memory {mem:.1f} / {hbm:.0f} GB per GPU, step {step:.2f} s, {tps:,.0f} tokens/s per GPU, MFU {mfu:.0%}",
        "显存 {mem:.1f} / {hbm:.0f} GB 每 GPU，每步 {step:.2f} 秒，每 GPU 每秒 {tps:,.0f} token，MFU {mfu:.0%}",
    ),
    "card.dataset_mock_note": (
        "mock data: fine for a first run; real pretraining needs --dataset megatron-indexed --data-path PREFIX",
        "模拟数据：适合首次试运行；实际预训练需要 --dataset megatron-indexed --data-path PREFIX",
    ),
    # warnings / pitfalls
    "pitfall.pp_without_vp": (
        "PP={pp} without virtual pipeline: the pipeline bubble is ~{bubble:.0%} of the step; consider VP (model.virtual_pipeline_model_parallel_size)",
        "PP={pp} 未使用虚拟流水线：流水线气泡约占每步的 {bubble:.0%}；建议设置 VP（model.virtual_pipeline_model_parallel_size）",
    ),
    "pitfall.ep_low": (
        "MoE with {experts} experts at EP={ep}: {per_gpu} experts per GPU; a higher EP usually trains faster and uses less memory",
        "MoE 有 {experts} 个专家而 EP={ep}：每 GPU {per_gpu} 个专家；更高的 EP 通常更快且更省显存",
    ),
    "pitfall.cuda_graph_packing": (
        "CUDA graphs with offline sequence packing need static shapes: set dataset.pad_to_max_length=true "
        "(and dataset.offline_packing_specs.pad_cu_seqlens=true when attention is captured), or disable one of them",
        "CUDA graphs 与离线序列打包同时使用需要静态形状：请设置 dataset.pad_to_max_length=true"
        "（捕获注意力时还需 dataset.offline_packing_specs.pad_cu_seqlens=true），或关闭其一",
    ),
    "pitfall.cuda_graph_full_recompute": (
        "CUDA graphs with full activation recompute are not supported together; use selective recompute",
        "CUDA graphs 不能与完全激活重计算同时使用；请改用选择性重计算",
    ),
    "pitfall.cuda_graph_rng": (
        "CUDA graphs need the Transformer Engine RNG tracker (model.use_te_rng_tracker=true or rng.te_rng_tracker=true); "
        "the model provider refuses to build without it",
        "CUDA graphs 需要 Transformer Engine RNG tracker（model.use_te_rng_tracker=true 或 rng.te_rng_tracker=true）；"
        "否则模型构建会失败",
    ),
    "pitfall.fsdp_tp_h100": (
        "Megatron-FSDP with TP={tp} on H100 is slower than TP=1 or the distributed optimizer in NVIDIA's tuning",
        "在 H100 上 Megatron-FSDP 与 TP={tp} 同用，在 NVIDIA 的调优中比 TP=1 或分布式优化器更慢",
    ),
    "pitfall.long_context_no_cp": (
        "long context ({seq} tokens) without context parallelism: activations grow with the sequence; consider CP>1",
        "长上下文（{seq} token）未使用上下文并行：激活随序列增长；建议 CP>1",
    ),
    "pitfall.moe_overlap_grad_reduce_h100": (
        "MoE with ddp.overlap_grad_reduce on {gpu_type} without a Hopper recipe that validated it: several of Megatron "
        "Bridge's Hopper MoE recipes turn it off; if the run hangs or slows down, set ddp.overlap_grad_reduce=false",
        "在 {gpu_type} 上 MoE 启用 ddp.overlap_grad_reduce，但没有经过验证的 Hopper 配方：Megatron Bridge 的多个 Hopper "
        "MoE 配方将其关闭；如果运行挂起或变慢，请设置 ddp.overlap_grad_reduce=false",
    ),
    "pitfall.vlm_text_data": (
        "{model} is a vision-language model but dataset '{dataset}' has no images; use a VLM dataset ({choices})",
        "{model} 是视觉语言模型，但数据集 '{dataset}' 不含图像；请使用 VLM 数据集（{choices}）",
    ),
    "pitfall.blackwell_only": (
        "recipe {recipe} was only validated on {hardware}; on {gpu_type} expect different memory and speed",
        "配方 {recipe} 仅在 {hardware} 上验证过；在 {gpu_type} 上显存和速度会不同",
    ),
    "pitfall.recipe_finding": ("recipe finding {code}: {message}", "配方问题 {code}：{message}"),
    "pitfall.benchmark_not_training": (
        "benchmark recipe: mock data, forced MoE balancing and a short timing schedule; its losses and checkpoints are not convergence evidence",
        "性能配方：模拟数据、强制 MoE 负载均衡和短计时调度；其损失和检查点不能作为收敛依据",
    ),
    "pitfall.hardware_substitute": (
        "no {kind} recipe for {gpu_type}; using the {hardware} recipe ({recipe})",
        "没有适用于 {gpu_type} 的{kind}配方；使用 {hardware} 配方（{recipe}）",
    ),
    "pitfall.dataset_fields_missing": (
        "dataset '{dataset}' needs {fields}; the run fails at start without it (give it as KEY=VALUE; for megatron-indexed "
        "--data-path PREFIX)",
        "数据集 '{dataset}' 需要 {fields}；缺少时运行会在启动时失败（以 KEY=VALUE 给出；megatron-indexed 可用 --data-path PREFIX）",
    ),
    "card.kind_short.library": ("library", "库"),
    "card.kind_short.benchmark": ("benchmark", "性能"),
    "card.on": ("on", "开"),
    "card.off": ("off", "关"),
    "card.recompute": ("recompute", "重计算"),
    # reasons inside recommend's errors
    "recommend.reason.world_not_divisible": (
        "world size {world} not divisible by TP x PP x CP = {mp}",
        "总 GPU 数 {world} 不能被 TP x PP x CP = {mp} 整除",
    ),
    "recommend.reason.gbs_not_integer": (
        "GBS {gbs} x {world}/{gpus} is not an integer",
        "全局批大小 {gbs} x {world}/{gpus} 不是整数",
    ),
    "recommend.reason.mount_syntax": ("'{value}' is not SRC[:DST]", "'{value}' 不是 SRC[:DST] 形式"),
    "recommend.reason.blend_weights": (
        "give a weight for every prefix (WEIGHT:PREFIX) or for none",
        "请为每个前缀都给出权重（WEIGHT:PREFIX），或都不给",
    ),
    "recommend.reason.env_name": (
        "'{value}' is not an environment variable name (values never go into a plan)",
        "'{value}' 不是环境变量名（变量值从不写入计划）",
    ),
    "recommend.reason.data_path_dataset": (
        "only for --dataset megatron-indexed (dataset is '{dataset}')",
        "仅用于 --dataset megatron-indexed（当前数据集为 '{dataset}'）",
    ),
    "recommend.reason.time_syntax": (
        "'{value}' is not a Slurm time (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S)",
        "'{value}' 不是 Slurm 时间格式（M、M:S、H:M:S、D-H、D-H:M 或 D-H:M:S）",
    ),
    "recommend.reason.time_finite": (
        "'{value}' asks for no time limit; a job needs a finite one",
        "'{value}' 表示不限时；作业需要有限的时间限制",
    ),
    "recommend.reason.model_required": ("required (or use --smoke-test)", "必填（或使用 --smoke-test）"),
    "pitfall.seq_beyond_model": (
        "sequence length {seq} exceeds the model's max_position_embeddings {max_pos}: needs RoPE scaling or a long-context checkpoint",
        "序列长度 {seq} 超过模型的 max_position_embeddings {max_pos}：需要 RoPE 缩放或长上下文检查点",
    ),
    "pitfall.arch_unknown": (
        "architecture of {model} is not in the catalog: layout checked without head/expert rules and without a memory estimate (pass --hf-config PATH)",
        "目录中没有 {model} 的架构：布局检查不含注意力头/专家规则，也没有显存估算（请传入 --hf-config PATH）",
    ),
    "pitfall.memory_over": (
        "estimated {mem:.1f} GB per GPU exceeds {limit:.1f} GB usable of {hbm:.0f} GB HBM",
        "估算每 GPU {mem:.1f} GB，超过 {hbm:.0f} GB HBM 中可用的 {limit:.1f} GB",
    ),
    "pitfall.gbs_changed": (
        "global batch changed from {old} to {new}: a convergence change",
        "全局批大小从 {old} 改为 {new}：属于改变收敛的修改",
    ),
}
