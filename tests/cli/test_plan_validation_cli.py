"""A bad Plan file is refused when it is loaded, by every command that reads one, with the clean
validation error (exit 2, the field, the bad value, what is valid; never a traceback, never an
estimate computed from the bad value). The three examples are those of issue 12."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from plan_fixtures import PLANS_DIR

pytestmark = pytest.mark.usefixtures("english")


def bad_plan_file(tmp_path: Path, section: str, field: str, value: object, **sections: dict) -> Path:
    """tests/golden/plans/two_node_h100.yaml with `section.field` set to `value` (and the other
    sections' fields given), written as a hand-edited Plan file."""
    data = yaml.safe_load((PLANS_DIR / "two_node_h100.yaml").read_text(encoding="utf-8"))
    data.setdefault(section, {})[field] = value
    for name, fields in sections.items():
        data.setdefault(name, {}).update(fields)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def state_env(tmp_path: Path) -> dict[str, str]:
    return {"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state"), "MBRIDGE_LAUNCH_CACHE_DIR": str(tmp_path / "cache")}


def assert_refused(result, *expected: str) -> None:
    assert result.rc == 2, (result.rc, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("error: invalid plan "))
    for text in expected:
        assert text in line, (text, result.stderr)


LOADERS = [
    ("preflight", "--no-cluster"),
    ("submit", "--executor", "sbatch", "--dry-run"),
    ("submit", "--executor", "sbatch", "--force", "--yes", "--reason", "test"),
]


@pytest.mark.parametrize("command", LOADERS, ids=lambda c: " ".join(c[:1] + c[3:4]))
def test_plan_negative_tp_is_refused_at_load(command, tmp_path, mbl):
    path = bad_plan_file(tmp_path, "parallelism", "tp", -4)
    result = mbl.run(command[0], path, *command[1:], env=state_env(tmp_path))
    assert_refused(result, "parallelism.tp: -4", "at least 1")
    assert "GB" not in result.stdout and "fits" not in result.stdout  # no memory estimate from tp=-4
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").rglob("*.sbatch"))


@pytest.mark.parametrize("command", LOADERS, ids=lambda c: " ".join(c[:1] + c[3:4]))
def test_plan_time_4h_is_refused_at_load_even_with_force(command, tmp_path, mbl):
    path = bad_plan_file(tmp_path, "cluster", "time", "4h")
    result = mbl.run(command[0], path, *command[1:], env=state_env(tmp_path))
    assert_refused(result, 'cluster.time: "4h"', "HH:MM:SS", "D-HH:MM:SS")


@pytest.mark.parametrize("command", LOADERS, ids=lambda c: " ".join(c[:1] + c[3:4]))
def test_plan_auto_rollback_window_zero_is_refused_at_load(command, tmp_path, mbl):
    path = bad_plan_file(tmp_path, "auto_rollback", "window", 0, **{"auto_rollback": {"enabled": True}})
    result = mbl.run(command[0], path, *command[1:], env=state_env(tmp_path))
    assert_refused(result, "auto_rollback.window: 0", "at least 1")


def test_watch_of_a_recorded_run_with_window_zero_is_refused_at_load(tmp_path, mbl):
    """A ledger run whose stored Plan says window 0 (recorded before the Plan was validated):
    `watch` gives the validation error instead of crashing in the loss monitor; `status`, which
    needs no Plan, still shows the run."""
    from mbridge_launch.runs.ledger import Ledger

    text = bad_plan_file(tmp_path, "auto_rollback", "window", 0, auto_rollback={"enabled": True}).read_text()
    db = tmp_path / "ledger.db"
    with Ledger.open(db) as ledger:
        run = ledger.begin_submission(name="llama3-8b-2node", plan_hash="0" * 16, plan_yaml=text, executor="sbatch")
        ledger.mark_submitted(run.id, ["4242"])
        ledger.set_state(run.id, "completed", slurm_state="COMPLETED")
    result = mbl.run("watch", str(run.id), "--ledger", db, env=state_env(tmp_path))
    assert_refused(result, f"ledger run {run.id}", "auto_rollback.window: 0", "at least 1")
    status = mbl.run("status", str(run.id), "--ledger", db, env=state_env(tmp_path))
    assert status.rc == 0 and "Traceback" not in status.stderr and "llama3-8b-2node" in status.stdout


def test_every_error_of_a_plan_file_is_listed_in_both_languages(tmp_path, mbl):
    path = bad_plan_file(tmp_path, "parallelism", "tp", -4, cluster={"time": "4h", "gpu_type": "a100"},
                         auto_rollback={"window": 0})
    for lang, head in (("en", "invalid plan"), ("zh", "无效")):
        result = mbl.run("preflight", path, "--no-cluster", env=state_env(tmp_path), lang=lang)
        assert result.rc == 2 and "Traceback" not in result.stderr
        lines = result.stderr.splitlines()
        assert head in lines[0] and "4" in lines[0]  # the count line
        detail = [line for line in lines[1:] if line.startswith("  - ")]
        assert len(detail) == 4, result.stderr
        for field in ("parallelism.tp", "cluster.gpu_type", "cluster.time", "auto_rollback.window"):
            assert any(field in line for line in detail), (field, result.stderr)


@pytest.mark.parametrize("flags,flag,text", [
    (("--mount", "data"), "--mount", "absolute path"),
    (("--mount", "/lustre:lustre"), "--mount", "absolute path"),
    (("--dataset", "megatron-indexed", "--data-path", "0:/d/a", "--data-path", "1:/d/b"), "--data-path", "above 0"),
    (("--time", "4h"), "--time", "4h"),
    (("--time", "0"), "--time", "0"),
])
def test_recommend_refuses_what_the_plan_would_refuse_naming_its_flag(flags, flag, text, tmp_path, mbl):
    """recommend agrees with the Plan: a flag value the Plan would refuse is refused as that flag,
    never an internal error from building the Plan."""
    result = mbl.run("recommend", "--model", "llama3_8b", "--gpus", "8", *flags, "-o", tmp_path / "plan.yaml")
    assert result.rc == 2 and "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert f"invalid value for {flag}" in result.stderr and text in result.stderr
    assert not (tmp_path / "plan.yaml").exists()
