"""`mbridge-launch catalog diff OLD NEW`: exit 0 without a difference, 1 with, 2 for bad input
(naming the shipped versions); text, JSON and Chinese output, on the synthetic catalogs of
tests/catalog_diff_fixtures.py and the shipped one."""

from __future__ import annotations

import os

import catalog_diff_fixtures as fx
from cli_helpers import one_line_error
from mbridge_launch.knowledge.catalog import available_versions

SHIPPED = available_versions()[-1]


def test_same_version_no_difference_exit_0(mbl):
    result = mbl.run("catalog", "diff", SHIPPED, SHIPPED)
    assert result.rc == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "no differences"


def test_text_lists_every_change_exit_1(mbl, tmp_path):
    old, new = fx.old_and_new(tmp_path)
    result = mbl.run("catalog", "diff", old, new)
    assert result.rc == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"catalog diff: Megatron Bridge 0.0.1 ({old}) -> 0.0.2 ({new})"
    assert f"  + {fx.ADDED}" in lines and f"  - {fx.REMOVED}" in lines
    assert any(line.startswith(f"  ~ {fx.RENAMED} -> {fx.RENAMED_TO}") for line in lines)
    assert "    tensor_model_parallel_size: 1 -> 2" in lines
    assert '    dataset.selector: "mock" -> "squad"' in lines
    assert lines[-1] == "differences found"


def test_json(mbl, tmp_path):
    old, new = fx.old_and_new(tmp_path)
    result = mbl.run("catalog", "diff", old, new, "--format", "json")
    assert result.rc == 1, result.stderr
    data = result.json()
    assert data["differs"] is True
    assert data["library"]["added"] == [fx.ADDED] and data["library"]["removed"] == [fx.REMOVED]
    assert data["benchmark"]["added"] == [fx.KEPT]
    kept = next(c for c in data["changed"] if c["name"] == fx.KEPT)
    assert {"field": "global_batch_size", "old": 512, "new": 256} in kept["fields"]
    assert data["run_recipe_names"][0]["recipe"] == fx.KEPT


def test_json_without_difference(mbl):
    result = mbl.run("catalog", "diff", SHIPPED, SHIPPED, "--format", "json")
    assert result.rc == 0 and result.json()["differs"] is False and result.json()["changed"] == []


def test_chinese(mbl, tmp_path):
    old, new = fx.old_and_new(tmp_path)
    result = mbl.run("catalog", "diff", old, new, "--lang", "zh")
    assert result.rc == 1, result.stderr
    assert result.stdout.startswith("配方目录比较：Megatron Bridge 0.0.1")
    assert "库配方：3 -> 3；新增 1，删除 1，改名 1" in result.stdout
    assert result.stdout.strip().endswith("发现差异")


def test_unknown_version_names_the_shipped_ones(mbl):
    line = one_line_error(mbl.run("catalog", "diff", "0.5.9", SHIPPED))
    assert "'0.5.9' is neither a shipped catalog version nor a catalog file" in line
    assert f"shipped versions: {', '.join(available_versions())}" in line


def test_unknown_version_in_chinese(mbl):
    line = one_line_error(mbl.run("catalog", "diff", SHIPPED, "9.9", lang="zh"))
    assert "'9.9' 既不是" in line and SHIPPED in line


def test_missing_unreadable_and_invalid_files(mbl, tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    for path in (tmp_path / "missing.json", tmp_path, bad_json):
        line = one_line_error(mbl.run("catalog", "diff", path, SHIPPED))
        assert f"catalog diff: {path} cannot be read as a recipe catalog" in line, line
        assert f"shipped versions: {', '.join(available_versions())}" in line


def test_unreadable_file(mbl, tmp_path):
    if os.geteuid() == 0:  # root reads a mode-000 file: a FIFO stands in (refused, never blocks)
        path = tmp_path / "fifo.json"
        os.mkfifo(path)
    else:
        path = tmp_path / "locked.json"
        path.write_text("{}")
        path.chmod(0)
    line = one_line_error(mbl.run("catalog", "diff", SHIPPED, path))
    assert str(path) in line and "shipped versions" in line


def test_control_characters_in_a_name_are_escaped(mbl, tmp_path):
    line = one_line_error(mbl.run("catalog", "diff", "0.6\x1b[2J", SHIPPED))
    assert "\x1b" not in line and "\\x1b[2J" in line
