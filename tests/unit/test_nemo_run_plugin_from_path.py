"""MBridgePlugin.from_plan takes a Plan or the path of a Plan file (issue 33, item 8: a path was a
traceback); a bad file is the same one-line UserError `submit` gives."""

from __future__ import annotations

from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.base.errors import UserError
from mbridge_launch.plan.model import save_plan

pytest.importorskip("nemo_run")


def _plugin_fields(plugin) -> dict:
    return {name: getattr(plugin, name) for name in ("env_vars", "container_mounts", "container_env", "srun_args",
                                                     "setup_lines", "signal", "signal_args")}


@pytest.mark.parametrize("as_text", [True, False])
def test_a_path_gives_the_same_plugin_as_the_plan(tmp_path: Path, as_text: bool):
    from mbridge_launch.executors.nemo_run import MBridgePlugin

    plan = pf.four_node_gb200()
    path = save_plan(plan, tmp_path / "plan.yaml")
    from_path = MBridgePlugin.from_plan(str(path) if as_text else path)
    assert _plugin_fields(from_path) == _plugin_fields(MBridgePlugin.from_plan(plan))
    assert from_path.container_mounts == ["/lustre:/lustre"]


def test_a_missing_or_bad_file_is_one_user_error(tmp_path: Path):
    from mbridge_launch.executors.nemo_run import MBridgePlugin

    with pytest.raises(UserError) as missing:
        MBridgePlugin.from_plan(tmp_path / "nope.yaml")
    assert "nope.yaml" in missing.value.render("en") and "\n" not in missing.value.render("en")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [\n")
    with pytest.raises(UserError):
        MBridgePlugin.from_plan(bad)


def test_anything_else_is_a_type_error_that_says_what_it_takes():
    from mbridge_launch.executors.nemo_run import MBridgePlugin

    with pytest.raises(TypeError, match="a Plan or the path of a Plan file, not int"):
        MBridgePlugin.from_plan(3)
