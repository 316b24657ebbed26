"""Fault points: named places where the crash-safety tests make the tool die, pause or be
interrupted (right after the ledger row is written, right before the scheduler call, mid-rollback).

`fault_point(name)` does nothing unless a hook was installed for `name` by code (`install`): no
environment variable, file or argument of the installed product can reach one. The tests install
theirs from a `sitecustomize.py` they put on PYTHONPATH for the processes they start
(tests/fault_hooks/sitecustomize.py), which reads the tests' own variables.

Names in use: gate.ledger, gate.call, gate.sbatch (gate/submit.py); rollback.<step>
(rollback/journal.py crash_point: locked, journal_written, pt_written, moved_N, undo_..., ...).
"""

from __future__ import annotations

from typing import Callable

_hooks: dict[str, Callable[[str], None]] = {}


def install(name: str, hook: Callable[[str], None]) -> None:
    """Call `hook(name)` whenever the fault point `name` is reached (one hook per name)."""
    _hooks[name] = hook


def uninstall(name: str) -> None:
    _hooks.pop(name, None)


def fault_point(name: str) -> None:
    """The fault point `name`: its hook if one was installed, else nothing."""
    hook = _hooks.get(name)
    if hook is not None:
        hook(name)
