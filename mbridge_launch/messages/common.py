MESSAGES = {
    "error.prefix": ("error: {message}", "错误：{message}"),
    "error.see_help": ("{message} (see '{prog} --help')", "{message}（参见 '{prog} --help'）"),
    "warning.prefix": ("warning: {message}", "警告：{message}"),
    "hint.prefix": ("hint: {message}", "提示：{message}"),
    "interrupted": ("interrupted", "已中断"),
    "internal_error": (
        "internal error: {error} (please report it; rerun with MBRIDGE_LAUNCH_DEBUG=1 for a traceback)",
        "内部错误：{error}（请报告此问题；设置 MBRIDGE_LAUNCH_DEBUG=1 重新运行可查看回溯）",
    ),
    "file.not_found": ("file not found: {path}", "文件不存在：{path}"),
    "file.unwritable": ("cannot write {path}: {reason}", "无法写入 {path}：{reason}"),
    "file.system_error": (
        "file-system error on {path}: {reason}",
        "文件系统错误（{path}）：{reason}",
    ),
    "file.not_utf8": ("not UTF-8 text (byte 0x{byte} at offset {offset})", "不是 UTF-8 文本（偏移 {offset} 处的字节 0x{byte}）"),
    "os.error": ("the operating system refused: {reason}", "操作系统拒绝了该操作：{reason}"),
    "file.unreadable": ("cannot read {path}: {reason}", "无法读取 {path}：{reason}"),
    "yaml.invalid": ("{path} is not valid YAML: {reason}", "{path} 不是有效的 YAML：{reason}"),
    "plan.unknown_field": (
        "unknown field '{field}' in {where} of {path}; valid fields: {valid}",
        "{path} 的 {where} 中有未知字段 '{field}'；有效字段：{valid}",
    ),
    "plan.invalid_field": (
        "invalid value for '{field}' in {path}: {reason}",
        "{path} 中字段 '{field}' 的值无效：{reason}",
    ),
    "plan.missing_field": (
        "missing required field '{field}' in {path}",
        "{path} 缺少必填字段 '{field}'",
    ),
    "plan.written": ("plan written to {path} (hash {hash})", "计划已写入 {path}（哈希 {hash}）"),
    "arg.invalid": ("invalid value for {flag}: {reason}", "{flag} 的值无效：{reason}"),
    "arg.choice": (
        "invalid value for {flag}: '{value}'; valid choices: {choices}",
        "{flag} 的值无效：'{value}'；可选值：{choices}",
    ),
    "override.syntax": (
        "override '{text}' is not KEY=VALUE (ConfigContainer path, e.g. train.train_iters=1000)",
        "覆盖项 '{text}' 不是 KEY=VALUE 格式（ConfigContainer 路径，例如 train.train_iters=1000）",
    ),
    "shell.unsafe_name": (
        "{what} '{value}' may only contain letters, digits, '.', '_' and '-'",
        "{what} '{value}' 只能包含字母、数字、'.'、'_' 和 '-'",
    ),
}
