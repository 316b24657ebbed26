"""The loss curve and the faults the stand-in can be told to produce (environment variables).

Loss: a deterministic, strictly decreasing function of (iteration, rng.seed):
    base(i) = 2 + 8.5 * exp(-i / 40);  loss(i) = base(i) + 0.5 * (base(i) - base(i+1)) * u(seed, i)
with u in [0, 1) from a hash, so a resumed run logs exactly the losses of an uninterrupted one.

Faults (K = iteration number, counted from 1 like Megatron's log):
  MBL_STANDIN_CRASH_AT=K        rank MBL_STANDIN_CRASH_RANK (default 0) raises at iteration K
                                (Python traceback on stderr, exit 1). MBL_STANDIN_CRASH_ONCE=PATH:
                                crash only if PATH does not exist, and create it (so a requeued or
                                resubmitted job gets past K).
  MBL_STANDIN_CRASH_IN_SAVE=K   rank 0 dies while saving iteration K: shards written, no
                                .metadata, no trackers (an incomplete checkpoint). Exit 1.
  MBL_STANDIN_NAN_AT=K          the data batch at iteration K is bad: loss is NaN from K on, for
                                the rest of the process, and checkpoints saved after K carry the
                                poison (resuming from them stays NaN).
  MBL_STANDIN_SPIKE_AT=K        loss x MBL_STANDIN_SPIKE_FACTOR (default 5) at iterations
                                K .. K + MBL_STANDIN_SPIKE_LENGTH - 1 (default length 1).
  MBL_STANDIN_ITER_SECONDS=S    sleep S seconds per iteration (default 0.05).
  MBL_STANDIN_SPEED_MODEL=NAME  the step time is a function of the layout instead (speed.py:
                                layout-v1, favour:K=V,...); an unknown name exits 2.

The bad batch (NaN, spike) belongs to the data order of the run's ORIGINAL seed: it fires when the
current rng.seed equals MBL_STANDIN_FAULT_SEED if set, else the seed the run started with (kept in
every checkpoint as initial_seed; a fresh start uses its own seed). So resuming from a checkpoint
before K with the same seed hits it again; resuming with another `rng.seed=`, or with K listed in
`train.iterations_to_skip=[K]` (batch consumed, update skipped), avoids it. A crash does not
depend on data: it fires whenever iteration K runs.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping


def _knob(parse: Callable[[str], Any], default: Any = None) -> Any:
    """A field set from the environment variable MBL_STANDIN_<FIELD NAME IN CAPITALS>, read with
    `parse`; unset or empty leaves `default`."""
    return field(default=default, metadata={"parse": parse})


@dataclass
class Faults:
    crash_at: int | None = _knob(int)
    crash_rank: int = _knob(int, 0)
    crash_once: str | None = _knob(str)
    crash_in_save: int | None = _knob(int)
    nan_at: int | None = _knob(int)
    spike_at: int | None = _knob(int)
    spike_factor: float = _knob(float, 5.0)
    spike_length: int = _knob(int, 1)
    fault_seed: int | None = _knob(int)
    iter_seconds: float = _knob(float, 0.05)
    speed_model: str | None = _knob(str)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Faults":
        env = os.environ if env is None else env
        found = ((f, env.get(f"MBL_STANDIN_{f.name.upper()}")) for f in fields(cls))
        return cls(**{f.name: f.metadata["parse"](raw) for f, raw in found if raw})

    def should_crash(self, iteration: int, rank: int) -> bool:
        if self.crash_at != iteration or rank != self.crash_rank:
            return False
        if self.crash_once:
            if os.path.exists(self.crash_once):
                return False
            with open(self.crash_once, "w", encoding="utf-8") as fh:
                fh.write(f"crashed at iteration {iteration}\n")
        return True


def base_loss(iteration: int) -> float:
    return 2.0 + 8.5 * math.exp(-iteration / 40.0)


def _unit(seed: int, iteration: int) -> float:
    digest = hashlib.sha256(f"{seed}:{iteration}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def clean_loss(iteration: int, seed: int) -> float:
    """Strictly decreasing in iteration for any seed (the jitter is below half the next drop)."""
    b = base_loss(iteration)
    return b + 0.5 * (b - base_loss(iteration + 1)) * _unit(seed, iteration)


class LossModel:
    """Loss per iteration with the data-position faults; `poisoned` is the NaN state of the
    weights (saved in checkpoints)."""

    def __init__(self, faults: Faults, seed: int, initial_seed: int, poisoned: bool, skip: list[int]):
        self.faults = faults
        self.seed = seed
        self.poisoned = poisoned
        self.skip = set(skip)
        origin = faults.fault_seed if faults.fault_seed is not None else initial_seed
        self.data_fault_active = seed == origin

    def step(self, iteration: int) -> tuple[float, bool]:
        """(loss, skipped) for one iteration. A skipped iteration consumes its batch, no update."""
        if iteration in self.skip:
            return (math.nan if self.poisoned else clean_loss(iteration, self.seed)), True
        f = self.faults
        if self.data_fault_active and f.nan_at == iteration:
            self.poisoned = True
        if self.poisoned:
            return math.nan, False
        loss = clean_loss(iteration, self.seed)
        if self.data_fault_active and f.spike_at is not None and f.spike_at <= iteration < f.spike_at + f.spike_length:
            loss *= f.spike_factor
        return loss, False
