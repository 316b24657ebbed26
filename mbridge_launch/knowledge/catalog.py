"""The recipe catalog at run time: megatron-bridge-<version>.json files.

They are found in the site folder ($MBRIDGE_LAUNCH_CATALOGS), the user's data folder (where
`catalog sync` writes) and the package's catalog/ folder, in that order, the first holding a
version answering for it (base/data_dirs.py). Several versions may sit side by side;
`load_catalog()` takes the newest, `load_catalog("0.6.2")` a given one, `load_catalog(file=...)`
one file. The files are JSON written by `mbridge-launch catalog sync` (catalog_sync/writer.py)
and read with `json.loads` (a few tens of milliseconds for ~1000 recipes).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.vocabulary import RECIPE_KEYS, catalog_field

_FILE_RE = re.compile(r"^megatron-bridge-(?P<version>.+)\.json$")

# Recipe attribute -> Megatron field name, in the catalog's order.
MEGATRON_NAMES: dict[str, str] = {attr: catalog_field(attr) for attr in RECIPE_KEYS}


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    severity: str = "warning"
    message_zh: str = ""

    def text(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import current_lang

        return self.message_zh if (lang or current_lang()) == "zh" and self.message_zh else self.message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class Recipe:
    name: str
    kind: str  # library | benchmark
    aliases: list[str] = field(default_factory=list)
    family: str | None = None
    model: str | None = None
    mode: str | None = None  # pretrain | sft | peft
    hardware: str | None = None
    gpus: int | None = None
    precision: str | None = None
    variant: str | None = None
    module: str | None = None
    raises_not_implemented: bool = False
    hf_model_id: str | None = None
    tp: int | None = None
    pp: int | None = None
    vp: int | None = None
    cp: int | None = None
    ep: int | None = None
    etp: int | None = None
    sp: bool | None = None
    mbs: int | None = None
    gbs: int | None = None
    seq_length: int | None = None
    dataset_seq_length: int | None = None
    train_iters: int | None = None
    peft_scheme: str | None = None  # lora | dora | None
    dataset: dict[str, Any] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # Megatron fields the recipe sets at run time, which the static reading could not resolve
    unresolved: tuple[str, ...] = ()

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def megatron_fields(self) -> dict[str, Any]:
        """The layout under Megatron's names (tensor_model_parallel_size, ...)."""
        return {megatron: getattr(self, attr) for attr, megatron in MEGATRON_NAMES.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON form for other tools: identity, then Megatron field names, then the rest."""
        data: dict[str, Any] = {
            "name": self.name, "aliases": list(self.aliases), "kind": self.kind, "family": self.family,
            "model": self.model, "mode": self.mode, "hardware": self.hardware, "gpus": self.gpus,
            "precision": self.precision, "variant": self.variant, "module": self.module,
            "raises_not_implemented": self.raises_not_implemented, "hf_model_id": self.hf_model_id,
        }
        data.update(self.megatron_fields())
        data.update({
            "peft_scheme": self.peft_scheme, "dataset": dict(self.dataset), "features": dict(self.features),
            "env_vars": dict(self.env_vars), "findings": [f.to_dict() for f in self.findings],
            "unresolved": list(self.unresolved),
        })
        return data


def _recipe_from_data(data: dict[str, Any]) -> Recipe:
    values = {attr: data.get(megatron) for attr, megatron in MEGATRON_NAMES.items()}
    findings = [
        Finding(f.get("code", "?"), f.get("message", ""), f.get("severity", "warning"), f.get("message_zh", ""))
        for f in data.get("findings") or []
    ]
    return Recipe(
        name=data["name"], kind=data["kind"], aliases=list(data.get("aliases") or []), family=data.get("family"),
        model=data.get("model"), mode=data.get("mode"), hardware=data.get("hardware"), gpus=data.get("gpus"),
        precision=data.get("precision"), variant=data.get("variant"), module=data.get("module"),
        raises_not_implemented=bool(data.get("raises_not_implemented")), hf_model_id=data.get("hf_model_id"),
        peft_scheme=data.get("peft_scheme"), dataset=data.get("dataset") or {}, features=data.get("features") or {},
        env_vars=data.get("env_vars") or {}, findings=findings, unresolved=tuple(data.get("unresolved") or ()), **values,
    )


class Catalog:
    def __init__(self, version: str, source: str, recipes: list[Recipe], meta: dict[str, Any] | None = None, *,
                 origin: str = "package", path: Path | None = None) -> None:
        self.version = version
        self.source = source  # the catalog file name (what a Plan records: never a user's path)
        self.origin = origin  # where it was found: site | user | package | folder | file
        self.path = path
        self.recipes = recipes
        self.meta = meta or {}
        self._by_name: dict[str, list[Recipe]] = {}
        for recipe in recipes:
            for name in (recipe.name, *recipe.aliases):
                self._by_name.setdefault(name, []).append(recipe)

    def get(self, name_or_alias: str, kind: str | None = None) -> Recipe | None:
        """A recipe by canonical name or legacy alias. Ten benchmark functions share their name with a
        library recipe; without `kind` the library one wins (the one meant for real training)."""
        candidates = self._by_name.get(name_or_alias, [])
        if kind is not None:
            candidates = [r for r in candidates if r.kind == kind]
        for recipe in candidates:
            if recipe.kind == "library":
                return recipe
        return candidates[0] if candidates else None

    def require(self, name_or_alias: str, kind: str | None = None) -> Recipe:
        recipe = self.get(name_or_alias, kind)
        if recipe is None:
            close = self.closest(name_or_alias)
            if close:
                raise UserError("catalog.unknown_recipe", name=name_or_alias, choices=", ".join(close))
            raise UserError("catalog.unknown_recipe_none", name=name_or_alias)
        return recipe

    def run_recipe_name(self, name: str) -> str | None:
        """The name by which scripts/training/run_recipe.py loads the LIBRARY recipe `name`, or None
        when it cannot. run_recipe.py gives a benchmark function precedence over a library recipe
        of the same name (recipe_metadata: benchmark precedence; "Use the corresponding generic
        alias from megatron.bridge.recipes"), so a shadowed library recipe is reached only by one of
        its aliases; one without an alias not at all (glm52_sft_192gpu_gb200_bf16_config, ...)."""
        library = self.get(name, kind="library")
        if library is None:
            return None
        if not any(r.kind == "benchmark" and r.name == library.name for r in self._by_name.get(library.name, [])):
            return library.name
        return library.aliases[0] if library.aliases else None

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def closest(self, name: str, count: int = 5) -> list[str]:
        return difflib.get_close_matches(name, self.names(), n=count, cutoff=0.5)

    def by_model(self, model_token: str) -> list[Recipe]:
        return [r for r in self.recipes if r.model == model_token]

    def filter(self, family: str | None = None, mode: str | None = None, kind: str | None = None) -> list[Recipe]:
        return [
            r for r in self.recipes
            if (family is None or r.family == family) and (mode is None or r.mode == mode) and (kind is None or r.kind == kind)
        ]


# --- files -------------------------------------------------------------------------------------------
MAX_CATALOG_BYTES = 64 << 20  # the 0.6.2 catalog is 1.8 MB; a file far larger is not a catalog


@dataclass(frozen=True)
class CatalogEntry:
    """One available catalog version: the file that answers for it, the folder it was found in
    (base/data_dirs.ORIGINS, or "folder" for an explicit directory), and the copies of the same
    version further down the search order, which it shadows."""

    version: str
    path: Path
    origin: str
    shadowed: tuple[Path, ...] = ()


def _version_key(version: str) -> tuple:
    parts = re.split(r"[.+-]", version)
    return tuple((0, int(p), "") if p.isdigit() else (-1, 0, p) for p in parts)


def _versions_in(folder: Path) -> dict[str, Path]:
    """version -> file of the catalogs in one folder; {} when the folder does not exist (the user's
    data folder before the first sync). A folder that exists but cannot be listed, or a file where
    the folder should be, is one line naming it (not silently an empty folder)."""
    import os

    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries]
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        raise UserError("catalog.folder_unreadable", path=str(folder), reason="not a folder") from None
    except OSError as exc:
        raise UserError("catalog.folder_unreadable", path=str(folder), reason=exc.strerror or str(exc)) from None
    return {m["version"]: folder / name for name in names if (m := _FILE_RE.match(name))}


def catalog_entries(directory: str | Path | None = None, problems: list[UserError] | None = None) -> list[CatalogEntry]:
    """Every available catalog version, oldest first: from `directory` alone when given, else from
    the site folder, the user's data folder and the package, the first folder holding a version
    answering for it (base/data_dirs.py explains the order). A folder that cannot be read is a
    UserError, or, when `problems` is a list (doctor, versions: they report, not stop), appended
    to it and skipped."""
    from mbridge_launch.base.data_dirs import CatalogFolder, catalog_folders

    folders = [CatalogFolder("folder", Path(directory))] if directory is not None else catalog_folders()
    found: dict[str, CatalogEntry] = {}
    for folder in folders:
        try:
            in_folder = _versions_in(folder.path)
        except UserError as exc:
            if problems is None:
                raise
            problems.append(exc)
            continue
        for version, path in in_folder.items():
            first = found.get(version)
            if first is None:
                found[version] = CatalogEntry(version, path, folder.origin)
            elif path.resolve() != first.path.resolve():  # the same folder named twice shadows nothing
                found[version] = CatalogEntry(version, first.path, first.origin, (*first.shadowed, path))
    return [found[v] for v in sorted(found, key=_version_key)]


def companion_file(name: str, directory: str | Path | None = None) -> Path:
    """A file that goes with a catalog version (config-fields-<version>.json): in `directory` when
    given, else in the first of the catalog folders holding it, else where the package would."""
    from mbridge_launch.base.data_dirs import catalog_folders

    if directory is not None:
        return Path(directory) / name
    folders = catalog_folders()
    for folder in folders:
        try:
            if (folder.path / name).is_file():
                return folder.path / name
        except OSError:  # a folder that cannot be searched holds nothing for us (versions says why)
            continue
    return folders[-1].path / name


def available_versions(directory: str | Path | None = None) -> list[str]:
    """Megatron Bridge versions with a catalog file, oldest first."""
    return [entry.version for entry in catalog_entries(directory)]


def find_catalog(version: str | None = None, directory: str | Path | None = None) -> CatalogEntry:
    """The catalog of that Megatron Bridge version (default: the newest) and where it was found."""
    entries = catalog_entries(directory)
    if not entries:
        from mbridge_launch.base.data_dirs import catalog_folders

        where = str(directory) if directory is not None else ", ".join(str(f.path) for f in catalog_folders())
        raise UserError("catalog.none", path=where)
    if version is None:
        return entries[-1]
    for entry in entries:
        if entry.version == version:
            return entry
    raise UserError("catalog.unknown_version", version=version, choices=", ".join(e.version for e in entries))


def catalog_file(version: str | None = None, directory: str | Path | None = None) -> Path:
    """The catalog file of that Megatron Bridge version (default: the newest)."""
    return find_catalog(version, directory).path


def load_catalog(version: str | None = None, directory: str | Path | None = None, *,
                 file: str | Path | None = None) -> Catalog:
    """A catalog by version (found in the folders) or, with `file`, that one file (--catalog FILE)."""
    if file is not None:
        return _load(Path(file), "file", None)
    entry = find_catalog(version, directory)
    return _load(entry.path, entry.origin, entry.version)


def read_catalog_text(path: str | Path) -> str:
    """The text of a catalog file, bounded: a missing, irregular, huge or non-UTF-8 file is one line."""
    from mbridge_launch.base.files import read_bounded_text

    return read_bounded_text(path, MAX_CATALOG_BYTES, "catalog")


def _load(path: Path, origin: str, named_version: str | None) -> Catalog:
    import os

    try:
        stat = os.stat(path)
    except OSError:
        stat = None  # read_catalog_text says why, in one line
    key = (stat.st_mtime_ns, stat.st_size) if stat is not None else (0, -1)
    catalog = _load_file(str(path), *key, origin)
    if named_version is not None and catalog.version != named_version:
        # a renamed or hand-copied file: a Plan would record one version and plan with another
        raise UserError("catalog.invalid", path=str(path),
                        reason=f"megatron_bridge_version is {catalog.version}, the file name says {named_version}")
    return catalog


@lru_cache(maxsize=8)
def _load_file(path: str, mtime_ns: int, size: int, origin: str) -> Catalog:  # mtime and size key the cache
    text = read_catalog_text(path)
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError
        raise UserError("catalog.invalid", path=path, reason=f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError("catalog.invalid", path=path, reason="not a JSON object")
    try:
        recipes = [_recipe_from_data(r) for r in data.get("recipes") or []]
        version = str(data["megatron_bridge_version"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise UserError("catalog.invalid", path=path, reason=f"missing or malformed {exc}") from None
    meta = {k: v for k, v in data.items() if k != "recipes"}
    return Catalog(version, Path(path).name, recipes, meta, origin=origin, path=Path(path))
