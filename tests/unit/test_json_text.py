"""A user's JSON nested too deeply is bad JSON (ValueError), never an internal error."""

from __future__ import annotations

import pytest

from mbridge_launch.base.json_text import parse_json
from mbridge_launch.cli.main import main

DEEP = "[" * 100_000 + "]" * 100_000  # 200 kB: inside every size bound, far past the recursion limit


def test_parse_json_reads_json_and_refuses_a_document_nested_too_deeply():
    assert parse_json('{"a": [1, 2]}') == {"a": [1, 2]}
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json(DEEP)


@pytest.mark.parametrize("argv", [
    ["catalog", "diff", "{deep}", "0.6.2"],
    ["estimate", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--calibration", "{deep}"],
])
def test_a_deeply_nested_file_is_a_clear_error_with_exit_2(tmp_path, capsys, argv):
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP, encoding="utf-8")
    code = main([a.replace("{deep}", str(deep)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "nested too deeply" in err and "internal error" not in err
