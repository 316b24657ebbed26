"""Rollback, undo and recovery: byte-identical undo, crash at every step, concurrent rollbacks,
confirmation and the active-run guard."""

from __future__ import annotations

import collections
import hashlib
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoint_fixtures import make_save_dir, train_state_bytes, write_iter
from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.rollback import engine as R
from mbridge_launch.rollback import lossmon as M
from mbridge_launch.rollback.journal import LOCK_NAME, SaveDirLock
from mbridge_launch.runs.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
ROLLBACK_STEPS = ["locked", "journal_written", "pt_written", "txt_written", "moved_1", "moved_2", "journal_done"]
UNDO_STEPS = ["undo_journal", "undo_moved_1", "undo_moved_2", "undo_txt", "undo_pt", "undo_cleanup"]


def tree_digest(root: Path) -> dict[str, tuple]:
    """Every file and directory under root (root included): kind, content hash, mode, mtime."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        st = os.stat(dirpath)
        out[rel + "/"] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            out[os.path.join(rel, name)] = ("file", digest, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


def iter_multiset(save: Path) -> collections.Counter:
    """(iter name, content digest) of every iter_* in the save dir and in rolled_back/*/."""
    found = collections.Counter()
    for folder in [save, *C.rolled_back_dirs(save)]:
        for _it, path in C.iter_dirs(folder).items():
            digest = hashlib.sha256()
            for f in sorted(path.iterdir()):
                digest.update(f.name.encode() + f.read_bytes())
            found[(path.name, digest.hexdigest())] += 1
    return found


@pytest.fixture
def state_env(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(state))
    return {"MBRIDGE_LAUNCH_STATE_DIR": str(state)}


def test_rollback_moves_newer_aside_and_rewrites_trackers(tmp_path):
    save = make_save_dir(tmp_path, (100, 200, 300))
    result = R.rollback(save, 100)
    assert result.moved == ["iter_0000300", "iter_0000200"] and result.from_iter == 300
    assert sorted(C.iter_dirs(save)) == [100]
    stamp_dir = save / C.ROLLED_BACK_DIR / result.stamp
    assert sorted(C.iter_dirs(stamp_dir)) == [200, 300]
    assert (save / C.PT_TRACKER).read_bytes() == (save / "iter_0000100" / "train_state.pt").read_bytes()
    assert (save / C.TXT_TRACKER).read_text() == "100"
    journal = C.read_journal(stamp_dir)
    assert journal["state"] == "done" and journal["to_iter"] == 100
    res = C.resolve_resume(save)
    assert res.loadable and res.iteration == 100
    assert not (save / LOCK_NAME).exists()
    assert C.list_checkpoints(save).rolled_back[0].journal_state == "done"


def test_dry_run_changes_nothing(tmp_path):
    save = make_save_dir(tmp_path)
    before = tree_digest(save)
    plan = R.rollback(save, 200, dry_run=True)
    assert plan.dry_run and plan.moved == ["iter_0000300"]
    assert set(plan.tracker_changes) == {C.PT_TRACKER, C.TXT_TRACKER}
    assert tree_digest(save) == before
    R.rollback(save, 200)
    after_rollback = tree_digest(save)
    assert R.undo(save, dry_run=True).restored == ["iter_0000300"]
    assert tree_digest(save) == after_rollback


def test_target_must_exist_and_be_complete(tmp_path):
    save = make_save_dir(tmp_path)
    with pytest.raises(UserError) as missing:
        R.rollback(save, 150)
    assert missing.value.key == "rollback.no_such_iter" and "100, 200, 300" in str(missing.value)
    (save / "iter_0000200" / "common.pt").unlink()
    before = tree_digest(save)
    with pytest.raises(CheckFailed) as incomplete:
        R.rollback(save, 200)
    assert "common.pt" in str(incomplete.value) and "100, 300" in str(incomplete.value)
    assert tree_digest(save) == before


def test_nothing_to_do(tmp_path):
    save = make_save_dir(tmp_path, (100,))
    assert R.rollback(save, 100).nothing_to_do


def test_incomplete_newer_checkpoints_are_moved_too(tmp_path):
    save = make_save_dir(tmp_path, (100, 200), tracker=200)
    partial = save / "iter_0000300"
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"half")  # a save cut short
    result = R.rollback(save, 100)
    assert result.moved == ["iter_0000300", "iter_0000200"]


def test_undo_is_byte_identical(tmp_path):
    save = make_save_dir(tmp_path, (100, 200, 300))
    os.chmod(save / C.PT_TRACKER, 0o640)
    os.utime(save / C.TXT_TRACKER, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    os.utime(save, ns=(1_650_000_000_000_000_000, 1_650_000_000_000_000_000))
    before = tree_digest(save)
    R.rollback(save, 100)
    assert stat.S_IMODE(os.stat(save / C.PT_TRACKER).st_mode) == 0o640  # mode kept by the rewrite
    assert tree_digest(save) != before
    R.undo(save)
    assert tree_digest(save) == before  # contents, modes and mtimes of every file and directory


def test_stacked_rollbacks_undo_newest_first(tmp_path):
    save = make_save_dir(tmp_path, (100, 200, 300))
    original = tree_digest(save)
    first = R.rollback(save, 200)
    write_iter(save, 250)  # training went on from 200 ...
    (save / C.PT_TRACKER).write_bytes(train_state_bytes(250))
    (save / C.TXT_TRACKER).write_text("250")
    after_training = tree_digest(save)
    second = R.rollback(save, 100)  # ... and was rolled back again
    with pytest.raises(CheckFailed) as older:
        R.undo(save, stamp=first.stamp)
    assert older.value.key == "rollback.undo_not_newest"
    R.undo(save)
    assert tree_digest(save) == after_training
    with pytest.raises(CheckFailed) as diverged:
        R.undo(save)  # undoing the first now would mix timelines: iter_250 exists after 200
    assert diverged.value.key in ("rollback.undo_diverged", "rollback.undo_new_checkpoints")
    assert tree_digest(save) == after_training
    assert second.stamp != first.stamp
    # remove the new timeline by hand (as a user would) and the first undo goes through
    for path in (save / "iter_0000250").iterdir():
        path.unlink()
    (save / "iter_0000250").rmdir()
    (save / C.PT_TRACKER).write_bytes(train_state_bytes(200))
    (save / C.TXT_TRACKER).write_text("200")
    R.undo(save)
    assert {k: v[:2] for k, v in tree_digest(save).items() if not k.endswith("/")} == \
        {k: v[:2] for k, v in original.items() if not k.endswith("/")}


def test_undo_refused_when_training_resumed(tmp_path):
    save = make_save_dir(tmp_path)
    R.rollback(save, 100)
    write_iter(save, 200)  # the resumed run saved a NEW iter_200, trackers not yet written
    before = tree_digest(save)
    with pytest.raises(CheckFailed) as err:
        R.undo(save)
    assert err.value.key == "rollback.undo_new_checkpoints" and "iter_0000200" in str(err.value)
    assert tree_digest(save) == before
    (save / C.TXT_TRACKER).write_text("200")
    with pytest.raises(CheckFailed) as err2:
        R.undo(save)
    assert err2.value.key == "rollback.undo_diverged"


def test_ledger_records_rollback_and_restores_lost_journal(tmp_path):
    save = make_save_dir(tmp_path)
    before = tree_digest(save)
    with Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        result = R.rollback(save, 100, ledger=ledger, trigger={"kind": "nan", "iteration": 250})
        [record] = ledger.rollbacks(save_dir=save)
        assert (record.state, record.to_iter, record.from_iter, record.trigger["kind"]) == ("done", 100, 300, "nan")
        assert record.journal["trackers_before"][C.PT_TRACKER]["present"]
        (save / C.ROLLED_BACK_DIR / result.stamp / C.JOURNAL_NAME).unlink()  # journal lost
        R.undo(save, ledger=ledger)
        assert ledger.rollbacks(save_dir=save)[0].state == "undone"
    assert tree_digest(save) == before


# ---------------------------------------------------------------------- crash safety
def assert_loadable_and_nothing_lost(save: Path, expected: collections.Counter) -> None:
    res = C.resolve_resume(save)
    assert res.loadable, res
    assert iter_multiset(save) == expected


@pytest.mark.parametrize("step", ROLLBACK_STEPS)
def test_crash_at_each_rollback_step(tmp_path, state_env, step, mbl):
    save = make_save_dir(tmp_path, (100, 200, 300))
    original_tree = tree_digest(save)
    original_iters = iter_multiset(save)
    crashed = mbl.run("rollback", str(save), "--to", "100", "--yes", env={**state_env, "MBL_ROLLBACK_CRASH_AFTER": step})
    assert crashed.returncode == 137, crashed.stderr
    assert_loadable_and_nothing_lost(save, original_iters)
    listing = mbl.run("checkpoints", str(save), env=state_env)
    if step not in ("locked", "journal_done"):
        assert "interrupted rollback" in listing.stdout
    # the next command finishes it
    nxt = mbl.run("rollback", str(save), "--recover", env=state_env)
    assert nxt.returncode == 0, nxt.stderr
    assert_loadable_and_nothing_lost(save, original_iters)
    if step == "locked":  # died before the journal: nothing happened, nothing to finish
        assert "nothing to recover" in nxt.stdout
        # same tree (the stale lock file is gone); only the directory's own mtime moved
        assert without_root_mtime(tree_digest(save)) == without_root_mtime(original_tree)
        return
    assert C.resolve_resume(save).iteration == 100 and sorted(C.iter_dirs(save)) == [100]
    assert not C.list_checkpoints(save).interrupted
    undo = mbl.run("rollback", str(save), "--undo", "--yes", env=state_env)
    assert undo.returncode == 0, undo.stderr
    assert tree_digest(save) == original_tree


def test_next_rollback_finishes_interrupted_one_first(tmp_path, state_env, mbl):
    save = make_save_dir(tmp_path, (100, 200, 300))
    original_iters = iter_multiset(save)
    assert mbl.run("rollback", str(save), "--to", "200", "--yes",
                   env={**state_env, "MBL_ROLLBACK_CRASH_AFTER": "pt_written"}).returncode == 137
    nxt = mbl.run("rollback", str(save), "--to", "100", "--yes", env=state_env)
    assert nxt.returncode == 0, nxt.stderr
    assert "finished interrupted" in nxt.stdout
    assert_loadable_and_nothing_lost(save, original_iters)
    assert [s.iterations for s in C.list_checkpoints(save).rolled_back] == [[300], [200]]


@pytest.mark.parametrize("step", UNDO_STEPS)
def test_crash_at_each_undo_step(tmp_path, state_env, step, mbl):
    save = make_save_dir(tmp_path, (100, 200, 300))
    original_tree = tree_digest(save)
    original_iters = iter_multiset(save)
    R.rollback(save, 100)
    crashed = mbl.run("rollback", str(save), "--undo", "--yes", env={**state_env, "MBL_ROLLBACK_CRASH_AFTER": step})
    assert crashed.returncode == 137, crashed.stderr
    assert_loadable_and_nothing_lost(save, original_iters)
    nxt = mbl.run("rollback", str(save), "--recover", env=state_env)
    assert nxt.returncode == 0, nxt.stderr
    if step == "undo_cleanup":
        # died after the journal was removed, before restoring the directory's own mtime (which
        # only the journal knew): everything else is identical, the stale lock file included
        assert without_root_mtime(tree_digest(save)) == without_root_mtime(original_tree)
    else:
        assert tree_digest(save) == original_tree


def without_root_mtime(digest: dict) -> dict:
    return {k: (v if k != "./" else v[:2]) for k, v in digest.items()}


# ---------------------------------------------------------------------- concurrency
def test_two_rollbacks_cannot_both_proceed(tmp_path, state_env, mbl):
    save = make_save_dir(tmp_path, (100, 200, 300))
    original_iters = iter_multiset(save)
    marker = tmp_path / "paused"
    env_a = {**state_env, "MBL_ROLLBACK_PAUSE_AFTER": "pt_written", "MBL_ROLLBACK_PAUSE_FILE": str(marker)}
    first = mbl.popen("rollback", save, "--to", "100", "--yes", env=env_a)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline and first.poll() is None, "first rollback never reached its pause"
            time.sleep(0.02)
        second = mbl.run("rollback", str(save), "--to", "200", "--yes", env=state_env)
        assert second.returncode == 1 and "another rollback is in progress" in second.stderr
        undo = mbl.run("rollback", str(save), "--undo", "--yes", env=state_env)
        assert undo.returncode != 0
    finally:
        marker.unlink(missing_ok=True)
        out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert_loadable_and_nothing_lost(save, original_iters)
    assert C.resolve_resume(save).iteration == 100 and len(C.rolled_back_dirs(save)) == 1


def test_lock_retries_when_the_file_was_replaced(tmp_path, monkeypatch):
    """A process that opened the lock file just before its holder unlinked it must not believe it
    holds the lock on the unlinked inode."""
    save = tmp_path / "s"
    save.mkdir()
    holder = SaveDirLock(save).acquire()
    stale_fd = os.open(save / LOCK_NAME, os.O_RDWR)
    holder.release()  # unlinks the file
    import mbridge_launch.rollback.journal as J

    real_open, calls = os.open, []

    def fake_open(path, flags, mode=0o777):
        calls.append(path)
        return stale_fd if len(calls) == 1 else real_open(path, flags, mode)

    monkeypatch.setattr(J.os, "open", fake_open)
    lock = SaveDirLock(save).acquire()
    assert len(calls) == 2 and os.fstat(lock.fd).st_ino == os.stat(save / LOCK_NAME).st_ino
    with pytest.raises(CheckFailed):
        monkeypatch.setattr(J.os, "open", real_open)
        SaveDirLock(save).acquire()
    lock.release()


# ---------------------------------------------------------------------- confirmation and guards
def test_refuses_without_tty_and_without_yes(tmp_path, state_env, mbl):
    save = make_save_dir(tmp_path)
    before = tree_digest(save)
    out = mbl.run("rollback", str(save), "--to", "100", env=state_env)
    assert out.returncode == 1 and "--yes" in out.stderr
    assert tree_digest(save) == before
    dry = mbl.run("rollback", str(save), "--to", "100", "--dry-run", env=state_env)
    assert dry.returncode == 0 and "iter_0000300" in dry.stdout and "nothing was changed" in dry.stdout
    assert tree_digest(save) == before


def test_typed_confirmation():
    from mbridge_launch.runs.operations import confirm

    assert confirm("ckpt", yes=False, action_key="rollback.action_rollback",
                   ask=lambda prompt: "ckpt", isatty=lambda: True) == "typed-name"
    with pytest.raises(CheckFailed):
        confirm("ckpt", yes=False, action_key="rollback.action_rollback", ask=lambda p: "yes", isatty=lambda: True)
    assert confirm("ckpt", yes=True, action_key="rollback.action_rollback", isatty=lambda: False) == "flag-yes"


@pytest.fixture
def fake_slurm(tmp_path):
    """squeue/sacct/scancel stand-ins: job 4242 runs until scancel'ed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    flag = tmp_path / "cancelled"
    # rows as the ledger's query reads them without --json: id, state, submit, reason, name, comment
    row = "4242\\037%s\\0372026-11-29T20:00:00\\037None\\037demo\\037mbl-x\\n"
    (bin_dir / "squeue").write_text(
        f"#!/bin/sh\n[ -e {flag} ] || printf '{row}' RUNNING\n")
    (bin_dir / "sacct").write_text(
        f"#!/bin/sh\nif [ -e {flag} ]; then printf '{row}' 'CANCELLED by 0'; "
        f"else printf '{row}' RUNNING; fi\n")
    (bin_dir / "scancel").write_text(f"#!/bin/sh\necho \"$@\" > {flag}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, flag


def _record_running_run(ledger_path: Path, save: Path) -> int:
    with Ledger.open(ledger_path) as ledger:
        run = ledger.begin_submission(name="demo", plan_hash="abc", plan_yaml="name: demo\n", executor="sbatch",
                                      save_dir=str(save))
        ledger.mark_submitted(run.id, ["4242"])
        ledger.set_state(run.id, "running", slurm_state="RUNNING")
        return run.id


def test_active_run_refused_then_cancelled(tmp_path, state_env, fake_slurm, mbl):
    env, flag = fake_slurm
    save = make_save_dir(tmp_path)
    ledger_path = Path(state_env["MBRIDGE_LAUNCH_STATE_DIR"]) / "ledger.sqlite3"
    run_id = _record_running_run(ledger_path, save)
    before = tree_digest(save)
    refused = mbl.run("rollback", "demo", "--to", "100", "--yes", env={**state_env, **env})
    assert refused.returncode == 1 and "is active" in refused.stderr and "4242" in refused.stderr
    refused_dir = mbl.run("rollback", str(save), "--to", "100", "--yes", env={**state_env, **env})
    assert refused_dir.returncode == 1 and "is active" in refused_dir.stderr
    assert tree_digest(save) == before and not flag.exists()
    done = mbl.run("rollback", "demo", "--to", "100", "--yes", "--cancel", env={**state_env, **env})
    assert done.returncode == 0, done.stderr
    assert flag.read_text().split() == ["4242"]
    assert C.resolve_resume(save).iteration == 100
    with Ledger.open(ledger_path) as ledger:
        assert ledger.get_run(run_id).state == "cancelled"
        actions = [c["action"] for c in ledger.confirmations(run_id)]
        assert actions == ["cancel", "rollback"]
        assert ledger.rollbacks(run_ids=[run_id])[0].state == "done"


# ---------------------------------------------------------------------- with the stand-in trainer
def standin(save: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    """Run the stand-in trainer locally (one rank, no Slurm) into `save`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MBL_STANDIN_"))}
    env.update(MBL_STANDIN_ITER_SECONDS="0", MBL_STANDIN_REPORT_DIR=str(tmp / "report"))
    argv = [sys.executable, str(ROOT / "tests" / "standin_trainer.py"), "--recipe", "llama3_8b_pretrain_config",
            "--dataset", "mock", "--save_dir", str(save), "--load_dir", str(save), "--save_interval", "10", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_standin_resumes_from_the_rolled_back_iteration(tmp_path):
    save = tmp_path / "ckpt"
    standin(save, tmp_path, "-ms", "30")
    report = C.list_checkpoints(save)
    assert [(c.iteration, c.complete) for c in report.checkpoints] == [(10, True), (20, True), (30, True)]
    assert report.resume.iteration == 30 and report.trackers.pt_matched_by == "bytes"
    before = tree_digest(save)
    R.rollback(save, 10)
    R.undo(save)
    assert tree_digest(save) == before  # byte-identical on the trainer's own files
    R.rollback(save, 10)
    again = standin(save, tmp_path, "-ms", "30")
    assert "at iteration 10" in again.stdout  # Bridge's resume order picked the rolled-back tracker
    logged = [r.iteration for r in M.parse_log(again.stdout.splitlines()) if isinstance(r, M.IterationLog)]
    assert logged[0] == 11 and logged[-1] == 30
    with pytest.raises(CheckFailed):  # a new timeline exists: undo refuses rather than mix them
        R.undo(save)
    assert sorted(C.iter_dirs(save)) == [10, 20, 30]
    assert [s.iterations for s in C.list_checkpoints(save).rolled_back] == [[20, 30]]


def test_pinned_resume_point_is_warned(tmp_path, state_env, mbl):
    from plan_fixtures import single_node_h100, with_changes

    save = make_save_dir(tmp_path)
    plan = with_changes(single_node_h100(), checkpoint={"save": str(save), "load": str(save / "iter_0000300")})
    ledger_path = Path(state_env["MBRIDGE_LAUNCH_STATE_DIR"]) / "ledger.sqlite3"
    with Ledger.open(ledger_path) as ledger:
        run = ledger.begin_submission(name="pinned", plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                      executor="sbatch", save_dir=str(save))
        ledger.set_state(run.id, "completed")
    out = mbl.run("rollback", "pinned", "--to", "100", "--dry-run", env=state_env)
    assert out.returncode == 0 and "pins its resume point" in out.stderr and "iter_0000300" in out.stderr
