"""Fixtures of the Megatron Bridge tier (tests/bridge/README.md).

The tests here run in the project's own Python (3.10-3.12) like every other test; the real
megatron-bridge 0.6.2 runs in the tier's Python 3.12 env (make-env.sh), reached only through a
subprocess and JSON lines (build_recipe.py), because the two cannot share an interpreter.

- `bridge_python` (session): the env's python. Where it comes from, in order: $MBL_BRIDGE_ENV (set by
  tests/run-all.sh from make-env.sh), else an env already built for the current pins
  (`make-env.sh --existing`). No env: $MBL_BRIDGE_SKIP (run-all.sh's reason: no Python 3.12) skips
  every test of the tier with that reason; without it the tier is skipped when run by hand and FAILS
  under CI=true, so that CI cannot lose the tier silently.
- `run_bridge(args, timeout=...)`: `bridge_python args` in the repository root, text output.
- `run_jobs(jobs)`: one build_recipe.py --jobs process for many layouts (one import of the recipes,
  about 40 s of CPU); returns id -> result line.
- `all_results` (session): every catalog recipe built and validated at its own GPU count, with
  placeholder user inputs (`--all all --placeholder-inputs`); $MBL_BRIDGE_RESULTS names a JSON-lines
  file of such a run to reuse instead (while developing).

Every test under tests/bridge/ is marked `bridge` (`-m "not bridge"` leaves the tier out).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# one recipe import plus up to ~750 builds on a loaded 2-core machine: minutes, not seconds
ALL_TIMEOUT_S = 2400.0
JOBS_TIMEOUT_S = 1200.0


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.bridge)


def _existing_env() -> Path | None:
    try:
        out = subprocess.run(["bash", str(HERE / "make-env.sh"), "--existing"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return Path(lines[-1]) if out.returncode == 0 and lines else None


def _tier_unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"Megatron Bridge tier unavailable under CI: {reason}", pytrace=False)
    pytest.skip(f"Megatron Bridge tier: {reason}")


@pytest.fixture(scope="session")
def bridge_python() -> Path:
    env = os.environ.get("MBL_BRIDGE_ENV")
    skip = os.environ.get("MBL_BRIDGE_SKIP")
    if not env and skip:
        # run-all.sh found no Python 3.12 (make-env.sh exit 77) and printed a boxed SKIP already;
        # the skip reason repeats it in pytest's summary (-ra)
        pytest.skip(f"SKIPPED Megatron Bridge tier: {skip}")
    path = Path(env) if env else _existing_env()
    if path is None:
        _tier_unavailable("no env built for the pins of tests/bridge/requirements-bridge.txt "
                          "(bash tests/bridge/make-env.sh builds it; tests/run-all.sh does that itself)")
    python = path / "bin" / "python"
    if not os.access(python, os.X_OK):
        pytest.fail(f"MBL_BRIDGE_ENV={env!r} has no bin/python", pytrace=False)
    return python


@pytest.fixture(scope="session")
def run_bridge(bridge_python: Path) -> Callable[..., subprocess.CompletedProcess]:
    def run(args: list[str], timeout: float = JOBS_TIMEOUT_S) -> subprocess.CompletedProcess:
        return subprocess.run([str(bridge_python), *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
    return run


def _read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _failed(what: str, proc: subprocess.CompletedProcess) -> None:
    tail = "\n".join((proc.stderr or "").splitlines()[-30:])
    pytest.fail(f"{what} exited {proc.returncode}:\n{tail}", pytrace=False)


@pytest.fixture(scope="session")
def run_jobs(run_bridge, tmp_path_factory) -> Callable[[list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    def run(jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        ids = [str(job["id"]) for job in jobs]
        assert len(set(ids)) == len(ids), "job ids must be unique"
        work = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp(), prefix="jobs-"))
        (work / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
        proc = run_bridge(["tests/bridge/build_recipe.py", "--jobs", str(work / "jobs.jsonl"),
                           "--out", str(work / "results.jsonl")])
        if proc.returncode != 0:
            _failed("build_recipe.py --jobs", proc)
        results = {str(line["id"]): line for line in _read_lines(work / "results.jsonl")}
        missing = sorted(set(ids) - set(results))
        assert not missing, f"no result for jobs {missing[:10]}"
        return results
    return run


@pytest.fixture(scope="session")
def all_results(run_bridge, tmp_path_factory) -> list[dict[str, Any]]:
    reuse = os.environ.get("MBL_BRIDGE_RESULTS")
    if reuse:
        return _read_lines(Path(reuse))
    out = tmp_path_factory.mktemp("bridge-all") / "all.jsonl"
    proc = run_bridge(["tests/bridge/build_recipe.py", "--all", "all", "--placeholder-inputs", "--out", str(out)],
                      timeout=ALL_TIMEOUT_S)
    if proc.returncode != 0:
        _failed("build_recipe.py --all all", proc)
    return _read_lines(out)
