"""The property tier's harness (issue 14): a world of hostile files made once, a fresh sandbox per
generated invocation, the command line run in process (or in a fresh process), and the contract
every invocation must keep:

- the exit code is one README "Exit codes" documents;
- no traceback, no `internal_error`, no crashed preflight group (`preflight.group_crashed`);
- a bad-input answer (exit 2) is exactly one line on stderr;
- stdout and stderr carry no raw control character (C0 but \\n and \\t, DEL, C1, bidi overrides);
- the canary secret (in the environment, and in files trackers and symlinks point at) is never printed;
- nothing is created, changed or removed outside the paths the invocation may write (the state
  directory, the `-o`/`--out`/`--script-dir`/`--ledger` paths given, the save directories for a
  rollback that is not a dry run), and an output target that was not a regular file keeps its kind;
- no hang: the only time bound is a generous alarm (a hang is a failure, never a timed assert).

Slurm is never reached: a stub directory first on PATH answers every Slurm client command with a
refusal (exit 1) and records the call. `COUNTS` and `CLASSES` feed the summary line that
tests/property/conftest.py prints at the end of the session.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3, 4, 130})  # README.md "Exit codes"
SECRET_NAME = "MBL_PROPERTY_SECRET"
SECRET = "canary-5f3a9c1e-never-printed"
SLURM_COMMANDS = ("sbatch", "srun", "scancel", "squeue", "sacct", "sinfo", "scontrol", "sacctmgr", "salloc")
FOREIGN_NAME = "evil\x1b[31mrun\u202e\nsecond line"  # run #3, as a hand-edited or foreign ledger holds it
RUN_NAME = "prop-run"  # the ledger's run, in state `completed` (logs -f, watch, cancel --wait end)
BIG_DIGITS = "9" * 4400  # over Python's 4,300-digit limit for int(str)
HANG_LIMIT_S = 60  # not a duration assert: an invocation still running then is a hang

# the violations' own words: a traceback, the internal-error line (messages/en.yaml internal_error),
# a preflight check group that crashed (preflight.preflight.group_crashed and its hint)
CRASH_MARKS = ("Traceback (most recent call last)", "internal error:", "please report it",
               "checks could not run:", "this is a bug in mbridge-launch")
# messages/*.yaml error.prefix and warning.prefix, as they are and as an ASCII terminal gets them
ERROR_PREFIXES = ("error: ", "错误：", "错误：".encode("ascii", "backslashreplace").decode())
WARNING_PREFIXES = ("warning: ", "警告：", "警告：".encode("ascii", "backslashreplace").decode())
PLAN_ERROR_ITEM = "  - "
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

COUNTS: collections.Counter = collections.Counter()  # test family -> invocations
CLASSES: collections.Counter = collections.Counter()  # odd-value class -> invocations using it


class Hang(BaseException):
    """Raised by the alarm inside a hung in-process invocation (not an Exception: main() must
    not turn it into an internal error)."""


@dataclass
class World:
    """Made once per session: the stub Slurm, the hostile read-only files, a real Plan, a ledger."""

    root: Path
    stubs: Path
    calls_log: Path
    plan: Path
    plan_yaml: str
    ledger_template: Path
    read_paths: dict[str, str]  # class -> path that commands only read
    hf_config: Path
    pool: "Pool | None" = None


@dataclass
class Sandbox:
    """One invocation's own directories (a fresh one per generated example)."""

    root: Path
    cwd: Path
    state: Path
    home: Path
    save: Path  # a valid save directory (tests/checkpoint_fixtures.make_save_dir)
    hostile_save: Path  # trackers linked to the canary, /proc/self/environ, a FIFO; iter_* -> /
    out: Path  # write targets: a FIFO, a directory, links to victims, a device node (root)
    victims: Path
    write_paths: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    argv: list[str]
    rc: int
    out: str
    err: str


# ---------------------------------------------------------------- the world
def _stub(directory: Path, calls_log: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in SLURM_COMMANDS:
        script = directory / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls_log}"\n'
                          f'echo "{name}: error: refused by the property tests (no cluster)" >&2\nexit 1\n')
        script.chmod(0o755)


def _hostile_reads(d: Path) -> dict[str, str]:
    """Files a command may be pointed at to READ: special, huge, looping, secret-holding."""
    d.mkdir(parents=True, exist_ok=True)
    os.mkfifo(d / "fifo")  # no writer: an open() without O_NONBLOCK hangs forever
    (d / "directory").mkdir()
    (d / "loop").symlink_to(d / "loop")
    (d / "environ").symlink_to("/proc/self/environ")
    (d / "big.bin").write_bytes(b"x" * (5 * 1024 * 1024))
    (d / "secret.txt").write_text(f"{SECRET}\n")
    (d / "to-secret").symlink_to(d / "secret.txt")
    (d / "empty").write_bytes(b"")
    (d / "not-utf8").write_bytes(b"\xff\xfe\x00\x1b[31m")
    (d / "deep.json").write_text("[" * 20000 + "]" * 20000)
    (d / "dup.yaml").write_text("name: a\nname: b\n")
    (d / "to-root").symlink_to("/")
    return {
        "fifo": str(d / "fifo"), "directory": str(d / "directory"), "symlink_loop": str(d / "loop"),
        "proc_environ": str(d / "environ"), "file_5mb": str(d / "big.bin"), "secret_file": str(d / "to-secret"),
        "empty_file": str(d / "empty"), "not_utf8_file": str(d / "not-utf8"), "deep_json": str(d / "deep.json"),
        "duplicate_keys": str(d / "dup.yaml"), "root_dir": str(d / "to-root"), "dev_zero": "/dev/zero",
        "dev_urandom": "/dev/urandom", "dev_null": "/dev/null", "missing": str(d / "no-such-file"),
        "path_with_escape": str(d / "a\x1b[31mb"),
    }


def make_world(root: Path) -> World:
    """Everything invocations share and only read (the sandboxes hold what they may write)."""
    root.mkdir(parents=True, exist_ok=True)
    stubs, calls_log = root / "slurm-stubs", root / "slurm-calls.log"
    _stub(stubs, calls_log)
    read_paths = _hostile_reads(root / "hostile")
    hf = root / "hf-config.json"
    hf.write_text('{"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 16, '
                  '"vocab_size": 128256, "intermediate_size": 8192, "num_key_value_heads": 8}\n')
    plan = root / "plan.yaml"
    (root / "plan-ckpt").mkdir()
    env = sandbox_env_for(root, stubs, root / "plan-state", root / "plan-home")
    proc = subprocess.run(
        [sys.executable, "-m", "mbridge_launch", "recommend", "--model", "llama32_1b", "--gpus", "2",
         "--dataset", "mock", "--name", RUN_NAME, "--partition", "h100", "--time", "00:10:00",
         "--save-dir", str(root / "plan-ckpt"), "--mount", f"{root}:/data", "--workdir", str(root),
         "--entry", sys.executable, str(TESTS / "standin_trainer.py"), "-o", str(plan),
         "train.train_iters=6", "checkpoint.save_interval=3"],
        capture_output=True, text=True, env=env, cwd=root, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    plan_yaml = plan.read_text()
    ledger = root / "ledger-template.sqlite3"
    _fill_ledger(ledger, plan, plan_yaml, root, read_paths)
    world = World(root, stubs, calls_log, plan, plan_yaml, ledger, read_paths, hf)
    world.pool = Pool(world)
    return world


def _fill_ledger(path: Path, plan: Path, plan_yaml: str, root: Path, read_paths: dict[str, str]) -> None:
    """One completed run with a real Plan and an ordinary log, one whose log is a FIFO."""
    from mbridge_launch.runs import ledger as L

    log = root / "prop-run.log"
    log.write_text("iteration 1 | lm loss: 2.5 |\n")
    with L.Ledger.open(path) as ledger:
        run = ledger.begin_submission(name=RUN_NAME, plan_hash="0123456789abcdef", plan_yaml=plan_yaml,
                                      executor="sbatch", plan_path=str(plan), cluster={"partition": "h100"},
                                      save_dir=str(root / "plan-ckpt" / RUN_NAME))
        ledger.mark_submitted(run.id, ["999999"], log_paths=[str(log)])
        ledger.set_state(run.id, "completed", slurm_state="COMPLETED")
        other = ledger.begin_submission(name="fifo-log", plan_hash="fedcba9876543210", plan_yaml=plan_yaml,
                                        executor="sbatch")
        ledger.mark_submitted(other.id, ["999998"], log_paths=[read_paths["fifo"]])
        ledger.set_state(other.id, "failed", slurm_state="FAILED")
        # a ledger is a file others may write (a shared state directory): a name no command takes
        foreign = ledger.begin_submission(name=FOREIGN_NAME, plan_hash="00000000000000ff", plan_yaml="name: x\n",
                                          executor="sbatch", save_dir=str(root / "a\x1b[2Jb"))
        ledger.mark_submitted(foreign.id, ["999997"], log_paths=[read_paths["proc_environ"]])
        ledger.set_state(foreign.id, "completed", slurm_state="COMPLETED\x1b[31m")


# ---------------------------------------------------------------- a sandbox per invocation
def sandbox_env_for(root: Path, stubs: Path, state: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MBRIDGE_LAUNCH_", "MBL_"))}
    env.update({
        "PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home), "XDG_STATE_HOME": str(home / ".state"), "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".data"),
        "TMPDIR": str(root / "tmp"), "MBRIDGE_LAUNCH_STATE_DIR": str(state), "MBRIDGE_LAUNCH_LANG": "en",
        "MBRIDGE_LAUNCH_STRICT_MESSAGES": "1", SECRET_NAME: SECRET, "SLURM_CONF": str(root / "no-slurm.conf"),
    })
    return env


def _write_targets(out: Path, victims: Path) -> dict[str, str]:
    """Paths a command may be pointed at to WRITE, all inside the sandbox."""
    out.mkdir()
    victims.mkdir()
    (victims / "victim.txt").write_bytes(b"someone else's bytes\n")
    os.mkfifo(out / "fifo")
    (out / "directory").mkdir()
    (out / "to-victim").symlink_to(victims / "victim.txt")
    (out / "dangling").symlink_to(victims / "created-through-a-link")
    (out / "loop").symlink_to(out / "loop")
    (out / "to-fd1").symlink_to("/proc/self/fd/1")
    (out / "existing.yaml").write_text("old\n")
    targets = {
        "fifo": str(out / "fifo"), "directory": str(out / "directory"), "symlink_to_victim": str(out / "to-victim"),
        "dangling_symlink": str(out / "dangling"), "symlink_loop": str(out / "loop"),
        "symlink_to_stdout": str(out / "to-fd1"), "existing_file": str(out / "existing.yaml"),
        "new_file": str(out / "new.yaml"), "missing_parent": str(out / "no" / "such" / "dir" / "x.yaml"),
        "inside_file": str(out / "existing.yaml" / "x"),
    }
    if IS_ROOT:
        os.mknod(out / "device", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
        targets["device_node"] = str(out / "device")
    return targets


def new_sandbox(world: World) -> Sandbox:
    """A fresh directory tree for one invocation (under the world's root, removed by drop())."""
    from checkpoint_fixtures import make_save_dir

    root = Path(tempfile.mkdtemp(prefix="ex-", dir=world.root))
    for name in ("cwd", "home", "tmp"):
        (root / name).mkdir()
    state = root / "state"
    state.mkdir()
    shutil.copyfile(world.ledger_template, state / "ledger.sqlite3")
    save = make_save_dir(root)
    hostile = _hostile_save(root / "hostile-ckpt", world)
    box = Sandbox(root, root / "cwd", state, root / "home", save, hostile, root / "out", root / "victims")
    box.write_paths = _write_targets(box.out, box.victims)
    return box


def _hostile_save(save: Path, world: World) -> Path:
    """A save directory someone else can write: trackers that are links to secrets and special
    files, an iter_* link to /, a lock that is a link to a victim."""
    from checkpoint_fixtures import write_iter
    from mbridge_launch.rollback import checkpoints as C
    from mbridge_launch.rollback.journal import LOCK_NAME

    save.mkdir()
    write_iter(save, 100)
    (save / C.TXT_TRACKER).symlink_to(world.read_paths["secret_file"])
    (save / C.PT_TRACKER).symlink_to(world.read_paths["proc_environ"])
    (save / C.iter_dirname(500)).symlink_to("/")
    (save / LOCK_NAME).symlink_to(world.read_paths["secret_file"])
    return save


def drop(box: Sandbox) -> None:
    shutil.rmtree(box.root, ignore_errors=True)


def env_for(world: World, box: Sandbox) -> dict[str, str]:
    return sandbox_env_for(box.root, world.stubs, box.state, box.home)


# ---------------------------------------------------------------- what changed on disk
Entry = tuple  # (kind, mode, size, mtime_ns, inode, link target) of one path, links not followed


def listing(*roots: Path) -> dict[str, Entry]:
    """Every path under roots, by lstat (a FIFO is never opened, a link never followed). A
    directory is kind and mode only: its own size and mtime change whenever an entry does, and
    every entry is listed on its own."""
    found: dict[str, Entry] = {}
    for top in roots:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in [*dirnames, *filenames]:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                kind = stat.S_IFMT(st.st_mode)
                if stat.S_ISDIR(kind):
                    found[path] = (kind, stat.S_IMODE(st.st_mode))
                    continue
                target = os.readlink(path) if stat.S_ISLNK(kind) else ""
                found[path] = (kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino, target)
    return found


@dataclass(frozen=True)
class Allowed:
    """A place an invocation may write: `tree` (a directory and everything under it) or `file`
    (the path and its siblings named after it: an atomic write's temporary file, SQLite's -wal and
    -shm next to a --ledger path)."""

    kind: str
    path: str

    def __post_init__(self) -> None:
        # argv bytes that are not UTF-8 name the file the OS creates: compare as the OS spells it
        object.__setattr__(self, "path", os.fsdecode(os.fsencode(self.path)))

    def covers(self, path: str) -> bool:
        if path == self.path:
            return True
        if self.kind == "tree":
            return path.startswith(self.path.rstrip("/") + "/")
        name = os.path.basename(self.path).lstrip(".")
        return bool(name) and os.path.dirname(path) == os.path.dirname(self.path) and \
            os.path.basename(path).lstrip(".").startswith(name)


def changes(before: dict[str, Entry], after: dict[str, Entry], allowed: Sequence[Allowed]) -> list[str]:
    """What changed outside `allowed`: created, removed or altered paths, one line each."""
    found = []
    for path in sorted(set(before) | set(after)):
        if before.get(path) == after.get(path) or any(place.covers(path) for place in allowed):
            continue
        what = "created" if path not in before else "removed" if path not in after else "changed"
        found.append(f"{what}: {path}")
    return found


def kind_changes(before: dict[str, Entry], after: dict[str, Entry], targets: Sequence[str]) -> list[str]:
    """Output targets that were not regular files must keep their kind (never replaced)."""
    found = []
    for path in targets:
        was = before.get(path)
        if was is not None and not stat.S_ISREG(was[0]):
            now = after.get(path)
            if now is None or now[0] != was[0]:
                found.append(f"replaced: {path} ({stat.filemode(was[0])} -> "
                             f"{'gone' if now is None else stat.filemode(now[0])})")
    return found


# ---------------------------------------------------------------- running the command line
@contextlib.contextmanager
def _environment(env: dict[str, str], cwd: Path) -> Iterator[None]:
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.StringIO("")  # as /dev/null: no command may wait for a terminal
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.stdin = saved_stdin


def _alarm(signum, frame):
    raise Hang()


def invoke(argv: list[str], env: dict[str, str], cwd: Path) -> Result:
    """`mbridge-launch ARGV` in this process (about 20-70 ms instead of 400 ms for a fresh one)."""
    from mbridge_launch.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    previous = signal.signal(signal.SIGALRM, _alarm)
    # pytest-timeout (run-all.sh --timeout) may have its own alarm pending: it is put back after
    started, pending = time.monotonic(), signal.alarm(HANG_LIMIT_S)
    try:
        with _environment(env, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as exc:  # argparse: --help, --version, a bad argument
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Hang:
                rc = -1
                err.write(f"\nHANG: still running after {HANG_LIMIT_S} s\n")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if pending:
            signal.alarm(max(1, pending - int(time.monotonic() - started)))
        for sig, handler in handlers.items():  # a command may install its own (watch: SIGTERM)
            signal.signal(sig, handler)
    return Result(list(argv), rc, out.getvalue(), err.getvalue())


def invoke_process(argv: list[str], env: dict[str, str], cwd: Path) -> Result:
    """The same through the real entry (`python -m mbridge_launch`): real stdout encoding, the
    exit status the shell sees."""
    try:
        proc = subprocess.run([sys.executable, "-m", "mbridge_launch", *argv], capture_output=True, env=env,
                              cwd=cwd, timeout=HANG_LIMIT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return Result(list(argv), -1, (exc.stdout or b"").decode(errors="replace"),
                      (exc.stderr or b"").decode(errors="replace") + f"\nHANG: still running after {HANG_LIMIT_S} s\n")
    # bytes that are not UTF-8 are a violation of their own; decoded with replacement they show up
    return Result(list(argv), proc.returncode, proc.stdout.decode("utf-8", errors="replace"),
                  proc.stderr.decode("utf-8", errors="replace"))


# ---------------------------------------------------------------- the contract
def violations(result: Result) -> list[str]:
    """Every way the answer breaks the contract (empty: it keeps it)."""
    found = []
    both = result.out + result.err
    if result.rc not in DOCUMENTED_EXIT_CODES:
        found.append(f"exit code {result.rc} is not documented (README 'Exit codes')")
    found += [f"stderr/stdout holds {mark!r}" for mark in CRASH_MARKS if mark in both]
    if result.rc == 2:
        # one error line; warnings said before it are lines of their own
        lines = [line for line in result.err.splitlines() if not line.startswith(WARNING_PREFIXES)]
        # a Plan with several invalid fields: its one error line lists them as "  - FIELD: problem"
        # lines (plan/model.py PlanInvalid), each naming one field
        lines = lines[:1] + [line for line in lines[1:] if not line.startswith(PLAN_ERROR_ITEM)]
        if len(lines) != 1 or not lines[0].startswith(ERROR_PREFIXES):
            found.append(f"exit 2 with {len(lines)} lines on stderr besides warnings (one error line expected)")
    raw = sorted({f"U+{ord(c):04X}" for c in RAW_CONTROL.findall(both)})
    if raw:
        found.append(f"raw control characters printed: {', '.join(raw)}")
    if SECRET in both:
        found.append("the canary secret was printed")
    return found


def describe(result: Result, problems: list[str]) -> str:
    return (f"argv: {result.argv!r}\nexit: {result.rc}\nviolations:\n  - " + "\n  - ".join(problems)
            + f"\nstderr: {result.err[-2000:]!r}\nstdout: {result.out[-1500:]!r}")


def count(family: str, classes: Sequence[str]) -> None:
    COUNTS[family] += 1
    for name in set(classes):
        CLASSES[name] += 1


def summary() -> str:
    total = sum(COUNTS.values())
    per = ", ".join(f"{name} {n}" for name, n in sorted(COUNTS.items()))
    classes = ", ".join(f"{name} {n}" for name, n in sorted(CLASSES.items()))
    return f"property tests: {total} invocations ({per}); classes: {classes}"


SLURM_CALLS: collections.Counter = collections.Counter()  # stub command -> calls, over all worlds


def record_slurm_calls(world: World) -> None:
    """Move the stubs' call log into SLURM_CALLS (every call was refused, none reached Slurm)."""
    try:
        lines = world.calls_log.read_text().splitlines()
    except FileNotFoundError:
        return
    world.calls_log.unlink()
    SLURM_CALLS.update(line.split(" ", 1)[0] for line in lines if line)


def slurm_calls() -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(SLURM_CALLS.items()))


class Pool:
    """One sandbox at a time, reused while invocations leave it as it was (most do: a refusal
    writes nothing), its state directory reset when only the ledger moved, rebuilt otherwise:
    a fresh tree per invocation costs more than the invocation itself."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.box: Sandbox | None = None
        self.clean: dict[str, Entry] = {}

    def take(self) -> Sandbox:
        if self.box is None:
            self.box = new_sandbox(self.world)
            self.clean = listing(self.box.root)
        return self.box

    def settle(self, box: Sandbox) -> None:
        """After an invocation: keep, reset or drop the sandbox."""
        now = listing(box.root)
        if now == self.clean:
            return
        state = str(box.state) + "/"
        moved = {p for p in set(now) | set(self.clean) if now.get(p) != self.clean.get(p)}
        if all(p.startswith(state) for p in moved):
            shutil.rmtree(box.state)
            box.state.mkdir()
            shutil.copyfile(self.world.ledger_template, box.state / "ledger.sqlite3")
            self.clean = listing(box.root)
            return
        drop(box)
        self.box = None
