"""The compatibility matrix (catalog/compatibility.yaml, knowledge/compatibility.py): it loads,
every row says where its claim comes from, it agrees with the pins it cites (pyproject.toml, the
Megatron Bridge tier's requirements, the shipped catalogs, the container options the executors
emit), and README.md carries exactly its table."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from mbridge_launch.knowledge import compatibility
from mbridge_launch.knowledge.catalog import available_versions
from mbridge_launch.knowledge.compatibility import (
    STATUSES,
    components,
    feature_available,
    features,
    markdown,
    matches,
    pyxis_options,
    support,
)

REPO = Path(__file__).resolve().parents[2]


def test_matrix_loads_with_the_components_doctor_judges():
    assert set(components()) >= {"python", "megatron_bridge", "megatron_core", "nemo_run", "leptonai", "submitit",
                                 "slurm", "pyxis"}
    assert set(features()) >= {"segment", "json_output", "accounting", "pmix"}
    assert pyxis_options()


def test_every_row_and_feature_states_its_source_and_a_known_status():
    for comp in components().values():
        assert comp.title and comp.rows, comp.key
        for row in comp.rows:
            assert row.status in STATUSES, (comp.key, row)
            assert row.source.strip() and row.note.strip(), (comp.key, row)
            matches(row.versions, "1.0")  # every spec parses (a bad clause raises)
    for feat in features().values():
        assert feat.title and feat.needs and feat.source.strip(), feat.key


@pytest.mark.parametrize(("spec", "version", "expected"), [
    (">=3.10,<3.13", "3.10.0", True), (">=3.10,<3.13", "3.12.9", True), (">=3.10,<3.13", "3.13.0", False),
    (">=3.10,<3.13", "3.9.18", False), ("==0.19.*", "0.19.2", True), ("==0.19.*", "0.2.0", False),
    ("!=0.19.*", "0.20.0", True), ("==0.6.2", "0.6.2", True), ("==0.6.2", "0.6.2rc1", True),
    ("==0.6.2", "0.6.20", False), (">=0.47", "0.47", True), ("<0.47", "0.46.9", True), ("*", "anything 1", True),
    ("==22.05.*", "22.05.8", True), ("==22.05.*", "22.5.8", True), ("==22.05.*", "23.02.1", False),
])
def test_version_specs(spec, version, expected):
    assert matches(spec, version) is expected


def test_a_version_without_a_number_matches_nothing_and_bad_clauses_are_refused():
    assert matches(">=1", "unknown") is False
    with pytest.raises(ValueError):
        matches("~=1.2", "1.2")
    with pytest.raises(ValueError):
        matches(">=1.*", "1.2")


def test_every_shipped_catalog_is_a_supported_megatron_bridge_release():
    # a catalog synced without a matrix row would be "untested" in doctor: add the row with it
    for version in available_versions():
        assert support("megatron_bridge", version)[0] == "supported", version


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _bounds(spec: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"(>=|<)\s*([\d.]+)", spec)}


def test_python_rows_follow_requires_python():
    spec = _pyproject()["project"]["requires-python"]
    low, high = _bounds(spec)[">="], _bounds(spec)["<"]
    assert support("python", low)[0] == "supported"
    assert support("python", high)[0] == "unsupported"
    below = low.split(".")[0] + "." + str(int(low.split(".")[1]) - 1)
    assert support("python", below)[0] == "unsupported"


@pytest.mark.parametrize(("extra", "dist", "component"), [
    ("submitit", "submitit", "submitit"), ("nemo-run", "nemo-run", "nemo_run"), ("nemo-run", "leptonai", "leptonai"),
])
def test_library_rows_follow_the_extras_pins(extra, dist, component):
    pins = [p for p in _pyproject()["project"]["optional-dependencies"][extra] if p.startswith(dist)]
    assert pins, f"no {dist} pin in the {extra} extra"
    bounds = _bounds(pins[0][len(dist):])
    if ">=" in bounds:
        low = bounds[">="].split(".")
        below = ".".join(low[:-1] + [str(int(low[-1]) - 1)]) if int(low[-1]) else str(int(low[0]) - 1) + ".99"
        assert support(component, below)[0] == "unsupported", below
    if "<" in bounds:
        assert support(component, bounds["<"])[0] == "unsupported", bounds["<"]


def test_megatron_core_row_follows_the_bridge_tiers_pin():
    text = (REPO / "tests" / "bridge" / "requirements-bridge.txt").read_text(encoding="utf-8")
    pinned = re.search(r"^megatron-core==([\d.]+)", text, re.M)
    assert pinned
    assert support("megatron_core", pinned.group(1))[0] == "supported"


def test_pyxis_options_are_the_container_flags_the_executors_emit():
    from mbridge_launch.executors.common import container_srun_flags

    emitted = set(re.findall(r"--(?:no-)?container-[a-z-]+[a-z]", inspect.getsource(container_srun_flags)))
    assert emitted == set(pyxis_options())


def test_segment_needs_slurm_24_11():
    assert feature_available("segment", "22.05.8") is False
    assert feature_available("segment", "24.11.0") is True
    assert feature_available("segment", None) is None
    assert feature_available("pmix", None) is True  # no version bound: the plugin list decides


def test_readme_carries_the_matrix_as_generated():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## Compatibility\n")
    end = readme.find("\n## ", start + 1)
    section = readme[start:end if end != -1 else len(readme)]
    assert markdown() in section, ("README.md's compatibility table differs from catalog/compatibility.yaml: run "
                                   "`python -m mbridge_launch.knowledge.compatibility --markdown` and paste it")
    assert compatibility.__name__ in section or "compatibility.yaml" in section
