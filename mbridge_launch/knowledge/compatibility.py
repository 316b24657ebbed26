"""The compatibility matrix (catalog/compatibility.yaml): which versions of Python, Megatron Bridge,
Megatron Core, NeMo-Run, submitit, Slurm and Pyxis this tool supports, and the Slurm features it
uses. `doctor` judges what it finds with `support()`; README.md's "## Compatibility" table is
`markdown()` of the same data (tests/unit/test_compatibility.py keeps them equal).

Versions are compared as tuples of integers (no `packaging` dependency: the core install stays
pydantic, PyYAML, Jinja2); a suffix such as `rc1` or `+cu12` is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

STATUSES = ("supported", "untested", "unsupported")
_CLAUSE = re.compile(r"^(>=|<=|==|!=|>|<)?\s*(\d+(?:\.\d+)*)(\.\*)?$")
_NUMERIC = re.compile(r"\d+(?:\.\d+)*")


@dataclass(frozen=True)
class Row:
    versions: str
    status: str
    note: str
    source: str


@dataclass(frozen=True)
class Component:
    key: str
    title: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class ReleaseContainer:
    """The NeMo Framework image of a Megatron Bridge release and where it keeps the checkout."""
    release: str
    image: str
    megatron_bridge_path: str
    note: str
    source: str

    @property
    def entry_script(self) -> str:
        """run_recipe.py at its in-image path: the job needs no checkout of its own."""
        return f"{self.megatron_bridge_path.rstrip('/')}/scripts/training/run_recipe.py"


@dataclass(frozen=True)
class Feature:
    key: str
    title: str
    min_slurm: str | None
    needs: str
    source: str


def installed_version(distribution: str) -> str | None:
    """An installed distribution's version from its metadata (nothing is imported); None when absent."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def version_tuple(text: str) -> tuple[int, ...] | None:
    """`3.11.7` -> (3, 11, 7); `0.6.2rc1` -> (0, 6, 2); None when there is no number."""
    match = _NUMERIC.search(text or "")
    return tuple(int(p) for p in match.group(0).split(".")) if match else None


def _clause_matches(clause: str, version: tuple[int, ...]) -> bool:
    clause = clause.strip()
    if clause == "*":
        return True
    match = _CLAUSE.match(clause)
    if match is None:
        raise ValueError(f"bad version clause {clause!r}")
    op, number, series = match.group(1) or "==", match.group(2), bool(match.group(3))
    bound = tuple(int(p) for p in number.split("."))
    if series:  # ==0.19.* / !=0.19.*: the version's leading parts
        same = version[:len(bound)] == bound
        if op not in ("==", "!="):
            raise ValueError(f"bad version clause {clause!r}: .* only with == or !=")
        return same if op == "==" else not same
    width = max(len(bound), len(version))
    left, right = version + (0,) * (width - len(version)), bound + (0,) * (width - len(bound))
    return {"==": left == right, "!=": left != right, ">=": left >= right, "<=": left <= right,
            ">": left > right, "<": left < right}[op]


def matches(spec: str, version: str) -> bool:
    """Whether `version` satisfies every comma-separated clause of `spec`."""
    parsed = version_tuple(version)
    if parsed is None:
        return False
    return all(_clause_matches(clause, parsed) for clause in spec.split(","))


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, Component], dict[str, Feature], tuple[str, ...], dict[str, ReleaseContainer]]:
    from mbridge_launch.base.resources import catalog_yaml

    data: dict[str, Any] = catalog_yaml("compatibility.yaml")
    components = {
        key: Component(key, str(entry["title"]), tuple(
            Row(str(r["versions"]), str(r["status"]), str(r["note"]), str(r["source"])) for r in entry["rows"]))
        for key, entry in data["components"].items()
    }
    features = {
        key: Feature(key, str(entry["title"]), None if entry.get("min_slurm") is None else str(entry["min_slurm"]),
                     str(entry["needs"]), str(entry["source"]))
        for key, entry in data["features"].items()
    }
    containers = {
        str(release): ReleaseContainer(str(release), str(entry["image"]), str(entry["megatron_bridge_path"]),
                                       str(entry["note"]), str(entry["source"]))
        for release, entry in (data.get("containers") or {}).items()
    }
    return components, features, tuple(str(o) for o in data["pyxis_options"]), containers


def components() -> dict[str, Component]:
    return _load()[0]


def features() -> dict[str, Feature]:
    return _load()[1]


def pyxis_options() -> tuple[str, ...]:
    """The container options the executors put on srun, which `srun --help` must list."""
    return _load()[2]


def release_container(release: str) -> ReleaseContainer | None:
    """The NeMo Framework image of that Megatron Bridge release (the catalog's), None when the
    matrix names none (a synced newer release: the user gives --container-image or --workdir)."""
    return _load()[3].get(release)


def support(component: str, version: str) -> tuple[str, str]:
    """(status, note) of that version of the component: the first matrix row that matches;
    ("untested", "") when none does. KeyError for a component the matrix does not know."""
    for row in components()[component].rows:
        if matches(row.versions, version):
            return row.status, row.note
    return "untested", ""


def feature_available(key: str, slurm_version: str | None) -> bool | None:
    """Whether the Slurm version is new enough for a feature (None: the version is unknown);
    the feature's other needs (a plugin, a config value) are the caller's to check."""
    minimum = features()[key].min_slurm
    if minimum is None:
        return True
    parsed = version_tuple(slurm_version or "")
    if parsed is None:
        return None
    return matches(f">={minimum}", ".".join(map(str, parsed)))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """README.md's compatibility tables, generated from the matrix."""
    lines = ["| component | versions | status | what matters to the launcher | source |", "|---|---|---|---|---|"]
    for comp in components().values():
        for row in comp.rows:
            lines.append(f"| {_cell(comp.title)} | `{_cell(row.versions)}` | {row.status} | {_cell(row.note)} "
                         f"| {_cell(row.source)} |")
    lines += ["", "| Slurm feature | needs Slurm | and | source |", "|---|---|---|---|"]
    for feat in features().values():
        lines.append(f"| {_cell(feat.title)} | {feat.min_slurm or '-'} | {_cell(feat.needs)} | {_cell(feat.source)} |")
    lines += ["", "Container options the executors emit (`srun --help` must list them): "
              + ", ".join(f"`{o}`" for o in pyxis_options()) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m mbridge_launch.knowledge.compatibility --markdown
    print(markdown(), end="")
