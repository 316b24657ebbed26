"""Issue 14, never an internal error: odd numbers, hostile config.json values, broken ledgers,
terminals and stdout that cannot take the output, Ctrl-C at startup, contradictory flags. Each is
one clear line on stderr with a documented exit code, never a traceback or "internal error"."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.cli_helpers import CLI, cli_env, run_cli

SUPERSCRIPT_TWO = "\u00b2"  # str.isdigit() accepts it; int() then fails
# buffered stdout, as a user's shell gives it: the failing write is then the flush at exit
BUFFERED = {"PYTHONUNBUFFERED": None}


def one_error_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The single stderr line of a refused command, checked for exit code, no traceback and the
    words it must name."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---------------------------------------------------------------- numbers: one parser


def test_rollback_to_superscript_two_is_one_line(tmp_path):
    proc = run_cli("rollback", tmp_path, "--to", SUPERSCRIPT_TWO, "--dry-run")
    one_error_line(proc, 2, "--to", "ASCII digits", "from 0 to")


def test_seed_superscript_two(tmp_path):
    proc = run_cli("rollback", tmp_path, "--to", "5", "--resubmit", "--seed", SUPERSCRIPT_TWO, "--yes")
    one_error_line(proc, 2, "--seed", "from 0 to 4,294,967,295")


def test_skip_iters_superscript_two(tmp_path):
    proc = run_cli("rollback", tmp_path, "--to", "5", "--resubmit", "--skip-iters", f"1-{SUPERSCRIPT_TWO}", "--yes")
    one_error_line(proc, 2, "--skip-iters")


def test_int_over_4300_digits(tmp_path):
    huge = "9" * 5000
    for args in (["runs", "--limit", huge, "--no-refresh", "--ledger", tmp_path / "l.sqlite3"],
                 ["estimate", "--model", "llama3_8b", "--gpus", huge],
                 ["rollback", tmp_path, "--to", huge, "--dry-run"]):
        line = one_error_line(run_cli(*args), 2, "out of range")
        assert len(line) < 400, line  # the value is cut, not echoed in full


def test_runs_limit_2_pow_63(tmp_path):
    proc = run_cli("runs", "--limit", str(2**63), "--no-refresh", "--ledger", tmp_path / "l.sqlite3")
    one_error_line(proc, 2, "--limit", "out of range", "from 0 to 1,000,000,000")


def test_estimate_mtp_layers_10e20_refused():
    proc = run_cli("estimate", "--model", "llama3_8b", "--gpus", "8", "--mtp-layers", str(10**20))
    one_error_line(proc, 2, "--mtp-layers", "from 0 to 64")


def test_non_ascii_digits_in_every_size_flag():
    arabic_three = "\u0663"  # int() reads it as 3
    # --seq-length has its own parser (issue 33: 4k, 32K, 128k), which names its accepted forms
    cases = [("--gpus", arabic_three, "invalid int value"), ("--tp", arabic_three, "invalid int value"),
             ("--mbs", arabic_three, "invalid int value"),
             ("--seq-length", arabic_three, "invalid sequence length"),
             ("--seq-length", arabic_three + "k", "invalid sequence length")]
    for flag, value, expected in cases:
        args = {"--gpus": "8", flag: value}
        proc = run_cli("estimate", "--model", "llama3_8b", *[x for pair in args.items() for x in pair])
        one_error_line(proc, 2, f"argument {flag}", expected)


def test_whole_number_of_file_values_is_bounded():
    from mbridge_launch.plan.overrides import whole_number

    assert whole_number("12") == 12 and whole_number(" 7 ") == 7
    assert whole_number(SUPERSCRIPT_TWO) is None and whole_number("9" * 5000) is None
    assert whole_number("-1") is None and whole_number(True) is None


# ---------------------------------------------------------------- Hugging Face config.json

LLAMA = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
         "max_position_embeddings": 8192, "rope_theta": 500000.0}


@pytest.mark.parametrize("key, raw", [
    ("num_attention_heads", "NaN"),
    ("hidden_size", "Infinity"),
    ("rope_theta", "-Infinity"),
    ("num_hidden_layers", '"32"'),
    ("hidden_size", "[4096]"),
    ("num_key_value_heads", "0"),
    ("num_attention_heads", "true"),
    ("intermediate_size", "1e400"),
    ("vocab_size", "4096.5"),
    ("num_hidden_layers", "-4"),
    ("num_local_experts", '"8"'),
])
def test_hf_config_nan_infinity_string_list_zero(tmp_path, key, raw):
    """Each field read from config.json is type-checked, finite, positive and bounded; NaN and
    Infinity literals are refused by the JSON reader. One line naming the file and the key."""
    text = json.dumps({k: v for k, v in LLAMA.items() if k != key})
    (tmp_path / "config.json").write_text(text[:-1] + f', "{key}": {raw}}}')
    proc = run_cli("estimate", "--hf-config", tmp_path, "--gpus", "8")
    literal = raw if raw in ("NaN", "Infinity", "-Infinity") else key
    one_error_line(proc, 2, "config.json", literal)


# ---------------------------------------------------------------- ledgers


def test_corrupt_ledger_one_line(tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    ledger.write_bytes(b"\x00garbage, not SQLite\n" * 300)
    proc = run_cli("runs", "--no-refresh", "--ledger", ledger)
    one_error_line(proc, 2, str(ledger), "not a readable SQLite database", "move it aside")


def test_wrong_schema_ledger_one_line(tmp_path):
    ledger = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(ledger)
    conn.execute("CREATE TABLE runs (something_else TEXT)")  # another program's database
    conn.commit()
    conn.close()
    proc = run_cli("runs", "--no-refresh", "--ledger", ledger)
    one_error_line(proc, 2, str(ledger), "not a run ledger", "--ledger PATH")


def test_newer_schema_ledger_names_the_file(tmp_path):
    ledger = tmp_path / "newer.sqlite3"
    conn = sqlite3.connect(ledger)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    one_error_line(run_cli("runs", "--no-refresh", "--ledger", ledger), 2, str(ledger), "schema version 99")


def test_locked_ledger_one_line(tmp_path):
    from mbridge_launch.runs.ledger import Ledger

    ledger = tmp_path / "ledger.sqlite3"
    Ledger.open(ledger).close()
    holder = sqlite3.connect(ledger, isolation_level=None)
    holder.execute("PRAGMA journal_mode = delete")  # as on NFS: an exclusive lock blocks readers too
    holder.execute("BEGIN EXCLUSIVE")
    try:
        # run_cli's own timeout fails the test if the command waits on the lock instead of answering
        proc = run_cli("runs", "--no-refresh", "--ledger", ledger, env={"MBRIDGE_LAUNCH_LEDGER_BUSY_MS": "200"})
    finally:
        holder.rollback()
        holder.close()
    one_error_line(proc, 1, str(ledger), "locked", "run this again")


# ---------------------------------------------------------------- terminals and stdout


def test_ascii_terminal_lang_zh_falls_back(tmp_path):
    proc = run_cli("runs", "--no-refresh", "--ledger", tmp_path / "l.sqlite3", lang="zh",
                   env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert "UnicodeEncodeError" not in proc.stderr and proc.stderr == ""
    assert "\\u" in proc.stdout and proc.stdout.isascii()  # the Chinese words as escapes


def _with_stdout(args: list[str], stdout, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([*CLI, *args], stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=cli_env({**BUFFERED, **(env or {})}), text=True)
    if stdout is subprocess.PIPE:
        proc.stdout.close()  # the reader went away (`| head` that has seen enough) before any output
    err = proc.stderr.read()
    return subprocess.CompletedProcess(proc.args, proc.wait(timeout=60), "", err)


@pytest.mark.parametrize("args", [["catalog", "list"], ["--version"]])
def test_stdout_closed_pipe_is_quiet_exit_1(args):
    """`| head` that has seen enough: exit 1 and nothing on stderr (issue 32: no broken-pipe error)."""
    proc = _with_stdout(args, subprocess.PIPE)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("args", [["versions"], ["--version"]])
def test_stdout_dev_full_is_one_line_exit_1(args):
    with open("/dev/full", "w") as full:
        proc = _with_stdout(args, full)
    one_error_line(proc, 1)
    assert "Exception ignored" not in proc.stderr and "No space left" in proc.stderr


# ---------------------------------------------------------------- contradictory flags


def test_smoke_test_with_goal_refused():
    proc = run_cli("recommend", "--smoke-test", "--goal", "sft")
    one_error_line(proc, 2, "--smoke-test", "--goal")
    # the smoke test's own goal is no contradiction
    proc = run_cli("recommend", "--smoke-test", "--goal", "pretrain", "--format", "json")
    assert proc.returncode == 0 and proc.json()["mode"] == "pretrain", proc.stderr


def test_entry_point_is_the_interrupt_safe_one():
    """The console script imports the CLI inside entry(), under its Ctrl-C handling."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'mbridge-launch = "mbridge_launch.__main__:entry"' in text


# ---------------------------------------------------------------- flags that were left plain
def test_preflight_no_cluster_with_on_nodes_refused(tmp_path):
    """--on-nodes submits a node-check job: with --no-cluster it still called sbatch."""
    plan = _any_plan(tmp_path)
    proc = run_cli("preflight", str(plan), "--no-cluster", "--on-nodes")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["-1", "1001", "²", "9" * 5000])
def test_watch_max_rollbacks_out_of_range_is_one_line(tmp_path, value):
    proc = run_cli("watch", "run", "--max-rollbacks", value, "--ledger", str(tmp_path / "l.db"))
    assert proc.returncode == 2 and "--max-rollbacks" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["nan", "inf", "-5"])
def test_submit_confirm_threshold_nan_inf_negative_refused(tmp_path, value):
    plan = _any_plan(tmp_path)
    proc = run_cli("submit", str(plan), "--yes", "--confirm-threshold", value, "--ledger", str(tmp_path / "l.db"),
                   "--script-dir", str(tmp_path / "s"))
    assert proc.returncode == 2 and "confirmation threshold" in proc.stderr, proc.stderr


def _any_plan(tmp_path):
    out = tmp_path / "plan.yaml"
    made = run_cli("recommend", "--model", "llama32_1b", "--gpus", "1", "--dataset", "mock", "-o", str(out))
    assert made.returncode == 0, made.stderr
    return out
