"""Megatron's checkpoint layout (torch_dist), written and resumed like Megatron Bridge does.

    SAVE/iter_0000100/{__0_0.distcp .. __{W-1}_0.distcp, common.pt, metadata.json,
                       run_config.yaml, train_state.pt, .metadata}
    SAVE/latest_train_state.pt              } trackers, written only after the iteration
    SAVE/latest_checkpointed_iteration.txt  } directory is complete, each file atomically

Only rank 0 writes (all shards included), so ranks never race on a file. `.metadata` is the last
file of the iteration directory: a directory without it is incomplete. `.pt` files hold JSON
(no torch here); tools treat them as opaque bytes.

`.metadata` is a pickle like torch.distributed.checkpoint's: the real one pickles a `Metadata`
dataclass whose `storage_data` maps each MetadataIndex(fqn, offset, index) to a
`_StorageInfo(relative_path, offset, length)`, relative_path being the shard file
(`__<rank>_<n>.distcp`). Here it is the same shape in plain dicts and strings (no torch classes to
import), so a reader that walks the pickle for shard names sees what it would see in a real one.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ITER_RE = re.compile(r"^iter_(\d{7})$")
TRACKER_PT = "latest_train_state.pt"
TRACKER_TXT = "latest_checkpointed_iteration.txt"


class CheckpointError(RuntimeError):
    pass


def iter_dir_name(iteration: int) -> str:
    return f"iter_{iteration:07d}"


def write_atomic(path: Path, data: str | bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, str):
                data = data.encode("utf-8")
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _yaml(values: dict[str, Any]) -> str:
    """run_config.yaml: nested mapping from dotted keys; scalars as JSON (valid YAML)."""
    tree: dict[str, Any] = {}
    for key in sorted(values):
        *parents, leaf = key.split(".")
        node = tree
        for p in parents:
            child = node.get(p)
            if not isinstance(child, dict):  # a scalar and a sub-key under the same name: keep the sub-key
                child = node[p] = {}
            node = child
        node[leaf] = values[key]
    lines: list[str] = []

    def emit(node: dict[str, Any], indent: int) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                lines.append(f"{'  ' * indent}{k}:")
                emit(v, indent + 1)
            else:
                lines.append(f"{'  ' * indent}{k}: {json.dumps(v)}")

    emit(tree, 0)
    return "\n".join(lines) + "\n"


@dataclass
class Loaded:
    iteration: int
    consumed_samples: int
    directory: Path
    source: str  # which rule found it: iter_dir, ckpt_step, latest_train_state.pt, latest_checkpointed_iteration.txt
    poisoned: bool
    initial_seed: int | None


def save(root: Path, iteration: int, consumed: int, world_size: int, values: dict[str, Any],
         poisoned: bool, initial_seed: int, die_before_finalize: bool = False) -> Path:
    """Write iter_N completely, then the trackers. `die_before_finalize` leaves it incomplete."""
    root.mkdir(parents=True, exist_ok=True)
    d = root / iter_dir_name(iteration)
    d.mkdir(exist_ok=True)
    for r in range(world_size):
        write_atomic(d / f"__{r}_0.distcp", json.dumps({"rank": r, "iteration": iteration, "poisoned": poisoned}) + "\n")
    if die_before_finalize:
        raise CheckpointError(f"simulated failure while saving iteration {iteration} (MBL_STANDIN_CRASH_IN_SAVE)")
    state = {"iteration": iteration, "consumed_train_samples": consumed,
             "floating_point_operations_so_far": 0, "do_train": True}
    write_atomic(d / "common.pt", json.dumps({"iteration": iteration, "poisoned": poisoned,
                                              "initial_seed": initial_seed, "world_size": world_size}) + "\n")
    write_atomic(d / "metadata.json", json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                                                  "common_backend": "torch", "common_backend_version": 1}) + "\n")
    write_atomic(d / "run_config.yaml", _yaml(values))
    write_atomic(d / "train_state.pt", json.dumps(state) + "\n")
    write_atomic(d / ".metadata", metadata_bytes([f"__{r}_0.distcp" for r in range(world_size)]))
    # trackers last: a reader that finds them finds a complete iteration directory
    write_atomic(root / TRACKER_PT, json.dumps(state) + "\n")
    write_atomic(root / TRACKER_TXT, f"{iteration}\n")
    return d


def metadata_bytes(shard_files: list[str]) -> bytes:
    """A torch_dist-like `.metadata`: storage_data names every shard file (see the module doc)."""
    storage = {f"MetadataIndex(fqn='model.shard', offset=(0,), index={k})":
               {"relative_path": name, "offset": 0, "length": 64} for k, name in enumerate(shard_files)}
    return pickle.dumps({"state_dict_metadata": {"model.shard": {"size": [len(shard_files)]}},
                         "planner_data": {}, "storage_data": storage, "storage_meta": None},
                        protocol=pickle.HIGHEST_PROTOCOL)


def cleanup_most_recent_k(root: Path, k: int) -> list[Path]:
    """Keep the k iteration directories with the HIGHEST numbers, as Megatron does. After a
    rollback that left newer directories in place, this deletes the new timeline."""
    if k is None or k <= 0:
        return []
    dirs = sorted((p for p in root.iterdir() if p.is_dir() and ITER_RE.match(p.name)),
                  key=lambda p: int(ITER_RE.match(p.name).group(1)))
    doomed = dirs[:-k]
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return doomed


def find(load: str | None, ckpt_step: int | None) -> tuple[Path, int, str] | None:
    """Bridge's resume order: `load` naming an iter_* directory; else ckpt_step (missing raises);
    else latest_train_state.pt; else the .txt tracker; else nothing (start from scratch)."""
    if not load:
        return None
    p = Path(load)
    m = ITER_RE.match(p.name)
    if m and p.is_dir():
        return p, int(m.group(1)), "iter_dir"
    if ckpt_step is not None:
        d = p / iter_dir_name(int(ckpt_step))
        if not d.is_dir():
            raise CheckpointError(f"checkpoint.ckpt_step={ckpt_step}: {d} does not exist")
        return d, int(ckpt_step), "ckpt_step"
    if (p / TRACKER_PT).is_file():
        state = json.loads((p / TRACKER_PT).read_text(encoding="utf-8"))
        it = int(state["iteration"])
        return p / iter_dir_name(it), it, TRACKER_PT
    if (p / TRACKER_TXT).is_file():
        text = (p / TRACKER_TXT).read_text(encoding="utf-8").strip()
        if text == "release":
            return p / "release", 0, TRACKER_TXT
        it = int(text)
        return p / iter_dir_name(it), it, TRACKER_TXT
    return None


def load(load_path: str | None, ckpt_step: int | None) -> Loaded | None:
    found = find(load_path, ckpt_step)
    if found is None:
        return None
    d, iteration, source = found
    if not d.is_dir():
        raise CheckpointError(f"{source} names iteration {iteration} but {d} does not exist")
    if not (d / ".metadata").is_file() or not (d / "train_state.pt").is_file():
        raise CheckpointError(f"checkpoint {d} is incomplete (no .metadata or train_state.pt)")
    state = json.loads((d / "train_state.pt").read_text(encoding="utf-8"))
    common = {}
    if (d / "common.pt").is_file():
        common = json.loads((d / "common.pt").read_text(encoding="utf-8"))
    return Loaded(
        iteration=int(state.get("iteration", iteration)),
        consumed_samples=int(state.get("consumed_train_samples", 0)),
        directory=d,
        source=source,
        poisoned=bool(common.get("poisoned", False)),
        initial_seed=common.get("initial_seed"),
    )
