"""The sbatch adapter: a Plan becomes one batch script (templates/sbatch/*.j2) submitted with
`sbatch --parsable`. Multi-node plans use the srun-native shape (one task per GPU); single-node
plans whose launch.shape is torchrun use torchrun.sh.j2."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from mbridge_launch.base.atomic import EXECUTABLE_MODE, atomic_write_text
from mbridge_launch.executors import common
from mbridge_launch.executors.base import Rendered, Submitted
from mbridge_launch.executors.batch_script import script_context
from mbridge_launch.executors.templating import render_template
from mbridge_launch.plan.model import Plan
from mbridge_launch.slurm import commands as slurm_cli

NAME = "sbatch"


def submit_argv(plan: Plan, job_token: Optional[str] = None) -> list[str]:
    """The exact submit command; sbatch runs in the script directory, where the script lies.
    `schedule` adds the ledger's token as the job's comment (common.token_args), by which a
    submission interrupted before its job id was recorded is found again."""
    return ["sbatch", "--parsable", *common.token_args(job_token), common.script_file_name(plan)]


def render_script(plan: Plan) -> str:
    context = script_context(plan, submit_argv(plan))
    return render_template(context["template"], context)


class SbatchExecutor:
    name = NAME

    def render(self, plan: Plan, script_dir: Optional[Path] = None) -> Rendered:
        script_dir = Path(script_dir or Path.cwd()).resolve()
        text = render_script(plan)
        script = script_dir / common.script_file_name(plan)
        return Rendered(executor=NAME, plan=plan, script_dir=script_dir, text=text, submit_command=submit_argv(plan),
                        files={str(script): text}, script_path=script)

    def schedule(self, rendered: Rendered, job_token: Optional[str] = None) -> Submitted:
        plan, script_dir = rendered.plan, rendered.script_dir
        # the very file the review copy is (the gate wrote it before the confirmation), again
        path = rendered.script_path or script_dir / common.script_file_name(plan)
        script = atomic_write_text(path, rendered.text, mode=EXECUTABLE_MODE)
        # Slurm does not create the directory of --output; a missing one fails the job at launch
        log_base = common.resolve_dir(common.log_dir(plan), common.job_workdir(plan, script_dir))
        log_base.mkdir(parents=True, exist_ok=True)
        # exactly the command in the script's header: the file name, run from the script directory
        job_id, raw = slurm_cli.sbatch(Path(script.name), cwd=script_dir, extra_args=common.token_args(job_token))
        return Submitted(
            executor=NAME,
            job_ids=[job_id],
            script_path=script,
            log_paths=common.log_files(plan, [job_id], script_dir),
            raw_output=raw,
        )

    def cancel(self, job_ids: list[str]) -> None:
        slurm_cli.scancel(job_ids)

    def log_paths(self, plan: Plan, job_ids: list[str]) -> list[Path]:
        return common.log_files(plan, job_ids, Path.cwd())


def create(**options: object) -> SbatchExecutor:
    return SbatchExecutor()
