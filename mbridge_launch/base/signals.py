"""Deferring interrupts across a window that must not be cut in half.

Why: between "the scheduler is called" and "the job id is in the ledger" a Ctrl-C (or a SIGTERM /
SIGHUP from a closing terminal or session) used to land in the middle: sbatch had queued the job,
the ledger said `submit_failed` with no job, and the job ran unseen. Inside `deferred_signals()`:

- SIGINT, SIGTERM and SIGHUP are blocked in the calling thread with `pthread_sigmask`. A blocked
  mask is inherited across fork and exec (Python's subprocess keeps it: it resets handlers, not
  the mask), so the children the executors spawn in the window (sbatch itself, or NeMo-Run's
  `invoke` and submitit's subprocess calls) are not killed by the terminal's Ctrl-C, which goes to
  the whole foreground process group;
- a Python-level handler records any of them that still arrives (a process-directed signal may be
  delivered to another thread whose mask is open);
- on leaving the window the mask and handlers are restored and each recorded signal is delivered
  again with `signal.raise_signal`, so Ctrl-C still stops the command (KeyboardInterrupt) and
  SIGTERM still ends it, only after what the window protects has been committed.

Only the main thread may change handlers; elsewhere the window blocks the mask only.

A deferred interrupt must not wait on a scheduler call that never ends (a stopped controller
keeps sbatch waiting for its own timeouts): `interrupt_pending()` tells the Slurm command layer
(slurm/commands.call) that one arrived, and it gives the child a short grace to answer, then stops
it and reports the call as interrupted (an indefinite answer: the job may exist).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# the `received` lists of the windows open now (a window may open inside another)
_OPEN_WINDOWS: list[list[int]] = []


@contextmanager
def deferred_signals(signals: tuple[signal.Signals, ...] = DEFERRED) -> Iterator[list[int]]:
    """Block and record `signals` for the body; re-deliver what arrived on exit. Yields the list
    of signal numbers received so far (for tests and diagnostics)."""
    received: list[int] = []
    in_main = threading.current_thread() is threading.main_thread()
    previous = _install_recorder(signals, received) if in_main else {}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    _OPEN_WINDOWS.append(received)
    try:
        yield received
    finally:
        _OPEN_WINDOWS.remove(received)
        # Unblocking with the recorder still installed turns a pending signal into a record
        # instead of running the old handler in the middle of this cleanup.
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _redeliver(received)


def interrupt_pending(signals: tuple[signal.Signals, ...] = DEFERRED) -> bool:
    """Whether an interrupt waits for a window to end: recorded by an open window's handler, or
    blocked and pending for this thread or the process (a blocked signal never reaches the
    handler until the mask opens, so it is only seen with sigpending)."""
    if any(_OPEN_WINDOWS):
        return True
    return bool(signal.sigpending() & set(signals))


def _install_recorder(signals: tuple[signal.Signals, ...], received: list[int]) -> dict[int, Any]:
    def record(signum: int, _frame: object) -> None:
        received.append(signum)

    return {int(s): signal.signal(s, record) for s in signals}


def _redeliver(received: list[int]) -> None:
    """Each distinct signal once, in arrival order: the first that ends the process or raises
    (KeyboardInterrupt) stops the rest, as it would have without the window."""
    for signum in dict.fromkeys(received):
        signal.raise_signal(signum)
