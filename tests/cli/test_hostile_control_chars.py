"""Issue 14, raw control characters: nothing the tool prints puts a raw ESC, CR, NUL, DEL, C1
control or bidi override on the terminal (base/escape.py is the one escaping function, and the CLI
writes through it), a value holding a newline cannot split a one-line message, JSON output stays
valid JSON of the exact value, dry-run scripts hold such values in bash's $'...' form, and --help
into a closed pipe or onto a full device is one line and exit 1.

The CLI tests read the raw bytes of stdout and stderr (not text decoded by the test)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import CLI, ROOT, cli_env
from mbridge_launch.base.escape import EscapingStream, escape_controls, escaped_output, json_printable, one_line
from mbridge_launch.base.quoting import sh
from mbridge_launch.runs import ledger as L
from preflight_fixtures import valid_plan, write

ESC_CLEAR = "\x1b[2J"
BIDI = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: shows text reversed
CSI_8BIT = "\u009b"  # a C1 control some terminals read as ESC [
# what may never reach the terminal raw: C0 controls but \n (and \t where allowed), DEL, C1 (UTF-8
# \xc2\x80-\x9f), U+2028/U+2029 and the bidi embeddings, overrides and isolates
_C0 = rb"[\x00-\x08\x0a-\x1f\x7f]"
_WIDE = rb"\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]"


def assert_clean(data: bytes, *, tab: bool = False) -> str:
    """`data` (stdout or stderr) holds no raw control character; returned decoded (strict UTF-8:
    a lone surrogate written raw would fail here)."""
    c0 = _C0.replace(rb"\x0a", rb"\x0a\x09" if tab else rb"\x0a")
    for line in data.split(b"\n"):
        found = re.search(c0 + rb"|" + _WIDE, line)
        assert found is None, (found, line)
    return data.decode("utf-8")


def run_raw(*args: str | os.PathLike, lang: str = "en", **popen) -> subprocess.CompletedProcess:
    """The command in a fresh process; stdout and stderr as bytes."""
    options = {"capture_output": True, "stdin": subprocess.DEVNULL, "cwd": ROOT, "timeout": 120, **popen}
    return subprocess.run([*CLI, *map(str, args)], env=cli_env(lang=lang), **options)


def both_clean(proc: subprocess.CompletedProcess) -> tuple[str, str]:
    return assert_clean(proc.stdout or b""), assert_clean(proc.stderr or b"")


def one_line_stderr(proc: subprocess.CompletedProcess, code: int) -> str:
    out, err = both_clean(proc)
    assert proc.returncode == code, (proc.returncode, out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    return lines[0]


# ---------------------------------------------------------------------- the escaping function


def test_escape_controls_fast_path_returns_text_unchanged():
    text = "plain text, 中文, ü"
    assert escape_controls(text, one_line=True) is text
    assert escape_controls("a\nb\tc", one_line=False) == "a\nb\tc"


def test_escape_controls_keeps_cjk_and_ideographic_space():
    text = "检查点\u3000目录\u00a0ok"  # U+3000 and U+00A0: category Zs, not isprintable()
    assert escape_controls(text, one_line=True) == text


def test_escape_controls_writes_python_ascii_form():
    text = f"a{ESC_CLEAR}\r\x00\x7f{CSI_8BIT}{BIDI}\u2028\U000e0001b"
    assert escape_controls(text, one_line=True) == "a\\x1b[2J\\r\\x00\\x7f\\x9b\\u202e\\u2028\\U000e0001b"


def test_escape_controls_one_line_escapes_newline_and_tab():
    assert escape_controls("a\nb\tc", one_line=True) == "a\\nb\\tc"
    assert one_line(Path("/x\ny")) == "/x\\ny"


def test_escape_controls_undecodable_file_name_surrogates():
    name = os.fsdecode(b"ckpt-\xff\x80")  # surrogate escapes U+DCFF U+DC80
    assert escape_controls(name, one_line=True) == "ckpt-\\udcff\\udc80"


def test_escape_controls_many_distinct_characters():
    text = "".join(chr(c) for c in range(0x20)) + "".join(chr(c) for c in range(0x7f, 0xa0))
    escaped = escape_controls(text, one_line=True)
    assert escaped == ascii(text)[1:-1] and escaped.isascii() and escaped.isprintable()


def test_json_printable_is_the_same_valid_json():
    value = {"path": f"/x{ESC_CLEAR}\n{BIDI}\x7f{CSI_8BIT}\u2028\U000e0001\udc80中\u3000"}
    text = json_printable(json.dumps(value, indent=2, ensure_ascii=False))
    assert json.loads(text) == value
    assert escape_controls(text, one_line=False) == text  # nothing left for the output stream


def test_escaping_stream_escapes_writes_and_passes_write_control():
    raw = io.StringIO()
    stream = EscapingStream(raw)
    print(f"a{ESC_CLEAR}\tb", file=stream)
    stream.write_control("\rbar")
    assert raw.getvalue() == "a\\x1b[2J\tb\n\rbar"
    assert stream.getvalue() == raw.getvalue()  # everything else is the stream's own


def test_escaped_output_restores_the_streams():
    before = sys.stdout, sys.stderr
    with escaped_output():
        assert isinstance(sys.stdout, EscapingStream) and isinstance(sys.stderr, EscapingStream)
        with escaped_output():  # not wrapped twice
            assert sys.stdout.wrapped is before[0]
    assert (sys.stdout, sys.stderr) == before


def test_progress_bar_carriage_return_reaches_a_terminal():
    from mbridge_launch.preflight.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    raw = Tty()
    with Progress(EscapingStream(raw), f"data {ESC_CLEAR}", 2, delay_s=0) as progress:
        progress.advance(2)
    assert raw.getvalue().startswith("\rdata \\x1b[2J [") and raw.getvalue().endswith("\r")


def test_main_in_process_escapes_and_restores_capsys(capsys):
    from mbridge_launch.cli.main import main

    for _ in range(2):  # tests call main() many times in one process
        try:  # refused by argparse (SystemExit, the name rule) or by the command (a return code)
            code = main(["status", f"no{ESC_CLEAR}\nrun", "--ledger", os.devnull + "-missing/x.sqlite3"])
        except SystemExit as exc:
            code = exc.code
        assert code not in (0, None)
        out, err = capsys.readouterr()
        assert "\x1b" not in err and err.count("\n") == 1, err
    assert not isinstance(sys.stdout, EscapingStream)


# ---------------------------------------------------------------------- scripts: bash's $'...'


@pytest.mark.parametrize("value", [f"a{ESC_CLEAR}b\nc", f"x\r'y'\\z{BIDI}", f"{CSI_8BIT}中\u3000",
                                   os.fsdecode(b"bad-\xff-name")])
def test_sh_ansi_c_form_round_trips_through_bash(value, tmp_path):
    quoted = sh(value)
    assert escape_controls(quoted, one_line=False) == quoted  # no raw control character left
    proc = subprocess.run(["bash", "-c", f"printf %s\\\\n {quoted}"], capture_output=True, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == os.fsencode(value) + b"\n"
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------- the cases


def test_preflight_title_plan_path_with_esc_cr_nul_bidi(tmp_path):
    # NUL cannot stand in a path or an argument; the plan's name is a safe name (refused at load)
    folder = tmp_path / f"plans{ESC_CLEAR}\r{BIDI}"
    plan_path = write(valid_plan(tmp_path), folder, f"p{CSI_8BIT}.yaml")
    proc = run_raw("preflight", plan_path, "--no-cluster")
    out, err = both_clean(proc)
    assert proc.returncode in (0, 1), err
    title = out.split("\n")[0]
    assert "pf-valid" in title and "\\x1b[2J\\r\\u202e" in title and "p\\x9b.yaml" in title, title


def test_preflight_plan_path_with_newline_is_one_line(tmp_path):
    line = one_line_stderr(run_raw("preflight", tmp_path / "pl\nan.yaml", "--no-cluster"), 2)
    assert "pl\\nan.yaml" in line, line


def test_argparse_unrecognized_arguments_escaped():
    proc = run_raw("versions", f"extra{ESC_CLEAR}\nsecond{BIDI}\x7f")
    line = one_line_stderr(proc, 2)
    assert "unrecognized arguments" in line and "extra\\x1b[2J\\nsecond\\u202e\\x7f" in line, line


def test_recommend_card_values_escaped(tmp_path):
    # C0 controls in these flags are refused by the Plan; C1 controls and bidi overrides reach the card
    proc = run_raw("recommend", "--model", "llama3_8b", "--gpus", "8", "--partition", f"h100{BIDI}",
                   "--account", f"acct{CSI_8BIT}", "--container-image", f"img{BIDI}:1",
                   "--save-dir", f"/ckpt/{CSI_8BIT}2J{BIDI}", "--verbose")  # --verbose: the changes list shows the path
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert "/ckpt/\\x9b2J\\u202e" in out, out


def test_plan_written_to_path_with_esc_and_newline(tmp_path):
    target = tmp_path / f"out{ESC_CLEAR}\nplan.yaml"
    proc = run_raw("recommend", "--model", "llama3_8b", "--gpus", "8", "-o", target)
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert target.is_file()
    written = [line for line in err.split("\n") if line.startswith("plan written to")]
    assert len(written) == 1 and "out\\x1b[2J\\nplan.yaml (hash " in written[0], err


@pytest.fixture
def hostile_ledger(tmp_path) -> tuple[Path, int, Path]:
    """A ledger (as another user's tool could have written it) whose run holds control characters
    in its name, save directory, plan path, partition and log path; the log's own lines hold ESC
    sequences."""
    log = tmp_path / f"job{ESC_CLEAR}.log"
    log.write_text(f"iteration 1 \x1b[31mred\x1b[0m\rover{BIDI}\n")
    path = tmp_path / "ledger.sqlite3"
    with L.Ledger.open(path) as ledger:
        run = ledger.begin_submission(name=f"run{ESC_CLEAR}", plan_hash="0123456789abcdef",
                                      plan_yaml="name: x\n", executor="sbatch",
                                      plan_path=f"/plans/p{ESC_CLEAR}\n.yaml",
                                      cluster={"partition": f"h100\x1b[31m{BIDI}"},
                                      save_dir="/ckpt/run\x1b]0;title\x07\nnext")
        ledger.mark_submitted(run.id, ["12345"], log_paths=[str(log)])
        ledger.set_state(run.id, L.COMPLETED, slurm_state=f"COMPLETED{CSI_8BIT}", error="e\x1b[2J\nx")
    return path, run.id, log


def test_runs_and_status_tables_escape_ledger_values(hostile_ledger):
    path, run_id, _ = hostile_ledger
    proc = run_raw("runs", "--no-refresh", "--ledger", path)
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    rows = out.strip("\n").split("\n")
    assert len(rows) == 2 and "run\\x1b[2J" in rows[1] and "/ckpt/run\\x1b]0;title\\x07\\nnext" in rows[1], out
    proc = run_raw("status", str(run_id), "--ledger", path)
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert "/plans/p\\x1b[2J\\n.yaml" in out and "COMPLETED\\x9b" in out, out
    # the error's lines are printed as lines (message, then the scheduler's raw output, issue 33),
    # each escaped and indented under `error:`, so a line of the ledger cannot pass for a field
    assert "\n  error: e\\x1b[2J\n    x\n" in out, out
    assert not any(line.startswith(("next", ".yaml", "x")) for line in out.split("\n")), out


def test_runs_json_with_controls_is_valid_json(hostile_ledger):
    path, _, _ = hostile_ledger
    proc = run_raw("runs", "--no-refresh", "--ledger", path, "--format", "json")
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    (run,) = json.loads(out)
    assert run["name"] == f"run{ESC_CLEAR}" and run["save_dir"] == "/ckpt/run\x1b]0;title\x07\nnext"


def test_logs_streams_a_log_holding_esc_sequences_escaped(hostile_ledger):
    path, run_id, _ = hostile_ledger
    proc = run_raw("logs", str(run_id), "--ledger", path)
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert "iteration 1 \\x1b[31mred\\x1b[0m\\rover\\u202e\n" in out, out


def test_checkpoints_directory_names_and_tracker_with_esc(tmp_path):
    save = tmp_path / f"save{ESC_CLEAR}\n{BIDI}"
    (save / f"iter_0000100{ESC_CLEAR}").mkdir(parents=True)
    (save / "iter_0000200").mkdir()
    (save / "latest_checkpointed_iteration.txt").write_bytes(b"200\x1b[31m\r")
    proc = run_raw("checkpoints", save, "--ledger", tmp_path / "ledger.sqlite3")
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert out.split("\n")[0].endswith("save\\x1b[2J\\n\\u202e"), out
    proc = run_raw("checkpoints", save, "--ledger", tmp_path / "ledger.sqlite3", "--format", "json")
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert json.loads(out)["save_dir"] == str(save)


def test_rollback_dry_run_save_dir_with_esc_and_newline(tmp_path):
    from checkpoint_fixtures import make_save_dir

    save = make_save_dir(tmp_path / f"runs{ESC_CLEAR}\nnext", iterations=(100, 200))
    proc = run_raw("rollback", save, "--to", "100", "--dry-run", "--ledger", tmp_path / "ledger.sqlite3")
    out, err = both_clean(proc)
    assert proc.returncode == 0, err
    assert not any(line.startswith("next") for line in out.split("\n")), out
    assert "runs\\x1b[2J\\nnext/ckpt" in out, out


def test_submit_dry_run_script_value_with_controls(tmp_path):
    from plan_fixtures import with_changes

    value = f"line one\n{CSI_8BIT}[2J{BIDI}'q' $(touch canary)"  # C0 controls but \n are refused by the Plan
    plan = with_changes(valid_plan(tmp_path), top={"env_vars": {"MBL_ODD": value}})
    plan_path = write(plan, tmp_path / "plans")
    proc = run_raw("submit", plan_path, "--dry-run", "--no-cluster-checks", "--executor", "sbatch",
                   "--script-dir", tmp_path / "scripts", "--ledger", tmp_path / "ledger.sqlite3")
    out, err = both_clean(proc)
    assert proc.returncode in (0, 1), err
    script = out[out.index("#!/bin/bash"):]
    assert "$'\\xc2\\x9b'" in script and "$'\\xe2\\x80\\xae'" in script, script
    (tmp_path / "script.sh").write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / "script.sh")], capture_output=True).returncode == 0
    start = script.index("MBL_ODD=")
    line = script[start:script.index("\n", script.index("$(touch canary)", start))]
    shown = subprocess.run(["bash", "-c", f'{line}; printf %s "$MBL_ODD"'], capture_output=True, cwd=tmp_path)
    assert shown.stdout.decode() == value and not (tmp_path / "canary").exists()


RECOMMEND = ("recommend", "--model", "llama3_8b", "--gpus", "8")
# `--name $'a\nb'` was one line already (the Plan's name rule quotes the value); these were two
NEWLINE_ERRORS = {
    "status_run": ("status", "a\nb", "--ledger", "{tmp}/ledger.sqlite3"),
    "checkpoints_dir": ("checkpoints", "{tmp}/a\nb", "--ledger", "{tmp}/ledger.sqlite3"),
    "submit_plan_path": ("submit", "{tmp}/a\nb.yaml", "--dry-run"),
    "gpu_type": (*RECOMMEND, "--gpu-type", "a\nb"),
    "goal": (*RECOMMEND, "--goal", "a\nb"),
    "override": (*RECOMMEND, "a\nb=1"),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", NEWLINE_ERRORS)
def test_error_value_with_newline_is_one_line(case, lang, tmp_path):
    args = [arg.format(tmp=tmp_path) for arg in NEWLINE_ERRORS[case]]
    line = one_line_stderr(run_raw(*args, lang=lang), 2)
    assert "a\\nb" in line, line


# ---------------------------------------------------------------------- --help nowhere to go


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["runs", "--help"]])
def test_help_into_closed_pipe_is_quiet_exit_1(args):
    """A reader that went away asked for no more: exit 1 and nothing on stderr (issue 32's one
    rule for a closed pipe, tests/cli/test_broken_pipe.py), no 'Exception ignored', no traceback."""
    read, write_end = os.pipe()
    os.close(read)
    try:
        proc = run_raw(*args, stdout=write_end, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stderr == b"", proc.stderr


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_into_dev_full_is_one_line_exit_1(args):
    with open("/dev/full", "w") as full:
        proc = run_raw(*args, stdout=full, stderr=subprocess.PIPE, capture_output=False)
    line = one_line_stderr(proc, 1)
    assert "No space left" in line, line
