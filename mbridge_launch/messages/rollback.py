MESSAGES = {
    # checkpoint inspection
    "ckpt.not_a_dir": (
        "{path} is not a checkpoint directory (expected a folder holding iter_NNNNNNN/ folders)",
        "{path} 不是检查点目录（应为包含 iter_NNNNNNN/ 子目录的文件夹）",
    ),
    "ckpt.no_save_dir": (
        "run {run} has no checkpoint directory recorded (plan checkpoint.save is empty); pass the directory instead",
        "运行 {run} 没有记录检查点目录（计划中 checkpoint.save 为空）；请直接传入目录",
    ),
    "ckpt.not_run_or_dir": (
        "'{ref}' is neither a run in the ledger nor a directory; recent runs: {known}",
        "'{ref}' 既不是台账中的运行，也不是目录；最近的运行：{known}",
    ),
    "ckpt.header": ("checkpoints in {path}", "{path} 中的检查点"),
    "ckpt.reason.missing_or_incomplete": ("missing or incomplete", "缺失或不完整"),
    "ckpt.reason.pt_unknown": ("unreadable: matches no iteration's train_state.pt", "无法识别：与任何迭代的 train_state.pt 都不一致"),
    "ckpt.reason.not_an_iteration": ("not an iteration: {value}", "不是迭代编号：{value}"),
    "ckpt.reason.no_tracker": ("checkpoints exist but no tracker", "存在检查点但没有跟踪文件"),
    "ckpt.reason.dir_missing": ("directory missing", "目录不存在"),
    "ckpt.reason.incomplete": ("incomplete: missing {files}", "不完整：缺少 {files}"),
    "ckpt.reason.iteration": ("iteration {iteration}", "迭代 {iteration}"),
    "ckpt.none": ("no iter_* checkpoints", "没有 iter_* 检查点"),
    "ckpt.columns": ("ITERATION  COMPLETE  SIZE  SAVED AT  TRACKERS  LOSS", "迭代  完整  大小  保存时间  跟踪文件  损失"),
    "ckpt.complete": ("yes", "是"),
    "ckpt.incomplete": ("NO (missing {missing})", "否（缺少 {missing}）"),
    "ckpt.trackers": (
        "trackers: latest_train_state.pt -> {pt}; latest_checkpointed_iteration.txt -> {txt}",
        "跟踪文件：latest_train_state.pt -> {pt}；latest_checkpointed_iteration.txt -> {txt}",
    ),
    "ckpt.tracker_absent": ("absent", "不存在"),
    "ckpt.tracker_unknown": ("unknown (matches no train_state.pt)", "未知（与任何 train_state.pt 都不匹配）"),
    "ckpt.tracker_in_rolled_back": ("iteration {iteration} in {where} (moved aside!)", "迭代 {iteration}，位于 {where}（已移走！）"),
    "ckpt.trackers_disagree": (
        "the trackers disagree: Bridge resumes from latest_train_state.pt, not from the .txt",
        "两个跟踪文件不一致：Bridge 按 latest_train_state.pt 恢复训练，而不是 .txt",
    ),
    "ckpt.resume_ok": ("Bridge would resume from iteration {iteration} ({source})", "Bridge 将从迭代 {iteration} 恢复训练（依据 {source}）"),
    "ckpt.resume_fresh": ("Bridge would start from scratch (no tracker)", "Bridge 将从头开始训练（没有跟踪文件）"),
    "ckpt.resume_broken": (
        "Bridge could NOT resume: {source} -> {reason}",
        "Bridge 无法恢复训练：{source} -> {reason}",
    ),
    "ckpt.rolled_back_set": (
        "rolled_back/{stamp}: iterations {iters} (rolled back to {to_iter}; {state})",
        "rolled_back/{stamp}：迭代 {iters}（已回滚到 {to_iter}；{state}）",
    ),
    "ckpt.interrupted": (
        "an interrupted rollback was found ({stamps}); the next `mbridge-launch rollback` on this directory finishes it (or run `mbridge-launch rollback {dir} --recover`)",
        "发现被中断的回滚（{stamps}）；对该目录的下一次 `mbridge-launch rollback` 会完成它（或运行 `mbridge-launch rollback {dir} --recover`）",
    ),
    "ckpt.notes": ("iteration {iteration}: {notes} absent (not needed to load)", "迭代 {iteration}：缺少 {notes}（加载不需要）"),
    # rollback
    "rollback.need_to": ("--to ITER is required (unless --undo or --recover)", "需要 --to ITER（除非使用 --undo 或 --recover）"),
    "rollback.locked": (
        "another rollback is in progress on {path} ({holder}); wait for it to finish",
        "{path} 上已有另一个回滚正在进行（{holder}）；请等待其完成",
    ),
    "rollback.lock_failed": ("cannot lock {path}: {reason}", "无法锁定 {path}：{reason}"),
    "rollback.destination_exists": ("{path} already exists; nothing was overwritten", "{path} 已存在；未覆盖任何内容"),
    "rollback.no_such_iter": (
        "there is no checkpoint for iteration {iteration} in {path}; complete checkpoints: {valid}",
        "{path} 中没有迭代 {iteration} 的检查点；完整的检查点：{valid}",
    ),
    "rollback.target_incomplete": (
        "the checkpoint of iteration {iteration} is incomplete (missing {missing}); complete checkpoints: {valid}",
        "迭代 {iteration} 的检查点不完整（缺少 {missing}）；完整的检查点：{valid}",
    ),
    "rollback.journal_missing_dir": (
        "{name} is neither in the checkpoint directory nor in {path}; nothing was changed further (inspect by hand)",
        "{name} 既不在检查点目录中，也不在 {path} 中；未做进一步修改（请手动检查）",
    ),
    "rollback.nothing_to_undo": ("no finished rollback to undo in {path}", "{path} 中没有可撤销的已完成回滚"),
    "rollback.undo_not_newest": (
        "rollback {stamp} is not the newest one; undo {newest} first",
        "回滚 {stamp} 不是最近的一次；请先撤销 {newest}",
    ),
    "rollback.no_such_stamp": ("no finished rollback '{stamp}'; valid: {valid}", "没有已完成的回滚 '{stamp}'；可选：{valid}"),
    "rollback.undo_diverged": (
        "{file} changed since rollback {stamp} (training went on); undo would lose that progress, so nothing was changed",
        "自回滚 {stamp} 以来 {file} 已改变（训练已继续）；撤销会丢失这些进度，因此未做任何修改",
    ),
    "rollback.undo_new_checkpoints": (
        "new checkpoints were written after rollback {stamp} ({names}); undo would mix two timelines, so nothing was changed",
        "回滚 {stamp} 之后写入了新的检查点（{names}）；撤销会混合两条时间线，因此未做任何修改",
    ),
    "rollback.plan_header": ("rollback of {path} to iteration {iteration}", "将 {path} 回滚到迭代 {iteration}"),
    "rollback.plan_move": ("move {name} -> rolled_back/{stamp}/{name}", "移动 {name} -> rolled_back/{stamp}/{name}"),
    "rollback.plan_tracker": ("rewrite {file}: {before} -> {after}", "重写 {file}：{before} -> {after}"),
    "rollback.plan_recover": ("first finish the interrupted rollback {stamps}", "先完成被中断的回滚 {stamps}"),
    "rollback.nothing_to_do": (
        "{path} is already at iteration {iteration} with nothing newer: nothing to do",
        "{path} 已处于迭代 {iteration} 且没有更新的检查点：无需操作",
    ),
    "rollback.dry_run_done": ("dry run: nothing was changed", "试运行：未做任何修改"),
    "rollback.done": (
        "rolled back {path} to iteration {iteration}; {count} newer checkpoint(s) moved to rolled_back/{stamp}/ (undo: mbridge-launch rollback {ref} --undo)",
        "已将 {path} 回滚到迭代 {iteration}；{count} 个较新的检查点已移至 rolled_back/{stamp}/（撤销：mbridge-launch rollback {ref} --undo）",
    ),
    "rollback.undo_plan": (
        "undo rollback {stamp} of {path}: move back {names} and restore the trackers",
        "撤销 {path} 的回滚 {stamp}：移回 {names} 并恢复跟踪文件",
    ),
    "rollback.undone": ("undid rollback {stamp}: {path} is as it was before", "已撤销回滚 {stamp}：{path} 已恢复原状"),
    "rollback.recovered": ("finished interrupted rollback(s): {stamps}", "已完成被中断的回滚：{stamps}"),
    "rollback.nothing_to_recover": ("nothing to recover in {path}", "{path} 中没有需要恢复的内容"),
    "rollback.confirm_prompt": (
        "type '{expected}' to confirm (anything else aborts): ",
        "输入 '{expected}' 以确认（输入其他内容则中止）：",
    ),
    "rollback.aborted": ("not confirmed: nothing was changed", "未确认：未做任何修改"),
    "rollback.no_tty": (
        "refusing to {action} without confirmation: no terminal to ask on; pass --yes to confirm",
        "没有可交互的终端，无法确认，拒绝{action}；请传入 --yes 以确认",
    ),
    "rollback.action_rollback": ("roll back", "回滚"),
    "rollback.action_undo": ("undo the rollback", "撤销回滚"),
    "rollback.run_active": (
        "run {run} is active (job {jobs}, {state}): it would keep writing checkpoints; cancel it first (mbridge-launch cancel {run}) or pass --cancel",
        "运行 {run} 仍在进行中（作业 {jobs}，{state}）：它会继续写入检查点；请先取消（mbridge-launch cancel {run}）或传入 --cancel",
    ),
    "rollback.cancelling": ("cancelling run {run} (jobs {jobs}) and waiting for it to stop...", "正在取消运行 {run}（作业 {jobs}）并等待其停止……"),
    "rollback.cancel_timeout": (
        "run {run} did not stop within {seconds} s after cancel (state {state}); nothing was rolled back",
        "取消后 {seconds} 秒内运行 {run} 未停止（状态 {state}）；未执行回滚",
    ),
    "rollback.cancel_unavailable": (
        "cannot cancel run {run}: executor '{executor}' is not available ({reason})",
        "无法取消运行 {run}：执行器 '{executor}' 不可用（{reason}）",
    ),
    "rollback.unrecorded_dir": (
        "no recorded run writes to {path}: make sure no job is training into it",
        "台账中没有运行写入 {path}：请确认没有作业正在向其写入",
    ),
    "rollback.pinned": (
        "run {run} pins its resume point ({settings}): Bridge reads that before the trackers, so a resubmission of this plan would not start from the rollback",
        "运行 {run} 固定了恢复点（{settings}）：Bridge 会先于跟踪文件读取它，因此按此计划重新提交不会从回滚点开始",
    ),
    "rollback.bad_iter": ("--to must be a non-negative iteration number, got '{value}'", "--to 必须是非负的迭代编号，实际为 '{value}'"),
    # watch (automatic rollback)
    "watch.watching": ("watching run {run} (#{id}, jobs {jobs})", "正在监视运行 {run}（#{id}，作业 {jobs}）"),
    "watch.trigger": (
        "{kind} at iteration {iteration} (loss {loss}) in run {run}",
        "运行 {run} 在迭代 {iteration} 出现 {kind}（损失 {loss}）",
    ),
    "watch.rolled_back": (
        "run {run}: rolled back to iteration {iteration} (last complete checkpoint before {trigger}); {count} newer checkpoint(s) moved to rolled_back/{stamp}/",
        "运行 {run}：已回滚到迭代 {iteration}（{trigger} 之前最后一个完整检查点）；{count} 个较新的检查点已移至 rolled_back/{stamp}/",
    ),
    "watch.resubmitted": ("resubmitted as run {run} (#{id}, jobs {jobs})", "已重新提交为运行 {run}（#{id}，作业 {jobs}）"),
    "watch.max_rollbacks": (
        "run {run}: {count} automatic rollback(s) already, the limit is {limit} (plan.auto_rollback.max_rollbacks); stopped, nothing rolled back",
        "运行 {run}：已自动回滚 {count} 次，达到上限 {limit}（plan.auto_rollback.max_rollbacks）；已停止，未执行回滚",
    ),
    "watch.no_checkpoint": (
        "run {run}: no complete checkpoint before iteration {iteration}; nothing to roll back to",
        "运行 {run}：迭代 {iteration} 之前没有完整的检查点；无法回滚",
    ),
    "watch.already_watching": ("run {run} is already being watched by another process", "运行 {run} 已被另一个进程监视"),
    "watch.not_enabled": (
        "run {run}: plan.auto_rollback.enabled is false; reporting only (pass --act to roll back anyway)",
        "运行 {run}：plan.auto_rollback.enabled 为 false；只报告（传入 --act 仍执行回滚）",
    ),
    "watch.finished": ("run {run} (#{id}) ended: {state}", "运行 {run}（#{id}）已结束：{state}"),
    "watch.job_started": (
        "auto-rollback watcher for run {run} (#{id}): Slurm job {job}, starts when job {after} starts",
        "运行 {run}（#{id}）的自动回滚监视器：Slurm 作业 {job}，在作业 {after} 开始时启动",
    ),
    "watch.job_refused": (
        "the auto-rollback watcher job for run {run} was not submitted ({reason}); the training job is; run `mbridge-launch watch {run}` on a login node instead",
        "运行 {run} 的自动回滚监视作业未能提交（{reason}）；训练作业已提交；请改为在登录节点上运行 `mbridge-launch watch {run}`",
    ),
    "watch.cancelled_by_someone": (
        "run {run} was cancelled by someone else; the trigger at iteration {iteration} is reported only (no rollback, no resubmission)",
        "运行 {run} 已被他人取消；迭代 {iteration} 处的触发只报告（不回滚、不重新提交）",
    ),
    "watch.terminated": (
        "watcher of run {run} stopped by SIGTERM (time limit); run still active: successor watcher job {job}",
        "运行 {run} 的监视器被 SIGTERM 停止（时间限制）；运行仍在进行：后继监视作业 {job}",
    ),
    "watch.terminated_idle": (
        "watcher of run {run} stopped by SIGTERM; the run is no longer active ({state})",
        "运行 {run} 的监视器被 SIGTERM 停止；该运行已不再进行（{state}）",
    ),
    "watch.resubmitted_handover": (
        "run {run} (#{id}) is followed by its own watcher job from here on",
        "运行 {run}（#{id}）此后由它自己的监视作业跟踪",
    ),
    "watch.handled_cancelled": (
        "run {run} (#{id}) was cancelled by someone else: nothing done",
        "运行 {run}（#{id}）已被他人取消：未做任何操作",
    ),
    "watch.rolled_back_no_resubmit": (
        "run {run} was rolled back and not resubmitted (--no-resubmit)",
        "运行 {run} 已回滚，未重新提交（--no-resubmit）",
    ),
    # rollback --resubmit
    "rollback.bad_skip_iters": (
        "--skip-iters must be iteration numbers and ranges such as 25,30-32 (at most 100000 iterations), got '{value}' (bad part: '{part}')",
        "--skip-iters 必须是迭代编号或范围，例如 25,30-32（最多 100000 个迭代），实际为 '{value}'（有误的部分：'{part}'）",
    ),
    "rollback.bad_seed": ("--seed must be a non-negative integer, got '{value}'", "--seed 必须是非负整数，实际为 '{value}'"),
    "rollback.resubmit_only": ("{flag} applies only with --resubmit", "{flag} 只能与 --resubmit 一起使用"),
    "rollback.resubmit_conflict": ("--resubmit cannot be combined with {flag}", "--resubmit 不能与 {flag} 同时使用"),
    "rollback.resubmit_needs_run": (
        "--resubmit needs a recorded run (its plan is in the ledger); {path} is a bare checkpoint directory: roll it back without --resubmit, then submit its plan with mbridge-launch submit",
        "--resubmit 需要台账中记录的运行（其计划保存在台账中）；{path} 是单独的检查点目录：请不带 --resubmit 回滚，然后用 mbridge-launch submit 提交其计划",
    ),
    "rollback.resubmit_reason": (
        "rollback of run {run} (#{id}) to iteration {iteration}, resubmitted ({changes})",
        "运行 {run}（#{id}）回滚到迭代 {iteration} 后重新提交（{changes}）",
    ),
    "rollback.resubmit_preview": (
        "then resubmit run {run} through the gate, loading from the rollback; plan changes: {overrides}",
        "随后通过提交闸门重新提交运行 {run}，从回滚点加载；计划变更：{overrides}",
    ),
    "rollback.resubmitting": ("resubmitting run {run} (#{id}) through the gate", "正在通过提交闸门重新提交运行 {run}（#{id}）"),
    "rollback.resubmitted": (
        "resubmitted as run {run} (#{id}, child of #{parent}): job(s) {jobs}, loading from iteration {iteration}",
        "已重新提交为运行 {run}（#{id}，#{parent} 的后续运行）：作业 {jobs}，从迭代 {iteration} 加载",
    ),
}
