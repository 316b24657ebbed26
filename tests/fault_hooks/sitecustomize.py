"""The crash-safety tests' fault switches, for the processes the tests start (and only those).

The product has no fault switch a user's environment can reach: its fault points
(mbridge_launch/base/faults.py) do nothing unless code installs a hook. This file is that code:
tests/cli_helpers.py puts its folder first on PYTHONPATH of every command a test runs, so Python
imports it at start-up (site's `sitecustomize`), and it turns the tests' variables into hooks:

- MBL_GATE_CRASH_AFTER=ledger|call|sbatch: die like `kill -9` (exit 137, no cleanup) at gate.<point>;
- MBL_GATE_INTERRUPT_AT=call|sbatch: send this process SIGINT there, as a Ctrl-C would;
- MBL_ROLLBACK_CRASH_AFTER=STEP: die like `kill -9` at rollback.STEP;
- MBL_ROLLBACK_PAUSE_AFTER=STEP with MBL_ROLLBACK_PAUSE_FILE=PATH: at rollback.STEP write PATH and
  wait (60 s at most) until the test deletes it: the concurrency tests' barrier.

An installed mbridge-launch never imports this file, so the same variables in a user's
environment do nothing (tests/unit/test_fault_points.py).
"""

from __future__ import annotations

import os

_VARIABLES = ("MBL_GATE_CRASH_AFTER", "MBL_GATE_INTERRUPT_AT", "MBL_ROLLBACK_CRASH_AFTER", "MBL_ROLLBACK_PAUSE_AFTER")


def _die(_name: str) -> None:
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(137)


def _interrupt(_name: str) -> None:
    import signal

    os.kill(os.getpid(), signal.SIGINT)


def _pause(_name: str) -> None:
    import time
    from pathlib import Path

    marker = Path(os.environ["MBL_ROLLBACK_PAUSE_FILE"])
    marker.write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _install() -> None:
    if not any(os.environ.get(name) for name in _VARIABLES):
        return  # nothing asked: not even the package is imported
    try:
        from mbridge_launch.base.faults import install
    except ImportError:  # a Python without mbridge-launch (a job's own interpreter): nothing to hook
        return
    if os.environ.get("MBL_GATE_CRASH_AFTER"):
        install(f"gate.{os.environ['MBL_GATE_CRASH_AFTER']}", _die)
    if os.environ.get("MBL_GATE_INTERRUPT_AT"):
        install(f"gate.{os.environ['MBL_GATE_INTERRUPT_AT']}", _interrupt)
    if os.environ.get("MBL_ROLLBACK_CRASH_AFTER"):
        install(f"rollback.{os.environ['MBL_ROLLBACK_CRASH_AFTER']}", _die)
    if os.environ.get("MBL_ROLLBACK_PAUSE_AFTER") and os.environ.get("MBL_ROLLBACK_PAUSE_FILE"):
        install(f"rollback.{os.environ['MBL_ROLLBACK_PAUSE_AFTER']}", _pause)


_install()
