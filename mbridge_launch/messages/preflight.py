"""Preflight messages (en, zh). Keys: preflight.<check code> and preflight.<check code>.hint."""

MESSAGES = {
    # ------------------------------------------------------------------ report
    "preflight.title": ("preflight of {name} (plan {hash}, {path})", "预检 {name}（计划 {hash}，{path}）"),
    "preflight.severity.error": ("ERROR", "错误"),
    "preflight.severity.warning": ("warning", "警告"),
    "preflight.severity.info": ("info", "信息"),
    "preflight.summary.passed": (
        "passed: {errors} errors, {warnings} warnings, {infos} notes (exit {code})",
        "通过：{errors} 个错误，{warnings} 个警告，{infos} 条信息（退出码 {code}）",
    ),
    "preflight.summary.failed": (
        "FAILED: {errors} errors, {warnings} warnings, {infos} notes (exit {code}); fix the errors before submitting",
        "未通过：{errors} 个错误，{warnings} 个警告，{infos} 条信息（退出码 {code}）；请先修复错误再提交",
    ),
    "preflight.preflight.group_crashed": (
        "the {group} checks could not run: {error}",
        "{group} 检查无法运行：{error}",
    ),
    "preflight.preflight.group_crashed.hint": (
        "this is a bug in mbridge-launch; rerun with MBRIDGE_LAUNCH_DEBUG=1 and report the traceback",
        "这是 mbridge-launch 的缺陷；设置 MBRIDGE_LAUNCH_DEBUG=1 重新运行并报告回溯",
    ),
    # ------------------------------------------------------------------ plan
    "preflight.plan.recorded": ("recorded in the plan: {message}", "计划中记录的提示：{message}"),
    "preflight.plan.time_invalid": (
        "cluster.time '{time}' is not a Slurm time; expected M, M:S, H:M:S, D-H, D-H:M or D-H:M:S",
        "cluster.time '{time}' 不是有效的 Slurm 时间；应为 M、M:S、H:M:S、D-H、D-H:M 或 D-H:M:S",
    ),
    "preflight.plan.world_mismatch": (
        "layout TP={tp} x PP={pp} x CP={cp} x DP={dp} = {world} GPUs, but the cluster section asks for {nodes} nodes x {gpus_per_node} = {total} GPUs",
        "并行布局 TP={tp} x PP={pp} x CP={cp} x DP={dp} = {world} 块 GPU，但 cluster 部分申请 {nodes} 个节点 x {gpus_per_node} = {total} 块 GPU",
    ),
    "preflight.plan.world_mismatch.hint": (
        "set parallelism.dp = nodes x gpus_per_node / (TP x PP x CP), or change the node count",
        "将 parallelism.dp 设为 节点数 x 每节点 GPU 数 / (TP x PP x CP)，或修改节点数",
    ),
    "preflight.plan.gpu_type_unknown": (
        "GPU type '{gpu_type}' is not in the hardware catalog ({reason}); hardware rules and memory fit were not checked",
        "GPU 类型 '{gpu_type}' 不在硬件目录中（{reason}）；未检查硬件相关规则和显存",
    ),
    "preflight.plan.gpus_per_node_exceeds": (
        "cluster.gpus_per_node={gpus_per_node}, but a {gpu} node has {max} GPUs",
        "cluster.gpus_per_node={gpus_per_node}，但 {gpu} 节点只有 {max} 块 GPU",
    ),
    "preflight.plan.rules_skipped": (
        "parallelism rules not checked: {reason}",
        "未检查并行规则：{reason}",
    ),
    "preflight.plan.arch_unknown": (
        "architecture of '{model}' unknown ({reason}); rules that need it (TP vs heads and KV heads, PP vs layers, EP vs experts) were skipped",
        "'{model}' 的模型结构未知（{reason}）；跳过了依赖它的规则（TP 与注意力头及 KV 头数、PP 与层数、EP 与专家数）",
    ),
    "preflight.plan.arch_unknown.hint": (
        "add the model to catalog/models.yaml, or plan with --hf-config pointing at its Hugging Face config.json",
        "将该模型加入 catalog/models.yaml，或使用 --hf-config 指向其 Hugging Face config.json 重新规划",
    ),
    "preflight.plan.rule.hint": (
        "change the layout to one of the valid values, or run `mbridge-launch plan` to search a valid layout",
        "将并行布局改为有效取值之一，或运行 `mbridge-launch plan` 搜索有效布局",
    ),
    "preflight.plan.check_accepted": (
        "{code} is accepted by this plan (accepted_checks): {reason}",
        "本计划接受了 {code}（accepted_checks）：{reason}",
    ),
    "preflight.plan.accept_not_allowed": (
        "accepted_checks names {code}, which cannot be accepted: only checks that rest on an estimate can ({allowed})",
        "accepted_checks 中的 {code} 不能被接受：只有基于估算的检查可以被接受（{allowed}）",
    ),
    "preflight.plan.accept_not_allowed.hint": (
        "remove it from accepted_checks and fix what the check reports",
        "请将其从 accepted_checks 中删除，并修复该检查报告的问题",
    ),
    "preflight.plan.accept_unused": (
        "accepted_checks names {code}, but that check no longer fails: the acceptance can go",
        "accepted_checks 中的 {code} 已不再失败：可以删除这条接受",
    ),
    "preflight.plan.memory_oom": (
        "estimated memory {total} GB per GPU exceeds the usable {usable} GB of {hbm} GB HBM on {gpu} (source: {source}): out of memory (OOM) expected",
        "估算每 GPU 显存 {total} GB 超过 {gpu} 上 {hbm} GB HBM 中可用的 {usable} GB（来源：{source}）：预计显存溢出（OOM）",
    ),
    "preflight.plan.memory_oom.hint": (
        "raise TP/PP/CP, turn on selective or full activation recomputation, lower the micro batch size, or use more GPUs (`mbridge-launch plan` finds a layout that fits); if this layout is known to run, accept the estimate in the plan: an accepted_checks entry with code plan.memory_oom and the reason",
        "增大 TP/PP/CP、开启选择性或完全激活重计算、减小微批大小，或使用更多 GPU（`mbridge-launch plan` 可找到能放下的布局）；若已知该布局可以运行，可在计划中接受此估算：在 accepted_checks 中加入 code 为 plan.memory_oom 的一项并写明 reason",
    ),
    "preflight.plan.memory_ok": (
        "memory estimate {total} GB per GPU fits the usable {usable} GB of {hbm} GB HBM on {gpu} (source: {source})",
        "显存估算每 GPU {total} GB，在 {gpu} 的 {hbm} GB HBM 可用的 {usable} GB 以内（来源：{source}）",
    ),
    "preflight.plan.memory_skipped": ("memory fit not checked: {reason}", "未检查显存：{reason}"),
    "preflight.plan.recipe_unknown": (
        "recipe '{recipe}' is not in the Megatron Bridge {version} catalog",
        "配方 '{recipe}' 不在 Megatron Bridge {version} 的目录中",
    ),
    "preflight.plan.recipe_unknown.hint": (
        "check the name with `mbridge-launch catalog list`; a misspelled recipe fails at the job's first line",
        "用 `mbridge-launch catalog list` 核对名称；拼错的配方会在作业第一行就失败",
    ),
    "preflight.plan.catalog_skipped": ("recipe catalog not consulted: {reason}", "未查阅配方目录：{reason}"),
    "preflight.plan.recipe_kind_mismatch": (
        "the plan calls recipe '{recipe}' a {plan_kind} recipe, the catalog says {catalog_kind}",
        "计划将配方 '{recipe}' 标为 {plan_kind}，但目录中为 {catalog_kind}",
    ),
    "preflight.plan.recipe_mode_mismatch": (
        "recipe '{recipe}' is a {recipe_mode} recipe but the plan runs mode {mode}",
        "配方 '{recipe}' 是 {recipe_mode} 配方，但计划以 {mode} 模式运行",
    ),
    "preflight.plan.recipe_mode_mismatch.hint": (
        "pick the recipe of the same model for this mode (`mbridge-launch recommend --goal {mode}`)",
        "请为该模式选择同一模型的对应配方（`mbridge-launch recommend --goal {mode}`）",
    ),
    "preflight.plan.recipe_finding": (
        "catalog finding on recipe '{recipe}' [{code}]: {finding}",
        "目录对配方 '{recipe}' 的检查结果 [{code}]：{finding}",
    ),
    "preflight.plan.benchmark_real_data": (
        "benchmark recipe '{recipe}' with dataset '{dataset}': benchmark recipes own their (mock) data and reject --dataset",
        "性能配方 '{recipe}' 配合数据集 '{dataset}'：性能配方自带模拟数据，不接受 --dataset",
    ),
    "preflight.plan.benchmark_real_data.hint": (
        "for real training use the library recipe of the same model (`mbridge-launch recommend` without --benchmark)",
        "实际训练请使用同一模型的库配方（不带 --benchmark 运行 `mbridge-launch recommend`）",
    ),
    "preflight.plan.benchmark_recipe": (
        "'{recipe}' is a benchmark recipe: its losses and checkpoints are not convergence evidence",
        "'{recipe}' 是性能配方（吞吐量基准）：其损失和检查点不能作为收敛依据",
    ),
    "preflight.plan.mock_finetune": (
        "mock data with mode {mode}: fine-tuning needs real data",
        "模拟数据与 {mode} 模式不能搭配：微调需要真实数据",
    ),
    "preflight.plan.mock_finetune.hint": (
        "use a fine-tuning preset (squad, tulu3, ...) or local-jsonl with dataset.dataset_root",
        "使用微调预设数据集（squad、tulu3 等），或使用 local-jsonl 并设置 dataset.dataset_root",
    ),
    "preflight.plan.mock_pretrain": (
        "mock data: fine for a smoke test; real pretraining needs megatron-indexed data",
        "模拟数据：适合冒烟测试；实际预训练需要 megatron-indexed 数据",
    ),
    "preflight.plan.selector_unknown": (
        "dataset selector '{dataset}' is unknown; valid: {valid}",
        "数据集选择器 '{dataset}' 未知；有效值：{valid}",
    ),
    "preflight.plan.selector_mode": (
        "dataset '{dataset}' does not serve mode {mode}; it serves: {modes}",
        "数据集 '{dataset}' 不支持 {mode} 模式；支持：{modes}",
    ),
    "preflight.plan.dataset_required": (
        "dataset '{dataset}' needs {setting}, which the plan does not give",
        "数据集 '{dataset}' 需要 {setting}，但计划中没有提供",
    ),
    "preflight.plan.dataset_required.hint": (
        "set it in dataset.fields (or as an override {setting}=VALUE; a megatron-indexed blend goes in dataset.data_paths)",
        "在 dataset.fields 中设置它（或使用覆盖项 {setting}=VALUE；megatron-indexed 的数据混合写在 dataset.data_paths 中）",
    ),
    "preflight.plan.datasets_skipped": ("dataset catalog not consulted: {reason}", "未查阅数据集目录：{reason}"),
    "preflight.plan.convergence_override": (
        "convergence change: {setting}={value} (recipe default {from}; {reason})",
        "改变收敛的修改：{setting}={value}（配方默认值 {from}；{reason}）",
    ),
    "preflight.plan.benchmark_override": (
        "benchmark-only shortcut in a library-recipe run: {setting}={value} ({reason})",
        "库配方训练中使用了仅限基准测试的捷径：{setting}={value}（{reason}）",
    ),
    "preflight.plan.benchmark_override.hint": (
        "remove it for real training: results with it are not convergence evidence",
        "实际训练请删除该项：使用它得到的结果不能作为收敛依据",
    ),
    "preflight.plan.override_not_integer": (
        "override {setting}={value} is not a whole number of layers (at least {least}); Megatron would stop at start-up",
        "覆盖项 {setting}={value} 不是整数层数（至少为 {least}）；Megatron 会在启动时报错",
    ),
    "preflight.plan.override_not_integer.hint": (
        "write a whole number, e.g. {setting}=4, or null to keep the recipe's value",
        "请写整数，例如 {setting}=4，或写 null 保留配方的取值",
    ),
    "preflight.plan.override_misclassified": (
        "override {setting}={value} is declared {declared} but changing {setting} is a {actual} change",
        "覆盖项 {setting}={value} 被标为 {declared}，但修改 {setting} 属于 {actual} 类修改",
    ),
    "preflight.plan.override_misclassified.hint": (
        "set its class to {actual} in the plan so that the gate and the ledger record it correctly",
        "在计划中将其类别改为 {actual}，以便提交闸门和运行记录正确记录",
    ),
    "preflight.plan.container_without_pyxis": (
        "container image {image} is set, but cluster.profile.pyxis is false: the script will run without the container",
        "设置了容器镜像 {image}，但 cluster.profile.pyxis 为 false：脚本将不使用容器运行",
    ),
    "preflight.plan.container_without_pyxis.hint": (
        "set cluster.profile.pyxis: true if the site has Pyxis/Enroot",
        "如果站点装有 Pyxis/Enroot，请设置 cluster.profile.pyxis: true",
    ),
    "preflight.plan.render_failed": (
        "the sbatch executor refuses the plan: {reason}",
        "sbatch 执行器拒绝该计划：{reason}",
    ),
    "preflight.plan.render_failed.hint": (
        "fix the plan field it names; `mbridge-launch submit PLAN --dry-run` shows the script once it renders",
        "修正其指出的计划字段；能生成脚本后可用 `mbridge-launch submit PLAN --dry-run` 查看",
    ),
    # ------------------------------------------------------------------ data
    "preflight.data.weights_count": (
        "blend has {weights} weights for {prefixes} prefixes; expected one weight per prefix",
        "数据混合有 {weights} 个权重、{prefixes} 个前缀；每个前缀应对应一个权重",
    ),
    "preflight.data.weight_invalid": (
        "{count} blend weights are not positive numbers, e.g. '{weight}' for {prefix}",
        "{count} 个混合权重不是正数，例如 {prefix} 的 '{weight}'",
    ),
    "preflight.data.prefix_has_suffix": (
        "{count} prefixes end in .bin/.idx, e.g. {prefix}; Megatron expects the prefix {stem}",
        "{count} 个前缀以 .bin/.idx 结尾，例如 {prefix}；Megatron 需要的前缀是 {stem}",
    ),
    "preflight.data.duplicate_prefixes": (
        "{count} prefixes appear more than once in the blend",
        "数据混合中有 {count} 个前缀重复出现",
    ),
    "preflight.data.bin_missing": (
        "{count} of {total} prefixes have no .bin file: {examples}",
        "{total} 个前缀中有 {count} 个缺少 .bin 文件：{examples}",
    ),
    "preflight.data.bin_missing.hint": (
        "every prefix needs PREFIX.bin and PREFIX.idx (written by Megatron's preprocess_data.py)",
        "每个前缀都需要 PREFIX.bin 和 PREFIX.idx（由 Megatron 的 preprocess_data.py 生成）",
    ),
    "preflight.data.bin_unreadable": ("{count} of {total} .bin files cannot be read: {examples}", "{total} 个 .bin 文件中有 {count} 个无法读取：{examples}"),
    "preflight.data.bin_empty": ("{count} of {total} .bin files are empty (0 bytes): {examples}", "{total} 个 .bin 文件中有 {count} 个为空（0 字节）：{examples}"),
    "preflight.data.bin_empty.hint": (
        "re-run the preprocessing for these prefixes; an interrupted copy also leaves empty files",
        "重新对这些前缀做预处理；中断的拷贝也会留下空文件",
    ),
    "preflight.data.bin_truncated": (
        "{count} of {total} .bin files are shorter than their index says: {examples}",
        "{total} 个 .bin 文件中有 {count} 个比索引记录的短：{examples}",
    ),
    "preflight.data.bin_truncated.hint": ("copy or preprocess these files again", "重新拷贝或预处理这些文件"),
    "preflight.data.bin_size_mismatch": (
        "{count} of {total} .bin files are larger than their index covers (pair from different runs?): {examples}",
        "{total} 个 .bin 文件中有 {count} 个比索引覆盖的范围大（.bin 与 .idx 来自不同批次？）：{examples}",
    ),
    "preflight.data.idx_missing": (
        "{count} of {total} prefixes have no .idx file: {examples}",
        "{total} 个前缀中有 {count} 个缺少 .idx 文件：{examples}",
    ),
    "preflight.data.idx_missing.hint": (
        "every prefix needs PREFIX.bin and PREFIX.idx; copy the .idx next to its .bin",
        "每个前缀都需要 PREFIX.bin 和 PREFIX.idx；请把 .idx 拷贝到对应 .bin 旁边",
    ),
    "preflight.data.idx_unreadable": ("{count} of {total} .idx files cannot be read: {examples}", "{total} 个 .idx 文件中有 {count} 个无法读取：{examples}"),
    "preflight.data.idx_empty": ("{count} of {total} .idx files are empty (0 bytes): {examples}", "{total} 个 .idx 文件中有 {count} 个为空（0 字节）：{examples}"),
    "preflight.data.idx_not_megatron": (
        "{count} of {total} .idx files are not Megatron indexes (expected magic MMIDIDX): {examples}",
        "{total} 个 .idx 文件中有 {count} 个不是 Megatron 索引（应以 MMIDIDX 开头）：{examples}",
    ),
    "preflight.data.idx_truncated": (
        "{count} of {total} .idx files are truncated: {examples}",
        "{total} 个 .idx 文件中有 {count} 个被截断：{examples}",
    ),
    "preflight.data.idx_truncated.hint": ("copy or preprocess these files again", "重新拷贝或预处理这些文件"),
    "preflight.data.idx_bad_version": (
        "{count} of {total} .idx files have an unsupported index version (expected 1): {examples}",
        "{total} 个 .idx 文件中有 {count} 个索引版本不受支持（应为 1）：{examples}",
    ),
    "preflight.data.idx_bad_dtype": (
        "{count} of {total} .idx files have an unknown token dtype code (expected 1-8): {examples}",
        "{total} 个 .idx 文件中有 {count} 个 token 数据类型代码未知（应为 1-8）：{examples}",
    ),
    "preflight.data.idx_no_sequences": (
        "{count} of {total} indexes hold no sequences: {examples}",
        "{total} 个索引中有 {count} 个不含任何序列：{examples}",
    ),
    "preflight.data.idx_size_mismatch": (
        "{count} of {total} .idx files are larger than their header describes: {examples}",
        "{total} 个 .idx 文件中有 {count} 个比文件头描述的大：{examples}",
    ),
    "preflight.data.blend_ok": (
        "{good} of {total} prefixes are valid Megatron indexed datasets ({gb} GB of tokens, {documents} documents)",
        "{total} 个前缀中有 {good} 个是有效的 Megatron 索引数据集（token 数据 {gb} GB，{documents} 篇文档）",
    ),
    "preflight.data.jsonl_root_missing": ("dataset_root {path} is not a directory", "dataset_root {path} 不是目录"),
    "preflight.data.jsonl_missing": ("{path} does not exist; local-jsonl needs training.jsonl", "{path} 不存在；local-jsonl 需要 training.jsonl"),
    "preflight.data.jsonl_validation_missing": (
        "{path} does not exist: no validation data (validation will fail or be skipped)",
        "{path} 不存在：没有验证数据（验证会失败或被跳过）",
    ),
    "preflight.data.jsonl_empty": ("{path} holds no records", "{path} 不含任何记录"),
    "preflight.data.jsonl_unreadable": ("cannot read {path}: {reason}", "无法读取 {path}：{reason}"),
    "preflight.data.jsonl_parse": (
        "{path} line {line} is not JSON: {reason}",
        "{path} 第 {line} 行不是 JSON：{reason}",
    ),
    "preflight.data.jsonl_keys": (
        "{path} line {line} has keys [{found}]; expected {expected}",
        "{path} 第 {line} 行的键为 [{found}]；应为 {expected}",
    ),
    "preflight.data.jsonl_keys.hint": (
        "prompt-completion records need the prompt and completion columns (dataset.preprocessing.prompt_column / completion_column); chat records need a messages list",
        "提示-补全格式的记录需要提示列和补全列（dataset.preprocessing.prompt_column / completion_column）；对话格式的记录需要 messages 列表",
    ),
    "preflight.data.jsonl_ok": ("{path}: first {records} records parse with the expected keys", "{path}：前 {records} 条记录可解析且键符合要求"),
    "preflight.data.hf_needs_network": (
        "dataset '{dataset}' ({repo}) is downloaded from Hugging Face at run time: compute nodes need network access",
        "数据集 '{dataset}'（{repo}）在运行时从 Hugging Face 下载：计算节点需要网络访问",
    ),
    "preflight.data.hf_needs_network.hint": (
        "if the nodes are offline, download it on a login node into a shared HF_HOME and set HF_HUB_OFFLINE=1 in the plan's env_vars",
        "如果计算节点无法联网，请在登录节点下载到共享的 HF_HOME，并在计划的 env_vars 中设置 HF_HUB_OFFLINE=1",
    ),
    "preflight.data.hf_not_cached": (
        "HF_HUB_OFFLINE is set but dataset '{dataset}' ({repo}) is not in the Hugging Face cache ({cache})",
        "已设置 HF_HUB_OFFLINE，但数据集 '{dataset}'（{repo}）不在 Hugging Face 缓存中（{cache}）",
    ),
    "preflight.data.hf_not_cached.hint": (
        "on a machine with network access: HF_HOME=<shared dir> huggingface-cli download --repo-type dataset {repo}",
        "在可联网的机器上执行：HF_HOME=<共享目录> huggingface-cli download --repo-type dataset {repo}",
    ),
    "preflight.data.hf_cached": ("dataset '{dataset}' ({repo}) is in the offline cache: {path}", "数据集 '{dataset}'（{repo}）已在离线缓存中：{path}"),
    "preflight.data.path_missing": ("{field} {path} does not exist", "{field} {path} 不存在"),
    # ------------------------------------------------------------------ paths
    "preflight.path.image_missing": ("container image {path} does not exist", "容器镜像 {path} 不存在"),
    "preflight.path.image_missing.hint": (
        "create it with `enroot import` (a .sqsh file) or use a registry reference such as nvcr.io#nvidia/nemo:25.09",
        "用 `enroot import` 生成 .sqsh 文件，或使用镜像仓库引用，例如 nvcr.io#nvidia/nemo:25.09",
    ),
    "preflight.path.image_unreadable": ("container image {path} cannot be used: {reason}", "容器镜像 {path} 无法使用：{reason}"),
    "preflight.path.image_node_local": (
        "container image {path} is on node-local storage ({why}); other nodes cannot see it",
        "容器镜像 {path} 位于节点本地存储（{why}）；其他节点看不到它",
    ),
    "preflight.path.image_ref_invalid": (
        "container image '{image}' is neither an existing file nor a well-formed registry reference ([USER@][REGISTRY#]IMAGE[:TAG])",
        "容器镜像 '{image}' 既不是已存在的文件，也不是格式正确的镜像仓库引用（[USER@][REGISTRY#]IMAGE[:TAG]）",
    ),
    "preflight.path.mount_missing": (
        "mount source {source} (-> {target}) does not exist",
        "挂载源 {source}（-> {target}）不存在",
    ),
    "preflight.path.mount_missing.hint": (
        "Pyxis fails the whole job on a missing mount source; create it or fix the path",
        "挂载源不存在时 Pyxis 会使整个作业失败；请创建该路径或修正",
    ),
    "preflight.path.mount_relative": ("mount source {source} (-> {target}) is not an absolute path", "挂载源 {source}（-> {target}）不是绝对路径"),
    "preflight.path.mount_target_relative": ("mount target {target} (from {source}) is not an absolute path", "挂载目标 {target}（来自 {source}）不是绝对路径"),
    "preflight.path.save_unset": (
        "no checkpoint.save: the recipe default ./nemo_experiments/default/checkpoints silently resumes any earlier run started from the same directory",
        "未设置 checkpoint.save：配方默认的 ./nemo_experiments/default/checkpoints 会静默恢复同一目录下以前的训练",
    ),
    "preflight.path.save_unset.hint": ("set an explicit per-run checkpoint.save (recommend --save-dir)", "为每次运行设置明确的 checkpoint.save（recommend --save-dir）"),
    "preflight.path.save_unwritable": (
        "checkpoint.save {path} is not writable: {reason}",
        "checkpoint.save {path} 不可写：{reason}",
    ),
    "preflight.path.save_unwritable.hint": (
        "choose a directory on writable shared storage; the job would fail at its first checkpoint",
        "请选择可写的共享存储上的目录；否则作业会在第一次保存检查点时失败",
    ),
    "preflight.path.save_node_local": (
        "{what} {path} is on node-local storage ({why}); with {nodes} node(s) each node would write its own part, and a requeue may land elsewhere",
        "{what} {path} 位于节点本地存储（{why}）；{nodes} 个节点会各自写入一部分，重新排队后也可能换到别的节点",
    ),
    "preflight.path.save_node_local.hint": ("use shared storage (Lustre, GPFS, NFS, ...) that every node mounts", "请使用所有节点都挂载的共享存储（Lustre、GPFS、NFS 等）"),
    "preflight.path.save_maybe_local": (
        "{what} {path} is on a {why} file system, which is usually a node's own disk; all {nodes} nodes must see it",
        "{what} {path} 位于 {why} 文件系统上，通常是节点本地磁盘；所有 {nodes} 个节点都必须能访问它",
    ),
    "preflight.path.save_maybe_local.hint": (
        "if this path is shared at your site, declare it: MBRIDGE_LAUNCH_SHARED_PREFIXES=/that/prefix",
        "如果该路径在你的站点是共享的，请声明：MBRIDGE_LAUNCH_SHARED_PREFIXES=/that/prefix",
    ),
    "preflight.path.pretrained_node_local": (
        "{what} {path} is on node-local storage ({why}); the other nodes cannot load it",
        "{what} {path} 位于节点本地存储（{why}）；其他节点无法加载",
    ),
    "preflight.path.pretrained_maybe_local": (
        "{what} {path} is on a {why} file system, which is usually a node's own disk; all {nodes} nodes must see it",
        "{what} {path} 位于 {why} 文件系统上，通常是节点本地磁盘；所有 {nodes} 个节点都必须能访问它",
    ),
    "preflight.path.save_space": (
        "{path} has {free_gb} GB free; {count} checkpoints need {need_gb} GB ({ckpt_gb} GB each: weights + optimizer state)",
        "{path} 剩余 {free_gb} GB；{count} 个检查点需要 {need_gb} GB（每个 {ckpt_gb} GB：权重 + 优化器状态）",
    ),
    "preflight.path.save_space.hint": (
        "free space, choose another file system, or keep fewer checkpoints (checkpoint.most_recent_k); if old checkpoints are pruned elsewhere, accept it in the plan: an accepted_checks entry with code path.save_space and the reason",
        "清理空间、换用其他文件系统，或减少保留的检查点数（checkpoint.most_recent_k）；若旧检查点会在别处清理，可在计划中接受：在 accepted_checks 中加入 code 为 path.save_space 的一项并写明 reason",
    ),
    "preflight.path.save_space_ok": (
        "{path} has {free_gb} GB free for {count} checkpoints of {ckpt_gb} GB",
        "{path} 剩余 {free_gb} GB，可容纳 {count} 个 {ckpt_gb} GB 的检查点",
    ),
    "preflight.path.save_space_unknown": (
        "free space for checkpoints in {path} not checked: checkpoint size unknown",
        "未检查 {path} 的检查点空间：检查点大小未知",
    ),
    "preflight.path.resume": (
        "{path} already holds checkpoints: the run will RESUME from iteration {iteration} ({source}), not start fresh",
        "{path} 中已有检查点：本次运行将从迭代 {iteration} 恢复训练（{source}），而不是从头开始",
    ),
    "preflight.path.resume.hint": (
        "that is what a requeue wants; for a new experiment use a new checkpoint.save",
        "重新排队时这正是所需行为；如果是新实验，请使用新的 checkpoint.save",
    ),
    "preflight.path.resume_broken": (
        "{path} holds checkpoints but resuming would fail: {source} -> iteration {iteration}: {reason}",
        "{path} 中有检查点，但恢复训练会失败：{source} -> 迭代 {iteration}：{reason}",
    ),
    "preflight.path.resume_broken.hint": (
        "inspect with `mbridge-launch checkpoints {path}`; roll back to a complete one with `mbridge-launch rollback`",
        "用 `mbridge-launch checkpoints {path}` 查看；用 `mbridge-launch rollback` 回滚到完整的检查点",
    ),
    "preflight.path.pretrained_missing": ("pretrained checkpoint {path} does not exist", "预训练检查点 {path} 不存在"),
    "preflight.path.pretrained_missing.hint": (
        "convert the Hugging Face model to a Megatron checkpoint first, or fix the path",
        "请先将 Hugging Face 模型转换为 Megatron 检查点，或修正路径",
    ),
    "preflight.path.pretrained_unset": (
        "mode {mode} without checkpoint.pretrained_checkpoint: fine-tuning would start from random weights unless the recipe sets one",
        "{mode} 模式未设置 checkpoint.pretrained_checkpoint：除非配方已设置，否则微调会从随机权重开始",
    ),
    "preflight.path.load_missing": (
        "checkpoint.load {path} does not exist: the run starts from scratch",
        "checkpoint.load {path} 不存在：本次运行将从头开始",
    ),
    "preflight.path.cache_unset": (
        "{name} is not set for a multi-node fine-tuning run with packing; it defaults to {default}",
        "多节点打包微调未设置 {name}；默认值为 {default}",
    ),
    "preflight.path.cache_unset.hint": (
        "set {name} in env_vars to a directory on shared storage so every node sees the packed data",
        "在 env_vars 中将 {name} 设为共享存储上的目录，使所有节点都能看到打包后的数据",
    ),
    "preflight.path.cache_node_local": (
        "{name}={path} is on node-local storage ({why}); multi-node fine-tuning with packing needs it shared",
        "{name}={path} 位于节点本地存储（{why}）；多节点打包微调需要共享存储",
    ),
    "preflight.path.cache_maybe_local": (
        "{name}={path} is on a {why} file system, usually a node's own disk; multi-node fine-tuning with packing needs it shared",
        "{name}={path} 位于 {why} 文件系统上，通常是节点本地磁盘；多节点打包微调需要共享存储",
    ),
    "preflight.path.workdir_missing": ("launch.workdir {path} does not exist", "launch.workdir {path} 不存在"),
    "preflight.path.workdir_missing.hint": (
        "point it at the Megatron Bridge checkout the job runs in",
        "请将其指向作业运行所用的 Megatron Bridge 代码目录",
    ),
    "preflight.path.log_dir_unwritable": (
        "launch.log_dir {path} is not writable: {reason}; Slurm would drop the job's output",
        "launch.log_dir {path} 不可写：{reason}；Slurm 将无法写出作业输出",
    ),
    "preflight.path.log_dir_created": (
        "launch.log_dir {path} does not exist yet; it is created at submission",
        "launch.log_dir {path} 尚不存在；提交时会创建",
    ),
    # ------------------------------------------------------------------ environment and secrets
    "preflight.env.name_invalid": ("'{name}' is not a valid environment variable name", "'{name}' 不是有效的环境变量名"),
    "preflight.env.secret_missing": (
        "secret {name} is named by the plan but not set in this environment",
        "计划引用了密钥 {name}，但当前环境中未设置",
    ),
    "preflight.env.secret_missing.hint": (
        "export {name} before submitting (it is forwarded to the job by name, never written down)",
        "提交前 export {name}（它按名称传递给作业，不会写入任何文件）",
    ),
    "preflight.env.forward_missing": (
        "environment variable {name} is forwarded to the job but not set here",
        "环境变量 {name} 会被转发给作业，但当前环境中未设置",
    ),
    "preflight.env.secret_in_env_vars": (
        "env_vars holds a value for the secret {name}; env_vars are written into the script",
        "env_vars 中包含密钥 {name} 的值；env_vars 会被写入脚本",
    ),
    "preflight.env.secret_in_env_vars.hint": (
        "remove it from env_vars and list {name} under cluster.secrets (passed by name)",
        "将其从 env_vars 删除，并在 cluster.secrets 中列出 {name}（按名称传递）",
    ),
    "preflight.env.token_in_override": (
        "override {setting} holds a {kind}; token values are refused",
        "覆盖项 {setting} 含有{kind}；拒绝使用令牌值",
    ),
    "preflight.env.token_in_override.hint": (
        "pass secrets by name: list the variable under cluster.secrets and let the program read it from the environment",
        "请按名称传递密钥：在 cluster.secrets 中列出该变量，由程序从环境中读取",
    ),
    "preflight.env.token_in_plan": (
        "{where} holds a {kind}; a plan must not contain token values",
        "{where} 含有{kind}；计划中不得包含令牌值",
    ),
    "preflight.env.token_in_plan.hint": (
        "remove it and pass the secret by name (cluster.secrets); rotate the token if the plan was shared",
        "删除它并按名称传递密钥（cluster.secrets）；如果计划已被共享，请更换该令牌",
    ),
    "preflight.env.secret_leaked": (
        "the value of secret {name} appears in the {where}",
        "密钥 {name} 的值出现在{where}中",
    ),
    "preflight.env.secret_leaked.hint": (
        "remove the value and reference {name} by name only; rotate it if the plan or script was shared",
        "删除该值，只按名称引用 {name}；如果计划或脚本已被共享，请更换该密钥",
    ),
    # ------------------------------------------------------------------ cluster
    "preflight.cluster.skipped": ("cluster checks skipped (--no-cluster)", "已跳过集群检查（--no-cluster）"),
    "preflight.cluster.unreachable": (
        "Slurm cannot be queried here ({reason}); cluster checks skipped",
        "无法在此查询 Slurm（{reason}）；已跳过集群检查",
    ),
    "preflight.cluster.unreachable.hint": (
        "run preflight on the login node (SLURM_CONF set), or pass --no-cluster to silence this",
        "请在登录节点上运行预检（已设置 SLURM_CONF），或使用 --no-cluster 关闭此提示",
    ),
    "preflight.cluster.partition_unset": (
        "no partition in the plan and the cluster has no default partition; partitions: {valid}",
        "计划中未指定分区，集群也没有默认分区；可用分区：{valid}",
    ),
    "preflight.cluster.partition_default": (
        "no partition in the plan: the job goes to the default partition {partition}",
        "计划中未指定分区：作业将进入默认分区 {partition}",
    ),
    "preflight.cluster.partition_missing": (
        "partition '{partition}' does not exist; partitions: {valid}",
        "分区 '{partition}' 不存在；可用分区：{valid}",
    ),
    "preflight.cluster.partition_down": ("partition {partition} is {state}, not UP", "分区 {partition} 状态为 {state}，不是 UP"),
    "preflight.cluster.account_denied": (
        "account {account} may not use partition {partition} (allowed: {allowed})",
        "账户 {account} 无权使用分区 {partition}（允许：{allowed}）",
    ),
    "preflight.cluster.account_no_association": (
        "user {user} has no association with account {account} (accounts: {accounts})",
        "用户 {user} 与账户 {account} 没有关联（已关联账户：{accounts}）",
    ),
    "preflight.cluster.account_no_association.hint": ("check the account with `sacctmgr show assoc user=$USER`", "用 `sacctmgr show assoc user=$USER` 核对账户"),
    "preflight.cluster.time_over_max": (
        "time limit {time} exceeds partition {partition}'s MaxTime {max_time}",
        "时间限制 {time} 超过分区 {partition} 的 MaxTime {max_time}",
    ),
    "preflight.cluster.time_over_max.hint": (
        "lower cluster.time to at most {max_time} (the run resumes from checkpoints when requeued) or use another partition",
        "将 cluster.time 降到 {max_time} 以内（重新排队后会从检查点恢复训练），或换用其他分区",
    ),
    "preflight.cluster.max_nodes": (
        "{nodes} nodes exceed partition {partition}'s MaxNodes {max_nodes}",
        "{nodes} 个节点超过分区 {partition} 的 MaxNodes {max_nodes}",
    ),
    "preflight.cluster.gpu_type_missing": (
        "partition {partition} has no {gpu_type} GPUs; it has: {found}",
        "分区 {partition} 没有 {gpu_type} GPU；现有：{found}",
    ),
    "preflight.cluster.gpu_type_missing.hint": (
        "choose a partition with {gpu_type} nodes (sinfo -o '%P %G'), or plan for the GPUs this partition has",
        "选择有 {gpu_type} 节点的分区（sinfo -o '%P %G'），或按此分区现有的 GPU 重新规划",
    ),
    "preflight.cluster.gpus_per_node_short": (
        "partition {partition}: the plan needs {gpus_per_node} x {gpu_type} per node, nodes there have at most {found}",
        "分区 {partition}：计划每节点需要 {gpus_per_node} 块 {gpu_type}，该分区节点最多只有 {found} 块",
    ),
    "preflight.cluster.not_enough_nodes": (
        "partition {partition} has {found} nodes with {gpus_per_node} x {gpu_type}; the plan needs {nodes}",
        "分区 {partition} 只有 {found} 个具备 {gpus_per_node} 块 {gpu_type} 的节点；计划需要 {nodes} 个",
    ),
    "preflight.cluster.nodes_unavailable": (
        "partition {partition}: only {available} of the {gpu_type} nodes are available now, the plan needs {nodes}; down/drained: {down}",
        "分区 {partition}：当前只有 {available} 个 {gpu_type} 节点可用，计划需要 {nodes} 个；宕机/排空：{down}",
    ),
    "preflight.cluster.nodes_unavailable.hint": ("the job will queue until enough nodes return", "作业会一直排队，直到有足够的节点恢复"),
    "preflight.cluster.gpus_unused": (
        "partition {partition} nodes have {found} GPUs but the plan uses {gpus_per_node} per node with --exclusive: the rest sit idle",
        "分区 {partition} 的节点有 {found} 块 GPU，但计划每节点只用 {gpus_per_node} 块且独占节点：其余 GPU 闲置",
    ),
    "preflight.cluster.gpus_ok": (
        "partition {partition}: {found} nodes with {gpus_per_node} x {gpu_type} ({available} available now), plan needs {nodes}",
        "分区 {partition}：{found} 个节点具备 {gpus_per_node} 块 {gpu_type}（当前可用 {available} 个），计划需要 {nodes} 个",
    ),
    "preflight.cluster.nvl72_no_segment": (
        "{nodes} nodes of 4-GPU NVL72 systems without --segment: the job may straddle NVLink domains ({domain_nodes} nodes each); expected segment {expected}",
        "在 4-GPU NVL72 系统上使用 {nodes} 个节点但未设置 --segment：作业可能跨越 NVLink 域（每域 {domain_nodes} 个节点）；建议 segment 为 {expected}",
    ),
    "preflight.cluster.nvl72_no_segment.hint": (
        "set cluster.segment: {expected} where Slurm supports it (24.11+ with topology/block)",
        "在 Slurm 支持时（24.11+ 且 topology/block）设置 cluster.segment: {expected}",
    ),
    "preflight.cluster.nvl72_nodes_split": (
        "{nodes} nodes do not split into NVLink domains ({domain_nodes} nodes of {domain} GPUs each): the largest equal segment is {segment} node(s), so most cross-node traffic leaves NVLink",
        "{nodes} 个节点无法按 NVLink 域（每域 {domain_nodes} 个节点，{domain} 块 GPU）均分：最大的等分段只有 {segment} 个节点，大部分跨节点通信无法走 NVLink",
    ),
    "preflight.cluster.nvl72_nodes_split.hint": (
        "use a node count that splits into segments of at least half a domain, e.g. {lower} or {upper} nodes",
        "改用能按至少半个域均分的节点数，例如 {lower} 或 {upper} 个节点",
    ),
    "preflight.cluster.segment_too_big": (
        "segment {segment} is larger than an NVLink domain ({domain_nodes} nodes of {domain} GPUs)",
        "segment {segment} 大于一个 NVLink 域（{domain_nodes} 个节点，{domain} 块 GPU）",
    ),
    "preflight.cluster.segment_not_divisor": (
        "segment {segment} does not divide the node count {nodes}; expected {expected}",
        "segment {segment} 不能整除节点数 {nodes}；建议为 {expected}",
    ),
    "preflight.cluster.segment_unusual": (
        "segment {segment} for {nodes} nodes; NVIDIA's launcher uses {expected}",
        "{nodes} 个节点使用 segment {segment}；NVIDIA 启动器使用 {expected}",
    ),
    "preflight.cluster.segment_unsupported": (
        "the plan uses --segment, but this Slurm ({version}, {topology}) lacks it: it needs Slurm 24.11+ with topology/block",
        "计划使用了 --segment，但当前 Slurm（{version}，{topology}）不支持：需要 Slurm 24.11+ 且 topology/block",
    ),
    "preflight.cluster.segment_unsupported.hint": (
        "remove cluster.segment and set cluster.profile.segment: false for this cluster",
        "删除 cluster.segment，并为此集群设置 cluster.profile.segment: false",
    ),
    "preflight.cluster.pyxis_missing": (
        "the plan uses a container ({image}), but srun here has no --container-image: Pyxis is not installed",
        "计划使用了容器（{image}），但此处的 srun 没有 --container-image：未安装 Pyxis",
    ),
    "preflight.cluster.pyxis_missing.hint": (
        "run without a container (remove container_image, set cluster.profile.pyxis: false) or use a cluster with Pyxis/Enroot",
        "不使用容器运行（删除 container_image，设置 cluster.profile.pyxis: false），或换用装有 Pyxis/Enroot 的集群",
    ),
    "preflight.cluster.test_only_ok": ("sbatch --test-only accepts the script: {result}", "sbatch --test-only 接受该脚本：{result}"),
    "preflight.cluster.test_only_failed": ("sbatch --test-only refuses the script: {reason}", "sbatch --test-only 拒绝该脚本：{reason}"),
    "preflight.cluster.test_only_failed.hint": (
        "see the script with `mbridge-launch submit PLAN --dry-run`",
        "用 `mbridge-launch submit PLAN --dry-run` 查看脚本",
    ),
    "preflight.progress.data": ("data", "数据"),
    # detail phrases inside other messages
    "preflight.detail.not_regular_file": ("not a regular file", "不是普通文件"),
    "preflight.detail.permission_denied": ("permission denied", "权限不足"),
    "preflight.detail.is_directory": ("is a directory", "是一个目录"),
    "preflight.detail.empty_file": ("empty file", "空文件"),
    "preflight.detail.header_needs": ("{size} bytes, header needs {expected}", "{size} 字节，文件头需要 {expected} 字节"),
    "preflight.detail.header_promises": ("{size} bytes, header promises {expected}", "{size} 字节，文件头声明 {expected} 字节"),
    "preflight.detail.index_needs": ("{size} bytes, index needs {expected}", "{size} 字节，索引需要 {expected} 字节"),
    "preflight.detail.index_covers": ("{size} bytes, index covers {expected}", "{size} 字节，索引只覆盖 {expected} 字节"),
    "preflight.detail.not_a_directory": ("{path} is not a directory", "{path} 不是目录"),
    "preflight.detail.pseudo_fs": ("{path} is on a {fstype} pseudo file system", "{path} 位于 {fstype} 伪文件系统上"),
    "preflight.detail.read_only_fs": ("{path} is on a read-only file system", "{path} 位于只读文件系统上"),
    "preflight.detail.path_permission_denied": ("{path}: permission denied", "{path}：权限不足"),
    "preflight.detail.accounts_except": ("all except {accounts}", "除 {accounts} 以外的所有账户"),
    "preflight.detail.untyped": ("untyped", "未标注类型"),
    "preflight.detail.gpu_nodes": ("{label} ({count} nodes)", "{label}（{count} 个节点）"),
    "preflight.detail.no_gpus": ("no GPUs", "没有 GPU"),
    "preflight.detail.exited": ("{command} exited {code}", "{command} 退出码为 {code}"),
    "preflight.detail.module_missing": ("module {name} is not available", "模块 {name} 不可用"),
    "preflight.detail.not_found": ("not found", "未找到"),
    "preflight.detail.slurm_conf_missing": ("SLURM_CONF={path} does not exist", "SLURM_CONF={path} 不存在"),
    "preflight.detail.command_missing": ("{command} not found on PATH", "PATH 中找不到 {command}"),
    "preflight.detail.command_timeout": ("{command} did not answer within {seconds}s", "{command} 在 {seconds} 秒内没有响应"),
    "preflight.progress.cluster": ("cluster", "集群"),
    "preflight.progress.nodes": ("node check (job {job})", "节点检查（作业 {job}）"),
    "preflight.cluster.test_only_waits": (
        "sbatch --test-only cannot place the job now ({reason}) because nodes are down/drained: {down}; a real submission is accepted and waits for them",
        "sbatch --test-only 目前无法放置该作业（{reason}），因为有节点宕机/排空：{down}；实际提交会被接受并等待这些节点恢复",
    ),
    "preflight.cluster.test_only_waits.hint": (
        "submit anyway and let it queue, or lower cluster.nodes to what is available",
        "仍可提交并排队等待，或将 cluster.nodes 降到当前可用的数量",
    ),
    "preflight.cluster.test_only_skipped": (
        "sbatch --test-only not run: fix the cluster errors above first",
        "未运行 sbatch --test-only：请先修复上面的集群错误",
    ),
    "preflight.cluster.test_only_no_script": (
        "sbatch --test-only not run: the script could not be rendered ({reason})",
        "未运行 sbatch --test-only：无法生成脚本（{reason}）",
    ),
    # ------------------------------------------------------------------ on the nodes
    "preflight.nodes.skipped": (
        "node check not submitted: fix the cluster errors above first",
        "未提交节点检查：请先修复上面的集群错误",
    ),
    "preflight.nodes.render_failed": ("the node-check step could not be rendered: {reason}", "无法生成节点检查步骤：{reason}"),
    "preflight.nodes.submit_failed": ("the node-check job was refused: {reason}", "节点检查作业被拒绝：{reason}"),
    "preflight.nodes.timeout": (
        "node-check job {job} did not finish within {seconds}s (still queued?); it was cancelled. Log: {log}",
        "节点检查作业 {job} 未在 {seconds} 秒内完成（仍在排队？）；已取消。日志：{log}",
    ),
    "preflight.nodes.job_failed": (
        "node-check job {job} ended {state}: {tail} (log: {log})",
        "节点检查作业 {job} 以 {state} 结束：{tail}（日志：{log}）",
    ),
    "preflight.nodes.missing_reports": (
        "node-check job {job}: {reported} of {nodes} nodes reported (log: {log})",
        "节点检查作业 {job}：{nodes} 个节点中只有 {reported} 个有报告（日志：{log}）",
    ),
    "preflight.nodes.node_ok": (
        "node {node}: {found_count} x {found_type} GPUs, as planned ({source})",
        "节点 {node}：{found_count} 块 {found_type} GPU，与计划一致（{source}）",
    ),
    "preflight.nodes.node_mismatch": (
        "node {node}: expected {expected_count} x {expected_type} GPUs, found {found_count} x {found_type} ({source})",
        "节点 {node}：预期 {expected_count} 块 {expected_type} GPU，实际为 {found_count} 块 {found_type}（{source}）",
    ),
    "preflight.nodes.type_unverified": (
        "node {node}: {found_count} GPUs as planned; GPU type not verifiable (no nvidia-smi, untyped GRES), expected {expected_type}",
        "节点 {node}：GPU 数量 {found_count} 与计划一致；无法核实 GPU 类型（无 nvidia-smi，GRES 无类型），预期为 {expected_type}",
    ),
    "preflight.nodes.nvlink_ok": ("node {node}: all {gpus} GPUs are connected by NVLink", "节点 {node}：全部 {gpus} 块 GPU 之间均为 NVLink 连接"),
    "preflight.nodes.nvlink_missing": (
        "node {node}: GPU pairs without NVLink: {pairs}",
        "节点 {node}：以下 GPU 对之间没有 NVLink：{pairs}",
    ),
    "preflight.nodes.nvlink_missing.hint": (
        "TP groups across these GPUs go over PCIe; report the node to the site or exclude it",
        "跨这些 GPU 的 TP 组将走 PCIe；请向站点报告该节点或将其排除",
    ),
    "preflight.nodes.topology_unavailable": (
        "node {node}: nvidia-smi topo -m not available; NVLink not checked",
        "节点 {node}：没有 nvidia-smi topo -m；未检查 NVLink",
    ),
}
