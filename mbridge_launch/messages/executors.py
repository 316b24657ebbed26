"""Messages of the executor adapters (sbatch, nemo-run, submitit), the node check and `submit`."""

MESSAGES = {
    # ---------------------------------------------------------------- values that cannot be made safe
    "executors.env_name": (
        "{field}: '{value}' is not an environment variable name (letters, digits and '_', not starting with a digit)",
        "{field}：'{value}' 不是合法的环境变量名（只能包含字母、数字和 '_'，且不能以数字开头）",
    ),
    "executors.control_char": (
        "{field} contains a newline or another control character, which cannot be written safely into a job script: {value}",
        "{field} 含有换行符或其他控制字符，无法安全地写入作业脚本：{value}",
    ),
    "executors.mount_separator": (
        "container mount {field} '{value}' contains ',' or ':', which Pyxis uses as separators; rename the path or mount its parent",
        "容器挂载 {field} '{value}' 含有 ','或 ':'（Pyxis 的分隔符）；请重命名该路径或改为挂载其上级目录",
    ),
    "executors.log_dir_backslash": (
        "launch.log_dir '{value}' contains a backslash, which turns off Slurm's %j file name patterns; use another directory",
        "launch.log_dir '{value}' 含有反斜杠，会使 Slurm 的 %j 文件名模式失效；请换一个目录",
    ),
    "executors.sbatch_arg_not_option": (
        "cluster.sbatch_args item '{value}' is not an option (it must start with '-', e.g. --reservation=NAME)",
        "cluster.sbatch_args 中的 '{value}' 不是选项（必须以 '-' 开头，例如 --reservation=NAME）",
    ),
    "executors.sbatch_arg_long_form": (
        "cluster.sbatch_args item '{value}' must use the long form --name or --name=value with this executor (e.g. --constraint=gpu, not -C gpu)",
        "使用此执行器时，cluster.sbatch_args 中的 '{value}' 必须写成长格式 --name 或 --name=value（例如 --constraint=gpu，而不是 -C gpu）",
    ),
    "executors.secret_value_in_env": (
        "env_vars sets a value for '{name}', which cluster.secrets lists as a secret; secrets travel by name only: remove it from env_vars",
        "env_vars 为 '{name}' 设置了值，但 cluster.secrets 将其列为密钥；密钥只能按名称传递：请从 env_vars 中删除",
    ),
    "executors.empty_entry": (
        "launch.entry is empty; it must name the program and script every rank runs (e.g. python scripts/training/run_recipe.py)",
        "launch.entry 为空；它必须给出每个 rank 运行的程序和脚本（例如 python scripts/training/run_recipe.py）",
    ),
    "executors.torchrun_multi_node": (
        "launch.shape 'torchrun' is for single-node plans; this plan has {nodes} nodes: use launch.shape 'srun'",
        "launch.shape 'torchrun' 仅用于单节点计划；该计划有 {nodes} 个节点：请使用 launch.shape 'srun'",
    ),
    "executors.torchrun_entry": (
        "launch.shape 'torchrun' needs launch.entry = [PYTHON..., SCRIPT] (at least two items); got: {entry}",
        "launch.shape 'torchrun' 需要 launch.entry = [PYTHON..., SCRIPT]（至少两项）；实际为：{entry}",
    ),
    "executors.nemo_run_home_unsafe": (
        "NeMo-Run home '{value}' must be an absolute path of letters, digits, '.', '_', '-' and '/' without a '/nemo_run' part (NeMo-Run writes it into shell lines unquoted and rewrites '/nemo_run')",
        "NeMo-Run 主目录 '{value}' 必须是仅由字母、数字、'.'、'_'、'-' 和 '/' 组成且不含 '/nemo_run' 的绝对路径（NeMo-Run 会不加引号地写入 shell 命令行，并改写 '/nemo_run'）",
    ),
    "executors.experiment_id": (
        "NeMo-Run experiment id '{value}' must be '{title}_SUFFIX' with a SUFFIX of letters, digits, '.' and '-'",
        "NeMo-Run 实验 id '{value}' 必须是 '{title}_后缀' 的形式，后缀只能包含字母、数字、'.' 和 '-'",
    ),
    "executors.no_shared_folder": (
        "submitit needs a folder on storage every node can read: set launch.log_dir or checkpoint.save in the plan",
        "submitit 需要一个所有节点都能访问的目录：请在计划中设置 launch.log_dir 或 checkpoint.save",
    ),
    # ---------------------------------------------------------------- Slurm commands
    "executors.slurm_missing": (
        "'{command}' was not found on PATH: run this on a Slurm login node (or install the Slurm client)",
        "PATH 中找不到 '{command}'：请在 Slurm 登录节点上运行（或安装 Slurm 客户端）",
    ),
    "executors.slurm_timeout": (
        "'{command}' did not answer within {seconds} s; is slurmctld reachable?",
        "'{command}' 在 {seconds} 秒内没有响应；slurmctld 是否可达？",
    ),
    "executors.submit_refused": (
        "Slurm refused the job: {reason}",
        "Slurm 拒绝了该作业：{reason}",
    ),
    "executors.submit_no_job_id": (
        "{executor} submitted but no job id could be read from its output: {output}",
        "{executor} 已提交，但无法从其输出中读取作业 id：{output}",
    ),
    "executors.command_failed": (
        "'{command}' failed: {reason}",
        "'{command}' 执行失败：{reason}",
    ),
    # ---------------------------------------------------------------- job script lines
    "executors.script.start": (
        "job {job} (restart {restart}) on {nodes}",
        "作业 {job}（第 {restart} 次重启）运行于 {nodes}",
    ),
    "executors.node_check.ok": (
        "node check {node}: {found_count} x {found_type} GPUs, as the plan expects ({source})",
        "节点检查 {node}：{found_count} 块 {found_type} GPU，与计划一致（{source}）",
    ),
    "executors.node_check.mismatch": (
        "node check {node}: expected {expected_count} x {expected_type} GPUs, found {found_count} x {found_type} ({source})",
        "节点检查 {node}：预期 {expected_count} 块 {expected_type} GPU，实际为 {found_count} 块 {found_type}（{source}）",
    ),
    "executors.node_check.type_unknown": (
        "node check {node}: {found_count} GPUs as planned; GPU type not verifiable here (no nvidia-smi, no GRES type), expected {expected_type}",
        "节点检查 {node}：GPU 数量 {found_count} 与计划一致；此处无法核实 GPU 类型（无 nvidia-smi，GRES 无类型），预期为 {expected_type}",
    ),
    "executors.node_check.failed": (
        "node check failed: the allocated nodes do not match the plan (see the lines above); the trainer was not started",
        "节点检查失败：分配到的节点与计划不符（见上方输出）；训练程序未启动",
    ),
    "executors.node_check.passed": (
        "node check passed ({nodes} node(s)); starting the trainer",
        "节点检查通过（{nodes} 个节点）；开始启动训练程序",
    ),
    # ---------------------------------------------------------------- submit command
    "executors.submit.dry_run_header": (
        "# dry run: nothing was submitted. Executor {executor}; submit command: {command}",
        "# 试运行（不提交）：未提交任何作业。执行器 {executor}；提交命令：{command}",
    ),
    "executors.submit.file_header": (
        "# ---- file {path}",
        "# ---- 文件 {path}",
    ),
    "executors.submit.submitted": (
        "submitted {name} with {executor}: job {job_ids}; script {script}; logs {logs}",
        "已通过 {executor} 提交 {name}：作业 {job_ids}；脚本 {script}；日志 {logs}",
    ),
}
