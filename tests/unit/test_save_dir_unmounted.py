"""A checkpoint directory under a top-level directory that does not exist here (a site file system
not mounted on this machine) is one finding, not "does not exist", then the free space of "/",
then "/"'s file system type (issue 33, item 7)."""

from __future__ import annotations

import uuid

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.path_checks import run_path_checks
from preflight_fixtures import edit, valid_plan


def save_checks(plan):
    return [c for c in run_path_checks(PreflightContext(plan=plan, env={}))
            if c.code.startswith(("path.save_", "path.save"))]


def test_an_unmounted_file_system_is_one_finding(shared_dir):
    root = f"/mbl-unmounted-{uuid.uuid4().hex[:8]}"
    plan = edit(valid_plan(shared_dir), **{"checkpoint.save": f"{root}/ckpt/run", "checkpoint.load": f"{root}/ckpt/run"})
    checks = [c for c in save_checks(plan) if c.code != "path.save_owner_unchecked"]
    assert [(c.code, c.severity) for c in checks] == [("path.save_fs_missing", "error")]
    text = checks[0].message("en")
    assert root in text and "GB free" not in text and "ext4" not in text
    assert checks[0].hint("zh")  # said in both languages


def test_a_directory_yet_to_be_created_on_a_mounted_file_system_is_measured(shared_dir):
    plan = edit(valid_plan(shared_dir), **{"checkpoint.save": str(shared_dir / "new" / "run")})
    codes = [c.code for c in save_checks(plan)]
    assert "path.save_fs_missing" not in codes and any(code.startswith("path.save_space") for code in codes)
