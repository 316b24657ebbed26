"""JSON text read from a user's file, with one way to fail: ValueError.

`json.loads` raises RecursionError for a document nested deeper than Python's recursion limit (a
few thousand "[" are enough, well inside any size bound), which the readers' `except ValueError`
let through as an internal error. Every reader of a user's JSON parses through `parse_json`.
"""

from __future__ import annotations

import json
from typing import Any


def parse_json(text: str | bytes, **kwargs: Any) -> Any:
    """json.loads(text), with a too deeply nested document a ValueError like any other bad JSON."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
