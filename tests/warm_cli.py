"""A warm command line for the concurrency tests: one process imports the CLI and the executors'
libraries once (nemo_run alone takes 2-4 s to import on this machine), then for each request forks
one child per argv, releases them all at once and reports each child's exit code and output.

Why: a round of the serialised-submission test is a race between N real processes of
`mbridge-launch submit`; what decides it is the gate (checks, locks, ledger insert, scheduler
call), not the interpreter's start-up. With a fresh interpreter per submit, 126 rounds cost most of
their time importing nemo_run, and the start-up skew of a loaded machine spreads the processes so
far apart that the race is rarely a race. Children are real processes with their own ledger
connections, file locks and scheduler calls, exactly as separate shells would be.

Protocol (JSON lines): the parent writes {"argvs": [[...], ...], "dir": "/tmp/x"} on stdin; this
process answers {"results": [{"rc": N, "stdout": "...", "stderr": "..."}, ...]} on stdout, in argv
order. EOF on stdin ends it. Started by `WarmCli` below with tests/cli_helpers.cli_env, so the
environment (language, fault hooks on PYTHONPATH) is the one `mbl.run` gives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def _child(argv: list[str], out: Path, err: Path, gate: int) -> None:
    """In the forked child: wait for the start signal, run the command as `python -m mbridge_launch`
    would, exit with its code (no return to the parent's loop, ever)."""
    code = 70
    try:
        os.read(gate, 1)  # every sibling is forked before any starts
        os.close(gate)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number, path in ((1, out), (2, err)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, number)
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the child's stdin for its whole life
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        from mbridge_launch.cli.main import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a traceback must reach the test, as in a real process
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _round(argvs: list[list[str]], directory: Path) -> list[dict[str, Any]]:
    directory.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()
    pids = []
    for number, argv in enumerate(argvs):
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            _child(argv, directory / f"{number}.out", directory / f"{number}.err", read_end)
        pids.append(pid)
    os.close(read_end)
    os.write(write_end, b"x" * len(argvs))  # the start signal, one byte per child
    os.close(write_end)
    results = []
    for number, pid in enumerate(pids):
        _, status = os.waitpid(pid, 0)
        results.append({"rc": os.waitstatus_to_exitcode(status),
                        "stdout": (directory / f"{number}.out").read_text(errors="replace"),
                        "stderr": (directory / f"{number}.err").read_text(errors="replace")})
    return results


def serve() -> None:
    import nemo_run  # noqa: F401
    import submitit  # noqa: F401

    import mbridge_launch.cli.main  # noqa: F401 - the imports every child would otherwise pay
    import mbridge_launch.executors.nemo_run  # noqa: F401
    import mbridge_launch.executors.submitit  # noqa: F401
    import mbridge_launch.gate.submit  # noqa: F401

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps({"results": _round(request["argvs"], Path(request["dir"]))}), flush=True)


class WarmCli:
    """The test side: `with WarmCli(env) as cli: cli.run_all([[...], [...]], directory)`."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=cwd)
        ready = self.proc.stdout.readline() if self.proc.stdout else ""
        assert ready.strip() == '{"ready": true}', f"warm CLI did not start: {ready!r}"

    def run_all(self, argvs: list[list[str]], directory: Path) -> list[tuple[int, str, str]]:
        """Every argv started at once, each in its own process; (exit code, stdout, stderr) each."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"argvs": argvs, "dir": str(directory)}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return [(r["rc"], r["stdout"], r["stderr"]) for r in answer["results"]]

    def __enter__(self) -> "WarmCli":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    serve()
