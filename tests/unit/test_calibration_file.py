"""Calibration files (planner/calibration_file.py): what `calibrate` writes and `plan`/`estimate
--calibration` read, validated against the physical bounds; and the calibration rows the package
ships (catalog/perf_calibration.csv, the benchmarks' copy)."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.paths import STATE_ENV
from mbridge_launch.planner import calibration_file as cf
from mbridge_launch.planner import calibration_rows as cr
from mbridge_launch.planner.throughput import BOUNDS, CAL, Calibration, constant

REPO = Path(__file__).resolve().parents[2]
META = cf.Meta(rows=12, sources={"shipped": 0, "files": [{"path": "mine.csv", "rows": 12}], "ledger_runs": 0},
               median_error=0.071, within_15=0.83)


def _other() -> Calibration:
    """The shipped constants with two of them moved (still inside their ranges)."""
    return replace(CAL, attn_eff=0.5, gemm_eff={**CAL.gemm_eff, "bf16": 0.55})


def test_round_trip_keeps_every_constant_and_the_fit(tmp_path):
    path = cf.save(tmp_path / "cal.json", _other(), META)
    cal, meta = cf.read(path)
    assert cal == _other()
    for name in BOUNDS:
        assert constant(cal, name) == constant(_other(), name), name
    assert meta.rows == 12 and meta.sources["files"][0]["path"] == "mine.csv"
    assert meta.median_error == pytest.approx(0.071) and meta.within_15 == pytest.approx(0.83)
    data = json.loads(path.read_text())
    assert data["schema"] == cf.SCHEMA and data["schema_version"] == cf.SCHEMA_VERSION
    assert set(data["constants"]) == {f.name for f in fields(Calibration)}
    assert data["tool_version"] and data["created"].endswith("Z")


def _written(tmp_path: Path, change) -> Path:  # noqa: ANN001 - a function editing the JSON
    data = cf.to_json(CAL, META)
    change(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name, value", [("attn_eff", 0.986), ("gemm_eff.bf16", 0.91), ("generation.hopper", 1.163),
                                         ("attn_half_tokens", 3058.0), ("link_eff", 0.99)])
def test_a_constant_outside_its_range_is_refused_naming_it_and_the_range(tmp_path, name, value):
    group, _, key = name.partition(".")

    def change(data):
        if key:
            data["constants"][group][key] = value
        else:
            data["constants"][group] = value

    with pytest.raises(UserError) as err:
        cf.load(_written(tmp_path, change))
    text = err.value.render("en")
    b = BOUNDS[name]
    assert err.value.key == "calibration.file.out_of_bounds"
    assert name in text and f"{b.low:.4g}" in text and f"{b.high:.4g}" in text and "edited.json" in text


@pytest.mark.parametrize("change, key, named", [
    (lambda d: d.update(schema="something else"), "calibration.file.bad_schema", "edited.json"),
    (lambda d: d.update(schema_version=2), "calibration.file.bad_version", "2"),
    (lambda d: d["constants"].pop("tp_exposed"), "calibration.file.missing", "tp_exposed"),
    (lambda d: d["constants"]["gemm_eff"].pop("fp8"), "calibration.file.missing", "gemm_eff.fp8"),
    (lambda d: d["constants"].update(warp_speed=9), "calibration.file.unknown_field", "warp_speed"),
    (lambda d: d["constants"].update(attn_eff="fast"), "calibration.file.not_number", "attn_eff"),
    (lambda d: d["constants"].update(attn_eff=float("nan")), "calibration.file.not_number", "attn_eff"),
    (lambda d: d["constants"].update(generation=1.0), "calibration.file.not_object", "generation"),
])
def test_a_bad_file_is_one_error_naming_what(tmp_path, change, key, named):
    with pytest.raises(UserError) as err:
        cf.load(_written(tmp_path, change))
    assert err.value.key == key
    assert named in err.value.render("en")


def test_not_json_and_not_a_regular_file_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path, key in ((bad, "calibration.file.not_json"), (tmp_path, "file.not_regular"),
                      (tmp_path / "missing.json", "file.not_found")):
        with pytest.raises(UserError) as err:
            cf.load(path)
        assert err.value.key == key and str(path) in err.value.render("en")


def test_save_refuses_constants_outside_their_range(tmp_path):
    with pytest.raises(ValueError, match="attn_eff"):
        cf.save(tmp_path / "x.json", replace(CAL, attn_eff=0.99), META)
    assert not (tmp_path / "x.json").exists()


def test_resolve_explicit_then_state_then_shipped(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv(STATE_ENV, str(state))
    assert cf.resolve(None) == (CAL, cf.Source("shipped", None))
    cf.save(state / cf.FILE_NAME, _other(), META)
    cal, source = cf.resolve(None)
    assert cal == _other() and source == cf.Source("state", str(state / cf.FILE_NAME))
    explicit = cf.save(tmp_path / "mine.json", replace(CAL, tp_exposed=0.5), META)
    cal, source = cf.resolve(str(explicit))
    assert cal.tp_exposed == 0.5 and source.kind == "file" and source.path == str(explicit)
    assert source.as_json() == {"source": "file", "path": str(explicit), "measured_rows": 0}


def test_a_broken_state_file_is_refused_not_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ENV, str(tmp_path))
    (tmp_path / cf.FILE_NAME).write_text("[]")
    with pytest.raises(UserError) as err:
        cf.resolve(None)
    assert err.value.key == "calibration.file.bad_schema"


# ---------------------------------------------------------------------- the shipped rows
def test_the_package_rows_are_the_benchmarks_rows():
    shipped = REPO / "catalog" / cr.CSV_NAME
    assert cr.csv_path().read_bytes() == (REPO / "benchmarks" / "data" / cr.CSV_NAME).read_bytes()
    assert shipped.read_bytes() == cr.csv_path().read_bytes()
    rows, skipped = cr.read_rows(cr.csv_path())
    assert len(rows) == 129 and skipped == []


def test_the_csv_is_shipped_as_package_data():
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    catalog_line = next(line for line in section.splitlines() if line.startswith('"mbridge_launch.catalog"'))
    assert '"*.csv"' in catalog_line


def test_a_file_never_holds_more_measured_rows_than_it_reads(tmp_path):
    """calibrate keeps the newest MAX_MEASURED_ROWS; save refuses more (a caller's bug), as the
    reader would refuse the file."""
    from mbridge_launch.planner.calibration_rows import load_rows

    row = next(r for r in load_rows() if r.tokens_per_sec)
    with pytest.raises(ValueError, match="measured rows"):
        cf.save(tmp_path / "c.json", CAL, replace(META, measured=(row,) * (cf.MAX_MEASURED_ROWS + 1)))
    assert not (tmp_path / "c.json").exists()
    cf.save(tmp_path / "c.json", CAL, replace(META, measured=(row,) * 3))
    assert len(cf.read(tmp_path / "c.json")[1].measured) == 3
