"""Read Megatron Bridge Python sources from a wheel (a zip) or a source tree, never importing them.

Both kinds answer the same questions: which modules exist, the text of a module, and the
package version. A wheel is read with `zipfile`; a tree may be the repository root (with
`src/megatron/bridge`), an unpacked wheel, or any folder holding `megatron/bridge`.
"""

from __future__ import annotations

import ast
import re
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.files import open_regular_binary, read_bounded

_PACKAGE = "megatron/bridge"
SOURCE_FILE_MAX = 8 << 20  # one .py file or METADATA of the checkout; Bridge's largest are ~100 KB


class SourceTree:
    """Python files of the `megatron.bridge` package, keyed by their path inside the package root."""

    def __init__(self, origin: Path, files: dict[str, bytes], metadata: str | None) -> None:
        self.origin = origin
        self._files = files  # "megatron/bridge/recipes/common.py" -> bytes
        self._metadata = metadata

    # --- modules -----------------------------------------------------------------------------
    def module_path(self, dotted: str) -> tuple[str, bool] | None:
        """File of a dotted module and whether it is a package, or None if the wheel lacks it."""
        base = dotted.replace(".", "/")
        if f"{base}/__init__.py" in self._files:
            return f"{base}/__init__.py", True
        if f"{base}.py" in self._files:
            return f"{base}.py", False
        return None

    def has_package(self, dotted: str) -> bool:
        prefix = dotted.replace(".", "/") + "/"
        return any(path.startswith(prefix) for path in self._files)

    def read(self, path: str) -> str:
        return self._files[path].decode("utf-8")

    def paths_under(self, prefix: str) -> list[str]:
        """Paths of the .py files under a folder of the package root ("megatron/bridge/models/"), sorted."""
        return sorted(path for path in self._files if path.startswith(prefix) and path.endswith(".py"))

    def subpackages(self, dotted: str) -> list[str]:
        """Direct sub-packages (folders with __init__.py) of a package, sorted."""
        prefix = dotted.replace(".", "/") + "/"
        names = set()
        for path in self._files:
            if path.startswith(prefix):
                rest = path[len(prefix):].split("/")
                if len(rest) == 2 and rest[1] == "__init__.py":
                    names.add(rest[0])
        return [f"{dotted}.{name}" for name in sorted(names)]

    # --- version -------------------------------------------------------------------------------
    def version(self) -> str:
        if self._metadata:
            version = HeaderParser().parsestr(self._metadata).get("Version")
            if version:
                return version.strip()
        info = self._files.get(f"{_PACKAGE}/package_info.py")
        if info is not None:
            version = _version_from_package_info(info.decode("utf-8"))
            if version:
                return version
        raise UserError("catalog.sync.no_version", path=str(self.origin))


def _version_from_package_info(text: str) -> str | None:
    """MAJOR.MINOR.PATCH + PRE_RELEASE from package_info.py, read with ast (never executed)."""
    parts: dict[str, object] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant):
                parts[node.targets[0].id] = node.value.value
    if not all(key in parts for key in ("MAJOR", "MINOR", "PATCH")):
        return None
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE') or ''}"


def open_source(path: str | Path) -> SourceTree:
    """A wheel file or a folder holding megatron/bridge (directly or under src/)."""
    origin = Path(path)
    if not origin.exists():
        raise UserError("file.not_found", path=str(origin))
    if origin.is_file():
        return _from_wheel(origin)
    for root in (origin, origin / "src"):
        if (root / _PACKAGE / "__init__.py").is_file():
            return _from_tree(origin, root)
    raise UserError("catalog.sync.not_bridge", path=str(origin))


def _from_wheel(path: Path) -> SourceTree:
    handle = open_regular_binary(path, "wheel")  # a FIFO would hang ZipFile's own open
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError) as exc:
        handle.close()
        raise UserError("catalog.sync.bad_wheel", path=str(path), reason=str(exc)) from None
    files: dict[str, bytes] = {}
    metadata = None
    with handle, archive:
        for name in archive.namelist():
            if name.startswith(_PACKAGE + "/") and name.endswith(".py"):
                files[name] = archive.read(name)
            elif re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
                metadata = archive.read(name).decode("utf-8", "replace")
    if f"{_PACKAGE}/__init__.py" not in files:
        raise UserError("catalog.sync.not_bridge", path=str(path))
    return SourceTree(path, files, metadata)


def _from_tree(origin: Path, root: Path) -> SourceTree:
    files: dict[str, bytes] = {}
    for file in sorted((root / _PACKAGE).rglob("*.py")):
        files[str(PurePosixPath(file.relative_to(root).as_posix()))] = read_bounded(file, SOURCE_FILE_MAX, "source")
    metadata = None
    for meta in sorted(root.glob("megatron_bridge-*.dist-info/METADATA")):
        metadata = read_bounded(meta, SOURCE_FILE_MAX, "source").decode("utf-8", "replace")
    return SourceTree(origin, files, metadata)
