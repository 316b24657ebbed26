"""Issue 14, destructive writes: files other people can write in a save directory (the rollback
lock, ROLLBACK.json) and the user's `-o` target are data, never trusted paths. Each test is named
after an example of the issue; each checks the one-line refusal AND that nothing was written."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import stat
from pathlib import Path

import pytest

from checkpoint_fixtures import make_save_dir
from mbridge_launch.cli import main as cli
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.rollback import engine as R
from mbridge_launch.rollback.journal import LOCK_NAME

RECOMMEND = ["recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100"]
VICTIM_BYTES = b"precious bytes of someone else\n"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory, monkeypatch):
    # outside tmp_path, whose whole tree the tests compare before and after
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def run(capsys, *argv):
    code = cli.main([*argv, "--lang", "en"])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The single error line (and no traceback, no internal error)."""
    lines = [line for line in err.splitlines() if line.startswith("error")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def tree(root: Path) -> dict[str, tuple]:
    """Every entry under root (root included), not following links: kind, bytes hash, mode, mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            digest = ""
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            out[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), digest, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


def journal_path(save: Path, stamp: str) -> Path:
    return save / C.ROLLED_BACK_DIR / stamp / C.JOURNAL_NAME


def edit_journal(save: Path, stamp: str, **changes) -> dict:
    path = journal_path(save, stamp)
    journal = json.loads(path.read_text())
    journal.update(changes)
    path.write_text(json.dumps(journal))
    return journal


def snapshot(data: bytes, mode: int) -> dict:
    return {"present": True, "b64": base64.b64encode(data).decode(), "sha256": hashlib.sha256(data).hexdigest(),
            "mode": mode, "mtime_ns": 1_700_000_000_000_000_000, "atime_ns": 1_700_000_000_000_000_000}


# ---------------------------------------------------------------- the rollback lock
def _plant_lock(save: Path, victim: Path, kind: str) -> None:
    lock = save / LOCK_NAME
    if kind == "symlink":
        lock.symlink_to(victim)
    elif kind == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
@pytest.mark.parametrize("argv", [["--to", "100", "--yes"], ["--recover"]], ids=["to-100", "recover"])
def test_lock_symlink_to_victim_is_refused_and_victim_untouched(tmp_path, capsys, kind, argv):
    save = make_save_dir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_BYTES)
    _plant_lock(save, victim, kind)
    before = tree(tmp_path / "ckpt")
    code, _, err = run(capsys, "rollback", str(save), *argv)
    assert code == 2, err
    line = error_line(err)
    assert str(save / LOCK_NAME) in line and "not a lock file" in line, line
    assert victim.read_bytes() == VICTIM_BYTES
    assert tree(tmp_path / "ckpt") == before  # nothing moved, no tracker written


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_lock_symlink_dry_run_recover_leaves_victim_untouched(tmp_path, capsys, kind):
    save = make_save_dir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_BYTES)
    _plant_lock(save, victim, kind)
    code, out, err = run(capsys, "rollback", "--dry-run", str(save), "--recover")
    assert code == 0, err
    assert victim.read_bytes() == VICTIM_BYTES
    assert (save / LOCK_NAME).exists()  # a dry run does not even drop a stale lock


# ---------------------------------------------------------------- ROLLBACK.json
def test_journal_moved_entry_outside_save_dir_refused(tmp_path, capsys):
    save = make_save_dir(tmp_path)
    result = R.rollback(save, 100)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data").write_bytes(VICTIM_BYTES)
    journal = json.loads(journal_path(save, result.stamp).read_text())
    moved = [*journal["moved"], {"name": "../victim", "mtime_ns": 1, "atime_ns": 1}]
    edit_journal(save, result.stamp, state="started", moved=moved)  # an "interrupted" rollback to finish
    before = tree(tmp_path)
    code, _, err = run(capsys, "rollback", str(save), "--recover")
    assert code == 2, err
    line = error_line(err)
    assert str(journal_path(save, result.stamp)) in line and "moved[2].name" in line, line
    assert (victim / "data").read_bytes() == VICTIM_BYTES and not (save / C.ROLLED_BACK_DIR / "victim").exists()
    assert tree(tmp_path) == before


@pytest.mark.parametrize("content, mode, field", [
    (b"300", 0o6777, "mode"),  # a valid tracker made setuid/setgid/world-writable
    (b"#!/bin/sh\nrm -rf ~\n", 0o644, "b64"),  # attacker-chosen tracker bytes
])
def test_journal_undo_mode_6777_refused(tmp_path, capsys, content, mode, field):
    save = make_save_dir(tmp_path)
    result = R.rollback(save, 100)
    journal = json.loads(journal_path(save, result.stamp).read_text())
    trackers = dict(journal["trackers_before"], **{C.TXT_TRACKER: snapshot(content, mode)})
    edit_journal(save, result.stamp, trackers_before=trackers)
    before = tree(tmp_path)
    code, out, err = run(capsys, "rollback", str(save), "--undo", "--yes")
    assert code == 2, err
    line = error_line(err)
    assert f"trackers_before.{C.TXT_TRACKER}.{field}" in line and C.JOURNAL_NAME in line, line
    assert "as it was before" not in out
    assert (save / C.TXT_TRACKER).read_bytes() == b"100"
    assert stat.S_IMODE((save / C.TXT_TRACKER).stat().st_mode) & 0o7111 == 0
    assert tree(tmp_path) == before


@pytest.mark.parametrize("journal_text, field", [
    ("{}", "format"),
    ('{"format": 1, "stamp": "STAMP", "state": "done", "to_iter": "100"}', "to_iter"),
    ("[1, 2]", "(document)"),
    ("not json", "(file)"),
])
def test_malformed_journal_is_one_line_naming_file_and_field(tmp_path, capsys, journal_text, field):
    save = make_save_dir(tmp_path)
    result = R.rollback(save, 100)
    journal_path(save, result.stamp).write_text(journal_text.replace("STAMP", result.stamp))
    code, _, err = run(capsys, "rollback", str(save), "--undo", "--yes")
    assert code == 2, err
    line = error_line(err)
    assert str(journal_path(save, result.stamp)) in line and f"at {field}:" in line, line


def test_journal_symlink_is_not_followed(tmp_path, capsys):
    save = make_save_dir(tmp_path)
    result = R.rollback(save, 100)
    real = journal_path(save, result.stamp)
    elsewhere = tmp_path / "elsewhere.json"
    real.rename(elsewhere)
    real.symlink_to(elsewhere)  # a valid journal, but reached through a link someone planted
    code, _, err = run(capsys, "rollback", str(save), "--undo", "--yes")
    assert code == 2, err
    assert "symlink (not followed)" in error_line(err)
    assert sorted(C.iter_dirs(save)) == [100]


# ---------------------------------------------------------------- --dry-run writes nothing
def test_recover_dry_run_writes_nothing(tmp_path, capsys):
    save = make_save_dir(tmp_path)
    result = R.rollback(save, 100)
    edit_journal(save, result.stamp, state="started")  # recovery would rewrite it as done
    (save / LOCK_NAME).write_text("pid 1 on elsewhere\n")  # a stale lock recovery would take and drop
    before = tree(tmp_path)
    code, out, err = run(capsys, "rollback", "--dry-run", str(save), "--recover")
    assert code == 0, err
    assert "dry run: would finish the interrupted rollbacks" in out and result.stamp in out, out
    for argv in (["checkpoints", str(save)], ["rollback", str(save), "--to", "100", "--dry-run"]):
        code, _, err = run(capsys, *argv)
        assert code == 0, err
    assert tree(tmp_path) == before


def test_undo_dry_run_writes_nothing_even_to_restore_a_lost_journal(tmp_path, capsys):
    save = make_save_dir(tmp_path)
    code, _, err = run(capsys, "rollback", str(save), "--to", "100", "--yes")  # recorded in the ledger
    assert code == 0, err
    (stamp_dir,) = C.rolled_back_dirs(save)
    (stamp_dir / C.JOURNAL_NAME).unlink()  # lost; the ledger kept a copy
    before = tree(save)
    code, out, err = run(capsys, "rollback", str(save), "--undo", "--dry-run")
    assert code == 0, err
    assert stamp_dir.name in out and "dry run" in out
    assert tree(save) == before


# ---------------------------------------------------------------- contradictory flags
@pytest.mark.parametrize("flags, first, second", [
    (["--undo", "--to", "100"], "--undo", "--to"),
    (["--recover", "--to", "100"], "--recover", "--to"),
    (["--undo", "--recover"], "--undo", "--recover"),
])
def test_undo_with_to_refused(tmp_path, capsys, flags, first, second):
    save = make_save_dir(tmp_path)
    R.rollback(save, 100)
    before = tree(tmp_path)
    code, out, err = run(capsys, "rollback", str(save), *flags, "--yes")
    assert code == 2, err
    assert error_line(err) == f"error: {first} and {second} cannot be used together: they ask for different " \
                              "operations; give one of them"
    assert tree(tmp_path) == before


# ---------------------------------------------------------------- -o PATH
@pytest.mark.skipif(not IS_ROOT, reason="creating a device node needs root")
def test_output_onto_char_device_refused(tmp_path, capsys):
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
    code, _, err = run(capsys, *RECOMMEND, "-o", str(device))
    assert code == 2, err
    assert error_line(err) == f"error: cannot write {device}: it is a device, not a regular file; nothing was " \
                              "written (choose a new file name, or remove what is there)"
    assert stat.S_ISCHR(os.lstat(device).st_mode)


@pytest.mark.parametrize("kind", ["fifo", "socket", "directory"])
def test_output_onto_fifo_socket_or_directory_refused(tmp_path, capsys, kind):
    target = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
    before = tree(tmp_path)
    for argv in (RECOMMEND, ["plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--top", "1"]):
        code, _, err = run(capsys, *argv, "-o", str(target))
        assert code == 2, err
        line = error_line(err)
        assert str(target) in line and "not a regular file" in line, line
    assert tree(tmp_path) == before


@pytest.mark.parametrize("link_to", ["/proc/self/fd/1", "other.yaml"])
def test_output_symlink_refused(tmp_path, capsys, link_to):
    other = tmp_path / "other.yaml"
    other.write_bytes(VICTIM_BYTES)
    target = tmp_path / "plan.yaml"
    target.symlink_to(link_to if link_to.startswith("/") else other)
    before = tree(tmp_path)
    code, _, err = run(capsys, *RECOMMEND, "-o", str(target))
    assert code == 2, err
    assert error_line(err).startswith(f"error: cannot write {target}: it is a symlink, not a regular file")
    assert target.is_symlink() and other.read_bytes() == VICTIM_BYTES
    assert tree(tmp_path) == before


def test_output_overwrite_keeps_mode(tmp_path, capsys):
    target = tmp_path / "plan.yaml"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    if IS_ROOT:
        os.chown(target, 4321, 4322)  # someone else's file that root overwrites keeps its owner
    code, _, err = run(capsys, *RECOMMEND, "-o", str(target))
    assert code == 0, err
    st = os.lstat(target)
    assert stat.S_ISREG(st.st_mode) and target.read_text().startswith("# mbridge-launch plan")
    assert stat.S_IMODE(st.st_mode) == 0o640
    if IS_ROOT:
        assert (st.st_uid, st.st_gid) == (4321, 4322)


def test_script_dir_style_write_keeps_an_existing_files_mode(tmp_path):
    """submit --script-dir and catalog files pass mode=0o644 for a NEW file; a file already there
    keeps its own mode, and only the rollback's tracker restore sets an exact mode."""
    from mbridge_launch.base.atomic import atomic_write_text

    script = tmp_path / "job.sbatch"
    atomic_write_text(script, "#!/bin/bash\n", mode=0o644)
    assert stat.S_IMODE(script.stat().st_mode) == 0o644
    os.chmod(script, 0o750)
    atomic_write_text(script, "#!/bin/bash\necho 2\n", mode=0o644)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750 and script.read_text().endswith("echo 2\n")
    atomic_write_text(script, "#!/bin/bash\n", mode=0o640, exact_mode=True)
    assert stat.S_IMODE(script.stat().st_mode) == 0o640


# ---------------------------------------------------------------------- queries create nothing
@pytest.mark.parametrize("argv", [["status", "x"], ["runs"], ["logs", "x"], ["cancel", "x", "--yes"],
                                  ["runs", "mark-lost", "x", "--reason", "r", "--yes"], ["checkpoints", "x"],
                                  ["watch", "x"], ["rollback", "SAVE", "--to", "100", "--dry-run"]],
                         ids=lambda a: " ".join(a[:2]))
def test_query_with_a_mistyped_ledger_path_creates_nothing(capsys, tmp_path, argv):
    """A command that only looks runs up (and every --dry-run) reads a missing ledger, or a link to
    nothing, as empty: no folder, no database appears at the mistyped path or behind the link."""
    save = make_save_dir(tmp_path / "save", [100])
    argv = [str(save) if a == "SAVE" else a for a in argv]
    dangling = tmp_path / "dangling.sqlite3"
    dangling.symlink_to(tmp_path / "victim-dir" / "ledger.sqlite3")
    for ledger in (tmp_path / "typo" / "sub" / "ledger.sqlite3", dangling):
        run(capsys, *argv, "--ledger", str(ledger))
        assert not (tmp_path / "typo").exists() and not (tmp_path / "victim-dir").exists()
        assert dangling.is_symlink() and not dangling.exists()
