"""`mbridge-launch ... | head -1`: a reader that stops early is not an error (issue 32).

Each command runs with stdout a pipe; the test reads one line and closes the pipe, as `head -1`
does, while the command still has output to write. It exits 1 (Python's documented handling of
EPIPE) with nothing on stderr: no "Broken pipe", no "Exception ignored", no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import popen_cli, run_cli
from mbridge_launch.runs import ledger as L

# more than a pipe holds (64 KiB), so the command is still writing when the reader leaves
ROWS = 1500


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("pipe") / "ledger.db"
    with L.Ledger.open(db, create=True) as ledger:
        for i in range(ROWS):
            ledger.begin_submission(name=f"run-with-a-long-name-{i:05d}", plan_hash=f"{i:016x}",
                                    plan_yaml="name: x\n", executor="sbatch", save_dir=f"/ckpt/long/path/{i:05d}")
    return db


def _head_1(*args) -> tuple[str, int, str]:
    proc = popen_cli(*args, env={"PYTHONUNBUFFERED": None})
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    return first, proc.wait(timeout=120), err


@pytest.mark.parametrize("args", [("runs", "--no-refresh", "--limit", "0"),
                                  ("runs", "--no-refresh", "--limit", "0", "--format", "json")])
def test_runs_into_head_1_is_quiet(args, many_runs):
    first, rc, err = _head_1(*args, "--ledger", str(many_runs))
    assert first.strip(), "no first line"
    assert err == "", err  # was: "error: the output could not be written to stdout (Broken pipe)"
    assert rc == 1  # cut short (the output is larger than a pipe holds): Python's EPIPE exit, never 120


@pytest.mark.parametrize("args", [("--help",), ("catalog", "list"), ("runs", "--help")])
def test_other_commands_into_head_1_are_quiet(args):
    first, rc, err = _head_1(*args)
    assert first.strip() and err == "", err
    assert rc in (0, 1)  # 0 when the whole output fit in the pipe before it closed


def test_runs_output_is_larger_than_a_pipe(many_runs):
    """The fixture is big enough that `runs` is cut short, or the tests above prove nothing."""
    out = run_cli("runs", "--no-refresh", "--limit", "0", "--ledger", many_runs)
    assert out.rc == 0 and len(out.stdout) > 2 * 65536
