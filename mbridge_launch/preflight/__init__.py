"""Preflight: prove a Plan can run before a GPU-hour is spent.

`run_preflight(plan, *, cluster=True, on_nodes=False) -> Report`; see runner.py. Check codes and
their meaning are listed in messages/preflight.py.
"""

from mbridge_launch.preflight.model import Check, Report
from mbridge_launch.preflight.runner import run_preflight

__all__ = ["Check", "Report", "run_preflight"]
