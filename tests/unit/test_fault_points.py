"""Test-only switches are out of a user's reach (issue 32 item 9).

The product's fault points (base/faults.py) do nothing unless code installs a hook; the tests'
variables (MBL_GATE_CRASH_AFTER, ...) become hooks only through tests/fault_hooks/sitecustomize.py,
which the tests put on PYTHONPATH of the commands they start (tests/cli_helpers.py). A user's
environment with the same variables, in a process without that plugin (an installed mbridge-launch),
changes nothing.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_fixtures import make_save_dir
from cli_helpers import FAULT_HOOKS, ROOT
from mbridge_launch.base import faults

FAULT_VARIABLES = {"MBL_GATE_CRASH_AFTER": "call", "MBL_GATE_INTERRUPT_AT": "sbatch",
                   "MBL_ROLLBACK_CRASH_AFTER": "pt_written", "MBL_ROLLBACK_PAUSE_AFTER": "locked",
                   "MBL_ROLLBACK_PAUSE_FILE": "/nonexistent/pause"}

# every fault point of the product, reached in a fresh process
REACH_EVERY_POINT = """
from mbridge_launch.gate.submit import _crash_point
from mbridge_launch.rollback.journal import crash_point
for where in ("ledger", "call", "sbatch"):
    _crash_point(where)
for step in ("locked", "journal_written", "pt_written", "txt_written", "moved_0", "journal_done"):
    crash_point(step)
print("reached every fault point")
"""


def _user_env(**extra: str) -> dict[str, str]:
    """A user's environment: the test plugin's folder nowhere on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def test_a_fault_point_without_a_hook_does_nothing_and_a_hook_is_called():
    seen: list[str] = []
    faults.fault_point("gate.call")
    faults.install("gate.call", seen.append)
    try:
        faults.fault_point("gate.call")
        faults.fault_point("gate.sbatch")
    finally:
        faults.uninstall("gate.call")
    faults.fault_point("gate.call")
    assert seen == ["gate.call"]


def test_a_users_fault_variables_do_not_crash_an_installed_run():
    out = subprocess.run([sys.executable, "-c", REACH_EVERY_POINT], capture_output=True, text=True, cwd=ROOT,
                         env=_user_env(**FAULT_VARIABLES), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "reached every fault point"


@pytest.mark.parametrize("variable,value", [("MBL_GATE_CRASH_AFTER", "call"), ("MBL_GATE_CRASH_AFTER", "sbatch"),
                                            ("MBL_ROLLBACK_CRASH_AFTER", "pt_written")])
def test_the_test_plugin_turns_the_variable_into_a_crash(variable, value):
    env = _user_env(**{variable: value}, PYTHONPATH=str(FAULT_HOOKS))
    out = subprocess.run([sys.executable, "-c", REACH_EVERY_POINT], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=60)
    assert out.returncode == 137 and "reached" not in out.stdout, (out.returncode, out.stdout, out.stderr)


def test_a_users_rollback_crash_variable_does_not_stop_a_rollback(tmp_path, mbl):
    """The CLI as installed (no plugin on PYTHONPATH): the rollback completes."""
    save = make_save_dir(tmp_path, (100, 200, 300))
    env = _user_env(MBL_ROLLBACK_CRASH_AFTER="pt_written", MBRIDGE_LAUNCH_STATE_DIR=str(tmp_path / "state"),
                    MBRIDGE_LAUNCH_LANG="en")
    out = subprocess.run([*mbl.command, "rollback", str(save), "--to", "100", "--yes"], capture_output=True,
                         text=True, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "100"


def test_no_module_of_the_product_reads_a_test_variable():
    """No MBL_* name in the product's code (every MBL_* variable is the tests' own)."""
    found = []
    for folder in (ROOT / "mbridge_launch", ROOT / "executors"):
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("MBL_"):
                    found.append(f"{Path(path).relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert not found, found


def test_the_watcher_exports_only_the_names_it_reads(monkeypatch, tmp_path):
    """The watcher job's --export list: its fixed names, the Plan's env and (when it may resubmit)
    the names the resubmitted job needs; never a name family of the submitter's shell."""
    from mbridge_launch.gate.watcher_job import WATCHER_ENV_NAMES, watcher_export_names
    from plan_fixtures import single_node_h100, with_changes

    for name in ("MBL_GATE_CRASH_AFTER", "MBL_ROLLBACK_PAUSE_AFTER", "MBRIDGE_LAUNCH_API_TOKEN", "LC_SECRET_THING"):
        monkeypatch.setenv(name, "x")
    plan = with_changes(single_node_h100(), cluster={"env": ["WANDB_PROJECT"], "secrets": ["HF_TOKEN"]},
                        auto_rollback={"enabled": True, "max_rollbacks": 0})
    names = watcher_export_names(plan)
    assert names == [*WATCHER_ENV_NAMES, "WANDB_PROJECT"]
    assert not [n for n in names if n.startswith("MBL_")]
    # the names it reads: every MBRIDGE_LAUNCH_* name in the list is one the product's code uses
    product_text = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "mbridge_launch").rglob("*.py")
                             if p.name != "watcher_job.py")
    unread = [n for n in WATCHER_ENV_NAMES if n.startswith("MBRIDGE_LAUNCH_") and n not in product_text
              and n != "MBRIDGE_LAUNCH_WATCHER_POLL"]  # read by watcher_job.py itself
    assert not unread, unread
