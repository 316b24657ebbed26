"""A path the machine refuses is one clear line, never an 'internal error' with a report request:
user-named outputs (-o, submit --script-dir) exit 2 naming the path; any other file-system failure exits 1."""

from __future__ import annotations

import errno

import pytest

from mbridge_launch.base.errors import UserError, writable
from mbridge_launch.cli import main as cli

MISSING_PARENT = "/proc/mbridge-launch-test/no-such-dir"  # /proc refuses new entries, even for root


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--top", "1"],
    ["recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100"],
])
def test_an_unwritable_output_file_names_the_path(capsys, argv):
    target = f"{MISSING_PARENT}/plan.yaml"
    code, _, err = run(capsys, *argv, "-o", target, "--lang", "en")
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error")]
    assert lines == [f"error: cannot write {target}: No such file or directory"], err
    assert "internal error" not in err and "Traceback" not in err and ".tmp" not in err


def test_writable_names_the_users_path_and_passes_other_errors():
    with pytest.raises(UserError) as caught:
        with writable("out/plan.yaml"):
            raise PermissionError(errno.EACCES, "Permission denied", "out/.plan.yaml.abc.tmp")
    assert caught.value.render("en") == "cannot write out/plan.yaml: Permission denied"
    assert caught.value.render("zh") == "无法写入 out/plan.yaml：Permission denied"
    with pytest.raises(ValueError):
        with writable("out/plan.yaml"):
            raise ValueError("not a file-system error")


def test_any_other_file_system_failure_is_one_line_exit_1(capsys, monkeypatch, tmp_path):
    from mbridge_launch.cli.commands import checkpoints

    def refuse(args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))

    monkeypatch.setattr(checkpoints, "run", refuse)
    code, _, err = run(capsys, "checkpoints", str(tmp_path), "--lang", "en")
    assert code == 1
    assert err.strip() == f"error: file-system error on {tmp_path / 'x'}: No space left on device"
    monkeypatch.setenv("MBRIDGE_LAUNCH_DEBUG", "1")
    with pytest.raises(OSError):
        cli.main(["checkpoints", str(tmp_path)])


@pytest.mark.parametrize("executor", ["sbatch", "nemo-run", "submitit"])
def test_an_unwritable_script_dir_stops_before_anything_is_submitted(executor):
    import plan_fixtures as pf
    from mbridge_launch.executors.launch import render_plan, schedule

    with pytest.raises(UserError) as caught:
        schedule(render_plan(pf.single_node_h100(), executor, MISSING_PARENT))
    assert caught.value.render("en") == f"cannot write {MISSING_PARENT}: No such file or directory"


@pytest.mark.parametrize("command", ["preflight", "submit"])
def test_a_plan_file_that_is_not_text_is_one_clear_line(capsys, tmp_path, command):
    plan = tmp_path / "plan.yaml"
    plan.write_bytes(b"name: x\n\xa0\xff\n")
    code, _, err = run(capsys, command, str(plan), "--lang", "en")
    assert code == 2
    assert err.strip() == f"error: cannot read {plan}: not UTF-8 text (byte 0xa0 at offset 8)"
    code, _, err = run(capsys, command, str(plan), "--lang", "zh")
    assert code == 2 and "不是 UTF-8 文本" in err


def test_an_os_error_without_a_path_still_says_what_happened(capsys, monkeypatch, tmp_path):
    from mbridge_launch.cli.commands import checkpoints

    def refuse(args):
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    monkeypatch.setattr(checkpoints, "run", refuse)
    code, _, err = run(capsys, "checkpoints", str(tmp_path), "--lang", "en")
    assert code == 1 and err.strip() == "error: the operating system refused: Connection reset by peer"
