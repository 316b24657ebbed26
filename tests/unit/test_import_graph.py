"""The house follows the flow: the import graph of mbridge_launch (and of executors/, installed as
mbridge_launch.executors) has no cycle, and the package's top level holds no loose modules.

The graph is read from the source with `ast`, every import counted wherever it stands (a lazy
import inside a function is still a dependency), and `from pkg import name` counted as importing
the package too, because Python runs `pkg/__init__.py` first. import-linter (tests/run-all.sh)
checks the layer order; this test checks what import-linter does not: cycles inside one layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"mbridge_launch": REPO / "mbridge_launch", "mbridge_launch.executors": REPO / "executors"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in ROOTS.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in names:
            # importing a.b.c runs a/__init__ and a/b/__init__ first
            pieces = name.split(".")
            for i in range(1, len(pieces) + 1):
                candidate = ".".join(pieces[:i])
                if candidate in known and candidate != module:
                    out.add(candidate)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_reader_sees_lazy_and_package_imports():
    graph = _graph()
    # a lazy import inside a function (cli/main.py imports command modules in build_parser)
    assert "mbridge_launch.base.errors" in graph["mbridge_launch.cli.main"]
    # executors/ is read as mbridge_launch.executors
    assert "mbridge_launch.executors.common" in graph["mbridge_launch.executors.sbatch"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (each line: modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_at_most_three_python_files_at_the_package_top():
    loose = sorted(p.name for p in (REPO / "mbridge_launch").glob("*.py"))
    assert len(loose) <= 3, loose
