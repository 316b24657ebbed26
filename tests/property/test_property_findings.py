"""Issue 14: the violations the property tests found, each as the minimal invocation that showed
it, so that a regression names itself (the property tests would find it again, but as a shrunk
example of some parametrized test)."""

from __future__ import annotations

import property_harness as H
import pytest


def run(world, *argv: str) -> H.Result:
    box = world.pool.take()
    try:
        result = H.invoke(list(argv), H.env_for(world, box), box.cwd)
    finally:
        world.pool.settle(box)
    H.count("findings", ["regression"])
    return result


def keeps_contract(result: H.Result) -> None:
    problems = H.violations(result)
    assert not problems, H.describe(result, problems)


@pytest.mark.parametrize("argv", [
    ["recommend", "--model", "llama3_8b", "--gpus", "8", "--dataset", "megatron-indexed", "--data-path=--"],
    ["recommend", "--model=--", "--gpus", "8"],
    ["recommend", "--model", "llama3_8b", "--gpus", "8", "--time=--"],
    ["status", "--", "--"],
])
def test_option_equals_double_dash_is_the_text(world, argv):
    """`--opt=--` is the text "--" (Python before 3.13 handed the command an empty list, and
    recommend --data-path=-- failed with AttributeError: 'list' object has no attribute 'partition')."""
    result = run(world, *argv)
    keeps_contract(result)  # the internal error is gone; whether "--" is a good data path is the command's
    assert argv[-1] != "--" or result.rc == 2, result.err


def test_preflight_ledger_name_too_long_is_no_ledger(world):
    """preflight --ledger with a 4,400-character name: the save-directory owner check reads it as
    no ledger (it crashed its group with OSError: File name too long). --verbose: the check's
    finding is a note, and preflight lists notes only when asked (issue 33)."""
    result = run(world, "preflight", str(world.plan), "--no-cluster", "--verbose", "--ledger", H.BIG_DIGITS)
    keeps_contract(result)
    assert "path.save_owner" in result.out, result.out


@pytest.mark.parametrize("argv, rc", [
    (["rollback", "\udcff", "--to", "100", "--dry-run"], 2),  # argv byte 0xff: RUN|DIR
    # the run-name rule (issue 32: `runs --name` takes only a name a run can have): refused, exit 2
    (["runs", "--name", "run\udc80", "--no-refresh"], 2),
    (["checkpoints", "/nonexistent/\udcff"], 2),
])
def test_run_name_not_utf8_is_no_run(world, argv, rc):
    """A name from argv bytes that are not UTF-8 names no run (SQLite refused the lone
    surrogate: internal error: UnicodeEncodeError)."""
    result = run(world, *argv)
    keeps_contract(result)
    assert result.rc == rc, result.err


def test_preflight_ledger_folder_is_one_line(world):
    """preflight --ledger ./ (a folder): the ledger's own one-line refusal, exit 2 (the paths
    group crashed with UserError: cannot open the run ledger, reported as a bug)."""
    result = run(world, "preflight", str(world.plan), "--no-cluster", "--ledger", "./")
    keeps_contract(result)
    assert result.rc == 2 and "cannot open the run ledger" in result.err, result.err


def test_plan_integer_over_4300_digits_is_one_line(world, tmp_path):
    """A Plan holding an integer of 4,400 digits: a YAML error at its line (it was an internal
    error: ValueError: Exceeds the limit (4300 digits) for integer string conversion)."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(world.plan_yaml.replace("nodes: 1\n", f"nodes: {H.BIG_DIGITS}\n"))
    assert H.BIG_DIGITS in plan.read_text()
    for argv in (["preflight", str(plan), "--no-cluster"], ["submit", str(plan), "--dry-run"]):
        result = run(world, *argv)
        keeps_contract(result)
        assert result.rc == 2 and "too many digits" in result.err and "line " in result.err, result.err
