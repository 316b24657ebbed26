MESSAGES = {
    # ledger database
    "ledger.cannot_open": ("cannot open the run ledger {path}: {reason}", "无法打开运行台账 {path}：{reason}"),
    "ledger.schema_too_new": (
        "the run ledger has schema version {found}, newer than this mbridge-launch supports ({supported}); upgrade mbridge-launch or pass --ledger PATH",
        "运行台账的结构版本为 {found}，高于当前 mbridge-launch 支持的版本（{supported}）；请升级 mbridge-launch 或使用 --ledger PATH",
    ),
    "ledger.run_not_found": (
        "no run '{run}' in the ledger (a run name or id); recent runs: {known}",
        "台账中没有运行 '{run}'（运行名称或编号）；最近的运行：{known}",
    ),
    "ledger.reconciled_submitted": (
        "run {run} (#{id}) was interrupted during submission; Slurm has it as job {job}: recorded",
        "运行 {run}（#{id}）在提交过程中被中断；Slurm 中对应作业 {job}：已记录",
    ),
    "ledger.reconciled_lost": (
        "run {run} (#{id}) was interrupted before Slurm accepted it: marked lost",
        "运行 {run}（#{id}）在 Slurm 接受之前被中断：已标记为丢失（lost）",
    ),
    "ledger.reconciled_ambiguous": (
        "run {run} (#{id}) was interrupted during submission; several Slurm jobs match ({jobs}): check them and cancel the extra ones",
        "运行 {run}（#{id}）在提交过程中被中断；有多个 Slurm 作业与之匹配（{jobs}）：请检查并取消多余的作业",
    ),
    "ledger.reconcile_unknown": (
        "run {run} (#{id}) was interrupted during submission and Slurm cannot be asked now (squeue/sacct failed); it stays 'submitting' until it can",
        "运行 {run}（#{id}）在提交过程中被中断，且目前无法查询 Slurm（squeue/sacct 失败）；在能查询之前保持 'submitting' 状态",
    ),
    # runs
    "ledger.runs.none": ("no runs recorded in {path}", "{path} 中没有记录任何运行"),
    "ledger.runs.header": ("ID  NAME  STATE  EXECUTOR  JOBS  SUBMITTED  SAVE DIR", "编号  名称  状态  执行器  作业  提交时间  保存目录"),
    # status
    "ledger.status.run": ("run {name} (#{id})", "运行 {name}（#{id}）"),
    "ledger.status.state": ("state: {state} (Slurm: {slurm})", "状态：{state}（Slurm：{slurm}）"),
    "ledger.status.jobs": ("jobs: {jobs} via {executor}", "作业：{jobs}，执行器 {executor}"),
    "ledger.status.plan": ("plan: {hash} {path}", "计划：{hash} {path}"),
    "ledger.status.watcher": ("auto-rollback watcher job: {job}", "自动回滚监视作业：{job}"),
    "ledger.status.save_dir": ("checkpoints: {path}", "检查点目录：{path}"),
    "ledger.status.logs": ("logs: {paths}", "日志：{paths}"),
    "ledger.status.submitted": ("submitted: {when}", "提交时间：{when}"),
    "ledger.status.error": ("error: {error}", "错误：{error}"),
    "ledger.status.rollbacks": ("rollbacks: {count} (last: to iteration {to_iter}, {state})", "回滚：{count} 次（最近一次：回滚到迭代 {to_iter}，{state}）"),
    "ledger.status.slurm_unreachable": (
        "Slurm could not be queried; showing the last recorded state",
        "无法查询 Slurm；显示最后记录的状态",
    ),
    # logs
    "ledger.logs.none": (
        "run {run} has no log file recorded (executor {executor}); its jobs: {jobs}",
        "运行 {run} 没有记录日志文件（执行器 {executor}）；其作业：{jobs}",
    ),
    "ledger.logs.missing": ("log file {path} does not exist (yet)", "日志文件 {path} 不存在（或尚未生成）"),
    "ledger.logs.file_header": ("==> {path} <==", "==> {path} <=="),
    "ledger.arg.ledger": ("run ledger database (default: {path})", "运行台账数据库（默认：{path}）"),
}
