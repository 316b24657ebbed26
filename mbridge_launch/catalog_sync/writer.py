"""Write the catalog as JSON, byte for byte the same for the same input, and put it in place.

`json.dumps` with one space of indent, the keys in the extractor's order (identity, then the
Megatron field names, then the rest, as `Recipe.to_dict` lists them) and non-ASCII text kept
readable: one value per line, so that a diff between two releases shows what changed. The
reader (mbridge_launch.knowledge.catalog) is plain `json.loads`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mbridge_launch.base.errors import UserError

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


def write_catalog_file(directory: str | Path, name: str, text: str) -> Path:
    """Write the catalog `name` into `directory` (created with its parents): temp file, fsync,
    rename (base/atomic.py), so a reader never sees half a catalog. The caller chooses the folder:
    `--out DIR`, else the site or user folder (base/data_dirs.sync_target_dir), never the package.
    A folder that cannot be created or written is one line naming it."""
    from mbridge_launch.base.atomic import OutputNotRegular, atomic_write_text

    target = Path(directory) / name
    try:
        return atomic_write_text(target, text)  # mode: the umask's
    except OutputNotRegular:
        raise
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else str(target.parent)
        raise UserError("catalog.sync.unwritable", path=where, reason=exc.strerror or str(exc)) from None
