"""The command and the report: exit codes, JSON shape, text in English and Chinese, every message
in both languages with the same placeholders, the progress bar, and no writes without a cluster."""

from __future__ import annotations

import io
import json
import os
import re
import string

import pytest

from mbridge_launch.base.i18n import messages
from mbridge_launch.preflight.model import Check, Report
from mbridge_launch.preflight.progress import Progress
from preflight_fixtures import codes, edit, make_blend, preflight_json, valid_plan, write


@pytest.fixture
def plan(shared_dir):
    return valid_plan(shared_dir)


def test_report_exit_codes_and_json():
    report = Report([Check("plan.mock_pretrain", "info"), Check("data.duplicate_prefixes", "warning", {"count": 2})])
    assert report.ok and report.exit_code == 0
    report.add([Check("data.idx_missing", "error", {"count": 1, "total": 2, "examples": "/d/a"}, subject="/d/a")])
    assert not report.ok and report.exit_code == 1
    data = report.to_json("en")
    assert data["ok"] is False and set(data["checks"][0]) == {"code", "severity", "message", "hint", "subject"}
    assert data["checks"][2]["message"] == "1 of 2 prefixes has no .idx file: /d/a"
    assert data["checks"][2]["hint"].startswith("every prefix needs") and data["checks"][2]["subject"] == "/d/a"
    with pytest.raises(ValueError):
        Check("x", "fatal")


def test_every_preflight_message_has_both_languages_with_the_same_placeholders():
    keys = [k for k in messages("en") if k.startswith("preflight.")]
    assert len(keys) > 150
    for key in keys:
        en, zh = (messages(lang)[key] for lang in ("en", "zh"))
        forms = lambda entry: list(entry.values()) if isinstance(entry, dict) else [entry]  # noqa: E731
        fields = lambda text: sorted(f for _, f, _, _ in string.Formatter().parse(text) if f)  # noqa: E731
        assert all(forms(en) + forms(zh)) and len({str(fields(f)) for f in forms(en) + forms(zh)}) == 1, key
        assert all(re.search(r"[\u4e00-\u9fff]", f) for f in forms(zh)), f"{key}: Chinese text expected"


def test_valid_plan_text_output(plan, tmp_path, mbl):
    result = mbl.run("preflight", str(write(plan, tmp_path)), "--no-cluster", "--verbose")  # notes listed
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("preflight of pf-valid (plan ") and lines[-1].startswith("passed: 0 errors")
    assert any("data.blend_ok" in line and "2 of 2 prefixes" in line for line in lines)
    assert "cluster checks skipped (--no-cluster)" in result.stdout and "\r" not in result.stdout + result.stderr
    short = mbl.run("preflight", str(write(plan, tmp_path)), "--no-cluster")  # without --verbose: counted only
    assert "data.blend_ok" not in short.stdout and short.stdout.splitlines()[-1].endswith("--verbose lists the notes")


def test_failing_plan_text_output_in_chinese(plan, tmp_path, mbl):
    os.unlink(plan.dataset.data_paths[0] + ".idx")
    result = mbl.run("preflight", str(write(plan, tmp_path)), "--no-cluster", "--lang", "zh")
    assert result.returncode == 1
    first = result.stdout.splitlines()[1]
    assert first.split()[0] == "错误" and "data.idx_missing" in first and "缺少 .idx 文件" in first
    assert "提示：" in result.stdout and result.stdout.splitlines()[-1].startswith("未通过：")


def test_json_lists_errors_first_in_text_but_in_run_order_in_json(plan, tmp_path):
    broken = edit(plan, **{"parallelism.dp": 4})  # world mismatch (plan group) ...
    os.unlink(plan.dataset.data_paths[1] + ".bin")  # ... and a data error
    rc, report = preflight_json(write(broken, tmp_path), "--no-cluster")
    assert rc == 1 and report["ok"] is False
    found = codes(report, "error")
    assert found.index("plan.world_mismatch") < found.index("data.bin_missing")


def test_python_api_takes_a_plan_or_its_file(plan, tmp_path):
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.preflight.runner import run_preflight

    path = write(plan, tmp_path)
    by_object, by_path = run_preflight(plan, cluster=False), run_preflight(path, cluster=False)
    assert by_object.ok and by_object.codes() == by_path.codes()
    path.write_text(path.read_text() + "surprise: 1\n")
    with pytest.raises(UserError) as invalid:
        run_preflight(path, cluster=False)
    assert invalid.value.exit_code == 2 and "surprise" in str(invalid.value)


def test_unreachable_cluster_is_a_warning(plan, tmp_path):
    env = dict(os.environ, SLURM_CONF=str(tmp_path / "no-slurm.conf"))
    rc, report = preflight_json(write(plan, tmp_path), env=env)
    assert rc == 0 and "cluster.unreachable" in codes(report, "warning")


def test_no_cluster_run_writes_nothing(plan, tmp_path, shared_dir):
    """Without --on-nodes preflight only reads: the plan's directories, the working directory,
    HOME and the cache stay exactly as they were."""
    home, cache, cwd = tmp_path / "home", tmp_path / "cache", tmp_path / "cwd"
    home.mkdir(), cwd.mkdir()
    path = write(plan, tmp_path / "plan")

    def snap():
        return {os.path.join(d, n): os.lstat(os.path.join(d, n)).st_mtime_ns
                for root in (shared_dir, tmp_path) for d, ds, fs in os.walk(root) for n in ds + fs}

    before = snap()
    env = dict(os.environ, HOME=str(home), MBRIDGE_LAUNCH_CACHE_DIR=str(cache), SLURM_CONF=str(tmp_path / "none.conf"))
    rc, _ = preflight_json(path, env=env, cwd=cwd)
    assert rc == 0 and snap() == before and not cache.exists()


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal_and_only_when_slow():
    tty = _Tty()
    with Progress(tty, "data", 100, delay_s=0) as bar:
        for _ in range(100):
            bar.advance()
    assert "[" + "#" * 30 + "] 100/100" in tty.getvalue() and tty.getvalue().endswith("\r")
    quick = _Tty()
    with Progress(quick, "data", 100) as bar:  # default delay: a fast task draws nothing
        bar.advance(100)
    assert quick.getvalue() == ""
    pipe = io.StringIO()
    with Progress(pipe, "data", 10, delay_s=0) as bar:
        bar.advance(10)
    assert pipe.getvalue() == ""


SLOW_SCAN = """
import sys, time
import mbridge_launch.preflight.data_checks as D
real = D.check_prefix
def slow(prefix):  # a blend on a slow file system: 0.1 s per prefix
    time.sleep(0.1)
    return real(prefix)
D.check_prefix = slow
from mbridge_launch.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_cli_draws_a_progress_bar_on_a_terminal_when_a_check_is_slow(plan, tmp_path):
    """The command line, stderr on a pseudo-terminal, a data check that takes ~1 s: the bar is
    drawn there (and erased); with stderr a pipe, nothing but the report is printed."""
    import pty
    import subprocess
    import sys

    blend = make_blend(tmp_path / "blend", tuple(f"p{i}" for i in range(12)))
    path = write(edit(plan, **{"dataset.data_paths": blend, "dataset.weights": None}), tmp_path / "p")
    argv = [sys.executable, "-c", SLOW_SCAN, "preflight", str(path), "--no-cluster"]
    env = {**os.environ, "MBRIDGE_LAUNCH_LANG": "en"}
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed: the process is gone
                break
            if not chunk:
                break
            drawn += chunk
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
    text = drawn.decode()
    assert proc.returncode == 0, out
    assert "\rdata [" in text and "] 12/12" in text and text.rstrip(" ").endswith("\r")  # drawn, then erased
    assert "\r" not in out.decode()  # the report itself (stdout) has no bar
    piped = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert piped.returncode == 0 and "\r" not in piped.stderr and "data [" not in piped.stderr


def test_json_is_valid_for_every_check_of_a_bad_plan(plan, tmp_path, mbl):
    """A plan broken in many ways renders every message in both languages (no missing params)."""
    bad = edit(plan, mode="sft", env_vars={"HF_TOKEN": "x"}, **{
        "dataset.selector": "mock", "parallelism.tp": 3,
        "cluster.container_image": "Bad Image", "checkpoint.save": "/proc/x",
        "cluster.container_mounts": [{"source": "/nonexistent-mbl", "target": "/rel"}]})
    for lang in ("en", "zh"):
        result = mbl.run("preflight", str(write(bad, tmp_path / lang)), "--no-cluster", "--format", "json", "--lang", lang)
        data = json.loads(result.stdout)
        assert result.returncode == 1 and len(codes(data, "error")) >= 8
        assert all("{" not in c["message"] and c["message"] for c in data["checks"]), data
