"""Trim a Megatron Bridge source tree to what the static catalog sync reads, for a test fixture.

CI reaches only package registries, so tests/fixtures/megatron-bridge-0.7.0-tree/ holds the part of
the 0.7.0 tree (NVIDIA-NeMo/Megatron-Bridge main at 2026-08-22) that `catalog sync` reads: the
recipe modules and what they import. Which files that is comes from a sync itself (every file the
interpreter opens, plus the package __init__.py files on their way), so the list follows the
interpreter rather than a hand-kept one. A module the interpreter only asks about (is it part of
the package? then an unread name from it is unknown, not Megatron Core's default) is kept as a
one-line stub: only its existence matters.
Every module under models/ is also opened once by the
scan for `register_bridge(`: one that holds none and that the interpreter never loads (a second
read) cannot change the answer and is left out.

    python tests/tooling/trim_bridge_tree.py SOURCE_TREE OUT_DIR

Then `catalog sync --from OUT_DIR` must write the same recipes as `--from SOURCE_TREE`
(tests/unit/test_catalog_sync_070.py checks the fixture against values read from the recipes).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path, PurePosixPath

from mbridge_launch.catalog_sync import source as source_module
from mbridge_launch.catalog_sync.sync import build_catalog

# the fixture's root keeps the repository's layout: src/megatron/bridge/...
_PREFIX = "src"
_LICENSE_NOTE = (
    "Trimmed from https://github.com/NVIDIA-NeMo/Megatron-Bridge (main, commit {commit}), Apache License 2.0;\n"
    "only the files `mbridge-launch catalog sync` reads. Made by tests/tooling/trim_bridge_tree.py.\n"
)


_STUB = "# trimmed: catalog sync only asks whether this module exists (tests/tooling/trim_bridge_tree.py)\n"


def files_read(tree: Path) -> tuple[set[str], set[str]]:
    """Package paths ("megatron/bridge/...py") a sync of the tree reads, and those it only looks up."""
    reads: dict[str, int] = {}
    registering: set[str] = set()
    asked: set[str] = set()
    original = source_module.SourceTree.read
    original_module_path = source_module.SourceTree.module_path

    def recording_module_path(self: source_module.SourceTree, dotted: str) -> tuple[str, bool] | None:
        found = original_module_path(self, dotted)
        if found is not None:
            asked.add(found[0])
        return found

    def recording_read(self: source_module.SourceTree, path: str) -> str:
        text = original(self, path)
        reads[path] = reads.get(path, 0) + 1
        if "register_bridge(" in text:
            registering.add(path)
        return text

    source_module.SourceTree.read = recording_read  # type: ignore[method-assign]
    source_module.SourceTree.module_path = recording_module_path  # type: ignore[method-assign]
    try:
        build_catalog(tree)
    finally:
        source_module.SourceTree.read = original  # type: ignore[method-assign]
        source_module.SourceTree.module_path = original_module_path  # type: ignore[method-assign]
    scanned = "megatron/bridge/models/"
    read = {p for p, n in reads.items() if not p.startswith(scanned) or p in registering or n > 1}
    return read, asked - read


def with_packages(paths: set[str]) -> set[str]:
    """Each file plus the __init__.py of every package above it (module lookup needs them)."""
    out = set(paths) | {"megatron/bridge/__init__.py", "megatron/bridge/package_info.py"}
    for path in paths:
        parent = PurePosixPath(path).parent
        while str(parent).startswith("megatron/bridge"):
            out.add(f"{parent}/__init__.py")
            parent = parent.parent
    return out


def trim(tree: Path, out: Path, commit: str) -> int:
    root = tree / _PREFIX if (tree / _PREFIX / "megatron/bridge").is_dir() else tree
    read, looked_up = files_read(tree)
    kept = sorted(p for p in with_packages(read | looked_up) if (root / p).is_file())
    if out.exists():
        shutil.rmtree(out)
    for path in kept:
        target = out / _PREFIX / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path in read or path.endswith(("__init__.py", "package_info.py")):
            shutil.copyfile(root / path, target)
        else:
            target.write_text(_STUB)
    (out / "NOTICE").write_text(_LICENSE_NOTE.format(commit=commit))
    return len(kept)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: trim_bridge_tree.py SOURCE_TREE OUT_DIR [COMMIT]")
    count = trim(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else "unknown")
    print(f"kept {count} files")
