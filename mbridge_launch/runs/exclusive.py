"""Serialised submission: of any number of concurrent submits of one Plan or one checkpoint
directory, exactly one reaches the scheduler; the others are refused naming the run that holds it.

The gate checks early (before preflight, for a quick answer) and again, authoritatively, after the
confirmation, under two locks taken in this order (never the reverse, so they cannot deadlock):

1. the checkpoint directory's lock file (`<save>/.mbridge-launch-claim.lock`, flock): shared by
   every ledger and user that writes the directory. Under it the claim file is read, checked with
   Slurm and replaced, so two ledgers (two users) cannot both take the directory: the claim file is
   only ever written under this lock. It is held until the new claim is on disk, not across the
   scheduler call;
2. the ledger's write lock (BEGIN IMMEDIATE, `Ledger.begin_submission(guard=)`): under it the
   recorded runs are checked (`refuse_held`: same plan hash, a related checkpoint directory) and
   the `submitting` row is inserted, in one transaction, so no second row can slip in between.

A run holds its plan hash and directory while it is active (`submitting` included) and while its
scheduler call ended without an answer (`submit_failed` that may have a job): such a run is
"unresolved" until reconciliation finds its job by token or settles that there is none, and a
submission it blocks is told to wait for the controller and run `mbridge-launch runs`.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from mbridge_launch.base.errors import CheckFailed
from mbridge_launch.base.i18n import t
from mbridge_launch.runs import ledger as L

LOCK_NAME = ".mbridge-launch-claim.lock"
# How long a submission waits for another one that holds the directory's lock: the holder only
# checks the claim (one Slurm query), writes its ledger row and its claim, then lets go.
LOCK_WAIT_S = 120.0


def unresolved(run: L.RunRecord) -> bool:
    """RunRecord.unresolved: the scheduler was called and gave no answer."""
    return run.unresolved


def holds(run: L.RunRecord) -> bool:
    """RunRecord.holds: whether the run holds its plan hash and checkpoint directory."""
    return run.holds


def refuse_plan_holder(run: L.RunRecord, plan_hash: str) -> None:
    """CheckFailed for a plan whose hash `run` holds (gate.duplicate, or gate.unresolved_plan)."""
    if unresolved(run):
        raise CheckFailed("gate.unresolved_plan", hash=plan_hash, run=run.name, id=run.id)
    raise CheckFailed("gate.duplicate", hash=plan_hash, run=run.name, id=run.id, state=run.state,
                      jobs=", ".join(run.job_ids) or "-")


def refuse_held(ledger: L.Ledger, plan_hash: Optional[str], save_dir: Optional[str]) -> None:
    """The authoritative check, on the recorded states (no Slurm query: it runs under the ledger's
    write lock; the gate refreshed the states just before). `plan_hash` None: no duplicate check
    (--resubmit); `save_dir` None: the plan writes no checkpoints."""
    from mbridge_launch.rollback.claims import Owner, Ownership, owner_key, owner_params
    from mbridge_launch.runs.ownership import relation

    holding = ledger.holding_runs()
    if plan_hash is not None:
        same = [r for r in holding if r.plan_hash == plan_hash]
        if same:
            refuse_plan_holder(same[0], plan_hash)
    if save_dir is None:
        return
    for run in holding:
        where = relation(save_dir, run.save_dir) if run.save_dir else None
        if where is None:
            continue
        if unresolved(run):
            raise CheckFailed("gate.unresolved_save_dir", path=os.path.abspath(save_dir), run=run.name, id=run.id)
        own = Ownership(save_dir=os.path.abspath(save_dir))
        owner = Owner("ledger", run.name, run.id, run.state, list(run.job_ids), str(run.save_dir), where, "",
                      (run.submitter or "").rpartition(":")[0], str(ledger.path))
        raise CheckFailed(owner_key(owner), **owner_params(own, owner))


class DirectoryLock:
    """The checkpoint directory's lock, held from `acquire` until `release` (idempotent)."""

    def __init__(self, save_dir: Optional[str], out: Any = None) -> None:
        self.path = Path(save_dir) / LOCK_NAME if save_dir else None
        self.out = out or sys.stderr
        self.fd: Optional[int] = None

    def acquire(self, wait_s: float = LOCK_WAIT_S) -> None:
        """Take the lock, waiting up to `wait_s` for another submission; CheckFailed when it still
        holds it. A file system that cannot lock (or a directory that cannot be made) is said in a
        warning and the submission goes on serialised by the ledger alone: runs of other ledgers
        are then not kept out."""
        from mbridge_launch.base.locks import LockHeld, lock_file

        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = lock_file(self.path, wait_s=wait_s, poll_s=0.1)
        except LockHeld:
            raise CheckFailed("gate.save_dir_busy", path=str(self.path.parent), seconds=int(wait_s)) from None
        except OSError as exc:
            print(t("warning.prefix", message=t("gate.save_dir_lock_failed", file=str(self.path),
                                                reason=exc.strerror or str(exc))), file=self.out)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


@contextmanager
def directory_lock(save_dir: Optional[str], out: Any = None, *, wait_s: float = LOCK_WAIT_S) -> Iterator[DirectoryLock]:
    """`with directory_lock(save_dir) as lock: ...; lock.release()`: released at the latest on exit."""
    lock = DirectoryLock(save_dir, out)
    lock.acquire(wait_s)
    try:
        yield lock
    finally:
        lock.release()
