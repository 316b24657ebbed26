"""The training entry exists where the job starts (preflight/entry_checks.py), and the checkpoint
space check counts the checkpoints a run actually keeps (path_checks.checkpoints_to_hold)."""

from __future__ import annotations

import sys

import pytest

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.entry_checks import entry_script, run_entry_checks
from mbridge_launch.preflight.path_checks import CHECKPOINTS_OF_ROOM, checkpoints_to_hold
from preflight_fixtures import edit, override, valid_plan

DEFAULT_ENTRY = ["python", "scripts/training/run_recipe.py"]


def entry_checks(plan, submit_dir=None):
    """The findings about the entry script (the job's Python has its own test below)."""
    return [(c.code, c.severity) for c in run_entry_checks(PreflightContext(plan=plan, env={}, submit_dir=submit_dir))
            if not c.code.startswith("entry.host_python")]


def checkout(directory):
    """A directory holding the default entry, as a Megatron Bridge checkout does."""
    script = directory / "scripts" / "training" / "run_recipe.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    return directory


@pytest.fixture
def plan(tmp_path):
    return edit(valid_plan(tmp_path / "base"), **{"launch.entry": DEFAULT_ENTRY})


@pytest.mark.parametrize("entry, script", [
    (["python", "scripts/training/run_recipe.py"], "scripts/training/run_recipe.py"),
    (["uv", "run", "python", "/opt/mb/run_recipe.py"], "/opt/mb/run_recipe.py"),
    (["/usr/local/bin/train"], "/usr/local/bin/train"),
    (["bash", "train.sh"], "train.sh"),
    (["torchrun"], None),
    (["python", "-m", "megatron.bridge.run"], None),
])
def test_entry_script_is_the_file_the_entry_runs(entry, script):
    assert entry_script(entry) == script


def test_entry_in_the_workdir_is_found(plan, tmp_path):
    found = edit(plan, **{"launch.workdir": str(checkout(tmp_path / "mb"))})
    assert entry_checks(found) == [("entry.found", "info")]


def test_entry_missing_from_the_workdir_is_an_error(plan, tmp_path):
    (tmp_path / "empty").mkdir()
    missing = edit(plan, **{"launch.workdir": str(tmp_path / "empty")})
    checks = run_entry_checks(PreflightContext(plan=missing, env={}))[:1]
    assert [(c.code, c.severity) for c in checks] == [("entry.missing", "error")]
    text = checks[0].message("en") + " " + checks[0].hint("en")
    assert str(tmp_path / "empty" / "scripts/training/run_recipe.py") in text and "--workdir" in text


def test_a_missing_workdir_is_left_to_the_path_check(plan, tmp_path):
    assert entry_checks(edit(plan, **{"launch.workdir": str(tmp_path / "nowhere")})) == []


def test_without_workdir_the_submit_directory_decides(plan, tmp_path):
    no_workdir = edit(plan, **{"launch.workdir": None})
    (tmp_path / "elsewhere").mkdir()
    assert entry_checks(no_workdir, submit_dir=checkout(tmp_path / "mb")) == [("entry.found", "info")]
    assert entry_checks(no_workdir, submit_dir=tmp_path / "elsewhere") == [("entry.missing_submit_dir", "error")]


def test_without_workdir_a_preflight_of_its_own_classifies_as_the_gate(plan, tmp_path, monkeypatch):
    """The current directory is the submit directory, as for `submit`: the same error, not a warning."""
    monkeypatch.chdir(tmp_path)
    no_workdir = edit(plan, **{"launch.workdir": None})
    assert entry_checks(no_workdir) == entry_checks(no_workdir, submit_dir=tmp_path) == [("entry.missing_submit_dir", "error")]
    checkout(tmp_path)
    assert entry_checks(no_workdir) == [("entry.found", "info")]


def test_an_in_image_path_is_named_as_such(plan):
    image = edit(plan, **{"launch.workdir": None, "cluster.container_image": "nvcr.io#nvidia/nemo:26.08",
                          "cluster.profile.pyxis": True,
                          "launch.entry": ["python", "/opt/Megatron-Bridge/scripts/training/run_recipe.py"]})
    checks = run_entry_checks(PreflightContext(plan=image, env={}))
    assert [(c.code, c.severity) for c in checks] == [("entry.in_image_path", "info")]
    assert "usually" not in checks[0].message("en")


def test_without_a_container_the_job_s_python_is_said(plan, tmp_path):
    """How a non-container job gets Megatron Bridge's Python: said, and a named interpreter checked."""
    host = edit(plan, **{"launch.workdir": str(checkout(tmp_path / "mb"))})
    checks = run_entry_checks(PreflightContext(plan=host, env={}))
    assert [(c.code, c.severity) for c in checks] == [("entry.found", "info"), ("entry.host_python", "info")]
    assert "--export=NONE" in checks[1].message("en") and "launch.setup" in checks[1].hint("en")
    setup = edit(host, **{"launch.setup": ["source /opt/venv/bin/activate"]})
    assert [c.code for c in run_entry_checks(PreflightContext(plan=setup, env={}))][1] == "entry.host_python_setup"
    missing = edit(host, **{"launch.entry": [str(tmp_path / "no-venv/bin/python"), "scripts/training/run_recipe.py"]})
    assert [(c.code, c.severity) for c in run_entry_checks(PreflightContext(plan=missing, env={}))][1] == \
        ("entry.python_missing", "error")


def test_relative_workdir_is_relative_to_the_submit_directory(plan, tmp_path):
    checkout(tmp_path / "sub" / "mb")
    relative = edit(plan, **{"launch.workdir": "mb"})
    assert entry_checks(relative, submit_dir=tmp_path / "sub") == [("entry.found", "info")]


def test_with_a_container_the_entry_is_assumed_in_the_image(plan):
    image = edit(plan, **{"launch.workdir": None, "cluster.container_image": "nvcr.io/nvidia/nemo:25.11",
                          "cluster.profile.pyxis": True, "cluster.partition": "gpu"})
    checks = run_entry_checks(PreflightContext(plan=image, env={}))
    assert [(c.code, c.severity) for c in checks] == [("entry.in_image", "info")]
    hint = checks[0].hint("en")
    assert "srun" in hint and "--container-image=nvcr.io/nvidia/nemo:25.11" in hint and "--partition=gpu" in hint
    assert "test -f scripts/training/run_recipe.py" in hint and "/opt/Megatron-Bridge" in checks[0].message("en")
    inside = edit(image, **{"launch.workdir": "/opt/Megatron-Bridge"})
    checks = run_entry_checks(PreflightContext(plan=inside, env={}))
    assert [c.code for c in checks] == ["entry.in_image_workdir"]
    assert "--container-workdir=/opt/Megatron-Bridge" in checks[0].hint("en")


def test_an_image_without_pyxis_runs_on_the_host_and_is_checked_there(plan, tmp_path):
    """The executors use the image only with Pyxis: without it the script must be on the host."""
    (tmp_path / "empty").mkdir()
    host = edit(plan, **{"launch.workdir": str(tmp_path / "empty"), "cluster.container_image": "nvcr.io/nvidia/nemo:25.11"})
    assert entry_checks(host) == [("entry.missing", "error")]


def test_an_absolute_entry_is_checked_as_it_is(tmp_path):
    plan = valid_plan(tmp_path / "base")  # its entry: this interpreter and the stand-in trainer
    assert plan.launch.entry[0] == sys.executable
    assert entry_checks(plan) == [("entry.found", "info")]
    gone = edit(plan, **{"launch.entry": [sys.executable, str(tmp_path / "gone.py")]})
    assert entry_checks(gone) == [("entry.missing", "error")]


def test_an_entry_without_a_script_is_not_checked(plan):
    assert entry_checks(edit(plan, **{"launch.entry": ["torchrun"]})) == [("entry.no_script", "info")]


# ---------------------------------------------------------------------- checkpoints to hold
def hold(plan, *overrides):
    extra = [override(key, value, "execution").model_dump(by_alias=True) for key, value in overrides]
    kept = [o.model_dump(by_alias=True) for o in plan.overrides]
    return checkpoints_to_hold(PreflightContext(plan=edit(plan, overrides=kept + extra), env={}))


def test_checkpoints_to_hold_follows_the_save_interval(plan):
    # valid_plan: train.train_iters=100, checkpoint.save_interval 50 -> two saves, room for two
    assert hold(plan) == CHECKPOINTS_OF_ROOM
    assert hold(plan, ("checkpoint.save_interval", "0")) == 0  # saving off: neither interval nor final saves
    assert hold(plan, ("checkpoint.save_interval", "100")) == 1  # only the save at the end
    assert hold(plan, ("checkpoint.save_interval", "500")) == 1  # the final save alone
    assert hold(plan, ("train.train_iters", "40")) == 1  # the run ends before the first interval save


def test_a_real_run_still_needs_room_for_two(plan):
    assert hold(edit(plan, **{"checkpoint.save_interval": None})) == CHECKPOINTS_OF_ROOM  # the recipe's interval: unknown
