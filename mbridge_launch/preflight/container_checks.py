"""Paths a containerised job needs, checked against the Plan's mounts.

In a Pyxis container the job sees the image and the declared cluster.container_mounts only (the
local test cluster's fake Pyxis enforces this too). Paths in a Plan are paths as the job sees
them. Checkpoints and data must come through a mount: written into the image they vanish with
the task, and an image rarely carries the data, so a path outside every mount is an error naming
the mount that would fix it. launch.workdir and the entry script are usually the image's own
(/opt/Megatron-Bridge), so they only warn, and only when they exist on this host outside every
mount (a checkout the job will not see). Log files are opened by Slurm on the host, outside the
container, so launch.log_dir needs no mount (submitit's folder does: the submitit adapter checks it).
"""

from __future__ import annotations

import os
from pathlib import Path

from mbridge_launch.executors import common
from mbridge_launch.preflight.context import PreflightContext, run_all
from mbridge_launch.preflight.data_checks import blend_from_plan
from mbridge_launch.preflight.entry_checks import entry_script
from mbridge_launch.preflight.model import Check
from mbridge_launch.preflight.storage import existing_ancestor


def run_container_checks(ctx: PreflightContext) -> list[Check]:
    if not common.uses_container(ctx.plan):
        return []
    return run_all(ctx, (check_data_paths_mounted, check_host_dirs_mounted))


def _container_path(ctx: PreflightContext, path: str) -> str:
    """A Plan path as the job sees it: relative ones start at launch.workdir (the container's
    working directory), else at the image's default "/"."""
    p = Path(os.path.expanduser(path))
    if p.is_absolute():
        return os.path.normpath(p)
    return os.path.normpath(Path(ctx.plan.launch.workdir or "/") / p)


def _suggested_mount(path: str) -> str:
    """SRC:DST that would show `path` at the same place: its nearest existing directory on this
    host (pyxis refuses a missing mount source)."""
    base = existing_ancestor(Path(path))
    if not base.is_dir():
        base = base.parent
    return f"{base}:{base}"


def required_paths(ctx: PreflightContext) -> list[tuple[str, str]]:
    """(field, path) for every path the job reads or writes on shared storage."""
    plan = ctx.plan
    found: list[tuple[str, str]] = []
    save = plan.checkpoint.save or ctx.override("checkpoint.save")
    for name, value in (("checkpoint.save", save), ("checkpoint.load", plan.checkpoint.load),
                        ("checkpoint.pretrained_checkpoint", plan.checkpoint.pretrained_checkpoint)):
        if value:
            found.append((name, value))
    prefixes, _ = blend_from_plan(ctx)
    found += [("dataset.data_path", prefix) for prefix in prefixes]
    return found


def check_data_paths_mounted(ctx: PreflightContext) -> list[Check]:
    checks = []
    for name, value in required_paths(ctx):
        path = _container_path(ctx, value)
        if common.mount_covering(ctx.plan, path) is None:
            params = {"field": name, "path": path, "image": ctx.plan.cluster.container_image,
                      "mount": _suggested_mount(path)}
            checks.append(Check("container.path_unmounted", "error", params, subject=path))
    return checks


def check_host_dirs_mounted(ctx: PreflightContext) -> list[Check]:
    plan = ctx.plan
    candidates = [("launch.workdir", plan.launch.workdir)]
    script = entry_script(list(plan.launch.entry))
    candidates.append(("launch.entry", script))
    checks = []
    for name, value in candidates:
        if not value:
            continue
        path = _container_path(ctx, value)
        if common.mount_covering(plan, path) is None and os.path.exists(path):
            params = {"field": name, "path": path, "image": plan.cluster.container_image,
                      "mount": _suggested_mount(path)}
            checks.append(Check("container.host_path_unmounted", "warning", params, subject=path))
    return checks
