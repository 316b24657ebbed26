"""The stand-in's main loop: parse, derive ranks, resume, iterate, log, save, handle signals.

Signals as in Megatron Bridge: a handler only with `train.exit_signal_handler=true`, and only for
`train.exit_signal` (default SIGTERM); every other signal keeps Python's default action (the
process dies of it, no checkpoint), so a Plan whose signal the trainer would not handle fails here.

Exit codes: 0 finished (or stopped cleanly by its exit signal after checkpointing), 1 crash or
checkpoint error (Python traceback on stderr), 2 bad command line; killed by a signal: -N.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

from . import checkpoint, distenv, failures, speed
from .config import ConfigError, RunConfig, parse
from .faults import Faults, LossModel
from .report import RankReport, report_dir

_stop_signal: list[int] = []
_port_holder = failures.PortHolder()  # rank 0's store socket, open until the process ends


def _on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
    _stop_signal.append(signum)


def install_exit_handler(cfg: RunConfig) -> None:
    """Megatron Bridge's GlobalState._set_signal_handler: `signal.signal(train.exit_signal, ...)`
    only when train.exit_signal_handler is truthy. The value goes in as the command line parsed
    it, so a number works and a name (SIGUSR1) raises TypeError at start, as in Bridge."""
    if cfg.get("train.exit_signal_handler"):
        signal.signal(cfg.get("train.exit_signal"), _on_signal)


def stamp() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def fmt_e(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.6E}"


def log_line(iteration: int, train_iters: int, consumed: int, ms: float, lr: float, gbs: int,
             loss: float, grad_norm: float, skipped: int, nans: int) -> str:
    """Megatron-LM training_log, exactly as docs/internals.md shows it."""
    gn = "nan" if math.isnan(grad_norm) else f"{grad_norm:.3f}"
    return (
        f" [{stamp()}] iteration {iteration:8d}/{train_iters:8d} |"
        f" consumed samples: {consumed:12d} |"
        f" elapsed time per iteration (ms): {ms:.1f} |"
        f" learning rate: {lr:.6E} |"
        f" global batch size: {gbs:5d} |"
        f" lm loss: {fmt_e(loss)} |"
        f" loss scale: 1.0 |"
        f" grad norm: {gn} |"
        f" number of skipped iterations: {skipped:3d} |"
        f" number of nan iterations: {nans:3d} |"
    )


def learning_rate(it: int, cfg: RunConfig) -> float:
    lr, min_lr = float(cfg.get("optimizer.lr")), float(cfg.get("optimizer.min_lr") or 0.0)
    warm, total = int(cfg.get("scheduler.lr_warmup_iters") or 0), int(cfg.get("train.train_iters"))
    if warm and it <= warm:
        return lr * it / warm
    frac = min(1.0, (it - warm) / max(1, total - warm))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * frac))


class Trainer:
    def __init__(self, cfg: RunConfig, dist: distenv.DistEnv, faults: Faults):
        self.cfg, self.dist, self.faults = cfg, dist, faults
        self.rank0 = dist.rank == 0
        self.save_root = Path(cfg.get("checkpoint.save")) if cfg.get("checkpoint.save") else None
        self.tp = int(cfg.get("model.tensor_model_parallel_size") or 1)
        self.pp = int(cfg.get("model.pipeline_model_parallel_size") or 1)
        self.last_saved: int | None = None

    def modelled_step_seconds(self) -> float | None:
        """MBL_STANDIN_SPEED_MODEL's step time for this layout, or None (sleep iter_seconds)."""
        name = self.faults.speed_model
        return speed.step_seconds(self.cfg.values, self.dist.world_size, name) if name else None

    def say(self, text: str) -> None:
        if self.rank0:
            print(text, flush=True)

    def save(self, iteration: int, consumed: int, poisoned: bool, initial_seed: int) -> None:
        if self.save_root is None or not self.rank0 or self.last_saved == iteration:
            return
        self.say(f" saving checkpoint at iteration {iteration:7d} to {self.save_root} in torch_dist format")
        checkpoint.save(self.save_root, iteration, consumed, self.dist.world_size, self.cfg.values, poisoned,
                        initial_seed, die_before_finalize=self.faults.crash_in_save == iteration)
        self.last_saved = iteration
        self.say(f" successfully saved checkpoint from iteration {iteration:7d} to {self.save_root}"
                 f" [ t 1/{self.tp}, p 1/{self.pp} ]")
        k = self.cfg.get("checkpoint.most_recent_k")
        for gone in checkpoint.cleanup_most_recent_k(self.save_root, int(k) if k is not None else -1):
            self.say(f" removed old checkpoint {gone}")

    def run(self, report: RankReport) -> int:
        cfg = self.cfg
        seed = int(cfg.get("rng.seed"))
        loaded = checkpoint.load(cfg.get("checkpoint.load"), cfg.get("checkpoint.ckpt_step"))
        start, consumed, poisoned, initial_seed = 0, 0, False, seed
        if loaded is not None:
            failures.check_shard(loaded.directory, self.dist.rank)  # every rank reads its own shard
            start, consumed, poisoned = loaded.iteration, loaded.consumed_samples, loaded.poisoned
            initial_seed = loaded.initial_seed if loaded.initial_seed is not None else seed
            self.say(f" loading checkpoint from {cfg.get('checkpoint.load')} at iteration {start}")
            self.say(f" successfully loaded checkpoint from {cfg.get('checkpoint.load')}"
                     f" [ t 1/{self.tp}, p 1/{self.pp} ] at iteration {start}")
            self.last_saved = start
        else:
            pre = cfg.get("checkpoint.pretrained_checkpoint")
            if pre:
                if not Path(pre).exists():
                    raise checkpoint.CheckpointError(f"checkpoint.pretrained_checkpoint {pre} does not exist")
                self.say(f" loading pretrained checkpoint from {pre}")
            elif cfg.get("checkpoint.load"):
                self.say(f" WARNING: no checkpoint found in {cfg.get('checkpoint.load')}; starting from iteration 0")
        failures.check_dataset(cfg.values, self.dist.rank, self.dist.world_size)  # after the load, as Megatron
        report.record.update(start_iteration=start, resumed_from=str(loaded.directory) if loaded else None,
                             resume_source=loaded.source if loaded else None)
        report.write()

        model = LossModel(self.faults, seed, initial_seed, poisoned, list(cfg.get("train.iterations_to_skip") or []))
        train_iters = int(cfg.get("train.train_iters"))
        gbs = int(cfg.get("train.global_batch_size"))
        interval = int(cfg.get("checkpoint.save_interval") or 0)
        log_every = max(1, int(cfg.get("logger.log_interval") or 1))
        model_s = self.modelled_step_seconds()
        report_memory = True  # Bridge's report_memory_flag: the first logged iterations report memory
        it, skipped, nans, t_last = start, 0, 0, time.monotonic()
        while it < train_iters:
            if _stop_signal:
                break
            time.sleep(self.faults.iter_seconds if model_s is None else model_s)
            it += 1
            failures.oom_or_blocked(it, self.dist.rank, self.dist.local_rank, self.dist.world_size)
            if self.faults.should_crash(it, self.dist.rank):
                raise RuntimeError(f"stand-in: simulated crash at iteration {it} on rank {self.dist.rank}")
            loss, was_skipped = model.step(it)
            consumed += gbs
            skipped += int(was_skipped)
            nans += int(math.isnan(loss))
            if it % log_every == 0:
                now = time.monotonic()
                ms = (now - t_last) * 1000.0 / log_every if model_s is None else model_s * 1000.0
                t_last = now
                grad_norm = math.nan if math.isnan(loss) else 0.5 + 4.0 / math.sqrt(it)
                self.say(log_line(it, train_iters, consumed, ms, learning_rate(it, cfg), gbs, loss, grad_norm,
                                  skipped, nans))
                skipped = nans = 0
                if report_memory:
                    # Bridge prints it from the ranks of data-parallel rank 0; the stand-in from rank 0
                    self.say(speed.memory_line(self.dist.rank, it, speed.peak_memory_gib(cfg.values, self.dist.world_size)))
                    report_memory = it <= start + 1  # after the second iteration: optimizer state included
            if interval and it % interval == 0:
                self.save(it, consumed, model.poisoned, initial_seed)
        if _stop_signal:
            name = signal.Signals(_stop_signal[0]).name
            self.save(it, consumed, model.poisoned, initial_seed)
            self.say(f" [{stamp()}] exiting program after receiving {name} at iteration {it}.")
            report.finish(status="signalled", signal=name, end_iteration=it, exit_code=0)
            return 0
        if it > 0:  # Megatron saves at the end of training unless this iteration is saved already
            self.save(it, consumed, model.poisoned, initial_seed)
        self.say(f" [after training is done] datetime: {stamp()}")
        report.finish(status="completed", end_iteration=it, exit_code=0)
        return 0


def main(argv: list[str]) -> int:
    try:
        cfg = parse(argv)
    except ConfigError as exc:
        print(f"run_recipe.py (stand-in): error: {exc}", file=sys.stderr)
        return 2
    dist = distenv.derive()
    faults = Faults.from_env()
    if faults.speed_model and not speed.known_model(faults.speed_model):
        print(f"run_recipe.py (stand-in): error: unknown MBL_STANDIN_SPEED_MODEL {faults.speed_model!r}"
              f" (known: layout-v1, favour:K=V,...)", file=sys.stderr)
        return 2
    extra = {
        "recipe": cfg.recipe, "model": cfg.model, "mode": cfg.mode, "dataset": cfg.dataset,
        "dry_run": cfg.dry_run, "overrides": cfg.overrides, "config": cfg.values,
        "master_addr_resolves_to": distenv.resolve(dist.master_addr),
    }
    report = RankReport.start(report_dir(cfg.get("checkpoint.save")), dist.rank, argv, dist.as_dict(), extra)
    trainer = Trainer(cfg, dist, faults)
    trainer.say(f" [stand-in] run_recipe.py recipe={cfg.recipe or cfg.model} mode={cfg.mode}"
                f" dataset={cfg.dataset} world_size={dist.world_size} ({dist.source})"
                f" master={dist.master_addr}:{dist.master_port}")
    if cfg.dry_run:
        for key in sorted(cfg.values):
            trainer.say(f"{key}: {cfg.values[key]!r}")
        report.finish(status="dry-run", exit_code=0)
        return 0
    try:
        failures.check_imports(dist.rank)  # the recipe's imports come first
        failures.check_config(cfg.values, trainer.tp, dist.rank)
        failures.bind_master_port(dist, _port_holder)
        install_exit_handler(cfg)
        return trainer.run(report)
    except failures.OutOfMemoryError as exc:
        report.finish(status="crashed", error=f"OutOfMemoryError: {exc}", exit_code=1)
        failures.oom_exit(exc, dist.rank)
        raise
    except BaseException as exc:
        report.finish(status="crashed", error=f"{type(exc).__name__}: {exc}", exit_code=1)
        raise
