"""Locate the package data (catalog/, templates/) both when installed and in a source checkout."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

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
    return data_dir("catalog")


def sbatch_templates_dir() -> Path:
    return data_dir("templates/sbatch")
