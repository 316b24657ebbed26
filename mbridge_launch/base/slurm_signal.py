"""sbatch's --signal=[{R|B}:]<sig_num>[@sig_time], read into what Slurm will send and when
(as base.slurm_time reads --time): the Plan validates cluster.signal with it, preflight and the
executors read the signal's number, lead time and whether only the batch shell gets it."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

SLURM_DEFAULT_LEAD_S = 60  # sbatch: "If sig_time is not specified, the default value is 60 seconds"
WORKS = "TERM@60"  # what every executor delivers and Bridge handles (its PreemptionPlugin's choice)

# sbatch --signal=[{R|B}:]<sig_num>[@sig_time]
# (ASCII digits: \d takes every Unicode digit; sbatch refuses a sig_time above 65535, tried on 22.05)
_GRAMMAR = re.compile(r"(?:(?P<flags>[RB]{1,2}):)?(?P<sig>[A-Za-z0-9]{1,16})(?:@(?P<lead>[0-9]{1,5}))?")
MAX_LEAD_S = 65535


@dataclass(frozen=True)
class SlurmSignal:
    text: str
    signum: int
    lead_s: int
    batch_only: bool  # "B:": Slurm signals the batch shell only, never the job steps (the trainer)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def parse(text: str) -> SlurmSignal:
    """sbatch's grammar; the signal as a name (TERM, SIGTERM) or a number. ValueError otherwise."""
    found = _GRAMMAR.fullmatch(text.strip())
    if not found or int(found.group("lead") or 0) > MAX_LEAD_S:
        raise ValueError(text)
    sig = found.group("sig").upper()
    if sig.isdigit():
        signum = int(sig)
        if signum not in {s.value for s in signal.Signals}:
            raise ValueError(text)
    else:
        member = getattr(signal.Signals, sig if sig.startswith("SIG") else "SIG" + sig, None)
        if member is None:
            raise ValueError(text)
        signum = member.value
    lead = found.group("lead")
    return SlurmSignal(text, signum, int(lead) if lead is not None else SLURM_DEFAULT_LEAD_S,
                       "B" in (found.group("flags") or ""))
