"""Messages of the recipe catalog: sync, list, show, findings, dataset selectors."""

MESSAGES = {
    # --- catalog sync -------------------------------------------------------------------------
    "catalog.sync.not_bridge": (
        "{path} is neither a Megatron Bridge wheel nor a folder holding megatron/bridge",
        "{path} 既不是 Megatron Bridge wheel，也不是包含 megatron/bridge 的目录",
    ),
    "catalog.sync.bad_wheel": ("{path} is not a readable wheel (zip): {reason}", "{path} 不是可读取的 wheel（zip）：{reason}"),
    "catalog.sync.no_version": (
        "cannot tell the Megatron Bridge version of {path} (no METADATA, no package_info.py)",
        "无法确定 {path} 的 Megatron Bridge 版本（没有 METADATA，也没有 package_info.py）",
    ),
    "catalog.sync.no_recipes": ("no exported recipe found in {path}", "在 {path} 中没有找到导出的配方"),
    "catalog.sync.done": (
        "wrote {path}: {library} library recipes ({aliases} legacy aliases), {benchmark} benchmark recipes, "
        "{findings} with findings, in {seconds:.1f} s",
        "已写入 {path}：{library} 个库配方（{aliases} 个旧别名），{benchmark} 个性能配方，"
        "{findings} 个配方有检查发现，用时 {seconds:.1f} 秒",
    ),
    # --- catalog access -----------------------------------------------------------------------------
    "catalog.none": (
        "no recipe catalog found in {path} (expected megatron-bridge-<version>.yaml; run `mbridge-launch catalog sync`)",
        "在 {path} 中没有找到配方目录（应为 megatron-bridge-<version>.yaml；请运行 `mbridge-launch catalog sync`）",
    ),
    "catalog.unknown_version": (
        "no catalog for Megatron Bridge {version}; available: {choices}",
        "没有 Megatron Bridge {version} 的配方目录；可用版本：{choices}",
    ),
    "catalog.invalid": ("recipe catalog {path} is invalid: {reason}", "配方目录 {path} 无效：{reason}"),
    "catalog.unknown_recipe": (
        "unknown recipe '{name}'; closest names: {choices}",
        "未知配方 '{name}'；最接近的名称：{choices}",
    ),
    "catalog.unknown_recipe_none": ("unknown recipe '{name}'", "未知配方 '{name}'"),
    "catalog.list.empty": ("no recipe matches these filters", "没有符合这些筛选条件的配方"),
    "catalog.list.header": (
        "{count} recipes (Megatron Bridge {version}, {source})",
        "{count} 个配方（Megatron Bridge {version}，{source}）",
    ),
    "catalog.kind.library": ("library recipe (for real training)", "库配方（用于实际训练）"),
    "catalog.kind.benchmark": (
        "benchmark recipe (throughput upper bound; not a training config)",
        "性能配方（吞吐量基准；不是训练配置）",
    ),
    "catalog.show.recipe": ("recipe", "配方"),
    "catalog.show.aliases": ("legacy aliases", "旧别名"),
    "catalog.show.kind": ("kind", "类型"),
    "catalog.show.model": ("model", "模型"),
    "catalog.show.mode": ("mode", "模式"),
    "catalog.show.hardware": ("hardware", "硬件"),
    "catalog.show.gpus": ("GPUs", "GPU 数"),
    "catalog.show.precision": ("precision", "精度"),
    "catalog.show.variant": ("variant", "变体"),
    "catalog.show.module": ("module", "模块"),
    "catalog.show.hf_model_id": ("Hugging Face model", "Hugging Face 模型"),
    "catalog.show.parallelism": ("parallelism", "并行配置"),
    "catalog.show.batch": ("batch", "批大小"),
    "catalog.show.seq_length": ("sequence length (model / dataset)", "序列长度（模型 / 数据集）"),
    "catalog.show.train_iters": ("training iterations", "训练迭代数"),
    "catalog.show.peft": ("PEFT scheme", "参数高效微调（PEFT）方案"),
    "catalog.show.dataset": ("dataset", "数据集"),
    "catalog.show.features": ("features", "特性"),
    "catalog.show.findings": ("findings", "检查发现"),
    "catalog.show.no_findings": ("none", "无"),
    "catalog.show.raises": ("calling this recipe raises NotImplementedError", "调用此配方会抛出 NotImplementedError"),
    # --- findings ---------------------------------------------------------------------------------
    "catalog.finding.grid_exceeds_gpus": (
        "TP x PP x CP = {tp} x {pp} x {cp} = {need} GPUs, more than the {gpus} GPUs the name says",
        "TP x PP x CP = {tp} x {pp} x {cp} = {need} 个 GPU，超过名称所写的 {gpus} 个 GPU",
    ),
    "catalog.finding.world_not_divisible": (
        "{gpus} GPUs are not divisible by TP x PP x CP = {tp} x {pp} x {cp} = {need}",
        "{gpus} 个 GPU 不能被 TP x PP x CP = {tp} x {pp} x {cp} = {need} 整除",
    ),
    "catalog.finding.expert_grid_exceeds_gpus": (
        "PP x EP x ETP = {pp} x {ep} x {etp} = {need} GPUs, more than the {gpus} GPUs the name says",
        "PP x EP x ETP = {pp} x {ep} x {etp} = {need} 个 GPU，超过名称所写的 {gpus} 个 GPU",
    ),
    "catalog.finding.expert_world_not_divisible": (
        "{gpus} GPUs are not divisible by PP x EP x ETP = {pp} x {ep} x {etp} = {need}",
        "{gpus} 个 GPU 不能被 PP x EP x ETP = {pp} x {ep} x {etp} = {need} 整除",
    ),
    "catalog.finding.gbs_not_divisible": (
        "global batch size {gbs} is not divisible by MBS x DP = {mbs} x {dp} on {gpus} GPUs",
        "全局批大小 {gbs} 不能被 MBS x DP = {mbs} x {dp} 整除（{gpus} 个 GPU）",
    ),
    "catalog.finding.seq_length_mismatch": (
        "model seq_length {model} differs from dataset seq_length {dataset}",
        "模型 seq_length {model} 与数据集 seq_length {dataset} 不一致",
    ),
    "catalog.finding.cp_seq_not_divisible": (
        "sequence length {seq} is not divisible by 2 x CP = {mult}",
        "序列长度 {seq} 不能被 2 x CP = {mult} 整除",
    ),
    "catalog.finding.vp_without_pp": (
        "virtual pipeline size {vp} is set but PP = 1",
        "设置了虚拟流水线（VP）大小 {vp}，但流水线并行（PP）= 1",
    ),
    "catalog.finding.sp_without_tp": (
        "sequence_parallel is on with TP = 1; Megatron Bridge turns it off",
        "TP = 1 时开启了 sequence_parallel；Megatron Bridge 会将其关闭",
    ),
    "catalog.finding.pp_split_not_divisible": (
        "{layers} layers + the accounted embedding/loss stages = {total}, not divisible by PP = {pp}",
        "{layers} 层加上计入的 embedding/loss 阶段共 {total}，不能被流水线并行（PP）= {pp} 整除",
    ),
    "catalog.finding.vp_split_not_divisible": (
        "{per_rank} layers per pipeline rank (with embedding/loss accounting) are not divisible by VP = {vp}",
        "每个流水线 rank 的 {per_rank} 层（计入 embedding/loss）不能被虚拟流水线（VP）= {vp} 整除",
    ),
    "catalog.finding.name_irregular": (
        "name {name} does not follow <model>_<task>_<N>gpu_<hw>_<precision>[_<variant>]_config: "
        "GPU count, hardware and precision are unknown",
        "名称 {name} 不符合 <model>_<task>_<N>gpu_<hw>_<precision>[_<variant>]_config：GPU 数、硬件和精度未知",
    ),
    "catalog.finding.alias_differs": (
        "exported name {alias} runs this recipe, though its name says {what}",
        "导出名称 {alias} 运行的是此配方，但其名称写的是 {what}",
    ),
    "catalog.finding.precision_mismatch": (
        "the name says {named} but the recipe applies mixed precision '{recipe}'",
        "名称写的是 {named}，但配方实际使用的混合精度是 '{recipe}'",
    ),
    "catalog.finding.raises_not_implemented": (
        "calling this recipe raises NotImplementedError ({where})",
        "调用此配方会抛出 NotImplementedError（{where}）",
    ),
    "catalog.finding.raises": (
        "calling this recipe with its defaults raises {exception} ({where})",
        "使用默认参数调用此配方会抛出 {exception}（{where}）",
    ),
    "catalog.finding.unresolved": (
        "could not read {fields} from the source statically (set from the Hugging Face config at run time)",
        "无法从源码静态读取 {fields}（运行时由 Hugging Face 配置设置）",
    ),
    # --- dataset selectors ---------------------------------------------------------------------------
    "catalog.dataset.unknown": (
        "unknown dataset selector '{selector}'; valid: {choices}",
        "未知的数据集选择器 '{selector}'；可选值：{choices}",
    ),
    "catalog.dataset.mode": (
        "dataset '{selector}' does not allow mode {mode} (it allows: {modes}); for {mode} use one of: {choices}",
        "数据集 '{selector}' 不支持模式 {mode}（支持：{modes}）；{mode} 可用：{choices}",
    ),
}
