"""Extract the ConfigContainer field tree of a Megatron Bridge release, from the REAL classes.

Runs inside a Python that has Megatron Bridge installed (the test tier's env, a training
container), like real_build.py: the tool's package on PYTHONPATH, nothing of the tool imported
but the standard library. It walks `dataclasses.fields` of `megatron.bridge.training.config.
ConfigContainer` recursively, following each field's type hint (Optional/Union/Annotated unwrapped)
into every dataclass it names and every dataclass subclass of those (the model providers of every
model family are subclasses of the providers the `model` field names; LoRA and DoRA of PEFT).

The result is stored compactly (catalog/config-fields-<version>.json; knowledge/config_fields.py
reads it): one entry per class with its primary dataclass base and only the fields it adds or
re-types, each field's spec being "" (a value), "*" (a mapping: any key below it is the user's) or
the list of classes below it. A class name is its __qualname__ where that is unique, else its
module-qualified name. `recipe_model_class` maps each recipe (by catalog name; `benchmark:NAME`
for a benchmark function that shares a library recipe's name) to the provider
class its real build returned, read from real_build lines (`model_class`), so an override of a
model field can be checked against that recipe's own provider.

Maintainer route (the tier's env and stand-ins; tests/bridge/test_config_fields.py checks that
the shipped file is what this writes):

    ENV=$(bash tests/bridge/make-env.sh | tail -n1)
    $ENV/bin/python tests/bridge/build_recipe.py --all all --placeholder-inputs --out /tmp/all.jsonl
    $ENV/bin/python tests/bridge/extract_config_fields.py --builds /tmp/all.jsonl \\
        --out catalog/config-fields-0.6.2.json

In a Python with the real Transformer Engine (a NeMo container), `python -m
mbridge_launch.catalog_sync.config_fields --out FILE` with the tool on PYTHONPATH does the same.
`catalog sync` (static, no torch) does not write this file: a catalog without one checks no keys.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any, Iterable

SCHEMA = 1
ROOT_CLASS = "megatron.bridge.training.config.ConfigContainer"
# Packages whose import registers the dataclass subclasses a field may hold at run time (every
# model family's provider, every PEFT method, every dataset builder); __subclasses__ only sees
# what has been imported.
SUBCLASS_PACKAGES = ("megatron.bridge.models", "megatron.bridge.peft", "megatron.bridge.data",
                     "megatron.bridge.recipes")
VALUE, MAPPING = "", "*"


def full_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _members(hint: Any) -> list[Any]:
    """The alternatives of a type hint: Optional/Union members, Annotated's type, else the hint."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _members(typing.get_args(hint)[0])
    if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(hint, types.UnionType)):
        return [m for arg in typing.get_args(hint) for m in _members(arg)]
    return [hint]


def _is_mapping(hint: Any) -> bool:
    if hint is Any:
        return True
    target = typing.get_origin(hint) or hint
    if isinstance(target, type):
        import collections.abc

        if issubclass(target, (dict, collections.abc.Mapping)):
            return True
        return target.__name__ in ("DictConfig",)
    return False


def _subclasses(cls: type) -> list[type]:
    seen: dict[str, type] = {}
    stack: list[type] = [cls]
    while stack:
        subs: list[type] = stack.pop().__subclasses__()
        for sub in subs:
            if dataclasses.is_dataclass(sub) and full_name(sub) not in seen:
                seen[full_name(sub)] = sub
                stack.append(sub)
            elif full_name(sub) not in seen:
                stack.append(sub)  # a plain class between two dataclasses
    return [seen[k] for k in sorted(seen)]


def field_spec(cls: type, field: dataclasses.Field, hints: dict[str, Any]) -> tuple[str, list[type]]:
    """("" | "*", classes below): the field's kind and the dataclasses a value of it may be."""
    hint = hints.get(field.name, field.type)
    below: list[type] = []
    mapping = False
    for member in _members(hint):
        if isinstance(member, type) and dataclasses.is_dataclass(member):
            below.append(member)
        elif _is_mapping(member):
            mapping = True
    if not below and not mapping:
        # a hint that names no dataclass (a string annotation, a Protocol): the default tells
        default: Any = field.default
        if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = field.default_factory  # type: ignore[misc]
            below = [default] if isinstance(default, type) and dataclasses.is_dataclass(default) else []
        elif dataclasses.is_dataclass(default) and not isinstance(default, type):
            below = [type(default)]
    if mapping and not below:
        return MAPPING, []
    expanded: dict[str, type] = {}
    for klass in below:
        expanded[full_name(klass)] = klass
        for sub in _subclasses(klass):
            expanded.setdefault(full_name(sub), sub)
    return VALUE, [expanded[k] for k in sorted(expanded)]


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # an annotation that names what this Python cannot import: per field below
        hints: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            module = sys.modules.get(klass.__module__)
            for name, annotation in getattr(klass, "__annotations__", {}).items():
                try:
                    hints[name] = typing.get_type_hints(
                        type("_One", (), {"__annotations__": {name: annotation}, "__module__": klass.__module__}),
                        vars(module) if module else None)[name]
                except Exception:
                    hints[name] = annotation
        return hints


def walk(root: type) -> dict[str, dict[str, Any]]:
    """Every dataclass reachable from root: full name -> {base, fields: {name: (kind, [full names])}}."""
    out: dict[str, dict[str, Any]] = {}
    stack = [root]
    while stack:
        cls = stack.pop()
        name = full_name(cls)
        if name in out:
            continue
        hints = _hints(cls)
        fields: dict[str, tuple[str, list[str]]] = {}
        for field in dataclasses.fields(cls):
            kind, below = field_spec(cls, field, hints)
            fields[field.name] = (kind, [full_name(b) for b in below])
            stack.extend(below)
        base = next((b for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)), None)
        out[name] = {"base": full_name(base) if base else None, "fields": fields}
        if base is not None:
            stack.append(base)
    return out


def short_names(names: Iterable[str]) -> dict[str, str]:
    """full name -> the name the file uses: the qualname where unique, else the full name."""
    names = sorted(set(names))
    counts: dict[str, int] = {}
    for name in names:
        counts[name.rsplit(".", 1)[-1]] = counts.get(name.rsplit(".", 1)[-1], 0) + 1
    return {name: name.rsplit(".", 1)[-1] if counts[name.rsplit(".", 1)[-1]] == 1 else name for name in names}


def compact(tree: dict[str, dict[str, Any]], root: str) -> dict[str, Any]:
    """The stored form: each class keeps only the fields its base does not have the same way."""
    short = short_names(tree)

    def spec(kind: str, below: list[str]) -> Any:
        return sorted(short[b] for b in below) if below else kind

    classes: dict[str, Any] = {}
    for name in sorted(tree, key=lambda n: short[n]):
        entry = tree[name]
        base = entry["base"]
        inherited = tree[base]["fields"] if base else {}
        own = {f: spec(*s) for f, s in entry["fields"].items() if inherited.get(f) != s}
        gone = sorted(set(inherited) - set(entry["fields"]))  # a subclass cannot drop a dataclass field; kept honest
        record: dict[str, Any] = {"base": short[base] if base else None, "fields": own}
        if gone:
            record["removed"] = gone
        classes[short[name]] = record
    return {"root": short[root], "classes": classes}


def recipe_model_classes(build_lines: Iterable[dict[str, Any]], short: dict[str, str]) -> dict[str, str]:
    """recipe name -> the provider class of its real build (real_build's `model_class`)."""
    lines = list(build_lines)
    library = {line["name"] for line in lines if line.get("kind") != "benchmark"}
    out: dict[str, str] = {}
    for line in lines:
        model_class = (line.get("recipe") or {}).get("model_class")
        if line.get("built") and model_class in short:
            # ten benchmark functions share a library recipe's name: those are kept apart
            shadowed = line.get("kind") == "benchmark" and line["name"] in library
            out[f"benchmark:{line['name']}" if shadowed else line["name"]] = short[model_class]
    return dict(sorted(out.items()))


def extract(builds: Path | None = None) -> dict[str, Any]:
    from importlib import metadata

    for package in SUBCLASS_PACKAGES:
        importlib.import_module(package)
        _import_submodules(package)
    module, _, attr = ROOT_CLASS.rpartition(".")
    root = getattr(importlib.import_module(module), attr)
    lines = [json.loads(t) for t in builds.read_text().splitlines() if t.strip()] if builds is not None else []
    tree = walk(root)
    # a recipe may hold a provider that is no subclass of the classes the `model` hint names
    # (FalconH1ModelProvider derives from its own config): what the real builds returned joins them
    extra = sorted({m for line in lines if (m := (line.get("recipe") or {}).get("model_class"))} - set(tree))
    for name in extra:
        module_name, _, qualname = name.rpartition(".")
        cls = getattr(importlib.import_module(module_name), qualname, None)
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            for key, entry in walk(cls).items():
                tree.setdefault(key, entry)
            kind, below = tree[full_name(root)]["fields"]["model"]
            tree[full_name(root)]["fields"]["model"] = (kind, sorted({*below, name}))
    data: dict[str, Any] = {
        "comment": ("Generated by `python -m mbridge_launch.catalog_sync.config_fields` in a Python with Megatron "
                    "Bridge installed: do not edit by hand. The ConfigContainer field tree (dataclasses.fields, "
                    "recursively, with every dataclass subclass a field may hold). Per class: its dataclass base "
                    "and the fields it adds; a field is \"\" (a value), \"*\" (a mapping: keys below are free) "
                    "or the classes below it."),
        "schema": SCHEMA,
        "megatron_bridge_version": metadata.version("megatron-bridge"),
    }
    data.update(compact(tree, full_name(root)))
    if builds is not None:
        data["recipe_model_class"] = recipe_model_classes(lines, short_names(tree))
    return data


def _import_submodules(package: str) -> None:
    """Import every submodule of a package (providers live in per-family modules); one that fails
    to import in this Python (an optional dependency) is skipped: its classes cannot be reached."""
    import pkgutil

    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), prefix=package + "."):
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional dependency missing here
            continue


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--builds", type=Path, help="real_build JSON lines (model_class per recipe)")
    args = parser.parse_args(argv)
    # one entry per line: a diff between two releases shows what changed
    text = json.dumps(extract(args.builds), indent=1, ensure_ascii=False)
    args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
