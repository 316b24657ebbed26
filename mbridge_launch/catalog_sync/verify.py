"""`catalog verify`: the static catalog against the real Megatron Bridge in the user's own Python.

`catalog sync` reads a release statically (no torch needed); this runs the same recipes for real
where Megatron Bridge is installed (a training container, a login node's venv): real_build.py in
that interpreter builds every recipe at its own GPU count and validates it, and here each recipe's
real ConfigContainer is compared field by field with its catalog record (conformance.py, the same
comparison and reviewed list as the test tier), and every real rejection with the catalog's findings.

Nothing trains and nothing needs a GPU; recipes read their model's config.json through Hugging Face
(the user's cache or the network), as run_recipe.py does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mbridge_launch.base.errors import UserError
from mbridge_launch.catalog_sync import conformance

PACKAGE_PARENT = Path(__file__).resolve().parents[2]
PROBE = "import json, importlib.metadata as m; print(json.dumps(m.version('megatron-bridge')))"
RUNNER = "mbridge_launch.catalog_sync.real_build"


@dataclass
class VerifyResult:
    python: str
    installed: str
    catalog_version: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    report: conformance.Report | None = None


def _runner_env() -> dict[str, str]:
    env = dict(os.environ)
    # the tool's own package, importable by the other interpreter (real_build needs only its
    # stdlib-level modules), ahead of whatever that Python has installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH", "")) if p)
    return env


def installed_bridge(python: str) -> str:
    try:
        proc = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120, env=_runner_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError("catalog.verify.no_python", python=python, reason=str(exc)) from None
    if proc.returncode != 0:
        raise UserError("catalog.verify.no_bridge", python=python)
    return str(json.loads(proc.stdout.strip().splitlines()[-1]))


def run_real_build(python: str, catalog_file: Path, kind: str, names: list[str], present_gpu: bool,
                   on_line: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Runs real_build in `python`; its JSON lines, as they come (a full run takes minutes)."""
    with tempfile.TemporaryDirectory(prefix="mbl-verify-") as work:
        argv = [python, "-m", RUNNER, "--catalog", str(catalog_file), "--placeholder-inputs", work, *names]
        if not names:
            argv += ["--all", kind]
        if present_gpu:
            argv.append("--present-gpu")
        lines: list[dict[str, Any]] = []
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_runner_env()) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            for text in proc.stdout:
                if text.strip():
                    line = json.loads(text)
                    lines.append(line)
                    if on_line:
                        on_line(line)
            err = proc.stderr.read()
        if proc.returncode != 0:
            tail = " | ".join(err.strip().splitlines()[-3:])
            raise UserError("catalog.verify.runner_failed", python=python, code=proc.returncode, tail=tail)
    return lines


def verify(python: str | None, catalog_file: Path, catalog_data: dict[str, Any], kind: str, names: list[str],
           present_gpu: bool, on_line: Callable[[dict[str, Any]], None] | None = None) -> VerifyResult:
    py = python or sys.executable
    installed = installed_bridge(py)
    version = str(catalog_data.get("megatron_bridge_version"))
    if installed != version:
        raise UserError("catalog.verify.version", python=py, installed=installed, catalog=version)
    result = VerifyResult(py, installed, version)
    result.lines = run_real_build(py, catalog_file, kind, names, present_gpu, on_line)
    reviewed = conformance.load_reviewed(conformance.reviewed_file(version))
    result.report = conformance.report(catalog_data["recipes"], result.lines, reviewed)
    return result
