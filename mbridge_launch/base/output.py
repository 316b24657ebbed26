"""Printing helpers shared by commands (JSON to stdout, text in the user's language)."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(data: Any) -> None:
    """`data` as JSON on stdout. json.dumps escapes C0 controls itself but leaves DEL, C1 controls,
    U+2028 and bidi overrides raw: those become JSON escapes too (the same value, still valid JSON),
    so that the escaping stream has nothing to change in it."""
    from mbridge_launch.base.escape import json_printable

    sys.stdout.write(json_printable(json.dumps(data, indent=2, ensure_ascii=False, default=str)))
    sys.stdout.write("\n")
