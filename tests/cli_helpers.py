"""The one way tests run the command line: `python -m mbridge_launch ARGS` in a fresh process.

- `mbl` (fixture, session scope, in tests/conftest.py): `mbl.run(*args, env=..., cwd=..., input=...,
  timeout=..., lang=...)` returns a `CliResult` (a `subprocess.CompletedProcess` with `.rc` and
  `.json()`); `mbl.popen(*args, ...)` starts one without waiting; `mbl.command` is the argv prefix.
- `run_cli` / `popen_cli`: the same as plain functions, for helpers and module-scoped fixtures.
- `recommend_answer`: `recommend ARGS --format json` in process (fast), the parsed answer.

The child's environment is the test process's, with:
- `lang="en"` (default): MBRIDGE_LAUNCH_LANG=en, so message text is English whatever the locale;
  `lang="zh"` likewise; `lang=None`: MBRIDGE_LAUNCH_LANG removed and LANG=C.UTF-8, so the language
  comes from the locale (which `env` may set, e.g. {"LANG": "zh_CN.UTF-8"});
- then `env` on top; a value of None removes that variable;
- tests/fault_hooks first on PYTHONPATH: its sitecustomize.py turns the crash-safety tests'
  variables (MBL_GATE_CRASH_AFTER, ...) into fault hooks; the installed product reads none of them.
stdin is /dev/null unless `input` is given (no command may wait for a terminal); the working
directory is the repository root unless `cwd` is given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI: tuple[str, ...] = (sys.executable, "-m", "mbridge_launch")
DEFAULT_TIMEOUT = 120.0
FAULT_HOOKS = ROOT / "tests" / "fault_hooks"  # sitecustomize.py: the tests' fault switches


class CliResult(subprocess.CompletedProcess):
    """One finished command: `.rc` (= `.returncode`), `.stdout`, `.stderr` (text), `.json()`."""

    @property
    def rc(self) -> int:
        return self.returncode

    def json(self) -> Any:
        """stdout parsed as JSON; a clear failure (with stderr) when there is none."""
        assert self.stdout.strip(), f"no JSON on stdout (exit {self.returncode}); stderr: {self.stderr}"
        return json.loads(self.stdout)


def cli_env(env: Mapping[str, str | None] | None = None, *, lang: str | None = "en") -> dict[str, str]:
    """The environment a command runs with (see the module docstring)."""
    full = dict(os.environ)
    if lang is None:
        full["LANG"] = "C.UTF-8"
        full.pop("MBRIDGE_LAUNCH_LANG", None)
    else:
        full["MBRIDGE_LAUNCH_LANG"] = lang
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAULT_HOOKS), full.get("PYTHONPATH")) if p)
    return full


def run_cli(*args: str | os.PathLike, env: Mapping[str, str | None] | None = None,
            cwd: str | os.PathLike | None = None, input: str | None = None, timeout: float = DEFAULT_TIMEOUT,
            lang: str | None = "en") -> CliResult:
    """`mbridge-launch ARGS` in a fresh process, as a user sees it (exit code, stdout, stderr)."""
    proc = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=cli_env(env, lang=lang),
                          cwd=ROOT if cwd is None else cwd, timeout=timeout, input=input,
                          stdin=subprocess.DEVNULL if input is None else None)
    return CliResult(proc.args, proc.returncode, proc.stdout, proc.stderr)


def popen_cli(*args: str | os.PathLike, env: Mapping[str, str | None] | None = None,
              cwd: str | os.PathLike | None = None, lang: str | None = "en", **popen: Any) -> subprocess.Popen:
    """`mbridge-launch ARGS` started, not waited for: stdout and stderr are text pipes and stdin is
    /dev/null unless `popen` says otherwise (its keywords go to subprocess.Popen)."""
    options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "stdin": subprocess.DEVNULL,
                               "text": True, **popen}
    return subprocess.Popen([*CLI, *map(str, args)], env=cli_env(env, lang=lang), cwd=ROOT if cwd is None else cwd,
                            **options)


class Mbl:
    """What the `mbl` fixture gives a test (one object, no state of its own)."""

    command = CLI
    root = ROOT
    run = staticmethod(run_cli)
    popen = staticmethod(popen_cli)


def recommend_answer(capsys, *args: str) -> dict:
    """`mbridge-launch recommend ARGS --format json`, in process; the parsed answer."""
    from mbridge_launch.cli.main import main

    rc = main(["recommend", *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def one_line_error(result, rc: int = 2) -> str:
    """The single stderr line of a refused command (a run_cli/`mbl` result, exit `rc`), with no
    traceback and no internal error: the contract of every refusal (issue 14)."""
    assert result.rc == rc, (result.rc, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]
