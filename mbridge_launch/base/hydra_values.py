"""A value as run_recipe.py's trailing KEY=VALUE overrides write it (Hydra's override grammar:
null, true, false, numbers and bare strings), for every layer that writes one (the planner's
pipeline split, the Plan's overrides)."""

from __future__ import annotations

from typing import Any


def override_text(value: Any) -> str:
    """`value` as written after KEY= on the run_recipe.py line (Hydra syntax: null, true, false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
