"""Write the catalog as JSON, byte for byte the same for the same input.

`json.dumps` with one space of indent, the keys in the extractor's order (identity, then the
Megatron field names, then the rest, as `Recipe.to_dict` lists them) and non-ASCII text kept
readable: one value per line, so that a diff between two releases shows what changed. The
reader (mbridge_launch.knowledge.catalog) is plain `json.loads`.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Characters that some editors and diff tools show as line breaks (NEL, LS, PS) or hide (other C1
# controls, BOM); JSON allows them raw inside strings, the writer escapes them. They can only occur
# inside strings (the JSON structure is ASCII), so replacing them in the text is exact.
_INVISIBLE = re.compile("[\u007f-\u009f\u2028\u2029\ufeff]")


def dump_catalog(comment: str, meta: dict[str, Any], recipes: list[dict[str, Any]]) -> str:
    """The catalog file: {"comment": ..., **meta, "recipes": [...]}. NaN and infinity have no JSON
    form and raise ValueError."""
    data = {"comment": comment, **meta, "recipes": recipes}
    text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
