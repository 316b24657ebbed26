"""A ledger path that is a FIFO (or another non-regular file) is one line and exit 2 at once:
SQLite's open of a FIFO waited for a writer forever (found by the property tests). Were it to
block again, run_cli's time limit fails the test instead of hanging the suite."""

from __future__ import annotations

import os

import pytest

from tests.cli_helpers import run_cli


@pytest.mark.parametrize("command", [("runs",), ("status", "x")])
def test_fifo_as_ledger_is_one_line(tmp_path, command):
    fifo = tmp_path / "ledger.sqlite"
    os.mkfifo(fifo)
    proc = run_cli(*command, "--ledger", str(fifo), timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "not a regular file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
