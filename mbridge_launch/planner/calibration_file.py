"""Calibration files: the throughput constants `mbridge-launch calibrate` fitted, for `plan` and
`estimate --calibration FILE` (default: the state directory's calibration.json, else the shipped
constants of planner/throughput.py).

JSON, one object: `schema` and `schema_version`, `tool_version`, `created` (UTC), `constants`
(every field of throughput.Calibration, the dict fields as objects), `fit` (the rows it was
fitted on: their count and sources, its in-sample median error and share within 15%) and
`measured_rows`: the user's own measured rows it was fitted on (--rows files, --from-runs; in the
calibration CSV's columns, at most MAX_MEASURED_ROWS), which `plan` and `estimate` use as
measured evidence of the user's cluster (planner.measured) beside NVIDIA's rows. A file is
read bounded and validated: an unknown schema, a missing or unknown constant, a value that is not
a number or lies outside its physical range (throughput.BOUNDS) is a UserError naming the file,
the constant and its range, so a hand-edited file can never push the planner outside physics.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.json_text import parse_json
from mbridge_launch.planner.throughput import BOUNDS, CAL, Calibration

SCHEMA = "mbridge-launch/calibration"
SCHEMA_VERSION = 1
FILE_NAME = "calibration.json"
MAX_BYTES = 1024 * 1024  # constants about 2 kB, a measured row about 400 bytes
MAX_MEASURED_ROWS = 1000  # the user's rows kept (a fit in a minute uses about 300)
_DICT_FIELDS = tuple(f.name for f in fields(Calibration) if isinstance(getattr(CAL, f.name), dict))


@dataclass(frozen=True)
class Source:
    """Which constants a command used: "shipped" (planner/throughput.py), "state" (the state
    directory's calibration.json) or "file" (--calibration FILE), and the path of a file."""

    kind: str
    path: str | None = None
    measured: tuple = ()  # the user's measured rows the file carries (calibration_rows.Row)

    def as_json(self) -> dict[str, Any]:
        return {"source": self.kind, "path": self.path, "measured_rows": len(self.measured)}

    def text(self, lang: str | None = None) -> str:
        """The one line `plan` and `estimate` print (message planner.calibration.*)."""
        from mbridge_launch.base.i18n import t

        if self.kind == "shipped":
            return t("planner.calibration.shipped", lang=lang)
        line = t(f"planner.calibration.{self.kind}", lang=lang, path=self.path)
        # the error band (planner.domain) is the shipped constants' leave-one-out table
        return line + " " + t("planner.calibration.band_note", lang=lang)


@dataclass(frozen=True)
class Meta:
    """What a calibration was fitted on."""

    rows: int
    sources: dict[str, Any] = field(default_factory=dict)  # {"shipped": n, "files": [...], "ledger_runs": [...]}
    median_error: float | None = None
    within_15: float | None = None
    tool_version: str | None = None
    created: str | None = None
    measured: tuple = ()  # the user's own measured rows (calibration_rows.Row), at most MAX_MEASURED_ROWS


def state_path() -> Path:
    from mbridge_launch.base.paths import state_dir

    return state_dir() / FILE_NAME


def to_json(cal: Calibration, meta: Meta) -> dict[str, Any]:
    from datetime import datetime, timezone

    from mbridge_launch import __version__
    from mbridge_launch.planner.calibration_rows import record_of

    constants: dict[str, Any] = {}
    for f in fields(Calibration):
        value = getattr(cal, f.name)
        constants[f.name] = {k: float(v) for k, v in value.items()} if isinstance(value, dict) else float(value)
    created = meta.created or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "tool_version": meta.tool_version or __version__,
        "created": created, "constants": constants,
        "fit": {"rows": meta.rows, "sources": meta.sources, "median_error": meta.median_error,
                "within_15": meta.within_15},
        "measured_rows": [record_of(r) for r in meta.measured],
    }


def save(path: str | Path, cal: Calibration, meta: Meta) -> Path:
    """Write the calibration atomically (a crash leaves the old file or the new one)."""
    from mbridge_launch.base.atomic import atomic_write_text
    from mbridge_launch.base.errors import writable

    target = Path(path)
    bad = _out_of_bounds(cal)
    if bad:  # the fit keeps every constant inside BOUNDS; a caller's bug, never a file to write
        raise ValueError("constants outside their physical range: " + "; ".join(bad))
    if len(meta.measured) > MAX_MEASURED_ROWS:  # calibrate keeps the newest; a file never holds more
        raise ValueError(f"{len(meta.measured)} measured rows, at most {MAX_MEASURED_ROWS} are kept")
    text = json.dumps(to_json(cal, meta), indent=2, ensure_ascii=False) + "\n"
    with writable(target):
        return atomic_write_text(target, text)


def _out_of_bounds(cal: Calibration) -> list[str]:
    from mbridge_launch.planner.throughput import out_of_bounds

    return out_of_bounds(cal)


def _number(where: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError("calibration.file.not_number", path=where, field=name, value=json.dumps(value)[:80])
    return float(value)


def _checked(where: str, name: str, value: Any) -> float:
    number = _number(where, name, value)
    b = BOUNDS[name]
    if not b.contains(number):
        raise UserError("calibration.file.out_of_bounds", path=where, field=name, value=f"{number:.4g}",
                        low=f"{b.low:.4g}", high=f"{b.high:.4g}", why=b.why)
    return number


def from_json(data: Any, where: str) -> tuple[Calibration, Meta]:
    """The Calibration and Meta of a parsed file; UserError naming `where` and the field."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UserError("calibration.file.bad_schema", path=where, schema=SCHEMA, version=SCHEMA_VERSION)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UserError("calibration.file.bad_version", path=where, version=json.dumps(data.get("schema_version"))[:40],
                        supported=SCHEMA_VERSION)
    constants = data.get("constants")
    if not isinstance(constants, dict):
        raise UserError("calibration.file.missing", path=where, field="constants")
    names = [f.name for f in fields(Calibration)]
    unknown = [k for k in constants if k not in names]
    if unknown:
        raise UserError("calibration.file.unknown_field", path=where, field=str(unknown[0])[:80],
                        valid=", ".join(names))
    values: dict[str, Any] = {}
    for name in names:
        if name not in constants:
            raise UserError("calibration.file.missing", path=where, field=f"constants.{name}")
        value = constants[name]
        if name in _DICT_FIELDS:
            keys = list(getattr(CAL, name))
            if not isinstance(value, dict):
                raise UserError("calibration.file.not_object", path=where, field=name, keys=", ".join(keys))
            extra = [k for k in value if k not in keys]
            if extra:
                raise UserError("calibration.file.unknown_field", path=where, field=f"{name}.{str(extra[0])[:60]}",
                                valid=", ".join(f"{name}.{k}" for k in keys))
            missing = [k for k in keys if k not in value]
            if missing:
                raise UserError("calibration.file.missing", path=where, field=f"constants.{name}.{missing[0]}")
            values[name] = {k: _checked(where, f"{name}.{k}", value[k]) for k in keys}
        else:
            values[name] = _checked(where, name, value)
    given = data.get("fit")
    fit: dict[str, Any] = given if isinstance(given, dict) else {}
    rows = fit.get("rows")
    meta = Meta(rows=rows if isinstance(rows, int) and not isinstance(rows, bool) else 0,
                sources=dict(fit["sources"]) if isinstance(fit.get("sources"), dict) else {},
                median_error=_optional(fit.get("median_error")), within_15=_optional(fit.get("within_15")),
                tool_version=str(data.get("tool_version"))[:40] if data.get("tool_version") is not None else None,
                created=str(data.get("created"))[:40] if data.get("created") is not None else None,
                measured=_measured_rows(data.get("measured_rows", []), where))
    return Calibration(**values), meta


def _measured_rows(value: Any, where: str) -> tuple:
    """The Rows of a file's measured_rows, validated as a CSV file of the user's is (a bad value
    is a UserError naming the row and column; a model this version does not know is left out)."""
    from mbridge_launch.planner.calibration_rows import COLUMNS, rows_of_records

    def bad(reason: str) -> UserError:
        return UserError("calibration.file.bad_rows", path=where, limit=MAX_MEASURED_ROWS, columns=", ".join(COLUMNS),
                         reason=reason)

    if not isinstance(value, list):
        raise bad(f"found {type(value).__name__}")
    if len(value) > MAX_MEASURED_ROWS:
        raise bad(f"found {len(value)} rows")
    records = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, dict):
            raise bad(f"row {i} is {type(item).__name__}")
        record = {}
        for key, cell in item.items():
            if key not in COLUMNS:
                raise bad(f"row {i} has the unknown column {json.dumps(str(key))[:60]}")
            if isinstance(cell, bool) or not isinstance(cell, (str, int, float)):
                raise bad(f"row {i}, column {key}: not text or a number")
            record[key] = str(cell)
        records.append(record)
    rows, _ = rows_of_records(records, f"{where} measured_rows", first_line=1, strict=True)
    return tuple(r for r in rows if r.tokens_per_sec)


def _optional(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def read(path: str | Path) -> tuple[Calibration, Meta]:
    """The Calibration and Meta of a file, bounded and validated (UserError otherwise)."""
    from mbridge_launch.base.files import read_bounded_text

    where = str(path)
    text = read_bounded_text(path, MAX_BYTES, "calibration")
    try:
        data = parse_json(text)
    except ValueError as exc:
        raise UserError("calibration.file.not_json", path=where, reason=str(exc)[:200]) from None
    return from_json(data, where)


def load(path: str | Path) -> Calibration:
    return read(path)[0]


def resolve(explicit: str | None) -> tuple[Calibration, Source]:
    """The constants to use: an explicit file (--calibration), else the state directory's
    calibration.json when there is one, else the shipped constants; the Source carries the
    file's measured rows."""
    if explicit is not None:
        cal, meta = read(explicit)
        return cal, Source("file", str(explicit), meta.measured)
    path = state_path()
    if path.exists() or path.is_symlink():  # a broken link or a non-file there is read and refused
        cal, meta = read(path)
        return cal, Source("state", str(path), meta.measured)
    return CAL, Source("shipped", None)
