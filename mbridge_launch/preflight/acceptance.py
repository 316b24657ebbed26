"""Preflight errors a Plan accepts (`accepted_checks`): the escape hatch for checks that rest on
an estimate, when the user knows better (the layout ran before, old checkpoints get pruned).

An accepted error becomes a warning followed by a `plan.check_accepted` warning with the reason,
so every preflight and plan card still shows it. Checks that state facts (a missing partition,
a leaked secret) cannot be accepted: naming one is itself an error. An acceptance whose check no
longer fires is reported, so stale ones get cleaned up.
"""

from __future__ import annotations

from dataclasses import replace

from mbridge_launch.preflight.model import Check

# error codes that rest on an estimate of this tool, not on something it observed
ACCEPTABLE = ("plan.memory_oom", "path.save_space")


def apply_acceptances(checks: list[Check], accepted: list) -> list[Check]:
    """`checks` with the accepted errors turned into warnings, plus what the acceptances say."""
    if not accepted:
        return checks
    reasons = {a.code: a.reason for a in accepted}
    out: list[Check] = []
    fired: set[str] = set()
    for check in checks:
        if check.severity == "error" and check.code in reasons and check.code in ACCEPTABLE:
            fired.add(check.code)
            out.append(replace(check, severity="warning"))
            out.append(Check("plan.check_accepted", "warning", {"code": check.code, "reason": reasons[check.code]},
                             subject=check.code))
            continue
        out.append(check)
    for code in reasons:
        if code not in ACCEPTABLE:
            out.append(Check("plan.accept_not_allowed", "error", {"code": code, "allowed": ", ".join(ACCEPTABLE)},
                             subject=code))
        elif code not in fired:
            out.append(Check("plan.accept_unused", "info", {"code": code}, subject=code))
    return out
