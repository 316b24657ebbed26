"""Packaging (marked `packaging`): what `pip install mbridge-launch` really gives a user.

- The built wheel holds the data packages (the recipe catalog, models/hardware/datasets, the sbatch
  templates, the messages) where `importlib.resources` finds them, every Python package of the
  tree, the executor entry points, and no top-level name other than `mbridge_launch`.
- A core install (`pip install <repo>`, no extras) into a fresh venv runs recommend, plan, estimate,
  preflight and `submit --executor sbatch --dry-run`; `--executor nemo-run` there is one line naming the extra
  (also marked `network`: the core dependencies come from PyPI).

Both work on a copy of the checkout in a temporary folder (setuptools writes build/ and *.egg-info
beside the sources) and create their venvs there too: nothing is cached inside the clone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
VENV_TIMEOUT = 180
INSTALL_TIMEOUT = 900
COMMAND_TIMEOUT = 180
_IGNORED = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", "build", "dist", "*.egg-info",
                                  ".state", ".pytest_cache", ".mypy_cache", ".ruff_cache")


def _run(argv: list[str], what: str, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """Run argv; a failure (or time-out) names the step and shows the output's tail."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)
    except subprocess.TimeoutExpired as exc:
        tail = ((exc.stdout or b"")[-3000:] if isinstance(exc.stdout, bytes) else (exc.stdout or "")[-3000:])
        pytest.fail(f"{what}: no answer within {timeout:.0f} s: {' '.join(argv)}\n{tail}", pytrace=False)
    return proc


def _check(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}): {' '.join(map(str, proc.args))}\n"
                    f"--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n{proc.stderr[-3000:]}", pytrace=False)
    return proc


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a command in the fresh venv: nothing that points back at this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MBRIDGE_LAUNCH_"))}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory) -> Path:
    """The checkout's files (what git tracks plus untracked files it does not ignore), copied."""
    target = tmp_path_factory.mktemp("source") / "mbridge-launch"
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, timeout=60, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.SubprocessError):
        shutil.copytree(REPO, target, ignore=_IGNORED)  # not a git checkout: the tree minus build outputs
        return target
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the work tree is not part of it
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _venv(path: Path, python: str = sys.executable) -> Path:
    _check(_run([python, "-m", "venv", str(path)], "python -m venv", VENV_TIMEOUT), "python -m venv")
    return path / "bin" / "python"


# The supported Pythons besides the one running the suite: pyproject's requires-python is
# >=3.10,<3.14, so the oldest and the newest are installed and smoked too (issue 35).
OTHER_PYTHONS = ("3.10", "3.13")


def _python(version: str) -> str | None:
    """An interpreter of `version`: pyenv's newest X.Y.*, else a working pythonX.Y on PATH (a pyenv
    shim there may name a version that is not selected); None: none here."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(root.glob(f"{version}.*/bin/python{version}"),
                        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parts[-3].split(".")])
    found = [str(p) for p in reversed(candidates)] + [w for w in [shutil.which(f"python{version}")] if w]
    for candidate in found:
        try:
            if subprocess.run([candidate, "-c", "import venv"], capture_output=True, timeout=60).returncode == 0:
                return candidate
        except (OSError, subprocess.SubprocessError):
            continue
    return None


# --------------------------------------------------------------------------------- the wheel
@pytest.fixture(scope="module")
def wheel(source_copy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
                 "-w", str(out), str(source_copy)], "building the wheel", INSTALL_TIMEOUT)
    if proc.returncode != 0 and "bdist_wheel" in proc.stdout + proc.stderr:
        pytest.fail("building the wheel needs setuptools' bdist_wheel (the `wheel` package, in .[test]): "
                    "pip install -e '.[all,test]'\n" + proc.stderr[-2000:], pytrace=False)
    _check(proc, "pip wheel --no-deps --no-build-isolation")
    found = sorted(out.glob("mbridge_launch-*.whl"))
    assert len(found) == 1, f"expected one mbridge_launch wheel in {out}, found {[p.name for p in out.iterdir()]}"
    return found[0]


def _source_packages() -> set[str]:
    """Every package of the tree, under the name it is installed as."""
    roots = {"mbridge_launch": REPO / "mbridge_launch", "mbridge_launch.executors": REPO / "executors"}
    found = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            found.add(".".join([name, *parts]))
    return found


def test_wheel_contents(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"mbridge_launch", dist_info}, f"the wheel installs more than mbridge_launch: {sorted(tops)}"
    data = {
        "mbridge_launch/catalog/megatron-bridge-0.6.2.json", "mbridge_launch/catalog/models.yaml",
        "mbridge_launch/catalog/hardware.yaml", "mbridge_launch/catalog/datasets.yaml",
        "mbridge_launch/messages/en.yaml", "mbridge_launch/messages/zh.yaml",
        *(f"mbridge_launch/templates/sbatch/{p.name}" for p in (REPO / "templates" / "sbatch").glob("*.j2")),
    }
    assert not data - names, f"package data missing from the wheel: {sorted(data - names)}"
    assert not [n for n in names if n.startswith("mbridge_launch/catalog/megatron-bridge-") and n.endswith(".yaml")]
    packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    missing = _source_packages() - packages
    assert not missing, f"packages of the tree not in the wheel (add them to pyproject's packages list): {sorted(missing)}"
    assert "[mbridge_launch.executors]" in entry_points
    for line in ("sbatch = mbridge_launch.executors.sbatch", "nemo-run = mbridge_launch.executors.nemo_run",
                 "submitit = mbridge_launch.executors.submitit"):
        assert line in entry_points, entry_points
    core = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert sorted(re.split(r"[\s<>=!~;\[(]", line.split(":", 1)[1].strip())[0].lower() for line in core) == [
        "jinja2", "pydantic", "pyyaml", "ruamel.yaml"], core  # ruamel.yaml: round-trip edits of user files
    for extra in ("nemo-run", "submitit", "all", "test"):
        assert f"Provides-Extra: {extra}" in metadata


def test_wheel_resources_in_a_fresh_venv(wheel, tmp_path):
    python = _venv(tmp_path / "venv")
    _check(_run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-cache-dir", str(wheel)],
                "pip install --no-deps WHEEL", INSTALL_TIMEOUT), "pip install --no-deps WHEEL")
    code = textwrap.dedent("""
        import json
        from importlib import metadata, resources

        def names(package):
            return sorted(p.name for p in resources.files(package).iterdir() if p.is_file() and not p.name.endswith((".py", ".pyc")))

        print(json.dumps({
            "models_yaml": str(resources.files("mbridge_launch.catalog").joinpath("models.yaml")),
            "catalog": names("mbridge_launch.catalog"),
            "templates": names("mbridge_launch.templates.sbatch"),
            "messages": names("mbridge_launch.messages"),
            "zh_has_key": "executors.missing_extra:" in resources.files("mbridge_launch.messages").joinpath("zh.yaml").read_text("utf-8"),
            "entry_points": sorted(ep.name for ep in metadata.entry_points(group="mbridge_launch.executors")),
        }))
    """)
    proc = _check(_run([str(python), "-c", code], "reading the package data", COMMAND_TIMEOUT, cwd=tmp_path, env=_clean_env()),
                  "reading the package data")
    found = json.loads(proc.stdout)
    assert found["models_yaml"].startswith(str(tmp_path / "venv")), found  # the installed copy, not the checkout
    assert {"megatron-bridge-0.6.2.json", "models.yaml", "hardware.yaml", "datasets.yaml"} <= set(found["catalog"]), found
    assert {p.name for p in (REPO / "templates" / "sbatch").glob("*.j2")} <= set(found["templates"]), found
    assert {"en.yaml", "zh.yaml"} <= set(found["messages"]) and found["zh_has_key"], found
    assert found["entry_points"] == ["nemo-run", "sbatch", "submitit"], found


# --------------------------------------------------------------------------------- the core install
@pytest.mark.network
@pytest.mark.parametrize("version", ["running", *OTHER_PYTHONS])
def test_core_install_in_a_fresh_venv(source_copy, tmp_path, version):
    interpreter = sys.executable if version == "running" else _python(version)
    if interpreter is None:
        pytest.skip(f"SKIP: no Python {version} here (python{version} on PATH or pyenv): the core install and "
                    f"smoke on Python {version} did not run")
    venv = tmp_path / "core-venv"
    started = time.monotonic()
    python = _venv(venv, interpreter)
    _check(_run([str(python), "-m", "pip", "install", "--retries", "2", "--timeout", "60", str(source_copy)],
                "pip install <repo> (core, no extras)", INSTALL_TIMEOUT), "pip install <repo> (core, no extras)")
    seconds = time.monotonic() - started
    size_mb = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6
    print(f"\ncore install: {seconds:.0f} s, venv {size_mb:.0f} MB")
    listed = _check(_run([str(python), "-m", "pip", "list", "--format", "json"], "pip list", COMMAND_TIMEOUT), "pip list")
    installed = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert not installed & {"nemo-run", "submitit", "leptonai", "ray", "torchx"}, f"the core install pulled: {sorted(installed)}"
    assert size_mb < 150, f"the core venv is {size_mb:.0f} MB"  # ~50 MB; the full install is ~545 MB

    cli = str(venv / "bin" / "mbridge-launch")
    work = tmp_path / "work"
    work.mkdir()
    env = _clean_env(MBRIDGE_LAUNCH_LANG="en", MBRIDGE_LAUNCH_STATE_DIR=str(tmp_path / "state"))

    def mbl(*args: str, what: str | None = None) -> subprocess.CompletedProcess:
        return _run([cli, *args], what or f"mbridge-launch {' '.join(args)}", COMMAND_TIMEOUT, cwd=work, env=env)
    mbl.argv, mbl.env = [cli], env  # type: ignore[attr-defined]

    for args in (("recommend", "--smoke-test", "-o", "p.yaml"),
                 ("plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100")):
        _check(mbl(*args), f"mbridge-launch {' '.join(args)} in the core venv")
    # the dry run runs preflight as a real submit would: the smoke plan runs in the release's NeMo
    # container, so an empty directory with no Megatron Bridge checkout and no Slurm passes (issue 33)
    dry = _check(mbl("submit", "p.yaml", "--executor", "sbatch", "--dry-run", "--no-cluster-checks"),
                 "submit --executor sbatch --dry-run --no-cluster-checks")
    assert "#SBATCH" in dry.stdout and "#!/bin/bash" in dry.stdout, dry.stdout[:2000]
    _check(mbl("estimate", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--tp", "2", "--pp", "1",
               "--mbs", "1", "--gbs", "64", "--seq-length", "8192"), "estimate in the core venv")
    checked = mbl("preflight", "p.yaml", "--no-cluster", "--format", "json")  # the smoke plan passes on a fresh machine
    assert checked.returncode == 0 and "internal error" not in checked.stderr, (checked.returncode, checked.stderr[-2000:])
    assert json.loads(checked.stdout)["checks"], checked.stdout[:2000]
    _check_argparse_behaviour(mbl, work)

    for lang, text in (("en", "the nemo-run executor needs the nemo-run package: pip install 'mbridge-launch[nemo-run]'"),
                       ("zh", "nemo-run 执行器需要 nemo-run 包：请运行 `pip install 'mbridge-launch[nemo-run]'`")):
        proc = mbl("submit", "p.yaml", "--executor", "nemo-run", "--dry-run", "--lang", lang)
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, (
            f"`submit --executor nemo-run --dry-run` without the extra (--lang {lang}) should be exit 2 and one line; "
            f"got exit {proc.returncode}, stdout {proc.stdout[-500:]!r}, stderr {proc.stderr[-2000:]!r}")
        assert text in lines[0] and "mbridge-launch[nemo-run]" in lines[0], lines[0]


def _check_argparse_behaviour(mbl, work: Path) -> None:
    """What the CLI asks of argparse, on the venv's own Python: its words in Chinese, one line for a
    bad argument, `--opt=--` read as text (not an internal error), and --help / --version onto a
    device that refuses them: one line and exit 1 (not a silent 0)."""
    proc = mbl("--lang", "zh", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("用法："), proc.stdout[:300]
    proc = mbl("plan", "--gpus", "x", "--lang", "zh")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("错误：") and "--gpus" in proc.stderr and "无效" in proc.stderr, proc.stderr
    proc = mbl("plan", "--model=--", "--gpus", "8", "--gpu-type", "h100")
    assert proc.returncode == 2 and "internal error" not in proc.stderr and "'--'" in proc.stderr, proc.stderr
    for args in (("--help",), ("--version",), ("plan", "--help")):
        with open("/dev/full", "w") as full:
            refused = subprocess.run([*mbl.argv, *args], stdout=full, stderr=subprocess.PIPE, text=True,
                                     timeout=COMMAND_TIMEOUT, cwd=work, env=mbl.env)
        assert refused.returncode == 1 and "stdout" in refused.stderr, (args, refused.returncode, refused.stderr)
