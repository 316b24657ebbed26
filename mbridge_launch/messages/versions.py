MESSAGES = {
    "versions.missing": ("not installed", "未安装"),
    "versions.catalogs": ("Megatron Bridge recipe catalogs: {versions}", "Megatron Bridge 配方目录：{versions}"),
    "versions.slurm": ("Slurm found: {version}", "找到的 Slurm：{version}"),
    "versions.supported": (
        "Supported: executors {executors}; GPU types {gpus}; goals {goals}; precisions {precisions}",
        "支持：执行器 {executors}；GPU 类型 {gpus}；目标 {goals}；精度 {precisions}",
    ),
}
