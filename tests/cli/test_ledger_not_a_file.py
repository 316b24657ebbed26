"""A ledger path that is a FIFO (or another non-regular file) is one line and exit 2 at once:
SQLite's open of a FIFO waited for a writer forever (found by the property tests)."""

from __future__ import annotations

import os
import threading

import pytest

from tests.cli_helpers import run_cli


@pytest.mark.parametrize("command", [("runs",), ("status", "x")])
def test_fifo_as_ledger_is_one_line(tmp_path, command):
    fifo = tmp_path / "ledger.sqlite"
    os.mkfifo(fifo)
    # were the open to block, a writer would release it (and this test would then fail on the
    # exit code, not hang): opened in a thread that gives up after a while
    def release() -> None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    timer = threading.Timer(20.0, release)
    timer.start()
    try:
        proc = run_cli(*command, "--ledger", str(fifo))
    finally:
        timer.cancel()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "not a regular file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
