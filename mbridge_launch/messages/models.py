MESSAGES = {
    "models.unknown": (
        "unknown model '{model}'; closest known models: {closest}",
        "未知模型 '{model}'；最接近的已知模型：{closest}",
    ),
    "models.unknown_none": (
        "unknown model '{model}': no known model is close; `mbridge-launch catalog list` lists the recipe models (a model the catalog lacks can still be planned from its Hugging Face config.json with --hf-config PATH)",
        "未知模型 '{model}'：没有相近的已知模型；`mbridge-launch catalog list` 列出有配方的模型（目录中没有的模型可用 --hf-config PATH 从其 Hugging Face config.json 规划）",
    ),
    "models.local_path": (
        "'{path}' is a local path, not a model name: pass it with --hf-config {path} for the architecture, and name the recipe model with --model (for example --model qwen3_8b)",
        "'{path}' 是本地路径而不是模型名：请用 --hf-config {path} 提供模型结构，并用 --model 指定配方模型（例如 --model qwen3_8b）",
    ),
    "models.no_arch": (
        "the architecture of '{model}' is not in catalog/models.yaml; pass its Hugging Face config.json with --hf-config PATH (a file or a checkpoint directory)",
        "catalog/models.yaml 中没有 '{model}' 的模型结构；请用 --hf-config PATH 提供其 Hugging Face config.json（文件或检查点目录）",
    ),
    "models.incomplete": (
        "the catalog does not know {fields} of '{model}', which memory and FLOPs estimates need; pass its Hugging Face config.json with --hf-config PATH",
        "目录中缺少 '{model}' 的 {fields}，显存与 FLOPs 估算需要这些字段；请用 --hf-config PATH 提供其 Hugging Face config.json",
    ),
    "models.hf_config_missing": (
        "no Hugging Face config.json at {path}",
        "{path} 处没有 Hugging Face config.json",
    ),
    "models.hf_config_invalid": (
        "{path} is not a valid config.json: {reason}",
        "{path} 不是有效的 config.json：{reason}",
    ),
    "models.hf_config_keys": (
        "{path} lacks keys the planner needs: {keys}",
        "{path} 缺少规划器需要的键：{keys}",
    ),
    "hardware.unknown": (
        "unknown GPU type '{gpu}'; valid types: {valid}",
        "未知 GPU 类型 '{gpu}'；可选类型：{valid}",
    ),
    "hardware.unknown_precision": (
        "unknown precision '{precision}'; valid precisions: {valid}",
        "未知精度 '{precision}'；可选精度：{valid}",
    ),
    "hardware.precision_unsupported": (
        "{gpu} does not run precision {precision}; valid on {gpu}: {valid}",
        "{gpu} 不支持精度 {precision}；{gpu} 可用的精度：{valid}",
    ),
}
