"""Which recipe functions a Megatron Bridge release exports, and under which names.

Library recipes: every name `megatron.bridge.recipes` exports through its star imports (each
sub-package's `__all__`, or its public names). A name bound to a function defined under another
name (`from .h100.llama3 import llama3_8b_pretrain_2gpu_h100_bf16_config as
llama3_8b_pretrain_config`) is a legacy alias of that canonical function.
Benchmark recipes: every public function each `megatron.bridge.perf_recipes.<family>` package
imports. A few benchmark functions share their name with a library recipe; they are different
functions and stay separate entries (kind tells them apart).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mbridge_launch.catalog_sync.values import FuncValue

LIBRARY_ROOT = "megatron.bridge.recipes"
BENCHMARK_ROOT = "megatron.bridge.perf_recipes"


@dataclass
class ExportedRecipe:
    name: str  # the function's own (canonical) name
    kind: str  # library | benchmark
    func: FuncValue
    module: str  # module that defines the function
    family: str
    aliases: list[str] = field(default_factory=list)


def _family(module: str, root: str) -> str:
    rest = module[len(root) + 1:].split(".")
    return rest[0] if rest and rest[0] else "?"


def _collect(interp: Any, names: list[tuple[str, Any]], kind: str, root: str) -> tuple[list[ExportedRecipe], list[str]]:
    by_function: dict[int, ExportedRecipe] = {}
    skipped: list[str] = []
    for exported, value in names:
        func = interp.resolve(value)
        if not isinstance(func, FuncValue) or not func.module.name.startswith(root + "."):
            skipped.append(exported)
            continue
        entry = by_function.get(id(func.node))
        if entry is None:
            entry = ExportedRecipe(func.name, kind, func, func.module.name, _family(func.module.name, root))
            by_function[id(func.node)] = entry
        if exported != func.name and exported not in entry.aliases:
            entry.aliases.append(exported)
    for entry in by_function.values():
        entry.aliases.sort()
    return sorted(by_function.values(), key=lambda e: e.name), sorted(skipped)


def library_recipes(interp: Any) -> tuple[list[ExportedRecipe], list[str]]:
    state = interp.load_module(LIBRARY_ROOT)
    if state is None:
        return [], []
    names = [(n, v) for n, v in state.namespace.items() if not n.startswith("_")]
    return _collect(interp, names, "library", LIBRARY_ROOT)


def benchmark_recipes(interp: Any) -> tuple[list[ExportedRecipe], list[str]]:
    names: list[tuple[str, Any]] = []
    for package in interp.source.subpackages(BENCHMARK_ROOT):
        state = interp.load_module(package)
        if state is None:
            continue
        exported = state.namespace.get("__all__")
        if isinstance(exported, (list, tuple)):
            names.extend((n, state.namespace.get(n)) for n in exported if isinstance(n, str))
        else:
            names.extend((n, v) for n, v in state.namespace.items() if not n.startswith("_"))
    return _collect(interp, names, "benchmark", BENCHMARK_ROOT)
