"""The executor registry (executors/__init__.py): the built-ins without package metadata, other
distributions' entry points read only when needed, and one line naming the extra when an
executor's library is not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import tomllib

import mbridge_launch.executors as registry
from mbridge_launch.base.errors import EXIT_BAD_INPUT, UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.cli.main import main

REPO = Path(__file__).resolve().parents[2]
BUILTINS = ["sbatch", "nemo-run", "submitit"]
EXTRAS = {"nemo-run": ("nemo_run", "nemo-run"), "submitit": ("submitit", "submitit")}  # executor: (module, extra)


@pytest.fixture
def entry_points(monkeypatch):
    """Replace the installed entry points by a given list (and forget the cached read)."""

    def install(*points: EntryPoint) -> None:
        registry._entry_points.cache_clear()
        monkeypatch.setattr("importlib.metadata.entry_points", lambda group=None: [p for p in points if p.group == group])

    yield install
    registry._entry_points.cache_clear()


def _point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP)


def test_builtins_without_package_metadata(entry_points):
    entry_points()  # a source checkout, or an install made before the entry points existed
    assert registry.executor_names() == BUILTINS
    assert registry.get_executor("sbatch").name == "sbatch"
    assert "nemo-run" in registry.ExecutorNames() and "toy" not in registry.ExecutorNames()


def test_pyproject_declares_the_builtins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"][registry.ENTRY_POINT_GROUP] == registry.BUILTINS
    extras = project["optional-dependencies"]
    for executor, (module, extra) in EXTRAS.items():
        assert any(req.startswith(module.replace("_", "-")) for req in extras[extra]), (executor, extras[extra])
        assert not any(req.startswith(module.replace("_", "-")) for req in project["dependencies"])
    assert "mbridge-launch[nemo-run,submitit]" in extras["all"] and "mbridge-launch[all]" in extras["test"]


def test_an_entry_point_adds_an_executor_but_replaces_no_builtin(entry_points, monkeypatch):
    toy = types.ModuleType("toy_executor")
    toy.create = lambda **options: ("toy", options)  # type: ignore[attr-defined]
    toy.make = lambda **options: ("made", options)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_executor", toy)
    entry_points(_point("toy", "toy_executor"), _point("toy2", "toy_executor:make"), _point("sbatch", "toy_executor"))
    assert registry.executor_names() == [*BUILTINS, "toy", "toy2"]
    assert registry.get_executor("toy", workdir="w") == ("toy", {"workdir": "w"})
    assert registry.get_executor("toy2") == ("made", {})
    assert registry.get_executor("sbatch").name == "sbatch"  # the built-in, not the entry point
    with pytest.raises(UserError) as info:
        registry.get_executor("nope")
    assert info.value.key == "arg.choice" and "sbatch, nemo-run, submitit, toy, toy2" in str(info.value)


def test_a_builtin_reads_no_entry_points(monkeypatch):
    def unexpected():
        raise AssertionError("the entry points were read")

    monkeypatch.setattr(registry, "_entry_points", unexpected)
    names = registry.ExecutorNames()
    assert "sbatch" in names and "submitit" in names
    assert names.metavar() == "{sbatch,nemo-run,submitit}"
    assert registry.get_executor("sbatch").name == "sbatch"


@pytest.mark.parametrize("executor", ["nemo-run", "submitit"])
def test_missing_library_names_the_extra(executor, monkeypatch):
    module, extra = EXTRAS[executor]
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec answers None
    with pytest.raises(UserError) as info:
        registry.get_executor(executor)
    error = info.value
    assert error.key == "executors.missing_extra" and error.exit_code == EXIT_BAD_INPUT == 2
    assert error.render("en") == (
        f"the {executor} executor needs the {extra} package: pip install 'mbridge-launch[{extra}]'")
    assert error.render("zh") == f"{executor} 执行器需要 {extra} 包：请运行 `pip install 'mbridge-launch[{extra}]'`"


@pytest.mark.parametrize("executor", ["nemo-run", "submitit"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_submit_without_the_extra_is_one_line(executor, dry_run, monkeypatch, tmp_path, capsys):
    module, extra = EXTRAS[executor]
    plan = tmp_path / "p.yaml"
    assert main(["recommend", "--smoke-test", "-o", str(plan)]) == 0
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, module, None)
    args = ["submit", str(plan), "--executor", executor, "--script-dir", str(tmp_path / "w"), "--no-cluster-checks"]
    assert main([*args, "--dry-run"] if dry_run else [*args, "--yes"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "error: " + t("executors.missing_extra", lang="en", executor=executor, package=extra, extra=extra) + "\n"
    assert f"mbridge-launch[{extra}]" in err and not (tmp_path / "w").exists()  # nothing done before it


def test_recommend_and_sbatch_dry_run_load_no_other_executor(tmp_path):
    """In a fresh interpreter: no entry-point scan, no nemo_run, no submitit."""
    code = textwrap.dedent(f"""
        import sys
        import mbridge_launch.executors as registry

        def unexpected():
            raise AssertionError("the entry points were read")

        registry._entry_points = unexpected
        from mbridge_launch.cli.main import main

        plan = {str(tmp_path / "p.yaml")!r}
        assert main(["recommend", "--smoke-test", "-o", plan]) == 0
        assert main(["submit", plan, "--executor", "sbatch", "--dry-run", "--no-cluster-checks"]) == 0
        loaded = sorted(m for m in ("nemo_run", "submitit") if m in sys.modules)
        assert not loaded, loaded
    """)
    entry = tmp_path / "scripts" / "training" / "run_recipe.py"  # the job starts here: a checkout's entry
    entry.parent.mkdir(parents=True)
    entry.write_text("")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
