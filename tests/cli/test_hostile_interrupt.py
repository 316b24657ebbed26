"""Issue 14, "Ctrl-C in the first 0.2 s (a traceback)": Ctrl-C at any moment, from the first line
of mbridge_launch code that runs, ends the command with its normal result or with exactly
`interrupted` and exit 130: no traceback, no "Exception ignored", no death by SIGINT (-2).

The spread test runs the real console script (`.venv/bin/mbridge-launch`) and sends ONE SIGINT, to
the process or to its process group (as a terminal does), at delays spread over 0-600 ms counted
from the moment the wrapper has imported `mbridge_launch.__main__` (PYTHONPROFILEIMPORTTIME
reports it on stderr): Python's own start-up before that (site, the venv's .pth files: 45-450 ms
on a loaded machine, see benchmarks/RESULTS.md) runs no code of ours and is left out. The delays
are inputs; nothing here asserts a time.

The deterministic tests each pin one cause that the spread test met by chance:
- a second SIGINT while the first was being reported (Python raises one KeyboardInterrupt per
  SIGINT; `_main`'s handler did not ignore the next one);
- a SIGINT while Python exits after the command's result (finalization puts SIG_DFL back: -2);
- a KeyboardInterrupt raised inside a weakref callback (the import machinery's module-lock
  callback), which Python prints as "Exception ignored" and drops: the command went on;
- Ctrl-C while the CLI itself is imported, before the command read --lang.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, cli_env

SCRIPT = Path(sys.executable).with_name("mbridge-launch")
ENTRY_IMPORTED = "| mbridge_launch.__main__"  # PYTHONPROFILEIMPORTTIME's line for the wrapper's import
RUNS_PER_COMMAND = 10
ZH_INTERRUPTED = "已中断"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the console script is not installed next to python")


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """The three commands and the exit code each gives when nobody presses Ctrl-C."""
    plan = tmp_path_factory.mktemp("interrupt") / "plan.yaml"
    made = subprocess.run([str(SCRIPT), "recommend", "--model", "llama3-8b", "--gpus", "8", "-o", str(plan)],
                          env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    out = []
    for args in (["recommend", "--model", "llama3-8b", "--gpus", "8"], ["versions"],
                 ["preflight", str(plan), "--no-cluster"]):
        normal = subprocess.run([str(SCRIPT), *args], env=cli_env(), cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        assert "Traceback" not in normal.stderr and normal.stderr.strip() == "", normal.stderr
        out.append((args, normal.returncode))
    return out


def _drain(stream, lines: list[bytes], seen: threading.Event | None) -> None:
    for line in iter(stream.readline, b""):
        lines.append(line)
        if seen is not None and ENTRY_IMPORTED.encode() in line:
            seen.set()
    if seen is not None:
        seen.set()  # EOF: the process ended before the marker (then nothing is sent)


def interrupted_once(args: list[str], delay_s: float, to_group: bool) -> tuple[int, str]:
    """Run the console script, send one SIGINT `delay_s` after it imported our entry module;
    (returncode, stderr without the import-time lines)."""
    env = cli_env({"PYTHONPROFILEIMPORTTIME": "1"})
    proc = subprocess.Popen([str(SCRIPT), *args], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    err: list[bytes] = []
    seen = threading.Event()
    readers = [threading.Thread(target=_drain, args=(proc.stderr, err, seen)),
               threading.Thread(target=_drain, args=(proc.stdout, [], None))]
    for reader in readers:
        reader.start()
    seen.wait(120)
    time.sleep(delay_s)
    try:
        os.killpg(proc.pid, signal.SIGINT) if to_group else proc.send_signal(signal.SIGINT)
    except ProcessLookupError:
        pass
    code = proc.wait(120)
    for reader in readers:
        reader.join(10)
    text = b"".join(line for line in err if not line.startswith(b"import time:")).decode(errors="replace")
    return code, text


def test_ctrl_c_in_the_first_moments_is_interrupted_or_the_result(commands):
    """Ctrl-C in the first 0.2 s (a traceback): one SIGINT at delays spread over 0-600 ms."""
    bad = []
    for i in range(RUNS_PER_COMMAND):
        for n, (args, normal) in enumerate(commands):
            delay = ((i * len(commands) + n) * 0.037) % 0.6  # spread over 0-600 ms, no two alike
            to_group = (i + n) % 2 == 1
            code, err = interrupted_once(args, delay, to_group)
            shape_ok = (code == 130 and err == "interrupted\n") or (code == normal and err == "")
            if not shape_ok:
                bad.append((args[0], round(delay, 3), "group" if to_group else "pid", code, err[-800:]))
    assert not bad, bad


# ---------------------------------------------------------------- one test per cause
def _entry_child(body: str, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run entry() in a fresh interpreter after `body` (which may patch a command's run) ran."""
    code = textwrap.dedent("""
        import os, signal, sys
        import mbridge_launch.__main__ as entry_module
        {body}
        sys.argv = ["mbridge-launch", *{argv!r}]
        sys.exit(entry_module.entry())
    """).format(body=textwrap.indent(textwrap.dedent(body), "").strip(), argv=list(argv))
    return subprocess.run([sys.executable, "-c", code], env=env or cli_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_second_ctrl_c_while_interrupted_is_printed_is_ignored():
    """A terminal's Ctrl-C arrives twice (pressed again, or the group's and the process's): the
    second lands while `interrupted` is being written. It printed twice (or escaped as a
    traceback); now every SIGINT after the first is ignored."""
    proc = _entry_child("""
        from mbridge_launch.cli.commands import versions

        class CtrlCAfterEachWrite:
            def __init__(self, stream):
                self.stream = stream
            def write(self, text):
                n = self.stream.write(text)
                self.stream.flush()
                os.kill(os.getpid(), signal.SIGINT)
                return n
            def __getattr__(self, name):
                return getattr(self.stream, name)

        def run(args):
            sys.stderr = CtrlCAfterEachWrite(sys.stderr)
            os.kill(os.getpid(), signal.SIGINT)

        versions.run = run
    """, "versions")
    assert proc.returncode == 130 and proc.stderr == "interrupted\n", (proc.returncode, proc.stderr)


def test_ctrl_c_while_python_exits_after_the_result_is_ignored():
    """The command has printed its result; a Ctrl-C while the interpreter shuts down printed
    'Exception ignored in atexit callback ... KeyboardInterrupt' (or, once Python had put SIGINT
    back to its default, killed the process: -2). The result stands."""
    proc = _entry_child("""
        import atexit
        from mbridge_launch.cli.commands import versions

        def run(args):
            print("result")
            atexit.register(os.kill, os.getpid(), signal.SIGINT)
            return 0

        versions.run = run
    """, "versions")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "result\n", ""), proc.stderr


def test_ctrl_c_inside_a_weakref_callback_is_interrupted_not_ignored():
    """"Exception ignored in: <function _get_module_lock.<locals>.cb>": a KeyboardInterrupt raised
    in a callback Python cannot propagate from was printed and dropped, and the command went on as
    if Ctrl-C had not been pressed. Now it ends `interrupted`, 130."""
    proc = _entry_child("""
        import weakref
        from mbridge_launch.cli.commands import versions

        class Thing:
            pass

        def run(args):
            thing = Thing()
            ref = weakref.ref(thing, lambda _ref: os.kill(os.getpid(), signal.SIGINT))
            del thing  # the callback runs here; its KeyboardInterrupt cannot propagate
            print("went on")
            return 0

        versions.run = run
    """, "versions")
    assert proc.returncode == 130 and proc.stderr == "interrupted\n", (proc.returncode, proc.stderr)
    assert "Exception ignored" not in proc.stderr


def test_ctrl_c_while_the_cli_is_imported_speaks_the_lang_flag():
    """Ctrl-C during the import of the command modules, before the command read `--lang zh`: the
    word comes in the language the command line asked for."""
    proc = _entry_child("""
        class CtrlCOnImport:
            def find_spec(self, name, path=None, target=None):
                if name == "mbridge_launch.cli.main":
                    sys.meta_path.remove(self)
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, CtrlCOnImport())
    """, "versions", "--lang", "zh", env=cli_env(lang=None))
    assert proc.returncode == 130 and proc.stderr.strip() == ZH_INTERRUPTED, (proc.returncode, proc.stderr)
