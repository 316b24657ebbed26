"""Issue 14, property tests of the command line: every subcommand and every option of the real
parser (walked from build_parser(), so a new command or flag is covered, or fails
test_every_command_has_a_valid_base), given odd values one or two at a time on top of a valid
invocation, so that validation deeper than argparse is reached. Each invocation must keep the
contract of property_harness (documented exit code, one-line error, no traceback or internal
error, nothing raw, no secret, no write outside its paths, no hang).

Most examples run in process (main(argv), tens of milliseconds); test_real_entry_* run the
console entry in a fresh process for what only a process shows (exit status, the real stdout's
encoding, a closed pipe, /proc/self/environ holding the canary). NUL never appears in an argv: the
kernel cannot pass one (execve), so it is generated only inside files (test_plan_properties)."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import property_harness as H
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mbridge_launch.cli.main import build_parser

SCALE = max(1, int(os.environ.get("MBL_PROPERTY_SCALE", "1") or 1))
PER_OPTION_EXAMPLES = 5 * SCALE
PER_COMMAND_EXAMPLES = 15 * SCALE

# ---------------------------------------------------------------- the parser, walked
CommandPath = tuple[str, ...]


def command_parsers(parser: argparse.ArgumentParser | None = None, path: CommandPath = ()) \
        -> dict[CommandPath, argparse.ArgumentParser]:
    """Every parser of the command line by its command path ((), ("catalog", "sync"), ...)."""
    parser = parser or build_parser()
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(command_parsers(sub, (*path, name)))
    return found


def options_of(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]


def action_id(action: argparse.Action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


PARSERS = command_parsers()
PAIRS = [(path, action_id(action)) for path, parser in PARSERS.items() for action in options_of(parser)]


def find_action(path: CommandPath, ident: str) -> argparse.Action:
    return next(a for a in options_of(PARSERS[path]) if action_id(a) == ident)


# ---------------------------------------------------------------- a valid invocation per command
@dataclass
class Slot:
    """One argument of an invocation: an option (or positional, option None) and its values."""

    action: str
    values: list[str]


def bases(world: H.World, box: H.Sandbox) -> dict[CommandPath, list[Slot]]:
    """A valid invocation of every command (what the odd values are mixed into)."""
    plan, run = str(world.plan), H.RUN_NAME
    fake_bridge = str(world.read_paths["directory"])
    return {
        (): [],  # `mbridge-launch` alone, or with --version / --lang
        ("recommend",): [Slot("--model", ["llama3_8b"]), Slot("--gpus", ["8"]), Slot("--gpu-type", ["h100"])],
        ("catalog",): [],
        ("catalog", "sync"): [Slot("--from", [fake_bridge]), Slot("--out", [str(box.out / "catalog.json")])],
        # a Python without Megatron Bridge: refused at once with one line (the real run: tests/bridge)
        ("catalog", "verify"): [Slot("--python", [sys.executable]), Slot("names", ["llama3_8b_pretrain_config"])],
        ("catalog", "list"): [Slot("--family", ["llama"])],
        ("catalog", "show"): [Slot("name", ["llama3_8b_pretrain_config"])],
        ("catalog", "diff"): [Slot("old", ["0.6.2"]), Slot("new", ["0.6.2"])],
        ("plan",): [Slot("--model", ["llama3_8b"]), Slot("--gpus", ["8"]), Slot("--top", ["1"])],
        ("estimate",): [Slot("--model", ["llama3_8b"]), Slot("--gpus", ["8"]), Slot("--tp", ["2"])],
        # two rows and one iteration: seconds, not the minute of a real fit
        ("calibrate",): [Slot("--rows", [str(H.ROOT / "tests/fixtures/calibration/rows_two.csv")]),
                         Slot("--no-shipped-rows", []), Slot("--iters", ["1"]), Slot("--output", [str(box.out / "cal.json")])],
        ("preflight",): [Slot("plan", [plan]), Slot("--no-cluster", [])],
        ("submit",): [Slot("plan", [plan]), Slot("--dry-run", [])],
        ("runs",): [Slot("--no-refresh", [])],
        ("runs", "adopt"): [Slot("run", [run]), Slot("job", ["999999"]), Slot("--reason", ["property test"])],
        ("runs", "mark-lost"): [Slot("run", [run]), Slot("--reason", ["property test"])],
        ("runs", "forget"): [Slot("run", [run]), Slot("--reason", ["property test"])],
        # confirmed (--yes): the rebuild itself runs on the sandbox's ledger; the stub Slurm refuses
        ("runs", "recover"): [Slot("--reason", ["property test"]), Slot("--yes", [])],
        ("status",): [Slot("run", [run])],
        ("logs",): [Slot("run", [run])],
        ("cancel",): [Slot("run", [run])],
        ("checkpoints",): [Slot("target", [str(box.save)])],
        ("rollback",): [Slot("target", [str(box.save)]), Slot("--to", ["100"]), Slot("--dry-run", [])],
        ("watch",): [Slot("run", [run])],
        ("versions",): [],
        ("doctor",): [],
        ("diagnose",): [Slot("targets", [run])],
        ("tune",): [Slot("plan", [plan]), Slot("--dry-run", [])],
    }


# ---------------------------------------------------------------- odd values, by class
CONTROL = ["\x1b[31m", "\r", "\n", "\x7f", "\x85", "\x9b2J", "\u202e", "\u2066", "\x07", "\x08"]
HUGE_DIGITS = "9" * 4400


def _texts(*values: str) -> st.SearchStrategy[str]:
    return st.sampled_from(values)


CLASSES: dict[str, st.SearchStrategy[str]] = {
    "control_chars": st.builds(lambda a, c, b: a + c + b, _texts("", "x", "run", "8"), st.sampled_from(CONTROL),
                               _texts("", "y", "=1", "\x1b]0;title\x07")),
    "non_ascii_digits": _texts("\u00b2", "\u0663", "\uff11", "\uff18", "\u00b9\u00b2", "\u0e53", "\u2168"),
    "huge_or_negative_int": _texts("-1", "0", "-0", str(2**63), str(-2**63), str(2**64 + 1), "00000008",
                                   "+8", " 8", "8 ", "1_000", "0x10", "10**20"),
    "int_4400_digits": _texts(HUGE_DIGITS, "-" + HUGE_DIGITS),
    "float_odd": _texts("nan", "NaN", "inf", "-inf", "-0", "1e400", "-1e400", "1e-400", "0.0", "1e308"),
    "empty_or_whitespace": _texts("", " ", "\t", "   ", "\u3000", "\u00a0"),
    "dots_and_dashes": _texts(".", "..", "-x", "-", "--", "---", "../..", "./", "~", "$HOME", "*"),
    "long_string_100k": st.builds(lambda ch: ch * 100_000, _texts("a", "/", "\u4e2d", "9")),
    "unknown_name": _texts("no-such-model", "H100 PCIe 2", "llama3_8b\x1b", "zz", "LLAMA3_8B", "llama3-8b",
                           "gpt-oss-9000", "h100,gb200", "pretrain;rm -rf ~", "'quoted'", '"dq"', "a=b"),
    "undecodable_argv": _texts("\udcff", "run\udc80", "\udcc3\udca9"),  # bytes not UTF-8, as Python passes them
}
READ_PATH_CLASS = "special_read_path"
WRITE_PATH_CLASS = "special_write_target"
VALID_CLASS = "valid_value"

WRITE_OPTIONS = {"--output": "file", "--out": "file", "--ledger": "file", "--script-dir": "tree"}
INT_TYPES = ("int",)
# values the parser or the command accepts, per option, for mixing an odd value with valid ones
VALID: dict[str, list[str]] = {
    "--model": ["llama3_8b", "llama32_1b", "qwen3_30b_a3b"], "--gpus": ["8", "16", "2"], "--gpu-type": ["h100", "gb200"],
    "--goal": ["pretrain", "sft", "peft"], "--seq-length": ["4096", "8192"], "--precision": ["bf16", "fp8"],
    "--dataset": ["mock", "megatron-indexed"], "--time": ["00:10:00", "1-00:00:00"], "--tp": ["1", "2", "8"],
    "--pp": ["1", "2"], "--cp": ["1", "2"], "--ep": ["1", "8"], "--mbs": ["1", "2"], "--gbs": ["128", "256"],
    "--top": ["1", "3"], "--tokens": ["1T", "100B", "1e9"], "--to": ["100", "200"], "--seed": ["1234"],
    "--skip-iters": ["10"], "--limit": ["5"], "--poll": ["0.5"], "--max-rollbacks": ["2"],
    "--confirm-threshold": ["100"], "--mount": ["/data:/data"], "--env": ["NCCL_DEBUG=INFO"],
    "--name": ["prop-run", "a.b_c-1"], "--partition": ["h100", "cpu"], "--account": ["acct"],
    "--reason": ["because"], "--executor": ["sbatch", "submitit", "nemo-run"], "--family": ["llama", "qwen"],
    "--container-image": ["nvcr.io/nvidia/nemo:25.09"], "--data-path": ["/data/a", "0.5:/data/a"],
    "--recompute-layers": ["1"], "--first-stage-layers": ["4"], "--last-stage-layers": ["4"],
    "--mtp-layers": ["1"], "--vp": ["2"], "--etp": ["1"], "--pp-layout": ["Et|tL"],
    "--catalog-version": ["0.2.0"], "--scheduler": ["slurm"], "old": ["0.6.2"], "new": ["0.6.2"], "overrides": ["train.train_iters=10", "model.tensor_model_parallel_size=8"],
    "run": [H.RUN_NAME, "1", "fifo-log", "3", "#3"], "job": ["999999", "1"], "name": ["llama3_8b_pretrain_config"],
}


def read_paths(world: H.World, box: H.Sandbox) -> dict[str, str]:
    return {**world.read_paths, "hostile_save_dir": str(box.hostile_save), "save_dir": str(box.save),
            "plan": str(world.plan), "hf_config": str(world.hf_config)}


def value_strategy(action: argparse.Action, world: H.World, box: H.Sandbox) -> st.SearchStrategy[tuple[str, str]]:
    """(class, value) pairs for one option: every generic class, the option's type's, paths (read
    targets, or write targets inside the sandbox for the options that write), valid values."""
    ident = action_id(action)
    options = [st.tuples(st.just(name), strategy) for name, strategy in CLASSES.items()]
    if ident in WRITE_OPTIONS or "-o" in action.option_strings:
        options.append(st.tuples(st.just(WRITE_PATH_CLASS), st.sampled_from(sorted(box.write_paths.values()))))
    else:
        options.append(st.tuples(st.just(READ_PATH_CLASS), st.sampled_from(sorted(read_paths(world, box).values()))))
    valid = list(VALID.get(ident, []))
    if action.choices is not None:
        valid += [str(c) for c in action.choices]
    if valid:
        options.append(st.tuples(st.just(VALID_CLASS), st.sampled_from(valid)))
    return st.one_of(options)


def nargs_count(action: argparse.Action) -> st.SearchStrategy[int]:
    """How many values an option takes in a generated invocation (a wrong count now and then)."""
    if action.nargs == 0:
        return st.just(0)
    if action.nargs in (None, 1):
        return st.sampled_from([1, 1, 1, 1, 0])
    if action.nargs == "?":
        return st.sampled_from([0, 1])
    if action.nargs in ("*", "+"):
        return st.integers(0 if action.nargs == "*" else 1, 3)
    if isinstance(action.nargs, int):
        return st.just(action.nargs)
    raise AssertionError(f"no strategy for {action_id(action)} (nargs={action.nargs!r}): add one here")


@st.composite
def mutation(draw, action: argparse.Action, world: H.World, box: H.Sandbox) -> tuple[Slot | None, list[str]]:
    """A new slot for `action` (None: take the option away) and the classes of its values."""
    if action.nargs == 0:  # a flag: given or not (the base may have it)
        return (Slot(action_id(action), []) if draw(st.booleans()) else None), ["flag_toggled"]
    n = draw(nargs_count(action))
    pairs = [draw(value_strategy(action, world, box)) for _ in range(n)]
    if n == 0 and not action.option_strings and draw(st.booleans()):
        return None, ["argument_left_out"]
    return Slot(action_id(action), [v for _, v in pairs]), [c for c, _ in pairs] or ["no_value"]


def render(path: CommandPath, slots: list[Slot], equals_form: bool) -> list[str]:
    """argv: the command path, the options (`--opt=value` or `--opt value`), the positionals
    (after `--` when one starts with '-', as a user must write it)."""
    argv, positionals = list(path), []
    for slot in slots:
        if not slot.action.startswith("-"):
            positionals += slot.values
        elif len(slot.values) == 1 and (equals_form or slot.values[0].startswith("-")):
            argv.append(f"{slot.action}={slot.values[0]}")
        else:
            argv += [slot.action, *slot.values]
    if any(v.startswith("-") for v in positionals):
        argv.append("--")
    if path == ():
        argv += ["versions"]  # the global options need a command to apply to
    return argv + positionals


def apply(base: list[Slot], action: argparse.Action, slot: Slot | None) -> list[Slot]:
    """The base with `action`'s slot replaced (an append option gains one more instead)."""
    ident = action_id(action)
    appended = isinstance(action, argparse._AppendAction) and slot is not None
    kept = [s for s in base if s.action != ident or appended]
    if slot is None:
        return kept
    if ident in {s.action for s in kept} and not appended:
        return kept
    # positionals keep their order: the mutated one goes where it stood
    order = [s.action for s in base]
    if ident in order:
        kept.insert(min(order.index(ident), len(kept)), slot)
    else:
        kept.append(slot)
    return kept


def allowed_writes(path: CommandPath, slots: list[Slot], box: H.Sandbox, world: H.World) -> list[H.Allowed]:
    """Where this invocation may write: the state directory, the output paths it names, and
    for a rollback that is not a dry run, the save directories."""
    allowed = [H.Allowed("tree", str(box.state))]
    given = {s.action for s in slots}
    for slot in slots:
        kind = WRITE_OPTIONS.get(slot.action)
        if kind:
            for value in filter(None, slot.values):
                target = os.path.normpath(os.path.join(box.cwd, value))
                allowed += [H.Allowed(kind, target), *created_parents(target)]
    if path == ("rollback",) and "--dry-run" not in given:
        allowed += [H.Allowed("tree", str(box.save)), H.Allowed("tree", str(box.hostile_save))]
    if path == ("submit",) and "--dry-run" not in given and "--script-dir" not in given:
        allowed.append(H.Allowed("tree", str(box.cwd)))  # the script's default place (submit --help)
    if path == ("preflight",) and "--on-nodes" in given:
        allowed.append(H.Allowed("tree", str(box.home / ".cache")))  # its node-check job (XDG_CACHE_HOME)
    for slot in slots:  # a --ledger that is a link: the ledger is where it points (a shared one, say)
        if slot.action == "--ledger":
            allowed += [H.Allowed("file", os.path.realpath(os.path.join(box.cwd, v))) for v in slot.values if v]
    return allowed


def created_parents(target: str) -> list[H.Allowed]:
    """The folders a write to `target` may create on the way (the ledger makes its own)."""
    missing, parent = None, os.path.dirname(target)
    while parent and parent != "/" and not os.path.lexists(parent):
        missing, parent = parent, os.path.dirname(parent)
    return [H.Allowed("tree", missing)] if missing else []


def write_targets(slots: list[Slot], box: H.Sandbox) -> list[str]:
    return [os.path.normpath(os.path.join(box.cwd, v)) for s in slots if s.action in WRITE_OPTIONS for v in s.values]


def run_and_check(world: H.World, path: CommandPath, slots: list[Slot], classes: list[str], family: str,
                  box: H.Sandbox, equals_form: bool = False, in_process: bool = True) -> H.Result:
    argv = render(path, slots, equals_form)
    watched = [box.root, world.root / "hostile", world.root / "plan-ckpt"]
    before = H.listing(*watched)
    allowed = allowed_writes(path, slots, box, world)  # before: the folders a write may create are missing now
    try:
        env = H.env_for(world, box)
        result = H.invoke(argv, env, box.cwd) if in_process else H.invoke_process(argv, env, box.cwd)
        after = H.listing(*watched)
        problems = H.violations(result)
        problems += H.changes(before, after, allowed)
        problems += H.kind_changes(before, after, write_targets(slots, box))
        H.count(family, classes)
        H.record_slurm_calls(world)
    finally:
        world.pool.settle(box)
    assert not problems, H.describe(result, problems)
    return result


# ---------------------------------------------------------------- the tests
def test_every_command_has_a_valid_base(world):
    """Every command of the parser has a base invocation here (a new command fails this test
    until it gets one), and every base keeps the contract."""
    known = bases(world, world.pool.take())
    assert set(PARSERS) == set(known), f"commands without a base invocation: {set(PARSERS) - set(known)}"
    for path in known:
        for action in options_of(PARSERS[path]):
            nargs_count(action)  # raises for an option no strategy covers
        box = world.pool.take()
        run_and_check(world, path, bases(world, box)[path], ["base"], "base", box)


@pytest.mark.parametrize("path, ident", PAIRS, ids=[" ".join(p) + ":" + i if p else "(main):" + i for p, i in PAIRS])
@settings(max_examples=PER_OPTION_EXAMPLES)
@given(data=st.data())
def test_every_option_takes_odd_values(world, path, ident, data):
    """One option of one command set to an odd value (and now and then a second, valid or odd)."""
    parser = PARSERS[path]
    action = find_action(path, ident)
    box = world.pool.take()
    slots = bases(world, box)[path]
    slot, classes = data.draw(mutation(action, world, box), label=ident)
    slots = apply(slots, action, slot)
    if data.draw(st.booleans(), label="second value"):
        other = data.draw(st.sampled_from(options_of(parser)), label="second option")
        slot2, classes2 = data.draw(mutation(other, world, box), label=action_id(other))
        slots, classes = apply(slots, other, slot2), classes + classes2
    run_and_check(world, path, slots, classes, "per_option", box, equals_form=data.draw(st.booleans()))


@pytest.mark.parametrize("path", list(PARSERS), ids=[" ".join(p) or "(main)" for p in PARSERS])
@settings(max_examples=PER_COMMAND_EXAMPLES)
@given(data=st.data())
def test_every_command_takes_two_odd_values(world, path, data):
    """Two options of one command mutated at once (either odd or valid)."""
    parser = PARSERS[path]
    box = world.pool.take()
    slots, classes = bases(world, box)[path], []
    for k in range(2):
        action = data.draw(st.sampled_from(options_of(parser)), label=f"option {k}")
        slot, more = data.draw(mutation(action, world, box), label=action_id(action))
        slots, classes = apply(slots, action, slot), classes + more
    run_and_check(world, path, slots, classes, "two_values", box)


# ---------------------------------------------------------------- the real entry, in a fresh process
PROCESS_EXAMPLES = 10 * SCALE
PROCESS_COMMANDS = [("checkpoints",), ("rollback",), ("preflight",), ("recommend",), ("status",), ("runs",),
                    ("catalog", "show"), ("estimate",)]


@settings(max_examples=PROCESS_EXAMPLES)
@given(data=st.data())
def test_real_entry_keeps_the_contract(world, data):
    """A sample of commands and odd values through `python -m mbridge_launch`: the exit status
    the shell sees, stdout as the real (UTF-8) stream, undecodable argv bytes, and a
    /proc/self/environ that holds the canary (in process it holds pytest's environment)."""
    path = data.draw(st.sampled_from(PROCESS_COMMANDS), label="command")
    box = world.pool.take()
    slots, classes = bases(world, box)[path], []
    action = data.draw(st.sampled_from(options_of(PARSERS[path])), label="option")
    slot, classes = data.draw(mutation(action, world, box), label=action_id(action))
    run_and_check(world, path, apply(slots, action, slot), classes, "fresh_process", box, in_process=False)


def test_real_entry_hostile_save_dir_prints_no_environment(world):
    """checkpoints and rollback --dry-run on a save directory whose trackers are links to the
    canary and to /proc/self/environ (which, in a fresh process, holds the canary too)."""
    box = world.pool.take()
    for argv in (["checkpoints", str(box.hostile_save)], ["rollback", str(box.hostile_save), "--to", "100", "--dry-run"],
                 ["checkpoints", str(box.hostile_save), "--format", "json"]):
        slots = [Slot("target", [argv[1]])] + [Slot(argv[k], [argv[k + 1]] if argv[k] in ("--to", "--format") else [])
                                              for k in range(2, len(argv)) if argv[k].startswith("-")]
        run_and_check(world, (argv[0],), slots, ["hostile_save_dir"], "fresh_process", box, in_process=False)
        box = world.pool.take()


@pytest.mark.parametrize("argv", [["catalog", "list"], ["runs", "--all", "--no-refresh"], ["recommend", "--model",
                                  "llama3_8b", "--gpus", "8"], ["versions", "--format", "json"]])
def test_real_entry_closed_pipe_is_quiet(world, argv):
    """stdout closed by the reader (`| head -c0`): nothing on stderr (the reader asked for no
    more: issue 32's one rule, tests/cli/test_broken_pipe.py), exit 1, no 'Exception ignored'
    from the interpreter's own flush."""
    box = world.pool.take()
    proc = subprocess.Popen([sys.executable, "-m", "mbridge_launch", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=H.env_for(world, box), cwd=box.cwd)
    proc.stdout.close()  # the reader went away before the first byte
    err = proc.stderr.read().decode("utf-8", errors="replace")
    rc = proc.wait(timeout=H.HANG_LIMIT_S)
    H.count("fresh_process", ["closed_pipe"])
    world.pool.settle(box)
    problems = H.violations(H.Result(argv, rc, "", err))
    if err or rc not in (0, 1):
        problems.append("a closed stdout is exit 1 (or 0 when everything fitted in the pipe), nothing on stderr")
    assert not problems, H.describe(H.Result(argv, rc, "", err), problems)


@pytest.mark.parametrize("argv", [["versions", "--lang", "zh"], ["catalog", "show", "llama3_8b_pretrain_config",
                                  "--lang", "zh"], ["status", "no-such-run", "--lang", "zh"]])
def test_real_entry_ascii_terminal_with_chinese(world, argv):
    """An ASCII-only stdout (PYTHONIOENCODING=ascii) and --lang zh: escapes, not a crash."""
    box = world.pool.take()
    env = {**H.env_for(world, box), "PYTHONIOENCODING": "ascii"}
    result = H.invoke_process(argv, env, box.cwd)
    H.count("fresh_process", ["ascii_terminal"])
    world.pool.settle(box)
    problems = H.violations(result)
    if "UnicodeEncodeError" in result.err:
        problems.append("UnicodeEncodeError")
    assert not problems, H.describe(result, problems)


# ---------------------------------------------------------------- as root: links planted at a victim
@pytest.mark.skipif(not H.IS_ROOT, reason="the victims include a device node, which needs root")
class TestAsRoot:
    """Root follows any link and may replace any file: a lock, a journal or an -o target that is a
    link to a victim (a regular file, a device node) must leave the victim as it was.
    tests/cli/test_hostile_writes.py checks each refusal's wording; this class crosses every place
    with every kind of victim."""

    @staticmethod
    def _victims(box: H.Sandbox) -> dict[str, Path]:
        device = box.victims / "device"
        if not device.exists():
            os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        return {"regular_file": box.victims / "victim.txt", "device_node": device}

    @pytest.mark.parametrize("victim", ["regular_file", "device_node"])
    @pytest.mark.parametrize("place", ["lock", "journal", "output"])
    def test_victim_untouched(self, world, place, victim):
        from mbridge_launch.rollback import checkpoints as C
        from mbridge_launch.rollback import engine as R
        from mbridge_launch.rollback.journal import LOCK_NAME

        box = H.new_sandbox(world)
        try:
            target = self._victims(box)[victim]
            if place == "lock":
                (box.save / LOCK_NAME).symlink_to(target)
                runs = [["rollback", str(box.save), "--to", "100", "--yes"], ["rollback", "--dry-run", str(box.save),
                        "--recover"], ["rollback", str(box.save), "--recover"]]
            elif place == "journal":
                result = R.rollback(box.save, 100)
                journal = box.save / C.ROLLED_BACK_DIR / result.stamp / C.JOURNAL_NAME
                journal.unlink()
                journal.symlink_to(target)
                runs = [["rollback", str(box.save), "--undo", "--yes"], ["rollback", str(box.save), "--recover"],
                        ["checkpoints", str(box.save)]]
            else:
                link = box.out / "plan.yaml"
                link.symlink_to(target)
                runs = [["recommend", "--model", "llama3_8b", "--gpus", "8", "-o", str(link)],
                        ["plan", "--model", "llama3_8b", "--gpus", "8", "--top", "1", "-o", str(link)]]
            st_before = os.lstat(target)
            data_before = target.read_bytes() if victim == "regular_file" else b""
            for argv in runs:
                result = H.invoke(argv, H.env_for(world, box), box.cwd)
                H.count("as_root", [f"{place}_link_to_{victim}"])
                problems = H.violations(result)
                st_now = os.lstat(target)
                if (st_now.st_mode, st_now.st_rdev, st_now.st_ino, st_now.st_size) != \
                        (st_before.st_mode, st_before.st_rdev, st_before.st_ino, st_before.st_size) or \
                        (victim == "regular_file" and target.read_bytes() != data_before):
                    problems.append(f"the victim {target} changed")
                assert not problems, H.describe(result, problems)
        finally:
            H.drop(box)
