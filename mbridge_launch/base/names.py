"""The one rule for a run name (Plan `name`, `recommend --name`, the RUN of every command that
takes one): it becomes the Slurm job name, a checkpoint folder (SAVE_DIR/NAME), NeMo-Run's
experiment title and a word on sbatch/scancel lines, all unquoted.

So it is one safe path component: letters, digits, '.', '_' and '-'; not '.' or '..' (the folder
itself or its parent); not starting with '-' (scancel and sbatch would read an option); at most
MAX_RUN_NAME characters.
"""

from __future__ import annotations

import re

_SAFE = re.compile(r"[A-Za-z0-9._-]+")  # fullmatch: `$` would let a trailing newline through
# Slurm stores job names without a limit of its own that matters here, but the name is also a path
# component (NAME_MAX 255 bytes) to which the executors append suffixes (NeMo-Run's experiment id
# NAME_<unix time>, "-node-check", "-watcher"), and squeue/sacct show it in columns: 128 leaves room.
MAX_RUN_NAME = 128


def run_name_problem(value: object) -> str | None:
    """None when `value` is a valid run name, else the suffix of its message (plan.error.<suffix>)."""
    if not isinstance(value, str) or not value.strip():
        return "name_empty"
    if len(value) > MAX_RUN_NAME:
        return "name_too_long"
    if not _SAFE.fullmatch(value):
        return "name_characters"
    if value in (".", ".."):
        return "name_dots"
    if value.startswith("-"):
        return "name_dash"
    return None


def is_run_name(value: object) -> bool:
    return run_name_problem(value) is None
