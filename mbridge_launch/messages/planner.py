MESSAGES = {
    # ---------------------------------------------------------------- rules (RULE_* codes)
    "planner.rule.positive": (
        "{name}={value} must be a positive integer",
        "{name}={value} 必须是正整数",
    ),
    "planner.rule.size_limit": (
        "{name}={value} is beyond any real job; at most {limit:,}",
        "{name}={value} 超出任何实际作业的规模；上限为 {limit:,}",
    ),
    "planner.rule.dense_grid": (
        "{world} GPUs are not divisible by TP x PP x CP = {tp} x {pp} x {cp} = {mp}, so DP is not an integer; valid GPU counts: multiples of {mp} ({valid})",
        "{world} 个 GPU 不能被 TP x PP x CP = {tp} x {pp} x {cp} = {mp} 整除，数据并行（DP）不是整数；可用的 GPU 数：{mp} 的倍数（{valid}）",
    ),
    "planner.rule.expert_grid": (
        "{world} GPUs are not divisible by PP x EP x ETP = {pp} x {ep} x {etp} = {eg}, so the expert grid has no integer EDP (this layout needs at least {minimum} GPUs); valid EP here: {valid}",
        "{world} 个 GPU 不能被 PP x EP x ETP = {pp} x {ep} x {etp} = {eg} 整除，专家网格的 EDP 不是整数（该布局至少需要 {minimum} 个 GPU）；此处可用的 EP：{valid}",
    ),
    "planner.rule.gbs": (
        "GBS={gbs} is not divisible by MBS x DP = {mbs} x {dp} = {unit}; valid GBS: multiples of {unit} ({valid})",
        "全局批大小 GBS={gbs} 不能被 MBS x DP = {mbs} x {dp} = {unit} 整除；可用的 GBS：{unit} 的倍数（{valid}）",
    ),
    "planner.rule.packing_mbs": (
        "sequence packing needs MBS=1, not MBS={mbs}",
        "序列打包（packing）要求微批大小 MBS=1，而不是 MBS={mbs}",
    ),
    "planner.rule.vp_pp": (
        "VP={vp} needs PP > 1 (virtual pipeline stages split pipeline stages); valid VP with PP=1: {valid}",
        "虚拟流水线 VP={vp} 需要 PP > 1；PP=1 时可用的 VP：{valid}",
    ),
    "planner.rule.cpu_offload_pp": (
        "CPU offloading works only with PP=1, not PP={pp}",
        "CPU 卸载只支持 PP=1，而不是 PP={pp}",
    ),
    "planner.rule.fsdp_pp": (
        "Megatron-FSDP does not support pipeline parallelism: PP={pp}; valid PP with FSDP: {valid}",
        "Megatron-FSDP 不支持流水线并行：PP={pp}；使用 FSDP 时可用的 PP：{valid}",
    ),
    "planner.rule.fsdp_dp": (
        "FSDP with DP x CP = 1 has nothing to shard; use the distributed optimizer instead",
        "DP x CP = 1 时 FSDP 无可分片的内容；请改用分布式优化器",
    ),
    "planner.recompute_block": ("full ({layers} layers per pipeline chunk)", "完全（每个流水线块 {layers} 层）"),
    "planner.rule.recompute_layers_full": (
        "recompute_layers={layers} needs full recompute (recompute is '{recompute}') and at least 1 layer",
        "recompute_layers={layers} 需要完全激活重计算（当前为 '{recompute}'），且至少 1 层",
    ),
    "planner.rule.recompute_layers_chunk": (
        "recompute_layers={layers} exceeds the {chunk} layers of a pipeline chunk of {model} at PP={pp}, VP={vp}; "
        "valid: {valid}",
        "recompute_layers={layers} 超过 {model} 在 PP={pp}、VP={vp} 时每个流水线块的 {chunk} 层；可选：{valid}",
    ),
    "planner.rule.recompute": (
        "unknown recompute '{value}'; valid: {valid}",
        "未知的激活重计算设置 '{value}'；可选：{valid}",
    ),
    "planner.rule.sp_off": (
        "TP={tp} without sequence parallelism wastes activation memory; turn SP on",
        "TP={tp} 时未开启序列并行（SP）会浪费激活显存；请开启 SP",
    ),
    "planner.rule.sp_tp1": (
        "sequence parallelism has no effect with TP=1 (Megatron turns it off)",
        "TP=1 时序列并行（SP）无效（Megatron 会将其关闭）",
    ),
    "planner.rule.sp_seq": (
        "sequence parallelism splits the sequence over TP: sequence length {seq} is not divisible by TP x CP = {tp} x {cp}; valid TP here: {valid}",
        "序列并行（SP）将序列切分到各 TP 上：序列长度 {seq} 不能被 TP x CP = {tp} x {cp} 整除；此处可用的 TP：{valid}",
    ),
    "planner.rule.cp_seq": (
        "sequence length {seq} is not divisible by 2 x CP = {twice}; valid CP: {valid}",
        "序列长度 {seq} 不能被 2 x CP = {twice} 整除；可用的 CP：{valid}",
    ),
    "planner.rule.cp_comm": (
        "unknown cp_comm_type '{value}'; valid: {valid}",
        "未知的 cp_comm_type '{value}'；可选：{valid}",
    ),
    "planner.rule.cp_a2a_heads": (
        "cp_comm_type a2a splits KV heads: CP={cp} does not divide the {local} KV heads per TP rank of {model}; valid cp_comm_type: {valid}",
        "cp_comm_type a2a 会切分 KV 头：CP={cp} 不能整除 {model} 每个 TP rank 上的 {local} 个 KV 头；可选的 cp_comm_type：{valid}",
    ),
    "planner.rule.tp_heads": (
        "TP={tp} does not divide num_attention_heads={heads} of {model}; valid TP: {valid}",
        "TP={tp} 不能整除 {model} 的 num_attention_heads={heads}；可用的 TP：{valid}",
    ),
    "planner.rule.tp_kv_heads": (
        "TP={tp} does not divide num_query_groups={groups} of {model}; valid TP: {valid}",
        "TP={tp} 不能整除 {model} 的 KV 头数（num_query_groups={groups}）；可用的 TP：{valid}",
    ),
    "planner.rule.tp_ffn": (
        "TP={tp} does not divide ffn_hidden_size={ffn} of {model}; valid TP: {valid}",
        "TP={tp} 不能整除 {model} 的 ffn_hidden_size={ffn}；可用的 TP：{valid}",
    ),
    "planner.rule.pp_layers": (
        "{layers} layers of {model} do not split over PP x VP = {pp} x {vp} = {chunks} stages; valid PP: {valid} (or declare uneven first/last stages)",
        "{model} 的 {layers} 层无法均分到 PP x VP = {pp} x {vp} = {chunks} 个阶段；可用的 PP：{valid}（或声明首/尾阶段层数不均）",
    ),
    "planner.rule.vp_layers": (
        "{layers} layers of {model} do not split over PP x VP = {pp} x {vp} virtual stages; valid VP with PP={pp}: {valid}",
        "{model} 的 {layers} 层无法均分到 PP x VP = {pp} x {vp} 个虚拟阶段；PP={pp} 时可用的 VP：{valid}",
    ),
    "planner.rule.pp_uneven": (
        "uneven pipeline split of {model} does not add up: {layers} layers, PP={pp}, VP={vp}, first stage {first}, last stage {last}",
        "{model} 的不均匀流水线切分不成立：{layers} 层，PP={pp}，VP={vp}，首阶段 {first} 层，尾阶段 {last} 层",
    ),
    "planner.rule.ep_dense": (
        "EP={ep} needs experts, but {model} is a dense model; valid EP: {valid}",
        "EP={ep} 需要专家层，但 {model} 是稠密模型；可用的 EP：{valid}",
    ),
    "planner.rule.ep_experts": (
        "EP={ep} does not divide num_moe_experts={experts} of {model}; valid EP: {valid}",
        "EP={ep} 不能整除 {model} 的专家数 num_moe_experts={experts}；可用的 EP：{valid}",
    ),
    "planner.rule.etp_ffn": (
        "ETP={etp} does not divide the expert FFN width {ffn} of {model}; valid ETP: {valid}",
        "ETP={etp} 不能整除 {model} 的专家 FFN 宽度 {ffn}；可用的 ETP：{valid}",
    ),
    "planner.rule.moe_sp": (
        "MoE with TP={tp} and EP={ep} requires sequence parallelism (SP)",
        "MoE 在 TP={tp}、EP={ep} 时必须开启序列并行（SP）",
    ),
    "planner.rule.seq_positions": (
        "sequence length {seq} exceeds max_position_embeddings={positions} of {model}; the model was not trained that long",
        "序列长度 {seq} 超过 {model} 的 max_position_embeddings={positions}；该模型未在此长度上训练过",
    ),
    "planner.rule.tp_nvlink": (
        "TP={tp} spans more than one NVLink domain ({domain} GPUs on {gpu}); TP traffic would cross the network; valid TP: {valid}",
        "TP={tp} 超出一个 NVLink 域（{gpu} 为 {domain} 个 GPU），张量并行通信将走网络；可用的 TP：{valid}",
    ),
    "planner.rule.ep_nvlink": (
        "EP={ep} spans more than one NVLink domain ({domain} GPUs on {gpu}): expert all-to-all crosses the network",
        "EP={ep} 超出一个 NVLink 域（{gpu} 为 {domain} 个 GPU）：专家 all-to-all 通信将走网络",
    ),
    "planner.rule.partial_node": (
        "{world} GPUs do not fill whole nodes of {gpn} GPUs",
        "{world} 个 GPU 不能填满每节点 {gpn} 个 GPU 的整数个节点",
    ),
    "planner.rule.memory": (
        "does not fit in GPU memory even with full recompute",
        "即使完全激活重计算也无法放入 GPU 显存",
    ),
    "planner.rule.pruned": (
        "predicted slower than the layouts shown (not evaluated in full)",
        "预测比所列布局更慢（未完整评估）",
    ),
    # ---------------------------------------------------------------- plan / estimate output
    "planner.bad_gpus": ("--gpus must be a positive integer, not {value}", "--gpus 必须是正整数，而不是 {value}"),
    "planner.bad_tokens": (
        "{flag} must be a positive number of tokens, such as 1e12 or 15T (suffixes K, M, B, T), not {value}",
        "{flag} 必须是正的 token 数，例如 1e12 或 15T（可用后缀 K、M、B、T），而不是 {value}",
    ),
    "planner.bad_number": ("{flag} must be a positive integer, not {value}", "{flag} 必须是正整数，而不是 {value}"),
    "planner.no_layout": (
        "no valid layout of {model} fits {gpus} x {gpu} for GBS={gbs}, sequence length {seq}, {precision}; most frequent reasons: {reasons}{hint}",
        "在 {gpus} 个 {gpu} 上，GBS={gbs}、序列长度 {seq}、精度 {precision} 时 {model} 没有可用且放得下的布局；主要原因：{reasons}{hint}",
    ),
    "planner.fits_at": (
        "; doubling the GPU count, the first that fits is {gpus} x {gpu} (plan --gpus {gpus})",
        "；按倍数增加 GPU 数，首个能放下的是 {gpus} 个 {gpu}（plan --gpus {gpus}）",
    ),
    "planner.fits_nowhere": (
        "; no count up to {gpus} x {gpu} fits either: shorten the sequence, use a lower precision or a GPU with more memory",
        "；直到 {gpus} 个 {gpu} 也放不下：请缩短序列、降低精度或换用显存更大的 GPU",
    ),
    "planner.broken_rule": (
        "layout breaks rule {code}: {message}",
        "布局违反规则 {code}：{message}",
    ),
    "planner.header": (
        "{model} on {gpus} x {gpu} ({precision}, {goal}), GBS={gbs}, sequence length {seq}",
        "{model}，{gpus} 个 {gpu}（{precision}，{goal}），全局批大小 {gbs}，序列长度 {seq}",
    ),
    "planner.candidate": (
        "#{rank}  TP={tp} PP={pp} VP={vp} CP={cp} EP={ep} ETP={etp} DP={dp} MBS={mbs} recompute={recompute}{fsdp}",
        "#{rank}  TP={tp} PP={pp} VP={vp} CP={cp} EP={ep} ETP={etp} DP={dp} MBS={mbs} 激活重计算={recompute}{fsdp}",
    ),
    "planner.time_line": (
        "     where the step goes: {parts}",
        "     每步耗时构成：{parts}",
    ),
    "planner.time_group": ("{label} {seconds:.2f} s ({items})", "{label} {seconds:.2f} 秒（{items}）"),
    "planner.time_sep_items": (", ", "，"),
    "planner.time_sep_parts": ("; ", "；"),
    "planner.time_item": ("{label} {seconds:.2f}", "{label} {seconds:.2f}"),
    "planner.time_single": ("{label} {seconds:.2f} s", "{label} {seconds:.2f} 秒"),
    "planner.time.compute": ("compute", "计算"),
    "planner.time.latency": ("host launch and sync", "主机启动与同步"),
    "planner.time.comm": ("exposed communication", "未被掩盖的通信"),
    "planner.time.pp_bubble": ("pipeline bubble", "流水线气泡"),
    "planner.time.optimizer": ("optimizer step", "优化器更新"),
    "planner.time.gemm": ("GEMM", "GEMM"),
    "planner.time.attention": ("attention", "注意力"),
    "planner.time.moe": ("experts", "专家"),
    "planner.time.elementwise": ("element-wise", "逐元素"),
    "planner.time.tp_comm": ("TP", "TP"),
    "planner.time.cp_comm": ("CP", "CP"),
    "planner.time.ep_comm": ("EP", "EP"),
    "planner.time.pp_comm": ("PP", "PP"),
    "planner.time.dp_comm": ("DP", "DP"),
    "planner.figures": (
        "     {tps:,.0f} tokens/s/GPU, {tflops:.0f} model TFLOP/s/GPU, MFU {mfu:.1%}, step {step:.2f} s",
        "     每 GPU 每秒 {tps:,.0f} token，每 GPU 模型算力 {tflops:.0f} TFLOP/s，模型算力利用率（MFU）{mfu:.1%}，每步 {step:.2f} 秒",
    ),
    "planner.budget": (
        "     {tokens:.3g} tokens: {hours:,.1f} h wall-clock, {gpu_hours:,.0f} GPU-hours",
        "     {tokens:.3g} 个 token：墙钟时间 {hours:,.1f} 小时，{gpu_hours:,.0f} GPU 小时",
    ),
    "planner.memory_title": (
        "     memory per GPU ({stage} stage): {total:.1f} of {hbm:.0f} GiB (limit {limit:.0f} GiB with {headroom:.0%} headroom)",
        "     每 GPU 显存（{stage}阶段）：{total:.1f} / {hbm:.0f} GiB（保留 {headroom:.0%} 余量后上限 {limit:.0f} GiB）",
    ),
    "planner.near_tie": (
        "Layouts 1-{last} are predicted within {pct:.0%} of the first, about the model's median error on NVIDIA's "
        "published runs: it cannot tell them apart, so time a few steps of each before a long run.",
        "布局 1-{last} 的预测吞吐与第一名相差不到 {pct:.0%}，约等于本模型在 NVIDIA 公开结果上的中位误差："
        "模型无法区分它们，长时间训练前请各自试跑几步再定。",
    ),
    "planner.rank_below": (
        "     ranked below #{above} although predicted {pct:.1%} faster: {reasons}",
        "     预测吞吐比 #{above} 高 {pct:.1%}，但排在其后：{reasons}",
    ),
    "planner.rank_reason.memory": (
        "it uses {frac:.0%} of HBM (above {comfort:.0%} each 10% more costs {cost:.0%} in the ranking: near-full "
        "layouts are fragile)",
        "它占用 {frac:.0%} 的显存（超过 {comfort:.0%} 后每多 10% 在排序中扣 {cost:.0%}：接近占满的布局容易显存溢出）",
    ),
    "planner.rank_reason.ep": (
        "on near-ties wider expert parallelism is preferred (EP={ep} against EP={other})",
        "吞吐相近时优先更大的专家并行（EP={ep} 对 EP={other}）",
    ),
    "planner.rank_reason.cp": (
        "at this sequence length context parallelism is used only when needed (CP={cp} against CP={other})",
        "在此序列长度下仅在必要时使用上下文并行（CP={cp} 对 CP={other}）",
    ),
    "planner.rank_reason.join": ("; ", "；"),
    "planner.notes_uneven": (
        "     note: layers do not split evenly; set num_layers_in_first/last_pipeline_stage or a pipeline layout",
        "     注意：层数无法均分；请设置 num_layers_in_first/last_pipeline_stage 或流水线布局",
    ),
    "planner.rejected_title": ("rejected alternatives (by rule):", "被排除的方案（按规则）："),
    "planner.rejected_line": ("  {code}: {count} x, e.g. {example} — {message}", "  {code}：{count} 个，例如 {example} — {message}"),
    "planner.stage.first": ("first", "首"),
    "planner.stage.last": ("last", "尾"),
    "planner.stage.only": ("single", "单一"),
    "planner.memory.weights": ("weights", "权重"),
    "planner.memory.gradients": ("gradients", "梯度"),
    "planner.memory.optimizer": ("optimizer", "优化器状态"),
    "planner.memory.activations": ("activations", "激活"),
    "planner.memory.logits": ("logits", "logits"),
    "planner.memory.allowance": ("CUDA/NCCL/frag.", "CUDA/NCCL/碎片"),
    "planner.memory.free": ("free", "空闲"),
    "planner.estimate_oom": (
        "warning: this layout needs {total:.1f} GiB per GPU, more than the {limit:.0f} GiB limit of {gpu}",
        "警告：该布局每 GPU 需要 {total:.1f} GiB，超过 {gpu} 的 {limit:.0f} GiB 上限",
    ),
    "planner.plan_needs_catalog": (
        "-o needs the recipe catalog (mbridge_launch.knowledge.catalog.load_catalog) to pick a recipe for {model}; it is not available: {reason}",
        "-o 需要配方目录（mbridge_launch.knowledge.catalog.load_catalog）来为 {model} 选择配方；目录不可用：{reason}",
    ),
    "planner.plan_no_recipe": (
        "no library recipe of {model} for goal {goal} in the catalog; -o cannot write a Plan",
        "目录中没有 {model} 针对 {goal} 的库配方；-o 无法写出计划",
    ),
}
