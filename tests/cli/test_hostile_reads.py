"""Issue 14, bounded reads and secrets never echoed: files other people can write (trackers, Plans,
logs, journals) pointing at /proc/self/environ, /dev/zero, FIFOs or / are described in one line,
never echoed, never read without limit, never waited on, never walked."""

from __future__ import annotations

import os
import stat
import time
import uuid
from pathlib import Path

import pytest
import yaml

from checkpoint_fixtures import hostile_commands, make_hostile, make_save_dir
from cli_helpers import one_line_error
from mbridge_launch.rollback import checkpoints as C
from preflight_fixtures import valid_plan, write

TIMEOUT = 30  # every command here answers in a few seconds; a hang fails instead of blocking CI




def secret_env() -> tuple[str, dict[str, str]]:
    marker = f"hostile-secret-{uuid.uuid4().hex}"
    return marker, {"MBL_TEST_CI_TOKEN": marker}


def inside(path: str | Path, root: Path) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base + os.sep)


def lstat_listing(root: Path) -> dict[str, tuple]:
    """Every entry under root, symlinks and FIFOs included, by lstat (nothing followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):  # followlinks=False: links are entries
        for name in [".", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, link)
    return out


@pytest.fixture
def plan_with_save(shared_dir):
    """A Plan whose checkpoint.save is shared_dir/ckpt, holding complete iterations 100 and 200."""
    save = make_save_dir(shared_dir, iterations=(100, 200))
    return write(valid_plan(shared_dir), shared_dir / "plan"), save


# ---------------------------------------------------------------------- secrets never echoed
def test_tracker_symlink_to_proc_self_environ_is_not_echoed(plan_with_save, mbl):
    plan, save = plan_with_save
    (save / C.PT_TRACKER).unlink()  # Bridge falls back to the .txt tracker
    (save / C.TXT_TRACKER).unlink()
    (save / C.TXT_TRACKER).symlink_to("/proc/self/environ")
    marker, env = secret_env()
    outputs = []
    for args in (("preflight", str(plan), "--no-cluster"), ("preflight", str(plan), "--no-cluster", "--format", "json"),
                 ("checkpoints", str(save)), ("checkpoints", str(save), "--format", "json")):
        result = mbl.run(*args, env=env, timeout=TIMEOUT)
        assert marker not in result.stdout + result.stderr, args
        assert "MBL_TEST_CI_TOKEN" not in result.stdout + result.stderr, args
        outputs.append(result)
    text, report = outputs[0], outputs[1].json()
    broken = [c for c in report["checks"] if c["code"] == "path.resume_broken"]
    assert text.rc == 1 and broken and "symlink leaving the save directory" in broken[0]["message"]
    assert "resuming would fail" in text.stdout
    assert outputs[3].json()["trackers"]["txt_iteration"] is None


def test_tracker_holding_a_secret_is_described_by_size_and_kind(plan_with_save, mbl):
    plan, save = plan_with_save
    (save / C.PT_TRACKER).unlink()
    marker, env = secret_env()
    (save / C.TXT_TRACKER).write_text(f"TOKEN={marker}\n")
    size = len(f"TOKEN={marker}\n")
    for args in (("preflight", str(plan), "--no-cluster"), ("checkpoints", str(save), "--format", "json")):
        result = mbl.run(*args, env=env, timeout=TIMEOUT)
        assert marker not in result.stdout + result.stderr, args
        assert f"not an iteration: {size} bytes, text" in result.stdout, result.stdout
    (save / C.TXT_TRACKER).write_bytes(b"\x00\x01secret")
    assert C.resolve_resume(save).reason == "not an iteration: 8 bytes, not text"
    (save / C.TXT_TRACKER).write_text("²")  # not an ASCII digit: described, no ValueError
    assert not C.resolve_resume(save).loadable


# ---------------------------------------------------------------------- special files
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_plan_pointing_at_dev_zero_is_one_line(tmp_path, mbl, device):
    link = tmp_path / "plan.yaml"
    link.symlink_to(device)
    for plan in (str(link), device):
        line = one_line_error(mbl.run("preflight", plan, "--no-cluster", timeout=TIMEOUT))
        assert plan in line and "a device, not a regular file" in line, line
    (tmp_path / "dir.yaml").mkdir()
    assert "a directory" in one_line_error(mbl.run("preflight", str(tmp_path / "dir.yaml"), "--no-cluster"))


def test_fifo_plan_does_not_hang(tmp_path, mbl, plan_with_save):
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)  # no writer: a plain open() blocks forever
    start = time.monotonic()
    line = one_line_error(mbl.run("preflight", str(fifo), "--no-cluster", timeout=TIMEOUT))
    assert "a FIFO (named pipe), not a regular file" in line and str(fifo) in line
    _plan, save = plan_with_save
    line = one_line_error(mbl.run("checkpoints", str(save), "--log", str(fifo), timeout=TIMEOUT))
    assert "FIFO" in line and str(fifo) in line
    assert time.monotonic() - start < TIMEOUT


def test_oversized_plan_is_refused_before_parsing(tmp_path, mbl):
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * 500_000)  # 5 MB: over the Plan limit
    line = one_line_error(mbl.run("preflight", str(big), "--no-cluster", timeout=TIMEOUT))
    assert "is larger than 4194304 bytes, the most a Plan may be" in line


# ---------------------------------------------------------------------- symlinks out of the save directory
def test_tracker_iter_symlink_to_root_is_not_walked(tmp_path, monkeypatch, mbl):
    save = make_save_dir(tmp_path, iterations=(100,))
    (save / C.PT_TRACKER).unlink()
    (save / C.TXT_TRACKER).write_text("500")
    (save / "iter_0000500").symlink_to("/")
    walked = []
    real_walk = os.walk

    def recording_walk(top, *args, **kwargs):
        walked.append(os.path.realpath(top))
        return real_walk(top, *args, **kwargs) if inside(top, save) else iter(())  # never walk /

    monkeypatch.setattr(C.os, "walk", recording_walk)
    resolution = C.resolve_resume(save)
    info = C.inspect_iter_dir(save / "iter_0000500")  # what rollback --to 500 inspects
    assert all(inside(top, save) for top in walked), walked  # old code: os.walk("/") via the link
    assert not resolution.loadable and "symlink leaving the save directory" in resolution.reason
    assert not info.complete and info.size_bytes == 0
    result = mbl.run("checkpoints", str(save), timeout=TIMEOUT)
    assert result.rc == 0 and "symlink leaving the save directory" in result.stdout


# ---------------------------------------------------------------------- YAML
def plan_text(shared_dir: Path) -> str:
    return write(valid_plan(shared_dir), shared_dir / "plan").read_text()


def test_plan_yaml_duplicate_keys_refused(shared_dir, tmp_path, mbl):
    text = plan_text(shared_dir)
    lines = text.count("\n")
    path = tmp_path / "dup.yaml"
    path.write_text(text + "name: someone-elses-run\n")  # silently won before
    line = one_line_error(mbl.run("preflight", str(path), "--no-cluster", timeout=TIMEOUT))
    assert f"{path} line {lines + 1}: the key name appears twice" in line, line


@pytest.mark.parametrize("shape", ["block", "flow"])
def test_plan_yaml_deep_nesting_refused(tmp_path, mbl, shape):
    depth = 20_000
    text = ("x:\n  " + "- " * depth + "leaf\n" if shape == "block"  # 40 KB, 20,000 sequences deep
            else "x: " + "[" * depth + "]" * depth + "\n")
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    line = one_line_error(mbl.run("preflight", str(path), "--no-cluster", timeout=TIMEOUT))
    assert str(path) in line and ("nested deeper than 64 levels" in line or "nesting depth" in line), line
    assert "RecursionError" not in line


@pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False), reason="PyYAML built without libyaml")
def test_large_plan_uses_libyaml(shared_dir, tmp_path, monkeypatch):
    from mbridge_launch.plan.model import load_plan

    data = yaml.safe_load(plan_text(shared_dir))
    data["overrides"][0]["reason"] = "x" * 3_000_000  # a 3 MB Plan: within the limit
    path = tmp_path / "large.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    loaders = []
    real_load = yaml.load

    def spy(stream, Loader):  # noqa: N803 - PyYAML's parameter name
        loaders.append(Loader)
        return real_load(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "load", spy)
    plan = load_plan(path)
    assert plan.name == data["name"] and path.stat().st_size > 3_000_000
    assert loaders and all(issubclass(loader, yaml.CSafeLoader) for loader in loaders), loaders


# ---------------------------------------------------------------------- --poll
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "0.01"])
def test_logs_poll_zero_negative_nan_inf_refused(tmp_path, mbl, value):
    env = {"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}
    for command in (("logs", "some-run", "-f"), ("watch", "some-run")):
        result = mbl.run(*command, f"--poll={value}", env=env, timeout=TIMEOUT)
        line = one_line_error(result)
        assert "--poll" in line and "finite number of seconds, at least 0.05" in line, line


# ---------------------------------------------------------------------- a directory full of hostile links
def test_hostile_symlink_directory_prints_nothing_and_changes_nothing(plan_with_save, tmp_path, mbl):
    plan, save = plan_with_save
    make_hostile(save)  # the construction benchmarks/speed.py times too
    marker, env = secret_env()
    env["MBRIDGE_LAUNCH_STATE_DIR"] = str(tmp_path / "state")
    before = lstat_listing(save)
    for args in hostile_commands(plan, save):
        # a hang or a walk of / ends in TIMEOUT (a failure); speed itself is not asserted here
        result = mbl.run(*args, env=env, timeout=TIMEOUT)
        assert result.rc in (0, 1, 2), (args, result.rc, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        assert marker not in result.stdout + result.stderr and "MBL_TEST_CI_TOKEN" not in result.stdout, args
        assert "\x00" not in result.stdout, args
        assert lstat_listing(save) == before, args


def test_fifo_data_index_does_not_hang(tmp_path):
    """A data prefix whose .idx is a FIFO with no writer: preflight's index check says so at once."""
    import subprocess
    import sys

    prefix = tmp_path / "blend"
    (tmp_path / "blend.bin").write_bytes(b"\0" * 64)
    os.mkfifo(tmp_path / "blend.idx")
    code = ("import sys; from mbridge_launch.preflight.megatron_index import check_prefix; "
            "r = check_prefix(sys.argv[1]); print(r.problem)")
    out = subprocess.run([sys.executable, "-c", code, str(prefix)], capture_output=True, text=True,
                         timeout=TIMEOUT, env={**os.environ, "MBRIDGE_LAUNCH_LANG": "en"})
    assert out.returncode == 0 and out.stdout.strip() == "idx_unreadable", (out.stdout, out.stderr)
