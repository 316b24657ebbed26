"""Write the catalog as YAML, byte for byte the same for the same input.

A small emitter of our own rather than yaml.dump: its output cannot drift with the PyYAML
version. Each recipe is a block mapping; its nested values (aliases, dataset, features, env_vars,
each finding) are written on one line as JSON, which is also valid YAML flow syntax. That keeps
the file short and lets mbridge_launch.knowledge.catalog read it with json instead of a YAML parser
(about ten times faster), while any YAML reader still reads the same data.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_YAML_UNSAFE = re.compile("[\u007f-\u009f\u2028\u2029\ufeff]")
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
# top-level keys whose values are written in flow style on one line
_FLOW_KEYS = {"aliases", "dataset", "features", "env_vars", "counts"}


def scalar(value: Any) -> str:
    """A block-context scalar: plain when unambiguous, else JSON (a valid YAML double-quoted)."""
    if isinstance(value, str) and _PLAIN.match(value) and value.lower() not in _RESERVED:
        return value
    return _json_scalar(value)


def _json_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    return _escape(json.dumps(str(value), ensure_ascii=False))


def _escape(text: str) -> str:
    """Escape what YAML reads as a line break or forbids inside a double-quoted scalar
    (NEL, LS, PS, other C1 controls, BOM); JSON leaves them raw."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    # YAML 1.1 (PyYAML) needs a dot in the mantissa to read 1e-05 as a float.
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def flow(value: Any) -> str:
    """JSON text for a nested value (YAML flow syntax too)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json_scalar(str(k))}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"{value} has no JSON form")
    return _json_scalar(value)


def dump_catalog(header_lines: list[str], meta: dict[str, Any], recipes: list[dict[str, Any]]) -> str:
    lines = [f"# {line}" if line else "#" for line in header_lines]
    for key, value in meta.items():
        lines.append(f"{scalar(key)}: {flow(value) if isinstance(value, (dict, list)) else scalar(value)}")
    lines.append("recipes:")
    for recipe in recipes:
        first = True
        for key, value in recipe.items():
            prefix = "- " if first else "  "
            first = False
            if key == "findings":
                if not value:
                    lines.append(f"{prefix}findings: []")
                    continue
                lines.append(f"{prefix}findings:")
                lines.extend(f"  - {flow(item)}" for item in value)
            elif key in _FLOW_KEYS or isinstance(value, (dict, list)):
                lines.append(f"{prefix}{scalar(key)}: {flow(value)}")
            else:
                lines.append(f"{prefix}{scalar(key)}: {scalar(value)}")
    return "\n".join(lines) + "\n"
