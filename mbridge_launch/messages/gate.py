MESSAGES = {
    "gate.card.title": ("plan card", "计划卡"),
    "gate.card.parent": (
        "Resubmission of run #{id} after a rollback: resumes from the trackers in {load}",
        "回滚后重新提交运行 #{id}：按 {load} 中的跟踪文件恢复训练",
    ),
    "gate.card.where": (
        "Where: {nodes} node(s) x {per_node} {gpu_type}, partition {partition}, account {account}, time limit {time}",
        "位置：{nodes} 个节点 x {per_node} 个 {gpu_type}，分区 {partition}，账户 {account}，时间限制 {time}",
    ),
    "gate.card.speed": (
        "Estimate: {step:.2f} s per step, {tps:,.0f} tokens/s per GPU ({total:,.0f} tokens/s in all)",
        "估算：每步 {step:.2f} 秒，每 GPU 每秒 {tps:,.0f} token（总计每秒 {total:,.0f} token）",
    ),
    "gate.card.speed_unknown": ("Estimate: no throughput estimate for this model", "估算：该模型没有吞吐量估算"),
    "gate.card.cost": (
        "Cost: {hours:,.1f} GPU-hours if it runs to the time limit ({gpus} GPUs x {time})",
        "成本：若运行至时间限制，共 {hours:,.1f} GPU 小时（{gpus} 个 GPU x {time}）",
    ),
    "gate.card.convergence": ("Convergence-changing overrides: {count}", "改变收敛的覆盖项：{count} 个"),
    "gate.card.script": ("Exact script ({executor}): {path}", "完整脚本（{executor}）：{path}"),
    "gate.card.auto_rollback": (
        "Auto-rollback: on NaN/Inf {nan}; loss spike {spike}; at most {max} automatic rollback(s)",
        "自动回滚：遇到 NaN/Inf {nan}；损失尖峰 {spike}；最多自动回滚 {max} 次",
    ),
    "gate.card.auto_rollback_spike": ("> {factor} x the median of the last {window} losses", "> 最近 {window} 个损失中位数的 {factor} 倍"),
    "gate.card.yes": ("yes", "是"),
    "gate.card.prefixes": (" ({count} prefixes)", "（{count} 个前缀）"),
    "gate.card.no": ("no", "否"),
    "gate.card.watcher_job": (
        "a watcher job (1 CPU, starts when the training job starts) follows the log, then cancels, rolls back and resubmits on a trigger",
        "一个监视作业（1 个 CPU，训练作业开始时启动）跟踪日志，触发时取消、回滚并重新提交",
    ),
    "gate.card.watcher_none": (
        "no watcher job (--no-watcher): run `mbridge-launch watch {name}` on a login node to act on triggers",
        "不启动监视作业（--no-watcher）：请在登录节点上运行 `mbridge-launch watch {name}` 以响应触发",
    ),
    "gate.preflight_failed": (
        "preflight found {count} error(s); nothing was submitted (fix them, or --force --reason TEXT to override)",
        "预检发现 {count} 个错误；未提交任何作业（请修复，或使用 --force --reason TEXT 强制提交）",
    ),
    "gate.preflight_failed_uncovered": (
        "preflight found error(s) that the --force carried over from the parent run does not cover: {codes}; nothing was submitted",
        "预检发现了从上一个运行沿用的 --force 未涵盖的错误：{codes}；未提交任何作业",
    ),
    "gate.force_needs_reason": ("--force needs --reason TEXT (it is recorded in the ledger)", "--force 需要 --reason TEXT（将记录在账本中）"),
    "gate.forced": ("preflight errors overridden with --force: {reason}", "已使用 --force 忽略预检错误：{reason}"),
    "gate.duplicate": (
        "plan {hash} is already submitted and not finished: run {run} (#{id}, {state}, jobs {jobs}); use --resubmit to submit it again",
        "计划 {hash} 已提交且尚未结束：运行 {run}（#{id}，{state}，作业 {jobs}）；如需再次提交请使用 --resubmit",
    ),
    "gate.no_tty": (
        "no terminal to confirm on: pass --yes to {action} without a prompt",
        "没有可用于确认的终端：请使用 --yes 以在无提示的情况下{action}",
    ),
    "gate.action.submit": ("submit", "提交"),
    "gate.action.cancel": ("cancel", "取消"),
    "gate.prompt_yes": ("Submit {name}? Type yes or the run name: ", "提交 {name}？请输入 yes 或运行名称："),
    "gate.prompt_name": (
        "This job may use {hours:,.1f} GPU-hours (over {threshold:g}). Type the run name '{name}' to submit: ",
        "该作业可能使用 {hours:,.1f} GPU 小时（超过 {threshold:g}）。请输入运行名称 '{name}' 以提交：",
    ),
    "gate.prompt_cancel": ("Cancel run {name} (jobs {jobs})? Type the run name: ", "取消运行 {name}（作业 {jobs}）？请输入运行名称："),
    "gate.aborted": ("not confirmed; nothing was submitted", "未确认；未提交任何作业"),
    "gate.cancel_aborted": ("not confirmed; nothing was cancelled", "未确认；未取消任何作业"),
    "gate.submitted": (
        "submitted {name} as run #{id}: job(s) {jobs} via {executor}; script {script}",
        "已提交 {name}，运行编号 #{id}：作业 {jobs}，执行器 {executor}；脚本 {script}",
    ),
    "gate.cancelled": ("cancelled run {name} (#{id}): job(s) {jobs}", "已取消运行 {name}（#{id}）：作业 {jobs}"),
    "gate.not_active": ("run {name} (#{id}) is {state}: nothing to cancel", "运行 {name}（#{id}）状态为 {state}：无需取消"),
    "gate.threshold_invalid": ("confirmation threshold must be a number of GPU-hours, got '{value}'", "确认阈值必须是 GPU 小时数，当前为 '{value}'"),
    "gate.action.resubmit": ("resubmit", "重新提交"),
    "gate.inherited_reason": (
        "carried over from run #{id}, which was submitted with --force: {reason}",
        "沿用运行 #{id} 的 --force 理由：{reason}",
    ),
    "gate.auto_resubmit_refused": (
        "run {run} was rolled back to iteration {iteration}, but the gate refused to resubmit it: {reason} "
        "(after fixing that: mbridge-launch rollback {run} --to {iteration} --resubmit)",
        "运行 {run} 已回滚到迭代 {iteration}，但提交闸门拒绝重新提交：{reason}"
        "（修复后可执行：mbridge-launch rollback {run} --to {iteration} --resubmit）",
    ),
}
