"""The one line a command shows when Slurm could not be asked about the runs it shows.

A silent controller must never look like an idle one: the states shown are then the ledger's, and
the line says how old they are (the oldest last record among the runs Slurm was asked about), and
why Slurm gave no answer (runs/slurm_jobs.py SlurmNotAsked: "squeue: no answer within 5 s").
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Optional

from mbridge_launch.base.i18n import t


def age_text(seconds: float) -> str:
    """'40 s', '12 min', '3 h', '2 d' (rounded down; a clock that went back counts as 0)."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return t("ledger.age.seconds", count=seconds)
    if seconds < 2 * 3600:
        return t("ledger.age.minutes", count=seconds // 60)
    if seconds < 2 * 86400:
        return t("ledger.age.hours", count=seconds // 3600)
    return t("ledger.age.days", count=seconds // 86400)


def not_asked_line(exc: BaseException, runs: Iterable[Any], now: Optional[float] = None) -> str:
    """'Slurm could not be asked (REASON); states as last recorded AGE ago' for `runs` (those
    whose state Slurm was to refresh; their oldest `updated_at` gives the age)."""
    now = time.time() if now is None else now
    reason = getattr(exc, "reason", "") or str(exc) or type(exc).__name__
    stamps = [r.updated_at for r in runs if getattr(r, "updated_at", None)]
    if not stamps:
        return t("ledger.slurm_not_asked", reason=reason)
    return t("ledger.slurm_not_asked_age", reason=reason, age=age_text(now - min(stamps)))
