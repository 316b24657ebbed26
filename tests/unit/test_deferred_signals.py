"""base/signals.py: inside the window SIGINT/SIGTERM wait, children do not die of them, and on
leaving the window they are delivered again (Ctrl-C still raises KeyboardInterrupt)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from mbridge_launch.base.signals import deferred_signals


def test_sigint_in_the_window_is_raised_after_it():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_signals() as received:
            os.kill(os.getpid(), signal.SIGINT)
            done.append("body finished")
            assert received == [] or received == [signal.SIGINT]  # blocked: pending, not yet recorded
    assert done == ["body finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_child_started_in_the_window_survives_the_groups_ctrl_c():
    code = (
        "import os, signal, subprocess, sys\n"
        "from mbridge_launch.base.signals import deferred_signals\n"
        "try:\n"
        "    with deferred_signals():\n"
        "        child = subprocess.Popen(['sleep', '1'])\n"
        "        os.killpg(0, signal.SIGINT)\n"
        "        print('child', child.wait(), flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted after', flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                         start_new_session=True)
    assert out.stdout.split("\n")[:2] == ["child 0", "interrupted after"], out.stderr


def test_sigterm_is_delivered_again_and_ends_the_process():
    code = ("import os, signal\nfrom mbridge_launch.base.signals import deferred_signals\n"
            "with deferred_signals():\n    os.kill(os.getpid(), signal.SIGTERM)\n    print('kept', flush=True)\n"
            "print('not reached', flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == -signal.SIGTERM and out.stdout == "kept\n"
