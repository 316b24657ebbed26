"""Paths and storage: container image, mount sources, checkpoint directories (writable, shared
by all nodes, room for the checkpoints the run keeps (two, or fewer for a short run), existing checkpoints mean a resume), caches for
multi-node fine-tuning with packing, the job's working and log directories.

Preflight never writes here: writability is judged from the nearest existing directory (mode
bits, read-only and pseudo file systems), not by creating a file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mbridge_launch.knowledge.vocabulary import FINETUNE_GOALS, PEFT_GOALS
from mbridge_launch.plan.overrides import is_on, whole_number
from mbridge_launch.preflight.context import PreflightContext, run_all
from mbridge_launch.preflight.model import Check
from mbridge_launch.preflight.storage import detail_text, existing_ancestor, free_bytes, storage_kind, writable

# Pyxis/enroot image references: [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST], and docker style
# registry/namespace/image:tag. Components follow the OCI distribution grammar.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?"
_IMAGE_REF = re.compile(
    rf"^(?:[A-Za-z0-9._$-]+@)?(?:{_REGISTRY}#)?(?:{_REGISTRY}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)
BYTES_PER_PARAM_WITH_OPTIMIZER = 2 + 12  # bf16 weights + fp32 master weights and two Adam moments
BYTES_PER_PARAM_WEIGHTS = 2
CHECKPOINTS_OF_ROOM = 2
_PACKING_KEY = re.compile(r"(enable_offline_packing|packed_sequence)", re.I)


def run_path_checks(ctx: PreflightContext) -> list[Check]:
    from mbridge_launch.preflight.container_checks import run_container_checks
    from mbridge_launch.preflight.ownership_checks import check_save_owner

    return run_all(ctx, (check_container_image, check_mounts, check_save_dir, check_save_owner, check_load_paths,
                         check_caches, check_launch_dirs, run_container_checks))


# ---------------------------------------------------------------------- container
def is_image_path(image: str) -> bool:
    return image.startswith(("/", "./", "../", "~")) or image.endswith((".sqsh", ".squashfs", ".sif"))


def check_container_image(ctx: PreflightContext) -> list[Check]:
    image = ctx.plan.cluster.container_image
    if not image:
        return []
    if is_image_path(image):
        path = ctx.resolve_path(image)
        if not path.exists():
            return [Check("path.image_missing", "error", {"path": str(path)}, subject=str(path))]
        if not path.is_file():
            return [Check("path.image_unreadable", "error", {"path": str(path), "reason": detail_text("not_regular_file")}, subject=str(path))]
        if not os.access(path, os.R_OK):
            return [Check("path.image_unreadable", "error", {"path": str(path), "reason": detail_text("permission_denied")}, subject=str(path))]
        if path.stat().st_size == 0:
            return [Check("path.image_unreadable", "error", {"path": str(path), "reason": detail_text("empty_file")}, subject=str(path))]
        if ctx.plan.cluster.nodes > 1:
            kind, why = storage_kind(path, dict(ctx.env))
            if kind == "node_local":
                return [Check("path.image_node_local", "error", {"path": str(path), "why": why}, subject=str(path))]
        return []
    if not _IMAGE_REF.match(image):
        return [Check("path.image_ref_invalid", "error", {"image": image}, subject=image)]
    return []


def check_mounts(ctx: PreflightContext) -> list[Check]:
    checks: list[Check] = []
    for mount in ctx.plan.cluster.container_mounts:
        source = Path(os.path.expanduser(mount.source))
        if not source.is_absolute():
            checks.append(Check("path.mount_relative", "error", {"source": mount.source, "target": mount.target}, subject=mount.source))
        elif not source.exists():
            checks.append(Check("path.mount_missing", "error", {"source": mount.source, "target": mount.target}, subject=mount.source))
        # the target is absolute in every valid Plan (plan.model)
    return checks


# ---------------------------------------------------------------------- checkpoints

def _storage_check(ctx: PreflightContext, code_prefix: str, path: Path, what: str) -> list[Check]:
    """node-local storage: an error for multi-node jobs (each node would see its own copy), a
    warning for one node (a requeue may land on another node); an unknown local file system
    only warns for multi-node jobs."""
    kind, why = storage_kind(path, dict(ctx.env))
    params = {"path": str(path), "why": why, "what": what, "count": ctx.plan.cluster.nodes}
    multi = ctx.plan.cluster.nodes > 1
    if kind == "node_local":
        return [Check(f"{code_prefix}_node_local", "error" if multi else "warning", params, subject=str(path))]
    if kind in ("local_fs", "unknown") and multi:
        return [Check(f"{code_prefix}_maybe_local", "warning", params, subject=str(path))]
    return []


def checkpoint_bytes(ctx: PreflightContext) -> int | None:
    """Size of one checkpoint: parameters x (weights + optimizer state) for full training;
    PEFT checkpoints hold only the adapters, too small to matter."""
    if ctx.plan.mode in PEFT_GOALS:
        return 0
    arch = ctx.arch()
    if not arch.ok:
        return None
    try:
        params = int(arch.value.total_params)
    except Exception:  # noqa: BLE001 - an incomplete architecture has no parameter count
        return None
    save_optim = is_on(ctx.override("checkpoint.save_optim") or "true")
    return params * (BYTES_PER_PARAM_WITH_OPTIMIZER if save_optim else BYTES_PER_PARAM_WEIGHTS)


def check_save_dir(ctx: PreflightContext) -> list[Check]:
    save_text = ctx.plan.checkpoint.save or ctx.override("checkpoint.save")
    if not save_text:
        return [Check("path.save_unset", "warning", {})]
    save = ctx.resolve_path(save_text)
    ok, why = writable(save)
    if not ok:
        return [Check("path.save_unwritable", "error", {"path": str(save), "reason": why}, subject=str(save))]
    missing_root = _unmounted_root(save)
    if missing_root is not None:  # one finding: no free space or file system type of "/" in its name
        return [Check("path.save_fs_missing", "error", {"path": str(save), "root": str(missing_root)},
                      subject=str(save))]
    checks = _storage_check(ctx, "path.save", save, "checkpoint.save")
    checks += _free_space(ctx, save)
    checks += _resume(ctx, save)
    return checks


def _unmounted_root(path: Path) -> Path | None:
    """The missing top-level directory of an absolute path (/lustre of /lustre/ckpt/run) when
    nothing of it exists here: a site file system not mounted on this machine. Its free space and
    type would be those of "/", which say nothing about it, so it is one finding, not three."""
    if not path.is_absolute() or len(path.parts) < 2:
        return None
    root = Path(path.anchor) / path.parts[1]
    return None if root.exists() else root


def checkpoints_to_hold(ctx: PreflightContext) -> int:
    """How many checkpoints the save directory needs room for. Megatron Bridge saves every
    checkpoint.save_interval iterations and once more at the end of training unless the last
    iteration was just saved; save_interval 0 turns both off (train.py: `save_interval != 0`).
    So: none for save_interval 0, one when the run ends at or before the first interval save
    (the Plan states both numbers), else CHECKPOINTS_OF_ROOM (the new one is written before the
    old one can go)."""
    stated = ctx.override("checkpoint.save_interval")
    interval = whole_number(stated) if stated is not None else ctx.plan.checkpoint.save_interval
    if interval == 0:
        return 0
    iters = whole_number(ctx.override("train.train_iters"))
    if iters is None:
        recipe = ctx.recipe()
        iters = getattr(recipe.value, "train_iters", None) if recipe.ok else None
    if interval and iters and interval >= iters:
        return 1
    return CHECKPOINTS_OF_ROOM


def _free_space(ctx: PreflightContext, save: Path) -> list[Check]:
    count = checkpoints_to_hold(ctx)
    if count == 0:
        return [Check("path.save_space_none", "info", {"path": str(save)}, subject=str(save))]
    size = checkpoint_bytes(ctx)
    free = free_bytes(save)
    if size is None or free is None:
        return [Check("path.save_space_unknown", "info", {"path": str(save)}, subject=str(save))]
    need = size * count
    params = {"path": str(save), "free_gb": f"{free / 1e9:.1f}", "need_gb": f"{need / 1e9:.1f}", "ckpt_gb": f"{size / 1e9:.1f}", "count": count}
    if free < need:
        return [Check("path.save_space", "error", params, subject=str(save))]
    return [Check("path.save_space_ok", "info", params, subject=str(save))]


def _resume(ctx: PreflightContext, save: Path) -> list[Check]:
    if not save.is_dir():
        return []
    step = ctx.override("checkpoint.ckpt_step")
    load = ctx.plan.checkpoint.load
    from mbridge_launch.rollback.checkpoints import iter_dirs, resolve_resume

    resolution = resolve_resume(save, load=ctx.resolve_path(load) if load else None, ckpt_step=whole_number(step))
    has_iters = bool(iter_dirs(save))
    if resolution.source == "none" and not has_iters:
        return []
    params = {"path": str(save), "iteration": resolution.iteration if resolution.iteration is not None else "?", "source": resolution.source, "reason": resolution.reason}
    if not resolution.loadable:
        return [Check("path.resume_broken", "error", params, subject=str(save))]
    return [Check("path.resume", "info", params, subject=str(save))]


def check_load_paths(ctx: PreflightContext) -> list[Check]:
    # a fine-tuning Plan without starting weights is plan_checks.check_starting_weights' error
    checks: list[Check] = []
    pretrained = ctx.plan.checkpoint.pretrained_checkpoint or ctx.override("checkpoint.pretrained_checkpoint")
    if pretrained:
        checks += check_pretrained_path(ctx, pretrained)
    load = ctx.plan.checkpoint.load
    save = ctx.plan.checkpoint.save
    same_as_save = bool(save) and load is not None and ctx.resolve_path(load) == ctx.resolve_path(save)
    if load and not same_as_save and not ctx.resolve_path(load).exists():
        checks.append(Check("path.load_missing", "warning", {"path": str(ctx.resolve_path(load))}, subject=load))
    return checks


_TRACKER = "latest_checkpointed_iteration.txt"
_ITER_MARKERS = (".metadata", "common.pt", "metadata.json")  # what a saved iter_* directory holds


def host_path(ctx: PreflightContext, path: str) -> Path:
    """A Plan path on this host: a containerised job's path through the mount that holds it
    (SOURCE on the host for TARGET in the image), else the path itself."""
    from mbridge_launch.executors import common

    resolved = ctx.resolve_path(path)
    if common.uses_container(ctx.plan):
        covering = common.mount_covering(ctx.plan, str(resolved))
        if covering is not None:
            source, target = covering.split(":", 1)
            return Path(source) / resolved.relative_to(target)
    return resolved


def _unreachable_root(path: Path) -> Path | None:
    """The top directory of an absolute path when this host does not have it at all (/lustre on
    a laptop): the path lives on storage mounted elsewhere, and nothing here can judge it."""
    parts = path.parts
    if path.is_absolute() and len(parts) > 1:
        root = Path(parts[0]) / parts[1]
        if not root.exists():
            return root
    return None


def check_pretrained_path(ctx: PreflightContext, text: str) -> list[Check]:
    """checkpoint.pretrained_checkpoint as the other checkpoint paths: there, readable, shared by
    the nodes, and a Megatron checkpoint (a tracker file or iter_* directories, or an iter_*
    directory itself). A Hugging Face model directory is named as such, with its conversion."""
    path = host_path(ctx, text)
    params = {"path": str(path)}
    root = _unreachable_root(path)
    if root is not None:
        return [Check("path.pretrained_unreachable", "warning", {**params, "root": str(root)}, subject=str(path))]
    if not path.exists():
        return [Check("path.pretrained_missing", "error", params, subject=str(path))]
    if not path.is_dir():
        return [Check("path.pretrained_unreadable", "error", {**params, "reason": detail_text("not_a_directory", path=str(path))},
                      subject=str(path))]
    if not os.access(path, os.R_OK | os.X_OK):
        return [Check("path.pretrained_unreadable", "error", {**params, "reason": detail_text("permission_denied")},
                      subject=str(path))]
    found = checkpoint_marker(path)
    if found is None:
        code = "path.pretrained_hf_model" if (path / "config.json").is_file() else "path.pretrained_not_checkpoint"
        return [Check(code, "error", params, subject=str(path))]
    checks = [Check("path.pretrained_ok", "info", {**params, "found": found}, subject=str(path))]
    return checks + _storage_check(ctx, "path.pretrained", path, "checkpoint.pretrained_checkpoint")


def checkpoint_marker(path: Path) -> str | None:
    """What makes `path` a Megatron checkpoint (the tracker, the newest iter_* directory, or the
    saved files of an iter_* directory given directly), None when nothing does."""
    from mbridge_launch.rollback.checkpoints import iter_dirs, parse_iter_dirname

    if (path / _TRACKER).is_file():
        return _TRACKER
    iters = iter_dirs(path)
    if iters:
        return iters[max(iters)].name
    if parse_iter_dirname(path.name) is not None and any((path / m).exists() for m in _ITER_MARKERS):
        return path.name
    return None


# ---------------------------------------------------------------------- caches (NEMO_HOME, HF_HOME)
def uses_packing(ctx: PreflightContext) -> bool:
    for key, value in ctx.plan.dataset.fields.items():
        if _PACKING_KEY.search(key) and is_on(value):
            return True
    for override in ctx.plan.overrides:
        if _PACKING_KEY.search(override.key) and is_on(override.value) and not override.key.startswith("~"):
            return True
    return False


def check_caches(ctx: PreflightContext) -> list[Check]:
    plan = ctx.plan
    if plan.cluster.nodes <= 1 or plan.mode not in FINETUNE_GOALS or not uses_packing(ctx):
        return []
    checks: list[Check] = []
    home = os.path.expanduser("~")
    defaults = {"NEMO_HOME": os.path.join(home, ".cache", "nemo"), "HF_HOME": os.path.join(home, ".cache", "huggingface")}
    for name in ("NEMO_HOME", "HF_HOME", "NEMO_DATASETS_CACHE", "HF_DATASETS_CACHE"):
        value = ctx.job_env(name)
        if value is None and name not in defaults:
            continue
        if value is None:
            checks.append(Check("path.cache_unset", "warning", {"name": name, "default": defaults[name]}, subject=name))
            value = defaults[name]
        path = Path(os.path.expanduser(value))
        kind, why = storage_kind(path, dict(ctx.env))
        if kind == "node_local":
            checks.append(Check("path.cache_node_local", "error", {"name": name, "path": str(path), "why": why}, subject=name))
        elif kind in ("local_fs", "unknown"):
            checks.append(Check("path.cache_maybe_local", "warning", {"name": name, "path": str(path), "why": why}, subject=name))
    return checks


# ---------------------------------------------------------------------- working and log directories
def check_launch_dirs(ctx: PreflightContext) -> list[Check]:
    checks: list[Check] = []
    workdir = ctx.plan.launch.workdir
    if workdir:
        path = Path(os.path.expanduser(workdir))
        if not path.is_dir():
            checks.append(Check("path.workdir_missing", "error", {"path": str(path)}, subject=str(path)))
    log_dir = ctx.plan.launch.log_dir
    if log_dir:
        path = ctx.resolve_path(log_dir)
        ok, why = writable(path)
        if not ok:
            checks.append(Check("path.log_dir_unwritable", "error", {"path": str(path), "reason": why}, subject=str(path)))
        elif existing_ancestor(path) != path:
            checks.append(Check("path.log_dir_created", "info", {"path": str(path)}, subject=str(path)))
    return checks
