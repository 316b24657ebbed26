"""Issue 14, property tests of the Plan file: every field of the Plan model (walked from
mbridge_launch.plan.model.Plan recursively, so a new field is covered) set, one at a time, to an
odd value of every class in a valid Plan (the one `recommend -o` writes), then `preflight
--no-cluster` and `submit --dry-run` on it (Slurm stubs refuse every call). Both must keep the
contract of property_harness; a Plan they refuse is refused in one line that names the field."""

from __future__ import annotations

import copy
import os
import re
import typing
from pathlib import Path
from typing import Any

import property_harness as H
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mbridge_launch.plan.model import Plan

SCALE = max(1, int(os.environ.get("MBL_PROPERTY_SCALE", "1") or 1))
PER_FIELD_EXAMPLES = 4 * SCALE
BIG_INT = "9" * 4400  # written into the YAML text as is (Python cannot even print it by default)
FieldPath = tuple[Any, ...]  # keys, and 0 for the first item of a list


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The models a field holds: ("", M) for M itself, ("item", M) for list[M], ("value", M) for
    dict[str, M]; through Optional / Annotated."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin is typing.Annotated:
        return _models_in(args[0])
    if origin is list and args:
        return [("item", m) for _, m in _models_in(args[0])]
    if origin is dict and len(args) == 2:
        return [("value", m) for _, m in _models_in(args[1])]
    if origin is typing.Union or str(origin) == "types.UnionType":
        return [found for arg in args for found in _models_in(arg)]
    return []


def _is_dict(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated or origin is typing.Union or str(origin) == "types.UnionType":
        return any(_is_dict(arg) for arg in typing.get_args(annotation))
    return origin is dict


def plan_fields(model: type[BaseModel] = Plan, prefix: FieldPath = ()) -> list[FieldPath]:
    """Every field path of the model, nested models' fields included (by their YAML names)."""
    found = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = (*prefix, key)
        found.append(path)
        if _is_dict(info.annotation):
            found.append((*path, "some_key"))  # an entry of the mapping (env_vars, dataset.fields, ...)
        for how, sub in _models_in(info.annotation):
            inner = (*path, 0) if how == "item" else (*path, "some_key") if how == "value" else path
            found += plan_fields(sub, inner)
    return found


FIELDS = plan_fields()


def dotted(path: FieldPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# ---------------------------------------------------------------- odd values, by class
def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


PLAN_CLASSES: dict[str, st.SearchStrategy[Any]] = {
    "wrong_type": st.sampled_from([{"a": 1}, [1, 2], True, 1.5, "text", None, [], {}]),
    "out_of_range": st.sampled_from([-1, 0, 2**63, -2**63, 10**30, "__BIG_INT__", "-__BIG_INT__"]),
    "nan_inf": st.sampled_from([float("nan"), float("inf"), float("-inf"), "nan", "1e400"]),
    "control_chars": st.sampled_from(["a\x1b[31mb", "x\ny", "\u202eevil", "a\rb", "\x7f", "a\x85b", "\x9b2J"]),
    "nul_byte": st.sampled_from(["a\x00b", "\x00", "/x/ckroot\x00/etc"]),
    "huge_string": st.sampled_from(["a" * 300_000, "/" * 300_000, "\u4e2d" * 100_000]),
    "nested_100_deep": st.just(_deep(100)),
    "unknown_keys": st.sampled_from([{"no_such_key": 1}, {"__proto__": {}}, {"name": "x", "extra": [1]}]),
    "odd_text": st.sampled_from(["", " ", ".", "..", "-x", "\u00b2", "\uff11", "99:99:99", "0.5:", "nan:/x", "a:b:c",
                                 "/x,/y:/z", "relative/path", "~", "$(id)", "`id`", "'; rm -rf ~ #"]),
}


def set_at(data: dict, path: FieldPath, value: Any) -> bool:
    """Put value at path in data (creating the list item / dict entry on the way); False when a
    parent on the way is not a container the path can go through."""
    node: Any = data
    for part in path[:-1]:
        if isinstance(part, int):
            if not isinstance(node, list):
                return False
            if not node:
                node.append({})
            node = node[0]
        else:
            if not isinstance(node, dict):
                return False
            node = node.setdefault(part, {} if not isinstance(part, int) else [])
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list):
            return False
        if node:
            node[0] = value
        else:
            node.append(value)
    elif isinstance(node, dict):
        node[last] = value
    else:
        return False
    return True


def plan_text(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False).replace("__BIG_INT__", BIG_INT)


YAML_LINE = re.compile(r"\bline \d+")


def names_the_field(err: str, path: FieldPath) -> bool:
    """The error names the field: one of the names on its path (a whole section replaced is
    named by the section or the fields inside it), or, for a document YAML itself refuses (too
    deep, a number too long), the line."""
    names = [p for p in path if isinstance(p, str) and p != "some_key"]
    return any(name in err for name in names) or bool(YAML_LINE.search(err))


def run_plan(world: H.World, plan: Path, argv: list[str], classes: list[str], path: FieldPath) -> H.Result:
    box = world.pool.take()
    watched = [box.root, world.root / "hostile", world.root / "plan-ckpt"]
    before = H.listing(*watched)
    try:
        result = H.invoke(argv, H.env_for(world, box), box.cwd)
        after = H.listing(*watched)
        problems = H.violations(result)
        problems += H.changes(before, after, [H.Allowed("tree", str(box.state))])
        if result.rc == 2 and not names_the_field(result.err, path):
            problems.append(f"the error does not name the field {dotted(path)}")
        H.count("plan_fields", classes)
        H.record_slurm_calls(world)
    finally:
        world.pool.settle(box)
    assert not problems, H.describe(result, problems)
    return result


def test_every_plan_field_is_walked():
    """The walk reaches nested models and list items (a regression here would hide fields)."""
    walked = {dotted(p) for p in FIELDS}
    for expected in ("name", "parallelism.tp", "cluster.container_mounts[0].target", "overrides[0].class",
                     "auto_rollback.spike_factor", "cluster.profile.mpi", "accepted_checks[0].reason"):
        assert expected in walked, sorted(walked)


@pytest.mark.parametrize("path", FIELDS, ids=[dotted(p) for p in FIELDS])
@settings(max_examples=PER_FIELD_EXAMPLES)
@given(data=st.data())
def test_every_plan_field_takes_odd_values(world, path, data):
    """One field of a valid Plan set to an odd value: preflight and submit --dry-run answer
    within the contract."""
    name = data.draw(st.sampled_from(sorted(PLAN_CLASSES)), label="class")
    value = data.draw(PLAN_CLASSES[name], label="value")
    plan_data = copy.deepcopy(yaml.safe_load(world.plan_yaml))
    if not set_at(plan_data, path, value):
        return
    plan = world.root / "plans" / f"plan-{os.getpid()}.yaml"  # outside the sandbox, which stays reusable
    plan.parent.mkdir(exist_ok=True)
    plan.write_text(plan_text(plan_data))
    try:
        run_plan(world, plan, ["preflight", str(plan), "--no-cluster"], [f"plan_{name}"], path)
        run_plan(world, plan, ["submit", str(plan), "--dry-run"], [f"plan_{name}"], path)
    finally:
        plan.unlink()
