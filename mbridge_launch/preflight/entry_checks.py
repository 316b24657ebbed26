"""The training entry (plan.launch.entry, default `python scripts/training/run_recipe.py`) exists
where the job starts, before a job waits in the queue only to fail with "can't open file".

Where the job starts: launch.workdir (relative to the submit directory), else the submit directory
(where `submit` runs, `--script-dir`). Without a container the script must be there on the login
node's view of the file system, which the compute nodes share for the start directory: a missing
file is an error. One classification for `preflight` and the gate (and so `submit --dry-run`): a
preflight run on its own takes the current directory as the submit directory, as `submit` does by
default, so a Plan the dry run would refuse never passes preflight with a warning. With a container
(Pyxis and an image) the script is inside the image (the NeMo image keeps it in
/opt/Megatron-Bridge): not visible from here, so the check says what is assumed and gives the
one-line srun that verifies it on a node.
"""

from __future__ import annotations

import os
from pathlib import Path

from mbridge_launch.base.quoting import sh_join
from mbridge_launch.preflight.context import PreflightContext, run_all
from mbridge_launch.preflight.model import Check

SCRIPT_SUFFIXES = (".py", ".sh")


def run_entry_checks(ctx: PreflightContext) -> list[Check]:
    return run_all(ctx, (check_entry, check_python))


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
    code = "entry.missing" if workdir else "entry.missing_submit_dir"
    return [Check(code, "error", params, subject=str(path))]


def check_python(ctx: PreflightContext) -> list[Check]:
    """Without a container the job's Python is whatever the compute node runs: under
    `--export=NONE` nothing of the submitting shell (an activated venv, PYTHONPATH) reaches it, so
    the Plan says which interpreter and environment the job gets; an interpreter named by a path
    that does not exist here is an error (the nodes share the file system the job starts in)."""
    plan = ctx.plan
    entry = list(plan.launch.entry)
    if uses_container(ctx) or not entry or entry_script(entry) is None:
        return []
    script = entry_script(entry)
    runner = entry[:entry.index(script)] if script in entry else entry[:1]
    python = sh_join(runner or entry[:1])
    params = {"python": python, "release": plan.catalog.version, "setup": "; ".join(plan.launch.setup)}
    first = (runner or entry)[0]
    if os.path.isabs(first) and not Path(first).exists():
        return [Check("entry.python_missing", "error", {**params, "python": first}, subject=first)]
    code = "entry.host_python_setup" if plan.launch.setup else "entry.host_python"
    return [Check(code, "info", params, subject=python, hint_key="preflight.entry.host_python.hint")]


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
    if os.path.isabs(script):  # the image's own copy, named by its path (recommend --smoke-test)
        code = "entry.in_image_path"
    else:
        code = "entry.in_image_workdir" if workdir else "entry.in_image"
    return Check(code, "info", params, subject=script)
