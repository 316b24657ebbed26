"""`catalog verify` refuses clearly, before running anything heavy: a Python without Megatron
Bridge, a Python that cannot run, and a Megatron Bridge of another release than the catalog's.
(The real run is tests/bridge/test_catalog_verify.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

from cli_helpers import one_line_error


def _fake_python(tmp_path: Path, version: str) -> Path:
    """A 'Python' whose Megatron Bridge reports `version` (the probe prints it as JSON)."""
    path = tmp_path / "python"
    path.write_text(f'#!/bin/sh\necho \'"{version}"\'\n')
    path.chmod(0o755)
    return path


def test_python_without_megatron_bridge_is_a_one_line_error(mbl):
    line = one_line_error(mbl.run("catalog", "verify", "--python", sys.executable))
    assert "Megatron Bridge is not installed in" in line and "--python PATH" in line


def test_python_that_cannot_run(mbl, tmp_path):
    line = one_line_error(mbl.run("catalog", "verify", "--python", tmp_path / "missing" / "python"))
    assert "cannot run" in line


def test_other_release_than_the_catalog_asks_for_a_sync(mbl, tmp_path):
    line = one_line_error(mbl.run("catalog", "verify", "--python", _fake_python(tmp_path, "0.7.1")))
    assert "Megatron Bridge 0.7.1" in line and "the catalog is for 0.6.2" in line and "catalog sync" in line


def test_in_chinese(mbl, tmp_path):
    line = one_line_error(mbl.run("catalog", "verify", "--python", _fake_python(tmp_path, "0.7.1"), lang="zh"))
    assert "目录对应 0.6.2" in line
