"""A checkpoint directory belongs to one run at a time.

Two jobs writing one save directory corrupt it (the second resumes from the first's iteration,
both write the same iter_* directories, shards of two world sizes end up under one index). This
module says who owns a save directory now:

- the ledger: an ACTIVE run (states refreshed from Slurm first, like the duplicate check) whose
  save directory is the same, inside the plan's, or contains it. Nested directories count: Megatron
  cleans up and rollback moves iter_* directories of the outer directory, and a plan pointed at a
  sub-directory of a live run is almost always a typo, so both directions are refused. A run in a
  final state owns nothing (release). A resubmission of a chain takes over from its parent only
  once the parent has ended (rollback --resubmit and the watcher cancel it first).
- the claim file (rollback/claims.py) in the directory or an ancestor, for runs of other ledgers
  or users: live while Slurm reports its job active (by job id, or by the token in the job's
  comment while a claim has no job id yet); stale once the job ended or Slurm does not know it.
  A claim of this very ledger is decided by the ledger. When Slurm cannot be asked the claim is
  "unverified": the gate refuses unless --force with --reason (recorded as an override).

The gate calls `save_dir_ownership` + `refuse_if_owned` before preflight and again after the
confirmation under the directory's lock (runs/exclusive.py), and `ClaimWriter` (still under that
lock, then after the scheduler call); `preflight` gets `preflight_callback` (preflight may not
import runs).
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.base.errors import CheckFailed
from mbridge_launch.base.i18n import t
from mbridge_launch.rollback.claims import (
    Claim,
    ClaimUnreadable,
    Owner,
    Ownership,
    claim_owner,
    claim_path,
    owner_key,
    owner_params,
    read_claim,
    unverified_text,
    write_claim,
)
from mbridge_launch.runs import ledger as L

# A claim without a job id is a submission in progress for this long (the scheduler call).
SUBMITTING_GRACE_S = 120.0
CLOCK_SLACK_S = 300.0


# ---------------------------------------------------------------------- paths
def _forms(path: str | Path) -> set[str]:
    """A directory as typed (absolute) and resolved: a symlinked scratch matches its target."""
    absolute = os.path.abspath(os.path.expanduser(str(path)))
    return {absolute, os.path.realpath(absolute)}


def relation(plan_dir: str | Path, other: str | Path) -> Optional[str]:
    """same | inside (plan_dir is inside other) | contains (other is inside plan_dir) | None."""
    mine, theirs = _forms(plan_dir), _forms(other)
    if mine & theirs:
        return "same"
    for a in mine:
        for b in theirs:
            if a.startswith(b.rstrip(os.sep) + os.sep):
                return "inside"
            if b.startswith(a.rstrip(os.sep) + os.sep):
                return "contains"
    return None


def _claim_dirs(save_dir: str) -> list[tuple[Path, str]]:
    """Where a claim that covers `save_dir` may lie: the directory itself, then its ancestors."""
    path = Path(os.path.abspath(save_dir))
    return [(path, "same")] + [(parent, "inside") for parent in path.parents if parent != Path(parent.anchor)]


# ---------------------------------------------------------------------- who owns it
def save_dir_ownership(ledger: Optional[L.Ledger], save_dir: str, *, ask_slurm: bool = True,
                       query: Any = None) -> Ownership:
    """`ledger` None: there is no ledger yet (preflight before any submit); only claims count."""
    own = Ownership(save_dir=os.path.abspath(save_dir), slurm_asked=ask_slurm)
    if ledger is not None:
        _ledger_owners(ledger, own, ask_slurm, query)
    for directory, rel in _claim_dirs(own.save_dir):
        _claim_finding(ledger, own, directory, rel, ask_slurm)
    return own


def _ledger_owners(ledger: L.Ledger, own: Ownership, ask_slurm: bool, query: Any) -> None:
    runs = [r for r in ledger.list_runs(limit=None) if _may_write(r) and r.save_dir and relation(own.save_dir, r.save_dir)]
    if runs and ask_slurm:
        from mbridge_launch.runs.operations import slurm_query
        from mbridge_launch.runs.reconcile import SlurmUnavailable, refresh_runs

        try:
            runs = refresh_runs(ledger, query or slurm_query(), runs, raise_unavailable=True)
        except SlurmUnavailable:
            own.slurm_asked = False  # the recorded states decide: an active one still blocks
    for run in runs:
        if _may_write(run):
            own.owners.append(Owner("ledger", run.name, run.id, run.state, list(run.job_ids), str(run.save_dir),
                                    relation(own.save_dir, str(run.save_dir)) or "same", "",
                                    (run.submitter or "").rpartition(":")[0], str(ledger.path)))


def _may_write(run: Any) -> bool:
    """Active, or a failed submission whose job may exist after all (reconcile still looks):
    RunRecord.holds, the same rule as the ledger's holding_runs."""
    return bool(run.holds)


def _claim_finding(ledger: Optional[L.Ledger], own: Ownership, directory: Path, rel: str, ask_slurm: bool) -> None:
    try:
        claim = read_claim(directory)
    except ClaimUnreadable as exc:
        own.unverified.append((None, t("ownership.reason.unreadable", file=str(claim_path(directory)), why=str(exc))))
        return
    if claim is None or _ours(ledger, claim):
        return
    owner = claim_owner(claim, relation=rel)
    if not ask_slurm:
        own.unverified.append((owner, t("ownership.reason.not_asked")))
        return
    from mbridge_launch.runs.reconcile import SlurmUnavailable

    try:
        live, state = claim_job_state(claim)
    except SlurmUnavailable:
        own.slurm_asked = False
        own.unverified.append((owner, t("ownership.reason.slurm_unavailable")))
        return
    owner.state = state or t("ownership.state_unknown")
    if not live and not state and claim.user and claim.user != _user():
        # another user's job Slurm does not show may be hidden (PrivateData=jobs), not gone
        own.unverified.append((owner, t("ownership.reason.other_user_hidden", user=claim.user)))
        return
    (own.owners if live else own.stale).append(owner)


def _ours(ledger: Optional[L.Ledger], claim: Claim) -> bool:
    """A claim written through this very ledger for a run it still has: the ledger decides."""
    if ledger is None or not claim.ledger or os.path.realpath(claim.ledger) != os.path.realpath(str(ledger.path)):
        return False
    run = ledger.find_run(claim.run_id) if claim.run_id is not None else None
    return run is not None and run.job_token == claim.token


def claim_job_state(claim: Claim, query: Any = None) -> tuple[bool, str]:
    """(live, Slurm state word, "" when Slurm knows no such job) of the claim's job, asked as its
    owner's user; SlurmUnavailable when Slurm cannot be asked."""
    from mbridge_launch.runs.reconcile import SacctQuery, run_state_for

    q = query or SacctQuery(user=claim.user or None)
    if claim.job_ids:
        found = q.job_states(list(claim.job_ids))
        jobs = [found[j] for j in claim.job_ids if j in found]
    elif claim.token:
        if time.time() - claim.time < SUBMITTING_GRACE_S:
            return True, L.SUBMITTING  # its scheduler call may be running right now
        jobs = q.find_jobs(name=None, token=claim.token, since=claim.time - CLOCK_SLACK_S)
    else:
        jobs = []
    live = [j for j in jobs if run_state_for(j.state) in L.ACTIVE_STATES]
    if live:
        return True, live[0].state
    return False, jobs[0].state if jobs else ""


# ---------------------------------------------------------------------- the gate
def refuse_if_owned(own: Ownership, *, force: bool) -> None:
    """CheckFailed naming the owner; an unverified claim only without --force (and its reason).
    A run of this ledger whose scheduler call got no answer (it may have a job) is said as such:
    the way out is to let reconciliation find the job, not to cancel it."""
    if own.owners:
        owner = own.owners[0]
        if owner.source == "ledger" and owner.state == L.SUBMIT_FAILED:  # only _may_write keeps such a run
            raise CheckFailed("gate.unresolved_save_dir", path=own.save_dir, run=owner.name, id=owner.run_id)
        raise CheckFailed(owner_key(owner), **owner_params(own, owner))
    if own.unverified and not force:
        raise CheckFailed("ownership.unverified", path=own.save_dir, reason=unverified_text(own))


class ClaimWriter:
    """Writes the claim before the scheduler call (token, no job) and after it (job ids); says
    which stale claim it replaces and records an override for a forced take-over."""

    def __init__(self, ledger: L.Ledger, own: Optional[Ownership], plan_hash: str, out: Any = None) -> None:
        self.ledger, self.own, self.plan_hash = ledger, own, plan_hash
        self.out = out or sys.stderr
        self.claim: Optional[Claim] = None

    def before(self, record: Any, reason: Optional[str]) -> None:
        if self.own is None:
            return
        for stale in self.own.stale:
            self._warn("ownership.stale_replaced", **owner_params(self.own, stale))
        if self.own.unverified:
            self.ledger.record_override(record.id, "checkpoint_claim", reason or "",
                                        {"save_dir": self.own.save_dir, "unverified": unverified_text(self.own)})
            self._warn("ownership.forced", path=self.own.save_dir, reason=reason or "")
        self.claim = Claim(record.id, record.name, record.job_token or "", [], os.path.abspath(str(self.ledger.path)), _user(),
                           socket.gethostname(), self.plan_hash, self.own.save_dir)
        self._write()

    def after(self, record: Any) -> None:
        if self.claim is None:
            return
        self.claim.job_ids = list(record.job_ids)
        self.claim.time = time.time()
        self._write()

    def _write(self) -> None:
        assert self.claim is not None
        try:
            Path(self.claim.save_dir).mkdir(parents=True, exist_ok=True)
            write_claim(self.claim.save_dir, self.claim)
        except OSError as exc:  # the ledger check still holds; other ledgers will not see this run
            self._warn("ownership.claim_write_failed", file=str(claim_path(self.claim.save_dir)),
                       reason=exc.strerror or str(exc))
            self.claim = None

    def _warn(self, key: str, **params: Any) -> None:
        print(t("warning.prefix", message=t(key, **params)), file=self.out)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container: the uid still names it
        return str(os.getuid())


# ---------------------------------------------------------------------- preflight
def preflight_callback(ledger_path: Optional[str], *, ask_slurm: bool) -> Callable[[str], Ownership]:
    """What `preflight` (and `submit --dry-run`) pass to run_preflight(save_dir_ownership=): the
    ledger is opened only if it exists (a preflight creates no ledger) and closed after the check;
    only refreshed Slurm states are written to it."""

    def check(save_dir: str) -> Ownership:
        path = Path(ledger_path).expanduser() if ledger_path else L.default_ledger_path()
        # os.path.exists: a path that cannot exist (a name over NAME_MAX, a file as a folder) is
        # no ledger, as a missing one is; Path.exists raises OSError for those before 3.12
        if not os.path.exists(path):
            return save_dir_ownership(None, save_dir, ask_slurm=ask_slurm)
        ledger = L.Ledger.open(path, create=False)  # read (and refreshed where writable)
        try:
            return save_dir_ownership(ledger, save_dir, ask_slurm=ask_slurm)
        finally:
            ledger.close()

    return check


def fixed_callback(own: Optional[Ownership]) -> Optional[Callable[[str], Ownership]]:
    """For the gate's preflight: the ownership it already established (no second Slurm query)."""
    return None if own is None else (lambda _save_dir: own)
