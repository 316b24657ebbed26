"""`catalog diff OLD NEW`: what changed between two recipe catalogs (two Megatron Bridge releases).

Each side is a catalog version shipped in the package (knowledge.catalog.available_versions) or
the path of a catalog file as `catalog sync` writes it (catalog_sync/writer.py). The comparison is
on the records as stored, so that every field the catalog keeps is compared and none is invented:

- recipe names added and removed, library and benchmark apart (ten benchmark functions share
  their name with a library recipe, so a recipe is identified by (kind, name));
- renames: a removed recipe and an added one linked by a name or legacy alias (Megatron Bridge
  renames a recipe and keeps the old name as an alias: llama3_8b_pretrain_config became
  llama3_8b_pretrain_2gpu_h100_bf16_config); they are compared like any recipe present in both;
- legacy aliases added and removed;
- per recipe present in both, each stored default that changed (parallelism, batch sizes, sequence
  lengths, precision, dataset.*, features.* such as recompute, env_vars.*, the finding codes);
- the name by which scripts/training/run_recipe.py loads each library recipe (a new benchmark
  function of the same name shadows it: Catalog.run_recipe_name), the one CLI fact the catalog
  holds;
- the catalog's own schema. Provenance (version, generated_from, comment) and the derived counts
  are shown, not counted as differences: a catalog re-synced from the same release compares equal.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.json_text import parse_json

KINDS = ("library", "benchmark")
MAX_CATALOG_BYTES = 64 << 20  # the 0.6.2 catalog is 1.8 MB; a file far larger is not a catalog
# Stored keys that identify a record or are compared on their own (aliases, findings).
_IDENTITY = ("name", "kind", "aliases", "findings")
# Mappings compared key by key ("features.recompute_granularity"), not as one value.
_NESTED = ("dataset", "features", "env_vars")
# Top-level keys that say where a catalog came from, or follow from its recipes: not differences.
_PROVENANCE = ("comment", "megatron_bridge_version", "generated_from", "counts", "recipes")


@dataclass(frozen=True)
class CatalogData:
    """One side of the comparison: the version, where it was read from, its records."""

    version: str
    source: str  # the shipped version's file name, or the path given
    meta: dict[str, Any]
    records: list[dict[str, Any]]


@dataclass(frozen=True)
class FieldChange:
    field: str  # the catalog's key: tensor_model_parallel_size, features.recompute_granularity, ...
    old: Any
    new: Any


@dataclass(frozen=True)
class RecipeChange:
    """A recipe present on both sides (under its new name) whose stored defaults differ."""

    kind: str
    name: str
    old_name: str  # == name unless renamed
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True)
class KindDiff:
    kind: str
    old_count: int
    new_count: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    renamed: tuple[tuple[str, str], ...]  # (old name, new name)
    aliases_added: tuple[str, ...]
    aliases_removed: tuple[str, ...]

    @property
    def differs(self) -> bool:
        return bool(self.added or self.removed or self.renamed or self.aliases_added or self.aliases_removed)


@dataclass(frozen=True)
class RunRecipeChange:
    """A library recipe that run_recipe.py now loads by another name (or can no longer load: None)."""

    recipe: str
    old: str | None
    new: str | None


@dataclass
class CatalogDiff:
    old: CatalogData
    new: CatalogData
    kinds: dict[str, KindDiff]
    changed: list[RecipeChange]
    run_recipe: list[RunRecipeChange]
    catalog: list[FieldChange]  # the catalog's own keys (schema)
    provenance: list[FieldChange] = field(default_factory=list)  # shown, never a difference

    @property
    def differs(self) -> bool:
        return any(k.differs for k in self.kinds.values()) or bool(self.changed or self.run_recipe or self.catalog)

    def field_counts(self) -> list[tuple[str, int]]:
        """How many recipes changed each field, most first (the summary of a release's changes)."""
        counts = Counter(f.field for change in self.changed for f in change.fields)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def to_dict(self) -> dict[str, Any]:
        def side(data: CatalogData) -> dict[str, Any]:
            return {"version": data.version, "source": data.source}

        def changes(items: list[FieldChange] | tuple[FieldChange, ...]) -> list[dict[str, Any]]:
            return [{"field": c.field, "old": c.old, "new": c.new} for c in items]

        return {
            "old": side(self.old), "new": side(self.new), "differs": self.differs,
            **{kind: {
                "old_count": d.old_count, "new_count": d.new_count, "added": list(d.added),
                "removed": list(d.removed), "renamed": [{"old": o, "new": n} for o, n in d.renamed],
                "aliases_added": list(d.aliases_added), "aliases_removed": list(d.aliases_removed),
            } for kind, d in self.kinds.items()},
            "changed": [{"kind": c.kind, "name": c.name, "old_name": c.old_name, "fields": changes(c.fields)}
                        for c in self.changed],
            "fields": dict(self.field_counts()),
            "run_recipe_names": [{"recipe": r.recipe, "old": r.old, "new": r.new} for r in self.run_recipe],
            "catalog": changes(self.catalog), "provenance": changes(self.provenance),
        }


# --- reading the two sides ----------------------------------------------------------------------------
def load_side(spec: str, directory: str | Path | None = None) -> CatalogData:
    """A shipped version ("0.6.2") or a catalog file's path; UserError (exit 2) naming the valid
    versions otherwise. A version wins over a file of the same name in the working directory."""
    from mbridge_launch.knowledge.catalog import available_versions, catalog_file

    versions = available_versions(directory)
    if spec in versions:
        path = catalog_file(spec, directory)
        return _parse(path, path.name, path.read_text(encoding="utf-8"), versions)
    if not _looks_like_path(spec):
        raise UserError("catalog.diff.unknown", value=spec, choices=", ".join(versions) or "-")
    return _parse(Path(spec), spec, _read(spec, versions), versions)


def _looks_like_path(spec: str) -> bool:
    """A path, not a mistyped version: it exists, or is written as one (a slash, a .json name).
    A NUL cannot be in a path (the OS refuses it with ValueError)."""
    if "\0" in spec or not spec:
        return False
    if "/" in spec or spec.endswith(".json"):
        return True
    try:
        return Path(spec).exists()
    except (OSError, ValueError):  # a name too long for the file system: not a path of this machine
        return False


def _read(spec: str, versions: list[str]) -> str:
    from mbridge_launch.base.files import read_bounded_text

    try:
        return read_bounded_text(spec, MAX_CATALOG_BYTES, "catalog")
    except UserError as exc:  # missing, not a regular file, too large, not UTF-8: say so, and the versions
        raise UserError("catalog.diff.bad_file", path=spec, reason=exc.render(),
                        choices=", ".join(versions) or "-") from None


def _parse(path: Path, source: str, text: str, versions: list[str]) -> CatalogData:
    def bad(reason: str) -> UserError:
        return UserError("catalog.diff.bad_file", path=str(path), reason=reason, choices=", ".join(versions) or "-")

    try:
        data = parse_json(text)
    except ValueError as exc:
        raise bad(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "megatron_bridge_version" not in data:
        raise bad("not a recipe catalog (no megatron_bridge_version)")
    records = data.get("recipes")
    if not isinstance(records, list):
        raise bad("no list of recipes")
    for index, record in enumerate(records):
        if not (isinstance(record, dict) and isinstance(record.get("name"), str) and record.get("kind") in KINDS):
            raise bad(f"recipe #{index + 1} has no name or no kind (library, benchmark)")
    meta = {k: v for k, v in data.items() if k != "recipes"}
    return CatalogData(str(data["megatron_bridge_version"]), source, meta, records)


# --- comparing ----------------------------------------------------------------------------------------
def diff_specs(old: str, new: str, directory: str | Path | None = None) -> CatalogDiff:
    return diff_catalogs(load_side(old, directory), load_side(new, directory))


def diff_catalogs(old: CatalogData, new: CatalogData) -> CatalogDiff:
    kinds: dict[str, KindDiff] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for kind in KINDS:
        diff, matched = _diff_kind(kind, _by_name(old.records, kind), _by_name(new.records, kind))
        kinds[kind] = diff
        pairs += matched
    changed = []
    for before, after in pairs:
        fields = tuple(_field_changes(before, after))
        if fields:
            changed.append(RecipeChange(after["kind"], after["name"], before["name"], fields))
    catalog, provenance = _meta_changes(old.meta, new.meta)
    return CatalogDiff(old, new, kinds, changed, _run_recipe_changes(old, new, pairs), catalog, provenance)


def _by_name(records: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in records if r["kind"] == kind}


def _names(record: dict[str, Any]) -> set[str]:
    return {record["name"], *(a for a in record.get("aliases") or () if isinstance(a, str))}


def _diff_kind(kind: str, old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]
               ) -> tuple[KindDiff, list[tuple[dict[str, Any], dict[str, Any]]]]:
    removed = sorted(set(old) - set(new))
    added = sorted(set(new) - set(old))
    renamed: list[tuple[str, str]] = []
    for name in list(removed):  # one-to-one, in name order: deterministic
        link = next((a for a in added if _names(old[name]) & _names(new[a])), None)
        if link is not None:
            renamed.append((name, link))
            removed.remove(name)
            added.remove(link)
    pairs = [(old[n], new[n]) for n in sorted(set(old) & set(new))] + [(old[o], new[n]) for o, n in renamed]
    old_aliases = {a for r in old.values() for a in r.get("aliases") or ()}
    new_aliases = {a for r in new.values() for a in r.get("aliases") or ()}
    diff = KindDiff(kind, len(old), len(new), tuple(added), tuple(removed), tuple(renamed),
                    tuple(sorted(new_aliases - old_aliases)), tuple(sorted(old_aliases - new_aliases)))
    return diff, pairs


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """The compared fields of a record: top-level keys, nested mappings one key each, the
    aliases as a sorted list and the findings as their sorted codes."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key in _IDENTITY:
            continue
        if key in _NESTED and isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    out["aliases"] = sorted(a for a in record.get("aliases") or () if isinstance(a, str))
    out["findings"] = sorted(f.get("code", "?") for f in record.get("findings") or () if isinstance(f, dict))
    return out


def _field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    """Fields whose stored value differs; a key one side lacks reads as null (the catalog's
    'the source does not fix the value')."""
    before, after = _flat(old), _flat(new)
    keys = list(dict.fromkeys([*after, *before]))  # the new catalog's order, then keys it dropped
    return [FieldChange(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]


def _run_recipe_changes(old: CatalogData, new: CatalogData, pairs: list[tuple[dict[str, Any], dict[str, Any]]]
                        ) -> list[RunRecipeChange]:
    """Library recipes whose run_recipe.py name from the old catalog no longer loads them: a new
    benchmark function of that name shadows it, or the name is gone. A rename that keeps the old
    name as an alias is not one (the old command still works)."""
    old_names, new_names = _run_recipe_names(old), _run_recipe_names(new)
    benchmarks = {r["name"] for r in new.records if r["kind"] == "benchmark"}
    out = []
    for before, after in pairs:
        if after["kind"] != "library":
            continue
        was, now = old_names.get(before["name"]), new_names.get(after["name"])
        still_loads = was is not None and was in _names(after) and was not in benchmarks
        if was != now and not still_loads:
            out.append(RunRecipeChange(after["name"], was, now))
    return out


def _run_recipe_names(data: CatalogData) -> dict[str, str | None]:
    """Library recipe -> the name run_recipe.py loads it by, by the one rule (Catalog.run_recipe_name:
    a benchmark function of the same name takes precedence, a shadowed recipe is reached by an alias)."""
    from mbridge_launch.knowledge.catalog import Catalog, Recipe

    recipes = [Recipe(name=r["name"], kind=r["kind"], aliases=[a for a in r.get("aliases") or () if isinstance(a, str)])
               for r in data.records]
    catalog = Catalog(data.version, data.source, recipes)
    return {r.name: catalog.run_recipe_name(r.name) for r in recipes if r.kind == "library"}


def _meta_changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[FieldChange], list[FieldChange]]:
    catalog: list[FieldChange] = []
    provenance: list[FieldChange] = []
    for key in dict.fromkeys([*new, *old]):
        if key == "comment" or old.get(key) == new.get(key):
            continue
        (provenance if key in _PROVENANCE else catalog).append(FieldChange(key, old.get(key), new.get(key)))
    return catalog, provenance
