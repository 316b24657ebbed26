"""The keys of a policy file and how each one's value is read.

A file is a flat YAML mapping; every value is checked here, and a bad one is a UserError naming
the file, the key, what is wrong and what is valid (exit 2). Values are normalised for merging:
max_time becomes seconds, lists become tuples, auto_rollback becomes two keys
(auto_rollback.allow, auto_rollback.max_per_run).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from mbridge_launch.base import slurm_time
from mbridge_launch.base.errors import UserError

WHOLE = ("max_gpus", "max_nodes")
NUMBERS = ("max_gpu_hours", "max_gpu_hours_per_day", "typed_confirmation_above_gpu_hours")
NAME_LISTS = ("accounts", "partitions")
KEYS = ("max_gpus", "max_nodes", "max_time", "max_gpu_hours", "max_gpu_hours_per_day", "accounts",
        "partitions", "allow_benchmark_recipes", "auto_rollback", "rollback_dirs",
        "typed_confirmation_above_gpu_hours")
AUTO_ROLLBACK_KEYS = ("allow", "max_per_run")
MAX_NAMES = 1000  # accounts / partitions / dirs in one list: more is a generated file gone wrong


def bad(path: str, key: str, problem: str, valid: str, **params: Any) -> UserError:
    """policy.invalid: FILE: KEY: the problem (message key policy.problem.<problem>); valid: ..."""
    from mbridge_launch.base.i18n import t

    return UserError("policy.invalid", path=path, name=key, problem=t(f"policy.problem.{problem}", **params),
                     valid=valid)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def whole(path: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad(path, key, "whole", "0, 1, 2, ...", value=_shown(value))
    return value


def number(path: str, key: str, value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok:
        raise bad(path, key, "number", "0, 1.5, 1000, ...", value=_shown(value))
    return float(value)


def time_limit(path: str, key: str, value: Any) -> int:
    """Seconds. A string only: YAML reads an unquoted 04:00:00 as the base-60 integer 14400."""
    valid = slurm_time.FORMS
    if not isinstance(value, str):
        raise bad(path, key, "time_quoted", valid, value=_shown(value))
    try:
        seconds = slurm_time.parse_seconds(value)
    except ValueError:
        raise bad(path, key, "time", valid, value=_shown(value)) from None
    if seconds is None:
        raise bad(path, key, "time", valid, value=_shown(value))
    return seconds


def flag(path: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise bad(path, key, "bool", "true, false", value=_shown(value))
    return value


def names(path: str, key: str, value: Any) -> tuple[str, ...]:
    ok = isinstance(value, list) and len(value) <= MAX_NAMES and all(isinstance(v, str) and v.strip() for v in value)
    if not ok:
        raise bad(path, key, "names", "[name, ...]", value=_shown(value))
    return tuple(v.strip() for v in value)


def dirs(path: str, key: str, value: Any) -> tuple[str, ...]:
    found = names(path, key, value)
    for item in found:
        if not os.path.isabs(item):
            raise bad(path, key, "absolute_dir", "[/absolute/dir, ...]", value=_shown(item))
    return tuple(os.path.normpath(item) for item in found)


def auto_rollback(path: str, key: str, value: Any) -> dict[str, Any]:
    valid = ", ".join(AUTO_ROLLBACK_KEYS)
    if not isinstance(value, dict):
        raise bad(path, key, "mapping", "{allow: true|false, max_per_run: N}", value=_shown(value))
    out: dict[str, Any] = {}
    for sub, item in value.items():
        if sub == "allow":
            out["auto_rollback.allow"] = flag(path, "auto_rollback.allow", item)
        elif sub == "max_per_run":
            out["auto_rollback.max_per_run"] = whole(path, "auto_rollback.max_per_run", item)
        else:
            raise bad(path, f"auto_rollback.{sub}", "unknown_key", valid)
    return out


_READERS: dict[str, Callable[[str, str, Any], Any]] = {
    **{k: whole for k in WHOLE}, **{k: number for k in NUMBERS}, **{k: names for k in NAME_LISTS},
    "max_time": time_limit, "allow_benchmark_recipes": flag, "rollback_dirs": dirs,
}


def read_mapping(path: str, data: Any) -> dict[str, Any]:
    """The normalised limits of one file's document (None, an empty file, sets nothing)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        from mbridge_launch.base.i18n import t

        raise UserError("policy.not_mapping", path=path, found=t(f"policy.found.{_kind(data)}"), valid=", ".join(KEYS))
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or key not in KEYS:
            raise bad(path, str(key), "unknown_key", ", ".join(KEYS))
        if key == "auto_rollback":
            out.update(auto_rollback(path, key, value))
        else:
            out[key] = _READERS[key](path, key, value)
    return out


def _kind(data: Any) -> str:
    return "list" if isinstance(data, list) else "text" if isinstance(data, str) else "number" \
        if isinstance(data, (int, float)) else "other"
