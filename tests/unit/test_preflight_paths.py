"""Path and storage checks on real directories: container image, mounts, a save directory that
really is unwritable (even for root), node-local storage, free space, resume, caches."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.path_checks import run_path_checks
from mbridge_launch.preflight.storage import mounts, storage_kind, writable
from preflight_fixtures import codes, edit, override, preflight_json, valid_plan, write


def path_checks(plan, env=None):
    return run_path_checks(PreflightContext(plan=plan, env=env if env is not None else {}))


def path_codes(plan, env=None, severity=None):
    """Codes of the problems found (errors and warnings; notes only when asked by severity)."""
    return [c.code for c in path_checks(plan, env)
            if (c.severity == severity if severity else c.severity != "info")]


@pytest.fixture
def plan(shared_dir):
    """The valid plan in the harness's shared directory (not /tmp, which is node-local)."""
    return valid_plan(shared_dir)


def test_valid_paths_have_no_problems(plan):
    assert path_codes(plan) == []
    # without a ledger (run_preflight called directly) the directory's owner is said to be unchecked
    assert sorted(path_codes(plan, severity="info")) == ["path.log_dir_created", "path.save_owner_unchecked",
                                                         "path.save_space_ok"]


# ---------------------------------------------------------------------- container image and mounts
def test_mount_source_that_does_not_exist(plan, tmp_path):
    (tmp_path / "models").mkdir()
    mounts_ = [{"source": str(tmp_path / "models"), "target": "/models"}, {"source": str(tmp_path / "nope"), "target": "/data"}]
    broken = edit(plan, **{"cluster.container_mounts": mounts_})
    rc, report = preflight_json(write(broken, tmp_path / "p"), "--no-cluster")
    assert rc == 1 and codes(report, "error").count("path.mount_missing") == 1
    check = next(c for c in report["checks"] if c["code"] == "path.mount_missing")
    assert str(tmp_path / "nope") in check["message"] and "/data" in check["message"] and check["hint"]


def test_mount_paths_must_be_absolute(plan):
    # a relative source (relative to wherever srun starts) is refused by the Plan itself, as a relative target
    with pytest.raises(pydantic.ValidationError, match="absolute"):
        edit(plan, **{"cluster.container_mounts": [{"source": "relative/dir", "target": "/data"}]})


def test_squashfs_image(plan, tmp_path):
    image = tmp_path / "nemo.sqsh"
    assert path_codes(edit(plan, **{"cluster.container_image": str(image)})) == ["path.image_missing"]
    image.write_bytes(b"")
    assert path_codes(edit(plan, **{"cluster.container_image": str(image)})) == ["path.image_unreadable"]
    image.write_bytes(b"hsqs" + b"\0" * 60)
    assert path_codes(edit(plan, **{"cluster.container_image": str(image)})) == []


@pytest.mark.parametrize("ref", ["nvcr.io#nvidia/nemo:25.09", "nvcr.io/nvidia/nemo:25.09", "ubuntu", "user@nvcr.io#nvidia/pytorch:24.05-py3",
                                 "registry.example.com:5000/team/img@sha256:" + "a" * 64])
def test_well_formed_registry_references(plan, ref):
    assert path_codes(edit(plan, **{"cluster.container_image": ref})) == []


@pytest.mark.parametrize("ref", ["nvcr.io/nvidia/NeMo:25.09", "nemo:25.09 && rm -rf /", "$(whoami)/img", "img:"])
def test_malformed_registry_references(plan, ref):
    assert path_codes(edit(plan, **{"cluster.container_image": ref})) == ["path.image_ref_invalid"]


# ---------------------------------------------------------------------- unwritable save directory
def test_save_dir_below_a_regular_file_is_unwritable(plan, tmp_path):
    """A path whose parent is a file cannot be created, by root either (ENOTDIR)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    broken = edit(plan, **{"checkpoint.save": str(blocker / "ckpt")})
    rc, report = preflight_json(write(broken, tmp_path / "p"), "--no-cluster")
    assert rc == 1 and "path.save_unwritable" in codes(report, "error")
    assert "is not a directory" in next(c["message"] for c in report["checks"] if c["code"] == "path.save_unwritable")
    # the reason inside the message follows --lang too
    rc, report = preflight_json(write(broken, tmp_path / "zh"), "--no-cluster", "--lang", "zh")
    message = next(c["message"] for c in report["checks"] if c["code"] == "path.save_unwritable")
    assert rc == 1 and "不是目录" in message and "is not a directory" not in message


def test_save_dir_on_a_pseudo_file_system(plan):
    assert "path.save_unwritable" in path_codes(edit(plan, **{"checkpoint.save": "/proc/mbl-ckpt"}))


def _can_unshare() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root or user namespaces) to mount a read-only tmpfs")
def test_save_dir_on_a_read_only_file_system(plan, tmp_path):
    """Root passes every mode-bit check, so the fixture is a real read-only file system: a tmpfs
    mounted read-only in a private mount namespace (gone when the process ends)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    broken = edit(plan, **{"checkpoint.save": str(ro / "ckpt")})
    plan_path = write(broken, tmp_path / "p")
    env = dict(os.environ, MBRIDGE_LAUNCH_LANG="en")
    script = (
        f"mount -t tmpfs -o ro,size=1m tmpfs {ro} && "
        f"if touch {ro}/probe 2>/dev/null; then echo 'fixture is writable' >&2; exit 99; fi && "
        f"exec {sys.executable} -m mbridge_launch preflight {plan_path} --no-cluster --format json"
    )
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1, result.stderr
    import json

    report = json.loads(result.stdout)
    check = next(c for c in report["checks"] if c["code"] == "path.save_unwritable")
    assert check["severity"] == "error" and "read-only file system" in check["message"]


def test_writable_judges_the_nearest_existing_directory(tmp_path):
    ok, anchor = writable(tmp_path / "a" / "b" / "c")
    assert ok and anchor == str(tmp_path)


# ---------------------------------------------------------------------- storage visible to all nodes
def test_save_dir_on_node_local_storage(plan):
    multi = edit(plan, **{"checkpoint.save": "/tmp/mbl-ckpt-test/run1", "cluster.nodes": 2, "parallelism.dp": 16})
    checks = {c.code: c for c in path_checks(multi)}
    assert checks["path.save_node_local"].severity == "error" and "/tmp" in checks["path.save_node_local"].message("en")
    single = edit(plan, **{"checkpoint.save": "/dev/shm/mbl-ckpt-test"})
    assert {c.code: c.severity for c in path_checks(single)}.get("path.save_node_local") == "warning"


def test_declared_shared_prefix(plan):
    multi = edit(plan, **{"checkpoint.save": "/tmp/mbl-ckpt-test/run1", "cluster.nodes": 2, "parallelism.dp": 16})
    assert "path.save_node_local" not in path_codes(multi, env={"MBRIDGE_LAUNCH_SHARED_PREFIXES": "/tmp/mbl-ckpt-test"})


def test_storage_kind_reads_mountinfo(tmp_path):
    kind, why = storage_kind(Path("/proc/self"))
    assert kind == "local_fs" and why == "proc"  # a mount is found, its type reported
    assert any(m.mount_point == "/" for m in mounts())
    info = tmp_path / "mountinfo"
    info.write_text("36 25 0:32 / /mnt/with\\040space rw,relatime shared:1 - nfs4 srv:/x rw\n")
    assert mounts(str(info))[0].mount_point == "/mnt/with space" and mounts(str(info))[0].fstype == "nfs4"


# ---------------------------------------------------------------------- free space, resume
def test_not_enough_space_for_two_checkpoints(plan, tmp_path):
    """DeepSeek-V3 (671B parameters x 14 bytes) does not fit twice on any test machine's disk."""
    big = edit(plan, **{"recipe.model": "deepseek_v3"})
    check = next(c for c in path_checks(big) if c.code == "path.save_space")
    assert check.severity == "error" and float(check.params["need_gb"]) > 18000
    rc, report = preflight_json(write(big, tmp_path / "p"), "--no-cluster")
    assert rc == 1 and "path.save_space" in codes(report, "error")


def test_space_ok_and_peft_checkpoints_are_small(plan):
    check = next(c for c in path_checks(plan) if c.code == "path.save_space_ok")
    assert 15 < float(check.params["need_gb"]) < 20  # 0.6B x 14 bytes x 2
    lora = edit(plan, mode="lora")
    assert float(next(c for c in path_checks(lora) if c.code == "path.save_space_ok").params["need_gb"]) == 0


def _write_checkpoint(save: Path, iteration: int, complete: bool = True) -> None:
    d = save / f"iter_{iteration:07d}"
    d.mkdir(parents=True)
    files = [".metadata", "__0_0.distcp", "common.pt", "metadata.json", "train_state.pt"]
    for name in files if complete else files[:2]:
        if name == ".metadata":  # a torch_dist-like index naming the shard (the shard check reads it)
            (d / name).write_bytes(pickle.dumps({"storage_data": {"0": {"relative_path": "__0_0.distcp"}}}))
            continue
        (d / name).write_text(f'{{"iteration": {iteration}}}' if name == "train_state.pt" else "x")
    if complete:
        (save / "latest_train_state.pt").write_bytes((d / "train_state.pt").read_bytes())
    (save / "latest_checkpointed_iteration.txt").write_text(str(iteration))


def test_existing_checkpoints_mean_resume(plan):
    save = Path(plan.checkpoint.save)
    _write_checkpoint(save, 100)
    check = next(c for c in path_checks(plan) if c.code == "path.resume")
    assert check.severity == "info" and "RESUME from iteration 100" in check.message("en")


def test_incomplete_checkpoint_would_fail_to_resume(plan):
    _write_checkpoint(Path(plan.checkpoint.save), 200, complete=False)
    assert "path.resume_broken" in path_codes(plan, severity="error")


# ---------------------------------------------------------------------- other paths
def test_pretrained_checkpoint_missing_for_sft(plan, tmp_path):
    sft = edit(plan, mode="sft", **{"checkpoint.pretrained_checkpoint": str(tmp_path / "hf-import")})
    assert "path.pretrained_missing" in path_codes(sft, severity="error")
    (tmp_path / "hf-import").mkdir()
    assert "path.pretrained_missing" not in path_codes(sft)


def test_load_dir(plan, tmp_path):
    assert "path.load_missing" in path_codes(edit(plan, **{"checkpoint.load": str(tmp_path / "elsewhere")}))
    assert "path.load_missing" not in path_codes(edit(plan, **{"checkpoint.load": plan.checkpoint.save}))  # fresh run


def test_workdir_missing(plan, tmp_path):
    assert "path.workdir_missing" in path_codes(edit(plan, **{"launch.workdir": str(tmp_path / "no-checkout")}))


def test_multi_node_sft_with_packing_needs_shared_caches(plan):
    sft = edit(plan, mode="sft", env_vars={"NEMO_HOME": "/tmp/nemo-cache", "HF_HOME": "/dev/shm/hf"},
               overrides=[override("dataset.packed_sequence_specs.packed_sequence_size", "4096", "convergence").model_dump(by_alias=True)],
               **{"cluster.nodes": 2, "parallelism.dp": 16})
    found = {c.code + ":" + c.subject: c.severity for c in path_checks(sft)}
    assert found["path.cache_node_local:NEMO_HOME"] == "error" and found["path.cache_node_local:HF_HOME"] == "error"
    unpacked = edit(sft, overrides=[])
    assert not [c for c in path_codes(unpacked) if c.startswith("path.cache")]
    single = edit(sft, **{"cluster.nodes": 1, "parallelism.dp": 8})
    assert not [c for c in path_codes(single) if c.startswith("path.cache")]  # one node: its own cache is fine
    # on storage the site declares shared: nothing to say
    shared_env = {"MBRIDGE_LAUNCH_SHARED_PREFIXES": "/lustre"}
    on_shared = edit(sft, env_vars={"NEMO_HOME": "/lustre/nemo", "HF_HOME": "/lustre/hf"})
    assert not [c for c in path_codes(on_shared, env=shared_env) if c.startswith("path.cache")]
    # not set: the defaults under HOME are named, with the storage verdict of that default
    unset = {c.code + ":" + c.subject: c for c in path_checks(edit(sft, env_vars={}), env=shared_env)}
    assert unset["path.cache_unset:NEMO_HOME"].severity == "warning" and unset["path.cache_unset:HF_HOME"].severity == "warning"
    assert ".cache/nemo" in unset["path.cache_unset:NEMO_HOME"].message("en")
    # packing switched on through the dataset fields counts as well
    fields = edit(sft, overrides=[], **{"dataset.fields": {"packed_sequence_specs.packed_sequence_size": "4096"}})
    assert "path.cache_node_local" in path_codes(fields)


def test_repo_shared_dir_is_not_node_local(shared_dir):
    """The harness's shared directory (under the repository) is usable for multi-node plans."""
    kind, why = storage_kind(shared_dir)
    assert kind != "node_local", why
