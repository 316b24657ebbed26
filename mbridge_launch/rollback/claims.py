"""The claim file of a checkpoint directory: `<save>/.mbridge-launch-claim.json` says which run
(of which ledger, user and host) writes there, so that a submission from another ledger or user
sees it. The gate writes it atomically (mode 0644) before calling the scheduler (with the run's
token) and again with the job ids after; a run that ended leaves it as history, and a claim whose
job is no longer active in Slurm is stale and may be replaced.

It lives here, below preflight and runs (import layers), because it is a file of the checkpoint
directory like the trackers (rollback/checkpoints.py): preflight reads it, runs/ownership.py
decides with Slurm and the ledger whether it still holds. The file is untrusted (anyone who can
write the directory can write it): it is never followed through a symlink, read only up to
CLAIM_MAX_BYTES, and each value is type-checked and shortened before it is shown.
"""

from __future__ import annotations

import errno
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.base.atomic import OutputNotRegular, atomic_write_text
from mbridge_launch.base.i18n import t
from mbridge_launch.base.json_text import parse_json

CLAIM_NAME = ".mbridge-launch-claim.json"
CLAIM_MAX_BYTES = 64 * 1024
CLAIM_VERSION = 1
_TEXT_LIMIT = 200  # longest value shown from a claim file
_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")


class ClaimUnreadable(ValueError):
    """The claim file exists but cannot be trusted or parsed; str() is the reason (translated)."""


@dataclass
class Claim:
    run_id: Optional[int]
    name: str
    token: str
    job_ids: list[str]
    ledger: str
    user: str
    host: str
    plan_hash: str
    save_dir: str
    time: float = field(default_factory=time.time)
    version: int = CLAIM_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


@dataclass
class Owner:
    """Something that writes a save directory now, or may: an active ledger run or a claim.
    `relation`: same (the very directory), inside (the plan's directory is inside the owner's),
    contains (the owner's directory is inside the plan's)."""

    source: str  # ledger | claim
    name: str
    run_id: Optional[int]
    state: str  # the ledger state, or the Slurm state of the claim's job ("" when not known)
    job_ids: list[str]
    path: str
    relation: str = "same"
    user: str = ""
    host: str = ""
    ledger: str = ""


@dataclass
class Ownership:
    """What `runs.ownership.save_dir_ownership` found for one save directory. `owners` block a
    submission; `unverified` are claims whose job Slurm could not be asked about (or unreadable
    claim files): they block unless overridden; `stale` claims are replaced by the next claim."""

    save_dir: str
    owners: list[Owner] = field(default_factory=list)
    unverified: list[tuple[Optional[Owner], str]] = field(default_factory=list)  # (claim, reason)
    stale: list[Owner] = field(default_factory=list)
    slurm_asked: bool = True


def claim_path(save_dir: str | Path) -> Path:
    return Path(save_dir) / CLAIM_NAME


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text if len(text) <= _TEXT_LIMIT else text[:_TEXT_LIMIT] + "..."


def _read_bounded(path: Path) -> Optional[bytes]:
    """The file's bytes (base/files.py's bounded reader), never through a symlink; None when
    there is no claim file."""
    from mbridge_launch.base.files import probe_read

    probe = probe_read(path, CLAIM_MAX_BYTES, nofollow=True)
    if probe.kind == "missing":
        return None
    if probe.kind == "symlink":
        raise ClaimUnreadable(t("ownership.claim_file.symlink"))
    if probe.kind == "unreadable":
        raise ClaimUnreadable(t("ownership.claim_file.os_error", reason=probe.reason))
    if probe.kind != "regular":  # a FIFO or device would block or never end
        raise ClaimUnreadable(t("ownership.claim_file.not_regular"))
    if probe.data is None:
        raise ClaimUnreadable(t("ownership.claim_file.too_large", limit=CLAIM_MAX_BYTES))
    return probe.data


def _user_name(value: Any) -> str:
    """A login name, or "" (it is passed to `sacct -u`/`squeue -u`: never an option or odd text)."""
    return value if isinstance(value, str) and _USER_RE.match(value) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def read_claim(save_dir: str | Path) -> Optional[Claim]:
    """The directory's claim, None when it has none; ClaimUnreadable when it cannot be used."""
    data = _read_bounded(claim_path(save_dir))
    if data is None:
        return None
    try:
        raw = parse_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ClaimUnreadable(t("ownership.claim_file.not_json")) from None
    if not isinstance(raw, dict):
        raise ClaimUnreadable(t("ownership.claim_file.not_json"))
    jobs = raw.get("job_ids")
    run_id = raw.get("run_id")
    stamp = raw.get("time")
    return Claim(
        run_id=run_id if isinstance(run_id, int) and not isinstance(run_id, bool) else None,
        name=_text(raw.get("name")), token=_text(raw.get("token")),
        job_ids=[_text(j) for j in jobs if isinstance(j, (str, int)) and str(j).isdigit()][:16]
        if isinstance(jobs, list) else [],
        ledger=_text(raw.get("ledger")), user=_user_name(raw.get("user")), host=_text(raw.get("host")),
        plan_hash=_text(raw.get("plan_hash")), save_dir=_text(raw.get("save_dir")),
        time=float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else 0.0,
        version=_int(raw.get("version")),
    )


def write_claim(save_dir: str | Path, claim: Claim) -> Path:
    """Write (or replace) the claim atomically; a new one's mode follows the umask (0664 in a
    group-shared save directory under umask 002, where a forced 0644 kept the group from replacing
    a finished run's claim), a replaced one keeps its mode. A symlink in its place is replaced by
    the file itself (os.replace renames over the link; its target is never written); a directory,
    FIFO or device there is refused as an OSError, which the caller reports as a failed write."""
    try:
        return atomic_write_text(claim_path(save_dir), claim.to_json(), replace_links=True)
    except OutputNotRegular as exc:
        raise OSError(errno.EEXIST, exc.render()) from None


def claim_owner(claim: Claim, state: str = "", relation: str = "same") -> Owner:
    return Owner("claim", claim.name, claim.run_id, state, list(claim.job_ids), claim.save_dir, relation,
                 claim.user, claim.host, claim.ledger)


# ---------------------------------------------------------------------- how an owner is named
def _jobs(owner: Owner) -> str:
    return ", ".join(owner.job_ids) or "-"


def owner_params(own: Ownership, owner: Owner) -> dict[str, Any]:
    where = t(f"ownership.relation.{owner.relation}", path=own.save_dir, owner_path=owner.path)
    return {"path": own.save_dir, "name": owner.name, "id": owner.run_id if owner.run_id is not None else "-",
            "state": owner.state or "-", "jobs": _jobs(owner), "where": where, "user": owner.user or "-",
            "host": owner.host or "-", "ledger": owner.ledger or "-"}


def owner_key(owner: Owner) -> str:
    return "ownership.owned" if owner.source == "ledger" else "ownership.claimed"


def unverified_text(own: Ownership) -> str:
    return "; ".join(reason if owner is None else t("ownership.reason.claim", reason=reason, **owner_params(own, owner))
                     for owner, reason in own.unverified)
