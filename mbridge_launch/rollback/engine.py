"""Roll a checkpoint directory back to an earlier iteration, undo it, and finish one a crash cut short.

A rollback to iteration A, with newer checkpoints B < C and trackers pointing at C:

  0. check the target (before touching anything), then lock SAVE/.mbridge-launch.lock
     (non-blocking: a second rollback or undo fails at once with "another rollback is in progress")
  1. finish any interrupted rollback/undo found in SAVE/rolled_back/*/ROLLBACK.json
  2. check that iter_A is complete
  3. write the journal rolled_back/<stamp>/ROLLBACK.json: state `started`, the original tracker
     bytes/mode/mtime, the directories to move                               [journal_written]
  4. latest_train_state.pt := iter_A/train_state.pt (temp + fsync + rename)  [pt_written]
  5. latest_checkpointed_iteration.txt := "A" (temp + fsync + rename)       [txt_written]
  6. os.rename each newer iter_* into rolled_back/<stamp>/, newest first     [moved_1, moved_2...]
  7. journal state `done`                                                   [journal_done]
  8. unlink the lock file while holding the lock, then release it

INVARIANT: at every point the directory is loadable by Bridge (resume order: load at an iter dir,
ckpt_step, latest_train_state.pt, .txt), and every iter_* exists exactly once (in SAVE or in
rolled_back/<stamp>/). Before step 4 the trackers point at C, which is still in place; from step 4
on latest_train_state.pt (which Bridge reads first) points at A, which never moves; the .txt is a
fallback that is only read without latest_train_state.pt. The directories move only after both
trackers point at A, and a rename is atomic. So moving the trackers first is what keeps it loadable.

Undo (the newest `done` rollback; refused if training went on since: trackers changed or new
iter_* newer than A appeared): journal `undoing` [undo_journal]; rename the directories back,
oldest first [undo_moved_k]; restore the .txt then latest_train_state.pt bytes, mode and mtime
[undo_txt, undo_pt]; remove the journal and the stamp folder (and rolled_back/ if the rollback
created it) [undo_cleanup]; drop the lock file; restore SAVE's (and rolled_back/'s) times. The tree
is then byte-identical to before: contents, modes and mtimes of every file and directory. (After
a crash in the last instant, between [undo_cleanup] and the end, only SAVE's own mtime differs.)

Recovery (step 1, any later rollback/undo command): a journal in `started` is rolled FORWARD (all
steps are idempotent: write a tracker only if different, move what is still in place); one in
`undoing` finishes the undo; a stamp folder with no journal and no iter_* (a crash while the
journal was first written) is removed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mbridge_launch import __version__
from mbridge_launch.base.atomic import fsync_dir
from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.base.i18n import t
from mbridge_launch.rollback.checkpoints import (
    JOURNAL_NAME,
    PT_TRACKER,
    ROLLED_BACK_DIR,
    TRAIN_STATE,
    TXT_TRACKER,
    inspect_iter_dir,
    iter_dirname,
    iter_dirs,
    read_trackers,
    rolled_back_dirs,
)
from mbridge_launch.rollback.journal import (
    LOCK_NAME,
    SaveDirLock,
    crash_point,
    file_sha,
    read_tracker,
    remove_stale_temp_files,
    rename_durably,
    restore_file,
    sha256,
    snapshot_file,
    unique_stamp,
    write_if_changed,
    write_journal,
)
from mbridge_launch.rollback.journal_check import JOURNAL_FORMAT, check_journal, load_journal

STARTED, DONE, UNDOING, UNDONE = "started", "done", "undoing", "undone"


@dataclass
class RollbackResult:
    save_dir: str
    to_iter: int
    from_iter: Optional[int]
    stamp: Optional[str]
    moved: list[str]
    tracker_changes: dict[str, tuple[Optional[str], str]]  # file -> (before, after) as text
    dry_run: bool = False
    nothing_to_do: bool = False
    recovered: list[str] = field(default_factory=list)  # interrupted stamps finished first
    pending_recovery: list[str] = field(default_factory=list)  # dry run: would be finished first


@dataclass
class UndoResult:
    save_dir: str
    stamp: str
    to_iter: int
    restored: list[str]
    dry_run: bool = False
    recovered: list[str] = field(default_factory=list)


def _abs(save_dir: str | Path) -> Path:
    path = Path(os.path.abspath(os.path.expanduser(str(save_dir))))
    if not path.is_dir():
        raise UserError("ckpt.not_a_dir", path=str(path))
    return path


def _refuse_link(path: Path) -> None:
    """rolled_back/ and its stamp folders are where directories are renamed to: a symbolic link
    there would move checkpoints (or, on undo, anything) out of or into another tree."""
    if path.is_symlink():
        raise UserError("rollback.unsafe_entry", path=str(path), kind=t("file.kind.symlink"))


def _stamp_dirs(save: Path) -> list[Path]:
    _refuse_link(save / ROLLED_BACK_DIR)
    for stamp_dir in (found := rolled_back_dirs(save)):
        _refuse_link(stamp_dir)
    return found


def _describe_tracker(save_dir: Path) -> dict[str, Optional[str]]:
    trackers = read_trackers(save_dir)
    pt = None
    if trackers.pt_present:
        pt = t("ckpt.reason.iteration", iteration=trackers.pt_iteration) if trackers.pt_iteration is not None \
            else t("ckpt.tracker_unknown")
    return {PT_TRACKER: pt, TXT_TRACKER: trackers.txt_raw.strip() if trackers.txt_raw is not None else None}


def _target_not_loadable(info: Any, to_iter: int, save: Path) -> CheckFailed:
    """Missing files, or shards that disagree with the checkpoint's index (a mixed directory)."""
    if info.missing:
        return CheckFailed("rollback.target_incomplete", iteration=to_iter, missing=", ".join(info.missing),
                           valid=_complete_choices(save))
    return CheckFailed("rollback.target_mixed", iteration=to_iter, reason=info.shard_reason,
                       valid=_complete_choices(save))


def _complete_choices(save_dir: Path) -> str:
    done = [str(i) for i, p in iter_dirs(save_dir).items() if inspect_iter_dir(p).complete]
    return ", ".join(done) or "-"


def _ledger_update(ledger: Any, journal: dict[str, Any]) -> None:
    if ledger is None:
        return
    ledger.record_rollback(save_dir=journal["save_dir"], stamp=journal["stamp"], to_iter=journal["to_iter"],
                           from_iter=journal.get("from_iter"), state=journal["state"], journal=journal,
                           run_id=journal.get("run_id"), trigger=journal.get("trigger"))


# ---------------------------------------------------------------------- rollback
def rollback(save_dir: str | Path, to_iter: int, *, dry_run: bool = False, ledger: Any = None,
             run_id: Optional[int] = None, trigger: Optional[dict[str, Any]] = None) -> RollbackResult:
    save = _abs(save_dir)
    pending = interrupted_stamps(save)
    if dry_run:
        return _plan(save, to_iter, pending=pending)
    if not pending:
        _plan(save, to_iter)  # refuse a bad target before the lock file touches the directory
    with SaveDirLock(save) as lock:
        crash_point("locked")
        recovered = recover_locked(save, ledger)
        result = _plan(save, to_iter)
        result.recovered = recovered
        if result.nothing_to_do:
            return result
        return _execute(save, result, ledger, run_id, trigger, lock.dir_times_ns)


def _plan(save: Path, to_iter: int, pending: Optional[list[str]] = None) -> RollbackResult:
    target = save / iter_dirname(to_iter)
    if not target.is_dir():
        raise UserError("rollback.no_such_iter", iteration=to_iter, path=str(save), valid=_complete_choices(save))
    info = inspect_iter_dir(target)
    if not info.complete:
        raise _target_not_loadable(info, to_iter, save)
    newer = [p.name for i, p in sorted(iter_dirs(save).items(), reverse=True) if i > to_iter]
    before = _describe_tracker(save)
    trackers = read_trackers(save)
    target_state = read_tracker(target / TRAIN_STATE)
    pt_ok = target_state is not None and read_tracker(save / PT_TRACKER) == target_state
    txt_ok = trackers.txt_raw is not None and trackers.txt_raw.strip() == str(to_iter)
    changes = {}
    if not pt_ok:
        changes[PT_TRACKER] = (before[PT_TRACKER], t("ckpt.reason.iteration", iteration=to_iter))
    if not txt_ok:
        changes[TXT_TRACKER] = (before[TXT_TRACKER], str(to_iter))
    from_iter = trackers.pt_iteration if trackers.pt_present else trackers.txt_iteration
    return RollbackResult(str(save), to_iter, from_iter, None, newer, changes, dry_run=pending is not None,
                          nothing_to_do=not newer and not changes, pending_recovery=pending or [])


def _execute(save: Path, plan: RollbackResult, ledger: Any, run_id: Optional[int],
             trigger: Optional[dict[str, Any]], dir_times_ns: tuple[int, int]) -> RollbackResult:
    parent = save / ROLLED_BACK_DIR
    _refuse_link(parent)
    parent_existed = parent.is_dir()
    parent_times = (os.stat(parent).st_atime_ns, os.stat(parent).st_mtime_ns) if parent_existed else None
    stamp = unique_stamp(parent)
    stamp_dir = parent / stamp
    target_state = read_tracker(save / iter_dirname(plan.to_iter) / TRAIN_STATE) or b""
    moved_meta = []
    for name in plan.moved:
        st = os.stat(save / name)
        moved_meta.append({"name": name, "mtime_ns": st.st_mtime_ns, "atime_ns": st.st_atime_ns})
    journal = {
        "format": JOURNAL_FORMAT, "tool": f"mbridge-launch {__version__}", "stamp": stamp,
        "created": time.time(), "created_ns": time.time_ns(), "save_dir": str(save),
        "to_iter": plan.to_iter, "from_iter": plan.from_iter, "moved": moved_meta,
        "trackers_before": {PT_TRACKER: snapshot_file(save / PT_TRACKER), TXT_TRACKER: snapshot_file(save / TXT_TRACKER)},
        "trackers_after": {PT_TRACKER: sha256(target_state), TXT_TRACKER: sha256(str(plan.to_iter).encode())},
        "save_dir_atime_ns": dir_times_ns[0], "save_dir_mtime_ns": dir_times_ns[1],
        "rolled_back_existed": parent_existed, "rolled_back_times_ns": parent_times, "run_id": run_id, "trigger": trigger, "history": [],
    }
    check_journal({**journal, "state": STARTED}, stamp_dir)  # refuse (a tracker's mode) before any change
    stamp_dir.mkdir(parents=True)
    journal = write_journal(stamp_dir, journal, STARTED)
    crash_point("journal_written")
    try:
        _ledger_update(ledger, journal)
    except BaseException:
        # Nothing has changed yet: take the journal back so no half-recorded rollback remains.
        os.unlink(stamp_dir / JOURNAL_NAME)
        os.rmdir(stamp_dir)
        if not parent_existed:
            os.rmdir(parent)
        raise
    journal = _roll_forward(save, stamp_dir, journal)
    _ledger_update(ledger, journal)
    plan.stamp = stamp
    return plan


def _roll_forward(save: Path, stamp_dir: Path, journal: dict[str, Any]) -> dict[str, Any]:
    """Steps 4-7; idempotent so that recovery can repeat them after a crash."""
    to_iter = journal["to_iter"]
    target = save / iter_dirname(to_iter)
    info = inspect_iter_dir(target)
    if not info.complete:  # only possible if someone damaged it between crash and recovery
        raise _target_not_loadable(info, to_iter, save)
    before = journal["trackers_before"]
    write_if_changed(save / PT_TRACKER, read_tracker(target / TRAIN_STATE) or b"",
                     before[PT_TRACKER].get("mode", 0o644))
    crash_point("pt_written")
    write_if_changed(save / TXT_TRACKER, str(to_iter).encode(), before[TXT_TRACKER].get("mode", 0o644))
    crash_point("txt_written")
    for k, item in enumerate(journal["moved"], start=1):
        src, dst = save / item["name"], stamp_dir / item["name"]
        if src.exists():
            rename_durably(src, dst)
        elif not dst.exists():
            raise CheckFailed("rollback.journal_missing_dir", name=item["name"], path=str(stamp_dir))
        crash_point(f"moved_{k}")
    journal = write_journal(stamp_dir, journal, DONE)
    crash_point("journal_done")
    return journal


# ---------------------------------------------------------------------- undo
def _done_journals(save: Path) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for stamp_dir in _stamp_dirs(save):
        journal = load_journal(stamp_dir)
        if journal and journal.get("state") == DONE:
            found.append((stamp_dir, journal))
    return sorted(found, key=lambda item: item[1].get("created_ns", 0))


def undo(save_dir: str | Path, *, stamp: Optional[str] = None, dry_run: bool = False, ledger: Any = None) -> UndoResult:
    save = _abs(save_dir)
    if dry_run:
        stamp_dir, journal = _undo_target(save, stamp, ledger, write=False)
        _check_undo(save, stamp_dir, journal)
        return UndoResult(str(save), journal["stamp"], journal["to_iter"], [m["name"] for m in journal["moved"]], True)
    if not interrupted_stamps(save):  # refuse before the lock file touches the directory
        _check_undo(save, *_undo_target(save, stamp, ledger))
    with SaveDirLock(save):
        recovered = recover_locked(save, ledger)
        stamp_dir, journal = _undo_target(save, stamp, ledger)
        _check_undo(save, stamp_dir, journal)
        journal = write_journal(stamp_dir, journal, UNDOING)
        _ledger_update(ledger, journal)
        crash_point("undo_journal")
        journal = _finish_undo(save, stamp_dir, journal)
        _ledger_update(ledger, journal)
    _restore_save_mtime(save, journal)
    return UndoResult(str(save), journal["stamp"], journal["to_iter"], [m["name"] for m in journal["moved"]],
                      recovered=recovered)


def _undo_target(save: Path, stamp: Optional[str], ledger: Any, *, write: bool = True) -> tuple[Path, dict[str, Any]]:
    """The journal to undo; `write=False` (a dry run) uses the ledger's copy of a lost journal
    without putting it back on disk."""
    done = _done_journals(save)
    if not done and ledger is not None:
        found = _ledger_journal(save, ledger)
        if found is not None and write:
            write_journal(*found, DONE)
            done = _done_journals(save)
        elif found is not None:
            check_journal(found[1], found[0])
            done = [found]
    if not done:
        raise UserError("rollback.nothing_to_undo", path=str(save))
    newest_dir, newest = done[-1]
    if stamp is None or stamp == newest_dir.name:
        return newest_dir, newest
    if any(d.name == stamp for d, _ in done):
        raise CheckFailed("rollback.undo_not_newest", stamp=stamp, newest=newest_dir.name)
    raise UserError("rollback.no_such_stamp", stamp=stamp, valid=", ".join(d.name for d, _ in done))


def _ledger_journal(save: Path, ledger: Any) -> Optional[tuple[Path, dict[str, Any]]]:
    """The journal file was lost but the ledger kept a copy: it, if its folder is intact."""
    for record in reversed(ledger.rollbacks(save_dir=save)):
        if not isinstance(record.stamp, str) or "/" in record.stamp or record.stamp in ("", ".", ".."):
            continue  # a ledger row is data too: only a plain folder name inside rolled_back/
        stamp_dir = save / ROLLED_BACK_DIR / record.stamp
        _refuse_link(stamp_dir)
        if record.state == DONE and stamp_dir.is_dir() and not (stamp_dir / JOURNAL_NAME).exists():
            return stamp_dir, record.journal
    return None


def _check_undo(save: Path, stamp_dir: Path, journal: dict[str, Any]) -> None:
    """Undo only what the rollback left: the same trackers, nothing trained since."""
    after = journal["trackers_after"]
    for name in (PT_TRACKER, TXT_TRACKER):
        if file_sha(save / name) != after[name]:
            raise CheckFailed("rollback.undo_diverged", file=name, stamp=journal["stamp"])
    newer = [p.name for i, p in iter_dirs(save).items() if i > journal["to_iter"]]
    if newer:
        raise CheckFailed("rollback.undo_new_checkpoints", names=", ".join(newer), stamp=journal["stamp"])
    for item in journal["moved"]:
        if not (stamp_dir / item["name"]).is_dir():
            raise CheckFailed("rollback.journal_missing_dir", name=item["name"], path=str(stamp_dir))


def _finish_undo(save: Path, stamp_dir: Path, journal: dict[str, Any]) -> dict[str, Any]:
    for k, item in enumerate(reversed(journal["moved"]), start=1):
        src, dst = stamp_dir / item["name"], save / item["name"]
        if src.exists():
            rename_durably(src, dst)
        os.utime(dst, ns=(item.get("atime_ns", item["mtime_ns"]), item["mtime_ns"]))
        crash_point(f"undo_moved_{k}")
    restore_file(save / TXT_TRACKER, journal["trackers_before"][TXT_TRACKER])
    crash_point("undo_txt")
    restore_file(save / PT_TRACKER, journal["trackers_before"][PT_TRACKER])
    crash_point("undo_pt")
    journal = dict(journal, state=UNDONE, history=[*journal.get("history", []), {"state": UNDONE, "at": time.time()}])
    _remove_stamp_dir(save, stamp_dir, journal.get("rolled_back_existed", True))
    if journal.get("rolled_back_times_ns"):
        atime, mtime = journal["rolled_back_times_ns"]
        os.utime(save / ROLLED_BACK_DIR, ns=(atime, mtime))
    crash_point("undo_cleanup")
    return journal


def _remove_stamp_dir(save: Path, stamp_dir: Path, parent_existed: bool) -> None:
    for leftover in stamp_dir.iterdir():
        # only our own files: the journal and a temp file from an interrupted journal write
        if leftover.name == JOURNAL_NAME or (leftover.name.startswith(f".{JOURNAL_NAME}.") and leftover.name.endswith(".tmp")):
            os.unlink(leftover)
    os.rmdir(stamp_dir)  # fails (and says so) if anything else is in it
    parent = save / ROLLED_BACK_DIR
    if not parent_existed and parent.is_dir() and not any(parent.iterdir()):
        os.rmdir(parent)
    fsync_dir(save)


def _restore_save_mtime(save: Path, journal: dict[str, Any]) -> None:
    """Last, after the lock file is gone: the save directory's own times as before the rollback."""
    ns = journal.get("save_dir_mtime_ns")
    if ns:
        try:
            os.utime(save, ns=(journal.get("save_dir_atime_ns", ns), ns))
        except OSError:
            pass


# ---------------------------------------------------------------------- recovery
def interrupted_stamps(save_dir: str | Path) -> list[str]:
    out = []
    for stamp_dir in _stamp_dirs(Path(save_dir)):
        journal = load_journal(stamp_dir)
        if journal is None and not iter_dirs(stamp_dir):
            out.append(stamp_dir.name)
        elif journal and journal.get("state") in (STARTED, UNDOING):
            out.append(stamp_dir.name)
    return out


def recover_locked(save: Path, ledger: Any = None) -> list[str]:
    """Finish whatever a crash interrupted (the caller holds the lock). Returns the stamps handled."""
    handled = []
    remove_stale_temp_files(save, (PT_TRACKER, TXT_TRACKER))
    for stamp_dir in _stamp_dirs(save):
        journal = load_journal(stamp_dir)
        if journal is None:
            if not iter_dirs(stamp_dir):  # crashed while writing the first journal: nothing changed
                _remove_stamp_dir(save, stamp_dir, parent_existed=len(_stamp_dirs(save)) > 1)
                handled.append(stamp_dir.name)
            continue
        state = journal.get("state")
        if state == STARTED:
            journal = _roll_forward(save, stamp_dir, journal)
        elif state == UNDOING:
            journal = _finish_undo(save, stamp_dir, journal)
        else:
            continue
        _ledger_update(ledger, journal)
        handled.append(stamp_dir.name)
    return handled


def recover(save_dir: str | Path, ledger: Any = None) -> list[str]:
    """Finish interrupted rollbacks/undos in `save_dir` (takes the lock)."""
    save = _abs(save_dir)
    pending = interrupted_stamps(save)
    if not pending:
        if (save / LOCK_NAME).exists():  # left by a crash: take it (fails if really held) and drop it
            SaveDirLock(save).acquire().release()
        return []
    undoing = [load_journal(save / ROLLED_BACK_DIR / s) for s in pending]
    with SaveDirLock(save):
        handled = recover_locked(save, ledger)
    finished_undos = [j for j in undoing if j and j.get("state") == UNDOING]
    if finished_undos and len(handled) == len(finished_undos):
        _restore_save_mtime(save, finished_undos[-1])  # after the lock file is gone, as undo() does
    return handled
