"""Helpers shared by the CLI-level tests."""

from __future__ import annotations

import json

from mbridge_launch.cli.main import main


def recommend_answer(capsys, *args: str) -> dict:
    """`mbridge-launch recommend ARGS --format json`, in process; the parsed answer."""
    rc = main(["recommend", *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)
