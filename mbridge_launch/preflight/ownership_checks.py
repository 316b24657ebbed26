"""Does another run write this Plan's checkpoint directory? (issue 13: one run per directory)

Who owns a directory is decided in runs/ownership.py (the ledger, Slurm, the claim file); this
layer may not import the ledger, so the CLI and the gate pass the answer in as
`ctx.save_dir_ownership`. An owner is an error; a claim that could not be verified is an error
when Slurm could not be asked, a warning under `--no-cluster` (Slurm was not asked on purpose);
the info line says which states were used (refreshed from Slurm, or as recorded).
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.model import Check, Severity


def check_save_owner(ctx: PreflightContext) -> list[Check]:
    save_text = ctx.plan.checkpoint.save or ctx.override("checkpoint.save")
    if not save_text:
        return []  # path.save_unset already says so
    save = str(ctx.resolve_path(save_text))
    if ctx.save_dir_ownership is None:
        return [Check("path.save_owner_unchecked", "info", {"path": save}, subject=save)]
    own = ctx.save_dir_ownership(save)
    return _owner_checks(own) + _unverified_checks(own) + _summary(own)


def _owner_checks(own: Any) -> list[Check]:
    from mbridge_launch.rollback.claims import owner_key, owner_params

    return [Check("path.save_owned" if o.source == "ledger" else "path.save_claimed", "error",
                  owner_params(own, o), subject=own.save_dir, key=owner_key(o)) for o in own.owners]


def _unverified_checks(own: Any) -> list[Check]:
    if not own.unverified:
        return []
    from mbridge_launch.rollback.claims import unverified_text

    # not asked on purpose (--no-cluster): a warning; could not ask, or an unusable file: an error
    severity: Severity = ("error" if own.slurm_asked or any(owner is None for owner, _ in own.unverified)
                          else "warning")
    return [Check("path.save_claim_unverified", severity, {"path": own.save_dir, "reason": unverified_text(own)},
                  subject=own.save_dir)]


def _summary(own: Any) -> list[Check]:
    from mbridge_launch.base.i18n import t

    how = t("preflight.path.save_owner_basis." + ("refreshed" if own.slurm_asked else "recorded"))
    checks = [Check("path.save_owner_basis", "info", {"path": own.save_dir, "how": how}, subject=own.save_dir)]
    if not own.owners and not own.unverified:
        checks.append(Check("path.save_owner_free", "info", {"path": own.save_dir}, subject=own.save_dir))
    return checks
