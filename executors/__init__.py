"""Executor adapters and their registry (like TorchX's scheduler registry).

An executor is a module with `create(**options) -> Executor`, found by name: the three built-ins
below, and any installed distribution that declares one in the entry-point group
`mbridge_launch.executors` (`name = "package.module"` or `"package.module:factory"`).
pyproject.toml declares the built-ins there too; they are also known without package metadata
(a source checkout, a stale editable install), and an entry point cannot replace one.

Nothing is read before it is needed: the entry points only when a name outside the built-ins is
asked for or the whole list is shown, a module only when its executor is used, and the library an
adapter wraps (nemo_run, submitit) only inside the adapter. `mbridge-launch recommend` pays for none
of it. An adapter lists in `REQUIRES` the libraries it needs beyond the core install; when one is
missing, loading the executor is one error naming the extra that brings it.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

if TYPE_CHECKING:
    from mbridge_launch.executors.base import Executor

ENTRY_POINT_GROUP = "mbridge_launch.executors"

BUILTINS: dict[str, str] = {
    "sbatch": "mbridge_launch.executors.sbatch",
    "nemo-run": "mbridge_launch.executors.nemo_run",
    "submitit": "mbridge_launch.executors.submitit",
}


class Requirement(NamedTuple):
    """A library an adapter imports on use, and the extra of mbridge-launch that installs it."""

    module: str  # import name: nemo_run
    package: str  # distribution on PyPI: nemo-run
    extra: str  # pip install 'mbridge-launch[EXTRA]'


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, str]:
    """Executors other installed distributions declare (name -> target), read once."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTINS}


def executor_names() -> list[str]:
    """Every executor: the built-ins, then those of other distributions (reads package metadata)."""
    return [*BUILTINS, *sorted(_entry_points())]


class ExecutorNames:
    """The executor names as argparse `choices`: a built-in is accepted without reading package
    metadata; any other name and the invalid-choice message read the entry points. Give argparse
    `metavar()` too: without one it lists the choices (reading the metadata) when it builds the parser."""

    def __contains__(self, name: object) -> bool:
        return name in BUILTINS or name in _entry_points()

    def __iter__(self) -> Iterator[str]:
        return iter(executor_names())

    def metavar(self) -> str:
        """argparse's `{a,b,c}` for the built-ins, so that building a parser reads no metadata."""
        return "{" + ",".join(BUILTINS) + "}"


def _target(name: str) -> str:
    from mbridge_launch.base.errors import UserError

    target = BUILTINS.get(name) or _entry_points().get(name)
    if target is None:
        raise UserError("arg.choice", flag="--executor", value=name, choices=", ".join(executor_names()))
    return target


def missing_requirement(requirements: tuple[Requirement, ...]) -> Requirement | None:
    """The first of `requirements` that is not installed (found without importing it)."""
    for requirement in requirements:
        try:
            found = importlib.util.find_spec(requirement.module) is not None
        except (ImportError, ValueError):  # a parent package that is missing, or a broken entry in sys.modules
            found = False
        if not found:
            return requirement
    return None


def load_executor(name: str) -> Callable[..., "Executor"]:
    """The factory of executor `name`, after checking that its libraries are installed: a
    UserError naming the executor or the missing extra otherwise (exit code 2)."""
    from mbridge_launch.base.errors import UserError

    module_name, _, attr = _target(name).partition(":")
    module = importlib.import_module(module_name)
    missing = missing_requirement(tuple(getattr(module, "REQUIRES", ())))
    if missing is not None:
        raise UserError("executors.missing_extra", executor=name, package=missing.package, extra=missing.extra)
    factory: Callable[..., "Executor"] = getattr(module, attr or "create")
    return factory


def get_executor(name: str, **options: object) -> "Executor":
    return load_executor(name)(**options)
