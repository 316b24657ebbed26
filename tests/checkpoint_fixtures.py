"""Checkpoint directories and training logs as Megatron Bridge (and the stand-in trainer) write them,
for the checkpoint, rollback, loss-monitor and watcher tests.

`make_save_dir` builds a realistic torch_dist checkpoint directory the way the stand-in trainer
(and Bridge) lays it out (docs/internals.md); `log_line` is one line of Megatron's training log.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

from mbridge_launch.rollback import checkpoints as C


def train_state_bytes(iteration: int) -> bytes:
    # The stand-in writes train_state.pt as JSON (no torch here); tools treat it as bytes.
    return json.dumps({"iteration": iteration, "consumed_train_samples": iteration * 128,
                       "floating_point_operations_so_far": 0, "do_train": True}).encode()


def metadata_bytes(shard_files: list[str]) -> bytes:
    """A `.metadata` shaped like torch_dist's (storage_data names each shard file), as the
    stand-in trainer writes it (tests/standin/checkpoint.py): a pickle of plain dicts."""
    storage = {f"index-{k}": {"relative_path": name, "offset": 0, "length": 64} for k, name in enumerate(shard_files)}
    return pickle.dumps({"state_dict_metadata": {}, "storage_data": storage}, protocol=pickle.HIGHEST_PROTOCOL)


def shard_names(world_size: int) -> list[str]:
    return [f"__{rank}_0.distcp" for rank in range(world_size)]


def write_iter(save: Path, iteration: int, *, shards: int = 2, mtime: float | None = None,
               indexed: int | None = None) -> Path:
    """`indexed`: how many shards .metadata names (default: all `shards`); fewer makes a mixed dir."""
    d = save / C.iter_dirname(iteration)
    d.mkdir(parents=True)
    (d / ".metadata").write_bytes(metadata_bytes(shard_names(shards if indexed is None else indexed)))
    for rank in range(shards):
        (d / f"__{rank}_0.distcp").write_bytes(os.urandom(64) + str(iteration).encode())
    (d / "common.pt").write_bytes(b"common-" + str(iteration).encode())
    (d / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1}))
    (d / "run_config.yaml").write_text(f"train:\n  train_iters: 1000\n# iter {iteration}\n")
    (d / "train_state.pt").write_bytes(train_state_bytes(iteration))
    if mtime is not None:
        for f in d.iterdir():
            os.utime(f, (mtime, mtime))
        os.utime(d, (mtime, mtime))
    return d


def make_save_dir(root: Path, iterations=(100, 200, 300), tracker: int | None = None) -> Path:
    """iter dirs for each iteration, trackers at `tracker` (default: the last), written last."""
    save = root / "ckpt"
    save.mkdir(parents=True, exist_ok=True)
    for k, it in enumerate(iterations):
        write_iter(save, it, mtime=1_700_000_000 + k * 60)
    tracker = iterations[-1] if tracker is None else tracker
    (save / C.PT_TRACKER).write_bytes(train_state_bytes(tracker))
    (save / C.TXT_TRACKER).write_text(str(tracker))
    return save


def log_line(iteration: int, loss: str, total: int = 1000, nan_iters: int = 0) -> str:
    return (f" [2026-11-29 20:00:{iteration % 60:02d}] iteration {iteration:>8}/{total:>8} | consumed samples: "
            f"{iteration * 128:>12} | elapsed time per iteration (ms): 812.3 | learning rate: 3.000000E-04 | "
            f"global batch size:   128 | lm loss: {loss} | loss scale: 1.0 | grad norm: 1.234 | "
            f"number of skipped iterations:   0 | number of nan iterations: {nan_iters:>3} |\n")


def make_hostile(save: Path) -> Path:
    """Turn a save directory from make_save_dir (holding iteration 200) into the issue-14
    acceptance directory full of hostile entries: trackers linked to /proc/self/environ and
    /dev/zero, an iter_* linked to /, an iter_* FIFO, a FIFO journal, a rolled-back stamp linked
    to /, and a FIFO .metadata. Used by tests/cli/test_hostile_reads.py and benchmarks/speed.py."""
    for name in (C.TXT_TRACKER, C.PT_TRACKER):
        (save / name).unlink()
    (save / C.TXT_TRACKER).symlink_to("/proc/self/environ")
    (save / C.PT_TRACKER).symlink_to("/dev/zero")
    (save / "iter_0000500").symlink_to("/")
    os.mkfifo(save / "iter_0000700")
    stamp = save / C.ROLLED_BACK_DIR / "20260101-000000"
    stamp.mkdir(parents=True)
    os.mkfifo(stamp / C.JOURNAL_NAME)
    (save / C.ROLLED_BACK_DIR / "20260102-000000").symlink_to("/")
    fifo_metadata = save / "iter_0000200" / C.METADATA
    fifo_metadata.unlink()
    os.mkfifo(fifo_metadata)
    return save


# The five commands of the acceptance figure, on a Plan whose checkpoint.save is the hostile dir
def hostile_commands(plan: Path, save: Path) -> list[tuple[str, ...]]:
    return [("preflight", str(plan), "--no-cluster"), ("preflight", str(plan), "--no-cluster", "--format", "json"),
            ("checkpoints", str(save)), ("checkpoints", str(save), "--format", "json"),
            ("rollback", str(save), "--to", "100", "--dry-run")]
