"""Issue 33 item 4: a fine-tuning Plan needs its starting weights. Preflight errors on SFT/LoRA/DoRA
without checkpoint.pretrained_checkpoint unless the Plan says from_scratch (SFT only: PEFT cannot),
and checks the path like the other checkpoint paths, on real directories."""

from __future__ import annotations

import os

import pytest

from mbridge_launch.base.i18n import Msg
from mbridge_launch.plan.model import Mount, load_plan
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.path_checks import run_path_checks
from mbridge_launch.preflight.plan_checks import run_plan_checks
from preflight_fixtures import codes, edit, override, preflight_json, valid_plan, write

pytestmark = pytest.mark.usefixtures("english")


def checks_of(plan, group):
    return group(PreflightContext(plan=plan, env={}))


def found(plan, group, prefix):
    return {c.code: c for c in checks_of(plan, group) if c.code.startswith(prefix)}


@pytest.fixture
def plan(shared_dir):
    return valid_plan(shared_dir)


def megatron_checkpoint(root, tracker=True):
    (root / "iter_0000100").mkdir(parents=True)
    (root / "iter_0000100" / ".metadata").write_text("{}")
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text("100")
    return root


# ---------------------------------------------------------------------- plan: weights required
@pytest.mark.parametrize("mode", ["sft", "lora", "dora"])
def test_finetuning_without_weights_is_an_error(plan, mode):
    checks = found(edit(plan, mode=mode), run_plan_checks, "plan.")
    assert checks["plan.pretrained_required"].severity == "error"
    assert "convert_checkpoints.py import" in checks["plan.pretrained_required"].hint()
    assert "--from-scratch" in checks["plan.pretrained_required"].hint()


def test_pretraining_needs_no_weights(plan):
    assert not {"plan.pretrained_required", "plan.from_scratch"} & set(found(plan, run_plan_checks, "plan."))


def test_sft_from_scratch_is_accepted_and_said(plan):
    data = edit(plan, mode="sft", **{"checkpoint.from_scratch": "a new domain; random init on purpose"})
    checks = found(data, run_plan_checks, "plan.")
    assert "plan.pretrained_required" not in checks
    assert checks["plan.from_scratch"].severity == "info"
    assert "random init on purpose" in checks["plan.from_scratch"].message()


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_peft_from_scratch_is_still_an_error(plan, mode):
    data = edit(plan, mode=mode, **{"checkpoint.from_scratch": "why not"})
    checks = found(data, run_plan_checks, "plan.")
    assert checks["plan.peft_from_scratch"].severity == "error"
    assert "plan.from_scratch" not in checks


def test_weights_given_as_an_override_count(plan, shared_dir):
    ckpt = megatron_checkpoint(shared_dir / "base")
    data = plan.model_copy(update={"mode": "lora", "overrides": [
        *plan.overrides, override("checkpoint.pretrained_checkpoint", str(ckpt), "convergence", "base model")]})
    assert "plan.pretrained_required" not in found(data, run_plan_checks, "plan.")
    assert found(data, run_path_checks, "path.pretrained")["path.pretrained_ok"].severity == "info"


def test_from_scratch_round_trips_and_absent_keeps_the_hash(plan, shared_dir):
    before = plan.plan_hash()
    assert "from_scratch" not in plan.canonical_dict()["checkpoint"]  # Plans that load their weights keep their hash
    data = edit(plan, mode="sft", **{"checkpoint.from_scratch": "random init on purpose"})
    again = load_plan(write(data, shared_dir / "rt"))
    assert isinstance(again.checkpoint.from_scratch, Msg)
    assert again.plan_hash() == data.plan_hash() != before


# ---------------------------------------------------------------------- paths: like the others
def with_weights(plan, path, mode="lora"):
    return edit(plan, mode=mode, **{"checkpoint.pretrained_checkpoint": str(path)})


def test_a_megatron_checkpoint_is_accepted(plan, shared_dir):
    checks = found(with_weights(plan, megatron_checkpoint(shared_dir / "base")), run_path_checks, "path.pretrained")
    assert list(checks) == ["path.pretrained_ok"]
    assert "latest_checkpointed_iteration.txt" in checks["path.pretrained_ok"].message()


def test_iter_dirs_without_a_tracker_and_an_iter_dir_itself_are_checkpoints(plan, shared_dir):
    root = megatron_checkpoint(shared_dir / "base", tracker=False)
    assert "path.pretrained_ok" in found(with_weights(plan, root), run_path_checks, "path.pretrained")
    assert "path.pretrained_ok" in found(with_weights(plan, root / "iter_0000100"), run_path_checks, "path.pretrained")


def test_missing_path_is_an_error(plan, shared_dir):
    checks = found(with_weights(plan, shared_dir / "nope"), run_path_checks, "path.pretrained")
    assert checks["path.pretrained_missing"].severity == "error"


def test_a_hugging_face_model_is_named_with_its_conversion(plan, shared_dir):
    hf = shared_dir / "Llama-3-8B"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    check = found(with_weights(plan, hf), run_path_checks, "path.pretrained")["path.pretrained_hf_model"]
    assert check.severity == "error"
    assert f"convert_checkpoints.py import --hf-model {hf} --megatron-path" in check.hint()


def test_an_empty_directory_is_not_a_checkpoint(plan, shared_dir):
    empty = shared_dir / "empty"
    empty.mkdir()
    check = found(with_weights(plan, empty), run_path_checks, "path.pretrained")["path.pretrained_not_checkpoint"]
    assert check.severity == "error"


def test_a_file_is_unreadable_as_a_checkpoint(plan, shared_dir):
    f = shared_dir / "weights.pt"
    f.write_text("x")
    assert found(with_weights(plan, f), run_path_checks, "path.pretrained")["path.pretrained_unreadable"].severity == "error"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_directory_is_an_error(plan, shared_dir):
    root = megatron_checkpoint(shared_dir / "locked")
    root.chmod(0)
    try:
        check = found(with_weights(plan, root), run_path_checks, "path.pretrained")["path.pretrained_unreadable"]
        assert check.severity == "error"
    finally:
        root.chmod(0o755)


def test_storage_this_host_does_not_have_is_a_warning(plan):
    path = "/mbl-no-such-mount-here/models/llama3-8b"
    check = found(with_weights(plan, path), run_path_checks, "path.pretrained")["path.pretrained_unreachable"]
    assert check.severity == "warning"
    assert "/mbl-no-such-mount-here" in check.message()


def test_node_local_storage_is_an_error_for_several_nodes(shared_dir, tmp_path):
    plan = valid_plan(shared_dir, nodes=2)
    root = megatron_checkpoint(tmp_path / "base")  # /tmp: node-local
    checks = found(with_weights(plan, root), run_path_checks, "path.pretrained")
    assert checks["path.pretrained_node_local"].severity == "error"


def test_a_container_path_is_checked_through_its_mount(plan, shared_dir):
    root = megatron_checkpoint(shared_dir / "models" / "base")
    data = with_weights(plan, "/models/base").model_copy(deep=True)
    data.cluster.container_image = "nvcr.io#nvidia/nemo:25.09"
    data.cluster.profile.pyxis = True
    data.cluster.container_mounts = [Mount(source=str(shared_dir / "models"), target="/models")]
    checks = found(data, run_path_checks, "path.pretrained")
    assert "path.pretrained_ok" in checks, checks
    assert root.exists()


def test_preflight_cli_refuses_a_lora_plan_without_weights(plan, shared_dir):
    rc, report = preflight_json(write(edit(plan, mode="lora"), shared_dir / "p"), "--no-cluster")
    assert rc == 1
    assert "plan.pretrained_required" in codes(report, "error")
