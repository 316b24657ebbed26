"""The Plan's Slurm --signal and whether the trainer turns it into a checkpoint.

Megatron Bridge 0.6.2 installs its exit handler only when `train.exit_signal_handler` is true
(training/state.py `_set_signal_handler`), for `train.exit_signal` only (Megatron-LM
training_config.py: default `signal.SIGTERM`); at the end of each iteration it saves a checkpoint
and exits (training/train.py `checkpoint_and_decide_exit`). Every other signal keeps Python's
default action: SIGTERM, SIGUSR1 and SIGUSR2 terminate the process without a checkpoint.

A command-line `train.exit_signal=` reaches `signal.signal()` as Hydra parsed it: a number works, a
name (`SIGUSR1`) stays text and fails when the handler is installed. So the launcher writes a
number, and only where the signal is not SIGTERM.
"""

from __future__ import annotations

import signal
from typing import Optional

from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.base.slurm_signal import WORKS, parse
from mbridge_launch.plan.model import Override, Plan
from mbridge_launch.plan.overrides import is_on, whole_number

HANDLER_KEY = "train.exit_signal_handler"
SIGNAL_KEY = "train.exit_signal"
KEYS = (HANDLER_KEY, SIGNAL_KEY)
__all__ = ["KEYS", "WORKS", "handler_overrides", "parse", "problem"]


def _last_override(plan: Plan, key: str) -> Optional[str]:
    """The value the trainer ends with: later overrides win (plan.trainer_args)."""
    value = None
    for o in plan.overrides:
        if o.key == key:
            value = o.value
        elif o.key == "~" + key:
            value = None
    return value


def handler_overrides(signal_text: Optional[str], user_keys: set[str]) -> list[Override]:
    """The execution overrides that make the trainer save on the Plan's signal: the handler on
    and, for another signal than SIGTERM, its number. None where the user set a key himself (the
    preflight rule then checks his value)."""
    if not signal_text:
        return []
    sig = parse(signal_text)
    reason = msg("change.reason.exit_signal", name=sig.name, signal=signal_text, lead=sig.lead_s)
    wanted = [(HANDLER_KEY, "true", "false")]
    if sig.signum != signal.SIGTERM:
        wanted.append((SIGNAL_KEY, str(sig.signum), str(int(signal.SIGTERM))))
    return [Override.model_validate({"key": key, "value": value, "from": default, "class": "execution",
                                     "reason": reason, "source": "launcher"})
            for key, value, default in wanted if key not in user_keys]


def problem(plan: Plan) -> Optional[Msg]:
    """Why the trainer would not save on the Plan's signal, or None. A Plan without a signal gets
    Slurm's SIGTERM at the limit itself; nothing to check there."""
    text = plan.cluster.signal
    if not text:
        return None
    try:
        sig = parse(text)
    except ValueError:
        return None  # the Plan refuses it (plan.model); nothing more to say here
    params = {"signal": text, "lead": sig.lead_s, "works": WORKS}
    if sig.batch_only:
        return msg("signal.batch_only", **params)
    if not is_on(_last_override(plan, HANDLER_KEY)):
        return msg("signal.no_handler", name=sig.name, **params)
    handled = _last_override(plan, SIGNAL_KEY)
    number = int(signal.SIGTERM) if handled is None else whole_number(handled)
    if number is None:
        return msg("signal.exit_signal_text", value=handled, number=sig.signum)
    if number != sig.signum:
        return msg("signal.mismatch", name=sig.name, handled=_signal_name(number), number=sig.signum, **params)
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
