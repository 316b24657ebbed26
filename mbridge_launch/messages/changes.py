MESSAGES = {
    "change.class.convergence": ("convergence", "改变收敛的修改"),
    "change.class.execution": ("execution", "仅影响执行的修改"),
    "change.class.benchmark_only": ("benchmark-only", "仅限基准测试的捷径"),
    "change.reason.force_balance": (
        "forced MoE load balancing is a timing-only shortcut; losses are not convergence evidence",
        "强制 MoE 负载均衡是仅用于计时的捷径；其损失不能作为收敛依据",
    ),
    "change.reason.mock": ("mock data measures throughput only", "模拟数据只用于测量吞吐量"),
    "change.reason.runtime": ("runtime housekeeping; does not change the math", "运行时管理设置；不改变计算结果"),
    "change.reason.parallelism": (
        "parallel layout: changes how the model is mapped onto GPUs, not what is trained",
        "并行布局：只改变模型在 GPU 上的映射方式，不改变训练内容",
    ),
    "change.reason.memory": (
        "memory saving (recompute/offload): same math, different speed and memory",
        "节省显存（激活重计算/卸载）：计算相同，速度和显存不同",
    ),
    "change.reason.distributed": (
        "distributed optimizer / communication overlap: execution only",
        "分布式优化器 / 通信重叠：仅影响执行",
    ),
    "change.reason.kernels": (
        "kernels, fusions, CUDA graphs or MoE dispatch: execution only",
        "算子、融合、CUDA graphs 或 MoE 分发：仅影响执行",
    ),
    "change.reason.io": ("checkpoint I/O or FSDP sharding: execution only", "检查点 I/O 或 FSDP 分片：仅影响执行"),
    "change.reason.observability": ("logging, profiling or fault tolerance: execution only", "日志、性能分析或容错：仅影响执行"),
    "change.reason.mbs": (
        "micro batch size with the global batch fixed: only gradient accumulation changes",
        "全局批大小不变时的微批大小：只改变梯度累积",
    ),
    "change.reason.mbs_gbs_moved": (
        "micro batch size changed together with the global batch: part of a convergence change",
        "微批大小与全局批大小一起改变：属于改变收敛的修改",
    ),
    "change.reason.eval": ("evaluation cadence: does not change training", "评估频率：不改变训练"),
    "change.reason.init": ("a different initial checkpoint is a new experiment", "不同的初始检查点意味着新的实验"),
    "change.reason.packing": ("sequence packing changes what each sample holds", "序列打包改变每个样本的内容"),
    "change.reason.seq_length": ("sequence length is part of the convergence contract", "序列长度属于收敛约定"),
    "change.reason.dataset": ("the data is part of the convergence contract", "数据属于收敛约定"),
    "change.reason.batch_budget": (
        "global batch and token budget are part of the convergence contract",
        "全局批大小和 token 预算属于收敛约定",
    ),
    "change.reason.seed": ("a new seed is a new experiment", "新的随机种子意味着新的实验"),
    "change.reason.optimizer": ("optimizer and LR schedule are part of the convergence contract", "优化器和学习率调度属于收敛约定"),
    "change.reason.precision": ("numerical precision changes the math", "数值精度改变计算结果"),
    "change.reason.moe_routing": ("MoE routing/dropping policy changes the math", "MoE 路由/丢弃策略改变计算结果"),
    "change.reason.peft": ("PEFT settings are part of the convergence contract", "PEFT 设置属于收敛约定"),
    "change.reason.unknown": (
        "not a known execution setting: treated as a convergence change to be safe",
        "不是已知的执行设置：为安全起见视为改变收敛的修改",
    ),
    "change.reason.resize": (
        "resized from the recipe's {from_gpus} GPUs to {to_gpus} GPUs",
        "从配方的 {from_gpus} 个 GPU 调整为 {to_gpus} 个 GPU",
    ),
    "change.reason.resize_gbs": (
        "global batch {old} is not divisible by micro batch x data parallel ({mbs} x {dp}) on {gpus} GPUs; nearest valid value",
        "在 {gpus} 个 GPU 上，全局批大小 {old} 不能被 微批大小 x 数据并行（{mbs} x {dp}）整除；改为最接近的有效值",
    ),
    "change.reason.weak_scale": (
        "benchmark weak-scaled from {from_gpus} to {to_gpus} GPUs keeping samples per GPU (GBS {old} -> {new})",
        "性能配方从 {from_gpus} 个 GPU 弱扩展到 {to_gpus} 个 GPU，保持每 GPU 样本数（全局批大小 {old} -> {new}）",
    ),
    "change.reason.user_seq_length": ("sequence length requested by the user", "用户指定的序列长度"),
    "change.reason.precision_flag": (
        "--precision {precision}: the chosen recipe trains in {recipe_precision}, so its mixed-precision recipe is "
        "switched (numerical precision changes the math)",
        "--precision {precision}：所选配方使用 {recipe_precision} 训练，因此切换其混合精度设置（数值精度改变计算结果）",
    ),
    "change.reason.peft_mode": (
        "--goal {mode}: run_recipe.py --mode {mode} replaces the recipe's PEFT scheme",
        "--goal {mode}：run_recipe.py --mode {mode} 会替换配方的 PEFT 方案",
    ),
    "change.reason.dataset_selector": (
        "a different dataset than the recipe's: the data is part of the convergence contract",
        "与配方不同的数据集：数据属于收敛约定",
    ),
    "change.reason.launcher_paths": (
        "explicit per-run checkpoint paths (the recipe default silently resumes other runs)",
        "每次运行使用显式的检查点路径（配方默认路径会悄悄从其他运行恢复）",
    ),
}
