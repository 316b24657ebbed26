"""Run names that would break state (issue 13, item 3): '|' (split Slurm's parsable output), '/'
(a log path into a directory that does not exist), spaces and CJK. They are refused where they
enter: `recommend --name` with one line naming the flag and the valid characters (exit 2), and a
Plan file holding one (edited by hand) at `submit` and `preflight`, one line naming the field
(exit 2), before anything reaches Slurm or the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli_helpers import run_cli
from mbridge_launch.runs import ledger as L

BAD_NAMES = ["a|b", "team/run", "my run", "训练运行"]
VALID = "letters, digits, '.', '_' and '-'"


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_recommend_refuses_the_name_with_one_line(name, mbl):
    out = mbl.run("recommend", "--model", "llama32_1b", "--gpus", "2", "--goal", "pretrain", "--dataset", "mock",
                  "--name", name)
    assert out.rc == 2 and out.stdout == ""
    line = one_line(out.stderr)
    assert "--name" in line and VALID in line and "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def good_plan(tmp_path_factory) -> dict:
    return recommend_answer_plan(tmp_path_factory.mktemp("names"))


def recommend_answer_plan(directory: Path) -> dict:
    out = directory / "plan.yaml"
    proc = run_cli("recommend", "--model", "llama32_1b", "--gpus", "2", "--goal", "pretrain", "--dataset", "mock",
                   "--name", "names-ok", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(out.read_text())


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("command", ["submit", "preflight"])
def test_a_plan_file_with_such_a_name_is_refused_with_one_line(command, name, good_plan, tmp_path, mbl):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({**good_plan, "name": name}, allow_unicode=True))
    extra = ["--yes", "--ledger", str(tmp_path / "ledger.db"), "--script-dir", str(tmp_path)] if command == "submit" else []
    out = mbl.run(command, str(plan), *extra)
    assert out.rc == 2, out.stderr
    line = one_line(out.stderr)
    assert "name:" in line and VALID in line and name in line
    if (tmp_path / "ledger.db").exists():  # refused before any ledger row is written
        with L.Ledger.open(tmp_path / "ledger.db") as ledger:
            assert ledger.list_runs(limit=None) == []


def test_the_safe_characters_are_accepted(good_plan, tmp_path):
    """The rule refuses only what breaks state: every character it names is accepted."""
    from mbridge_launch.plan.model import plan_from_dict

    assert plan_from_dict({**good_plan, "name": "Team.run_2-a"}).name == "Team.run_2-a"
