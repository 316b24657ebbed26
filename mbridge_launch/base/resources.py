"""Locate the package data (catalog/, templates/) both when installed and in a source checkout."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # mbridge_launch/


@lru_cache(maxsize=None)
def data_dir(name: str) -> Path:
    """`catalog` or `templates/sbatch`: installed under the package, or at the repository root
    (editable installs and source checkouts keep them beside mbridge_launch/)."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"package data folder {name!r} not found next to {_PACKAGE_DIR}")


def catalog_dir() -> Path:
    """The package's own catalog/ folder (shipped data): read only. Catalogs a user syncs go to
    base/data_dirs.py's folders, which the catalog lookup searches before this one."""
    return data_dir("catalog")


@lru_cache(maxsize=None)
def catalog_yaml(name: str) -> dict[str, Any]:
    """The data of one YAML file of catalog/ (`hardware.yaml`...), read once per process; {} for
    an empty file. Callers share the result: they must not change it."""
    import yaml  # imported on first use: commands that read no catalog file do not pay for it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(catalog_dir() / name, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader) or {}


def sbatch_templates_dir() -> Path:
    return data_dir("templates/sbatch")
