"""mypy with a baseline that may only shrink.

    .venv/bin/python tests/tooling/mypy_baseline.py             check (tests/run-all.sh runs this)
    .venv/bin/python tests/tooling/mypy_baseline.py --update    rewrite the baseline after fixing errors
    .venv/bin/python tests/tooling/mypy_baseline.py --update --allow-new   regenerate it from scratch

mypy runs over the package as installed ([tool.mypy] of pyproject.toml): executors/ is installed as
mbridge_launch.executors (pyproject's package-dir), which an editable install resolves through an
import hook mypy cannot see, so the package is laid out with symbolic links in a temporary folder
(as tests/tooling/lint-imports.sh does) and the paths mypy reports are mapped back to the checkout.

Errors are compared with tests/tooling/mypy-baseline.txt by file and error code, counted, ignoring
line numbers and messages (so moving code does not break the check). The check fails when a
(file, code) pair has more errors than the baseline allows (a new error: fix it; the lines of that
file and code are printed), and also when it has fewer (errors were fixed: shrink the baseline with
--update and commit it, so the fixed places cannot silently fill up again). --update refuses to
let any pair grow unless --allow-new is given. Exit status: 0 clean, 1 differs, 2 mypy failed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path(__file__).resolve().parent / "mypy-baseline.txt"
PACKAGE = "mbridge_launch"
# where a module of the installed package lives in the checkout: longest prefix first
SOURCES = [("mbridge_launch/executors/", "executors/"), ("mbridge_launch/", "mbridge_launch/")]
ERROR = re.compile(r"^(?P<path>[^:\n]+\.pyi?):(?P<line>\d+):(?:\d+:)? error: (?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$")
UPDATE = "python tests/tooling/mypy_baseline.py --update"

Key = tuple[str, str]


def stage(tree: Path) -> Path:
    """The package as installed, as symbolic links under `tree`."""
    package = tree / PACKAGE
    package.mkdir()
    for entry in sorted((ROOT / PACKAGE).iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "executors").symlink_to(ROOT / "executors")
    return package


def checkout_path(path: str) -> str:
    path = path.replace(os.sep, "/")
    for installed, source in SOURCES:
        if path.startswith(installed):
            return source + path[len(installed):]
    return path


def run_mypy(mypy: list[str]) -> list[tuple[str, int, str, str]]:
    """(checkout path, line, code, message) of every error mypy reports."""
    with tempfile.TemporaryDirectory(prefix="mbl-mypy.") as tmp:
        stage(Path(tmp))
        argv = [*mypy, "--config-file", str(ROOT / "pyproject.toml"), "-p", PACKAGE, "--no-error-summary",
                "--no-pretty", "--show-error-codes", "--hide-error-context", "--cache-dir", os.devnull]
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, env={**os.environ, "MYPYPATH": tmp})
    errors, other = [], []
    for line in proc.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            errors.append((checkout_path(match["path"]), int(match["line"]), match["code"] or "no-code",
                           match["message"]))
        elif ": note: " not in line and line.strip():
            other.append(line)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not errors) or other:
        detail = "\n".join([*other, proc.stderr.strip()]).strip()
        print(f"mypy-baseline: mypy itself failed (exit {proc.returncode}): {' '.join(argv)}\n{detail}".rstrip())
        sys.exit(2)
    return errors


def count(errors: list[tuple[str, int, str, str]]) -> Counter[Key]:
    return Counter((path, code) for path, _, code, _ in errors)


def read_baseline() -> Counter[Key]:
    found: Counter[Key] = Counter()
    if not BASELINE.exists():
        return found
    for raw in BASELINE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        number, path, code = line.split()
        found[(path, code.strip("[]"))] += int(number)
    return found


def write_baseline(counts: Counter[Key]) -> None:
    lines = [
        "# mypy errors allowed, per file and error code (tests/tooling/mypy_baseline.py); may only shrink.",
        f"# Regenerate after fixing errors: {UPDATE}",
        f"# {sum(counts.values())} errors",
    ]
    lines += [f"{n} {path} [{code}]" for (path, code), n in sorted(counts.items())]
    BASELINE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the baseline with the errors found now")
    parser.add_argument("--allow-new", action="store_true", help="with --update: let the baseline grow")
    parser.add_argument("--mypy", default=f"{sys.executable} -m mypy", help="the mypy command (default: %(default)s)")
    args = parser.parse_args(argv)
    errors = run_mypy(args.mypy.split())
    now, allowed = count(errors), read_baseline()
    grown = {key: n - allowed[key] for key, n in now.items() if n > allowed[key]}
    shrunk = {key: allowed[key] - now[key] for key in allowed if now[key] < allowed[key]}
    if args.update:
        if grown and not args.allow_new:
            for (path, code), extra in sorted(grown.items()):
                print(f"  {path} [{code}]: {extra} more than the baseline allows")
            print("mypy-baseline: the baseline may only shrink; fix the new errors (or, to accept them "
                  "deliberately, --update --allow-new)")
            return 1
        write_baseline(now)
        print(f"mypy-baseline: wrote {BASELINE.relative_to(ROOT)}: {sum(now.values())} errors "
              f"({sum(allowed.values())} before)")
        return 0
    if shrunk:
        print(f"mypy-baseline: {sum(shrunk.values())} error(s) of the baseline are fixed "
              f"(thank you): shrink it with `{UPDATE}` and commit tests/tooling/mypy-baseline.txt")
        for (path, code), fewer in sorted(shrunk.items()):
            print(f"  {path} [{code}]: {fewer} fewer")
    if grown:
        print(f"mypy-baseline: {sum(grown.values())} new mypy error(s) (not in {BASELINE.relative_to(ROOT)}):")
        for path, code in sorted(grown):
            print(f"  {path} [{code}]: {now[(path, code)]} now, {allowed[(path, code)]} allowed; the errors there:")
            for p, line, c, message in errors:
                if (p, c) == (path, code):
                    print(f"    {p}:{line}: {message}  [{c}]")
        print("Fix them; the baseline only takes errors away.")
    if grown or shrunk:
        return 1
    print(f"mypy-baseline: {sum(now.values())} errors, all in the baseline; no new ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
