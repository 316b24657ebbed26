"""Fixed Plans for executor tests, written by hand as Plan files (tests/golden/plans/<name>.yaml, no
recommender): the golden scripts are pinned on these, and the end-to-end tests derive their cluster
plans from them."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable

from mbridge_launch.plan.model import Override, Plan, load_plan

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
PLANS_DIR = GOLDEN_DIR / "plans"

# name -> a function that loads a fresh copy of tests/golden/plans/<name>.yaml (each file says what it is)
GOLDEN_PLANS: dict[str, Callable[[], Plan]] = {
    name: functools.partial(load_plan, PLANS_DIR / f"{name}.yaml")
    for name in ("single_node_h100", "two_node_h100", "four_node_gb200", "moe_ep", "benchmark_recipe")
}
single_node_h100, two_node_h100, four_node_gb200, moe_ep, benchmark_recipe = GOLDEN_PLANS.values()


# Values no quoting can make safe, as `with_changes` sections, with the key of the UserError every
# executor refuses them with (before anything is written). Env-variable names, the run name, control
# characters and mount separators are refused by the Plan itself (tests/unit/test_plan_validation.py,
# tests/cli/test_hostile_validation.py).
UNSAFE_VALUES = [
    ({"launch": {"log_dir": "/logs\\x"}}, "executors.log_dir_backslash"),
    ({"launch": {"entry": []}}, "executors.empty_entry"),
]


def override(key: str, value: str, change_class: str = "execution", reason: str = "", source: str = "user") -> Override:
    return Override.model_validate({"key": key, "value": value, "class": change_class, "reason": reason, "source": source})


def edit(plan: Plan, **changes: Any) -> Plan:
    """A copy of `plan` with dotted-path changes, e.g. edit(p, **{"cluster.time": "2:00:00"})."""
    data = plan.canonical_dict()
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return Plan.model_validate(data)


def with_changes(plan: Plan, **sections: dict[str, Any]) -> Plan:
    """`edit` by section, e.g. cluster={"nodes": 2}; top-level fields are given as top={"name": ...}."""
    return edit(plan, **{(key if section == "top" else f"{section}.{key}"): value
                         for section, fields in sections.items() for key, value in fields.items()})


# ------------------------------------------------------------------ golden files
REGENERATE_ENV = "MBL_REGENERATE_GOLDEN"


def assert_golden(relative: str, text: str) -> None:
    """Compare `text` with tests/golden/<relative> line by line; MBL_REGENERATE_GOLDEN=1 rewrites
    the file instead (then review the diff and commit it)."""
    path = GOLDEN_DIR / relative
    if os.environ.get(REGENERATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    hint = f"regenerate with {REGENERATE_ENV}=1 python -m pytest {os.path.relpath(_caller_file(), Path.cwd())} and review the diff"
    if not path.exists():
        raise AssertionError(f"golden file {path} is missing; {hint}")
    expected = path.read_text(encoding="utf-8").splitlines()
    actual = text.splitlines()
    for number, (want, got) in enumerate(zip(expected, actual), start=1):
        if want != got:
            raise AssertionError(f"{path}:{number} differs\n  golden:   {want!r}\n  rendered: {got!r}\n{hint}")
    if len(expected) != len(actual):
        raise AssertionError(f"{path}: golden has {len(expected)} lines, rendered {len(actual)}; {hint}")


def _caller_file() -> str:
    import inspect

    for frame in inspect.stack()[2:]:
        if Path(frame.filename).name.startswith("test_"):
            return frame.filename
    return str(GOLDEN_DIR.parent)
