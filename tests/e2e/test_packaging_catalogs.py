"""Packaging (marked `packaging`): on an INSTALLED wheel, `catalog sync` writes nothing into the
package (issue 35). The wheel is built from a copy of the checkout and installed with
`pip install --no-deps --target` into a temporary folder; the tool then runs from there (this
venv's dependencies, PYTHONPATH naming only the installed copy, no byte code written), with
XDG_DATA_HOME and HOME pointing at temporary folders. It syncs the committed 0.7.0 tree fixture
(the miniature tree when that fixture is absent), reads it back with `catalog list
--catalog-version`, and compares every file of the installed package, digest by digest, before
and after.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
TREE_070 = REPO / "tests" / "fixtures" / "megatron-bridge-0.7.0-tree"
BUILD_TIMEOUT = 900
COMMAND_TIMEOUT = 300


def _run(argv: list[str], what: str, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: no answer within {timeout:.0f} s: {' '.join(argv)}", pytrace=False)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n--- stdout (tail)\n{proc.stdout[-3000:]}"
                    f"\n--- stderr (tail)\n{proc.stderr[-3000:]}", pytrace=False)
    return proc


def _source_copy(target: Path) -> Path:
    """What git tracks plus untracked files it does not ignore (setuptools writes build/ beside
    the sources: never into the checkout)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, timeout=60, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if name.startswith("tests/fixtures/megatron-bridge-0.7.0-tree/"):
            continue  # not part of the wheel; spared the copy
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


def _tree_to_sync(tmp_path: Path) -> tuple[Path, str]:
    if TREE_070.is_dir():
        return TREE_070, "0.7.0"
    spec = importlib.util.spec_from_file_location("mini_bridge_pkg", REPO / "tests" / "fixtures" / "catalog" / "mini_bridge.py")
    mini = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mini)
    return mini.write_tree(tmp_path / "mini-tree"), mini.VERSION


def test_sync_on_an_installed_wheel_writes_nothing_into_the_package(tmp_path):
    source = _source_copy(tmp_path / "source")
    wheelhouse = tmp_path / "wheelhouse"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
          "-w", str(wheelhouse), str(source)], "building the wheel", BUILD_TIMEOUT)
    wheel = next(wheelhouse.glob("mbridge_launch-*.whl"))
    site = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir", "--target", str(site),
          str(wheel)], "pip install --no-deps --target", BUILD_TIMEOUT)
    package = site / "mbridge_launch"
    before = _digests(package)
    assert "catalog/megatron-bridge-0.6.2.json" in before

    data_home, home, work = tmp_path / "xdg-data", tmp_path / "home", tmp_path / "work"
    for folder in (home, work):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MBRIDGE_LAUNCH_", "XDG_"))}
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", XDG_DATA_HOME=str(data_home), HOME=str(home),
               MBRIDGE_LAUNCH_STRICT_MESSAGES="1")

    def tool(*args: str) -> subprocess.CompletedProcess:
        return _run([sys.executable, "-m", "mbridge_launch", *args], f"mbridge-launch {args[0]} {args[1]}",
                    COMMAND_TIMEOUT, env=env, cwd=work)

    where = _run([sys.executable, "-c", "import mbridge_launch; print(mbridge_launch.__file__)"], "import", 60,
                 env=env, cwd=work).stdout.strip()
    assert Path(where).parent == package, f"the tool ran from {where}, not from the installed wheel"

    tree, version = _tree_to_sync(tmp_path)
    synced = json.loads(tool("catalog", "sync", "--from", str(tree), "--format", "json").stdout)
    written = data_home / "mbridge-launch" / "catalogs" / f"megatron-bridge-{version}.json"
    assert Path(synced["path"]) == written and written.is_file()
    listed = json.loads(tool("catalog", "list", "--catalog-version", version, "--format", "json").stdout)
    assert listed["catalog"]["origin"] == "user" and listed["catalog"]["version"] == version
    assert len([r for r in listed["recipes"] if r["kind"] == "library"]) == synced["library"]
    info = json.loads(tool("versions", "--format", "json").stdout)
    origins = {c["version"]: (c["origin"], c["path"]) for c in info["catalogs"]["catalogs"]}
    assert origins["0.6.2"] == ("package", str(package / "catalog" / "megatron-bridge-0.6.2.json"))
    assert origins[version] == ("user", str(written))

    after = _digests(package)
    assert after == before, (f"the installed package changed: added {sorted(set(after) - set(before))}, "
                             f"changed {sorted(k for k in before if after.get(k, before[k]) != before[k])}")
