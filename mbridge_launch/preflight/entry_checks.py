"""The training entry (plan.launch.entry, default `python scripts/training/run_recipe.py`) exists
where the job starts, before a job waits in the queue only to fail with "can't open file".

Where the job starts: launch.workdir (relative to the submit directory), else the submit directory
(where `submit` runs, `--script-dir`). Without a container the script must be there on the login
node's view of the file system, which the compute nodes share for the start directory: a missing
file is an error. A preflight run on its own does not know where `submit` will run; for a Plan
without launch.workdir it looks in the current directory and only warns (the gate, which knows,
makes it an error). With a container (Pyxis and an image) the script is inside the image, usually
in its working directory /opt/Megatron-Bridge: not visible from here, so the check says what is
assumed and gives the one-line srun that verifies it on a node.
"""

from __future__ import annotations

import os
from pathlib import Path

from mbridge_launch.base.quoting import sh_join
from mbridge_launch.preflight.context import PreflightContext, run_all
from mbridge_launch.preflight.model import Check

SCRIPT_SUFFIXES = (".py", ".sh")


def run_entry_checks(ctx: PreflightContext) -> list[Check]:
    return run_all(ctx, (check_entry,))


def entry_script(entry: list[str]) -> str | None:
    """The file the entry runs: its last word ending in .py or .sh (`python SCRIPT`, `uv run python
    SCRIPT`), else a one-word entry given as a path; None for a command found on PATH."""
    for word in reversed(entry):
        if word.endswith(SCRIPT_SUFFIXES):
            return word
    if len(entry) == 1 and "/" in entry[0]:
        return entry[0]
    return None


def uses_container(ctx: PreflightContext) -> bool:
    """The executors start the training step in the image only when the site has Pyxis."""
    cluster = ctx.plan.cluster
    return bool(cluster.profile.pyxis and cluster.container_image)


def check_entry(ctx: PreflightContext) -> list[Check]:
    plan = ctx.plan
    script = entry_script(list(plan.launch.entry))
    if script is None:
        return [Check("entry.no_script", "info", {"entry": sh_join(plan.launch.entry)})] if plan.launch.entry else []
    if uses_container(ctx):
        return [_in_image(ctx, script)]
    workdir = plan.launch.workdir
    start = ctx.job_start_dir()
    if workdir and not start.is_dir():
        return []  # path.workdir_missing already says it, with its fix
    path = Path(os.path.expanduser(script))
    path = path if path.is_absolute() else start / path
    params = {"path": str(path), "script": script, "base": str(start)}
    if path.is_file():
        return [Check("entry.found", "info", params, subject=str(path))]
    if workdir:
        return [Check("entry.missing", "error", params, subject=str(path))]
    if ctx.submit_dir is not None:
        return [Check("entry.missing_submit_dir", "error", params, subject=str(path))]
    # no launch.workdir and no submit yet: the start directory is wherever `submit` will run
    return [Check("entry.missing_here", "warning", params, subject=str(path))]


def _in_image(ctx: PreflightContext, script: str) -> Check:
    cluster, workdir = ctx.plan.cluster, ctx.plan.launch.workdir
    argv = ["srun", "--nodes=1", "--ntasks=1"]
    if cluster.partition:
        argv.append(f"--partition={cluster.partition}")
    if cluster.account:
        argv.append(f"--account={cluster.account}")
    argv.append(f"--container-image={cluster.container_image}")
    if workdir:
        argv.append(f"--container-workdir={workdir}")
    argv += ["test", "-f", script]
    params = {"script": script, "image": cluster.container_image, "workdir": workdir or "", "command": sh_join(argv)}
    code = "entry.in_image_workdir" if workdir else "entry.in_image"
    return Check(code, "info", params, subject=script)
