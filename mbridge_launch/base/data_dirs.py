"""Where recipe catalogs live besides the package: a site folder and the user's data folder.

`catalog sync` writes what a user extracts from a Megatron Bridge release to a folder of theirs,
never into the installed package: a shared or read-only install cannot take the file, and the
next `pip install -U` would delete it. Lookups search, in this order (the first folder that
holds a version wins; the others' copies of that version are shadowed):

1. the site folder named by $MBRIDGE_LAUNCH_CATALOGS (a shared install's catalogs, or any folder
   a user names for a session); `catalog sync` writes there too when it is set,
2. the user's data folder, $XDG_DATA_HOME/mbridge-launch/catalogs (~/.local/share/... when
   XDG_DATA_HOME is unset), where `catalog sync` writes by default,
3. the package's own catalog/ folder (the catalogs shipped with the release).

So a catalog synced by the user replaces a shipped one of the same version (their newer
extraction of the release they run), and an explicitly set site folder replaces both (the
folder `catalog sync` wrote to is the folder read first). `catalog list --catalog FILE` reads
one file outside these folders.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

CATALOGS_ENV = "MBRIDGE_LAUNCH_CATALOGS"
APP = "mbridge-launch"

# where a catalog was found, in lookup order; "file" is a --catalog FILE outside the folders
ORIGINS = ("site", "user", "package")


@dataclass(frozen=True)
class CatalogFolder:
    origin: str  # site | user | package
    path: Path


def user_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_DATA_HOME/mbridge-launch, or ~/.local/share/mbridge-launch (the XDG default). A
    relative XDG_DATA_HOME is invalid by the XDG spec and ignored, as the spec asks."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or ""
    if base and os.path.isabs(os.path.expanduser(base)):
        return Path(base).expanduser() / APP
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".local" / "share" / APP


def user_catalog_dir(env: Mapping[str, str] | None = None) -> Path:
    return user_data_dir(env) / "catalogs"


def site_catalog_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The folder named by $MBRIDGE_LAUNCH_CATALOGS, or None when it is unset or empty."""
    env = os.environ if env is None else env
    value = env.get(CATALOGS_ENV) or ""
    # absolute: sync writes there from any folder, and the watcher job reads it on another node
    return Path(value).expanduser().absolute() if value else None


def sync_target_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where `catalog sync` writes without --out: the site folder when it is set, else the
    user's data folder. Never the package."""
    return site_catalog_dir(env) or user_catalog_dir(env)


def catalog_folders(env: Mapping[str, str] | None = None) -> list[CatalogFolder]:
    """The folders searched for catalogs, first wins: site (when set), user, package."""
    from mbridge_launch.base.resources import catalog_dir

    folders = []
    site = site_catalog_dir(env)
    if site is not None:
        folders.append(CatalogFolder("site", site))
    folders.append(CatalogFolder("user", user_catalog_dir(env)))
    folders.append(CatalogFolder("package", catalog_dir()))
    return folders
