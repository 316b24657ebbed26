"""The ConfigContainer field tree of a Megatron Bridge release: which override keys exist.

catalog/config-fields-<version>.json is written by catalog_sync/config_fields.py from the real
classes (dataclasses.fields, recursively). Each class keeps its dataclass base and the fields it
adds; a field is "" (a value), "*" (a mapping whose keys are the user's: env_vars) or the list of
classes a value of it may be. `model` lists every model provider: which fields exist depends on
the recipe's provider, recorded per recipe from its real build (`recipe_model_class`).

`lookup(path, recipe=...)` answers whether an override key names a real field, and if not, the
closest real ones (difflib) at the level where the path leaves the tree.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

VALUE, MAPPING = "", "*"
MODEL_SECTION = "model"


@dataclass(frozen=True)
class Lookup:
    known: bool
    # where the path left the tree: the prefix that exists and the closest full paths
    suggestions: tuple[str, ...] = ()
    # the provider class the model.* part was checked against; None: every provider (the union)
    provider: str | None = None
    union: bool = False  # a model.* key checked against every provider, the recipe's unknown


def file_name(version: str) -> str:
    return f"config-fields-{version}.json"


class FieldTree:
    def __init__(self, data: dict[str, Any]) -> None:
        self.version = str(data.get("megatron_bridge_version", ""))
        self.root = str(data["root"])
        self.classes: dict[str, dict[str, Any]] = data["classes"]
        self.recipe_model_class: dict[str, str] = dict(data.get("recipe_model_class") or {})
        self._fields: dict[str, dict[str, Any]] = {}

    def fields(self, name: str) -> dict[str, Any]:
        """All fields of a class (its bases' first), by name -> spec."""
        if name not in self._fields:
            entry = self.classes.get(name) or {"base": None, "fields": {}}
            merged = dict(self.fields(entry["base"])) if entry.get("base") else {}
            for gone in entry.get("removed") or ():
                merged.pop(gone, None)
            merged.update(entry["fields"])
            self._fields[name] = merged
        return self._fields[name]

    def provider_of(self, recipe: str | None, kind: str | None = None) -> str | None:
        """The provider class the recipe's real build returned; None when it was not built."""
        if not recipe:
            return None
        if kind == "benchmark" and f"benchmark:{recipe}" in self.recipe_model_class:
            return self.recipe_model_class[f"benchmark:{recipe}"]
        return self.recipe_model_class.get(recipe)

    def lookup(self, path: str, recipe: str | None = None, provider: str | None = None,
               kind: str | None = None) -> Lookup:
        """Does `path` (a dotted ConfigContainer path, without + or ~) name a field?"""
        provider = provider or self.provider_of(recipe, kind)
        parts = path.split(".")
        current = [self.root]
        checked_provider: str | None = None
        union = False
        for depth, part in enumerate(parts):
            if not current:  # below a plain value: a value has no fields
                return Lookup(False, (), checked_provider, union)
            names = self._union(current)
            spec = names.get(part)
            if spec is None:
                prefix = ".".join(parts[:depth])
                close = difflib.get_close_matches(part, list(names), n=3, cutoff=0.8)
                rest = ".".join(parts[depth + 1:])
                suggestions = tuple(".".join(p for p in (prefix, word, rest) if p) for word in close)
                return Lookup(False, suggestions, checked_provider, union)
            if spec == MAPPING:
                return Lookup(True, (), checked_provider, union)
            if spec == VALUE:
                current = []
                continue
            current = list(spec)
            if depth == 0 and part == MODEL_SECTION:
                if provider is not None and provider in self.classes:
                    current, checked_provider = [provider], provider
                else:
                    union = True
        return Lookup(True, (), checked_provider, union)

    def _union(self, classes: list[str]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for name in classes:
            for field_name, spec in self.fields(name).items():
                if field_name not in merged:
                    merged[field_name] = spec
                elif merged[field_name] != spec:
                    merged[field_name] = _join(merged[field_name], spec)
        return merged


def _join(a: Any, b: Any) -> Any:
    """One field spelled two ways by two classes: a mapping anywhere keeps it open, classes join."""
    if MAPPING in (a, b):
        return MAPPING
    if isinstance(a, list) and isinstance(b, list):
        return sorted({*a, *b})
    return a if isinstance(a, list) else b  # a value in one class, classes in another: the classes


def fields_file(version: str, directory: str | Path | None = None) -> Path:
    from mbridge_launch.knowledge.catalog import companion_file

    return companion_file(file_name(version), directory)  # beside a synced catalog, or the package's


def load_field_tree(version: str, directory: str | Path | None = None) -> FieldTree | None:
    """The field tree of that release; None when the catalog has none (a catalog synced without
    a Megatron Bridge Python: its keys cannot be checked)."""
    path = fields_file(version, directory)
    if not path.is_file():
        return None
    stat = path.stat()
    return _load(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int) -> FieldTree:  # mtime and size key the cache
    from mbridge_launch.base.errors import UserError

    try:
        return FieldTree(json.loads(Path(path).read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError("catalog.invalid", path=path, reason=f"not a field tree: {exc}") from None
