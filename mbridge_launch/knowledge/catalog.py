"""The recipe catalog at run time: catalog/megatron-bridge-<version>.json.

Several versions may sit side by side; `load_catalog()` takes the newest, `load_catalog("0.6.2")`
a given one. The files are JSON written by `mbridge-launch catalog sync` (catalog_sync/writer.py)
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
    def __init__(self, version: str, source: str, recipes: list[Recipe], meta: dict[str, Any] | None = None) -> None:
        self.version = version
        self.source = source  # the catalog file name
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
def _version_key(version: str) -> tuple:
    parts = re.split(r"[.+-]", version)
    return tuple((0, int(p), "") if p.isdigit() else (-1, 0, p) for p in parts)


def _catalog_dir(directory: str | Path | None) -> Path:
    if directory is not None:
        return Path(directory)
    from mbridge_launch.base.resources import catalog_dir

    return catalog_dir()


def available_versions(directory: str | Path | None = None) -> list[str]:
    """Megatron Bridge versions with a catalog file, oldest first."""
    folder = _catalog_dir(directory)
    versions = [m["version"] for p in folder.glob("megatron-bridge-*.json") if (m := _FILE_RE.match(p.name))]
    return sorted(versions, key=_version_key)


def catalog_file(version: str | None = None, directory: str | Path | None = None) -> Path:
    """The catalog file of that Megatron Bridge version (default: the newest)."""
    folder = _catalog_dir(directory)
    versions = available_versions(folder)
    if not versions:
        raise UserError("catalog.none", path=str(folder))
    chosen = versions[-1] if version is None else version
    if chosen not in versions:
        raise UserError("catalog.unknown_version", version=version, choices=", ".join(versions))
    return folder / f"megatron-bridge-{chosen}.json"


def load_catalog(version: str | None = None, directory: str | Path | None = None) -> Catalog:
    path = catalog_file(version, directory)
    stat = path.stat()
    return _load_file(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load_file(path: str, mtime_ns: int, size: int) -> Catalog:  # mtime and size key the cache
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise UserError("catalog.invalid", path=path, reason=f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError("catalog.invalid", path=path, reason="not a JSON object")
    try:
        recipes = [_recipe_from_data(r) for r in data.get("recipes") or []]
        version = str(data["megatron_bridge_version"])
    except (KeyError, TypeError) as exc:
        raise UserError("catalog.invalid", path=path, reason=f"missing {exc}") from None
    meta = {k: v for k, v in data.items() if k != "recipes"}
    return Catalog(version, Path(path).name, recipes, meta)
