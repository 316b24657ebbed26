"""Failures the stand-in produces the way the real stack does, with the real messages, for
`mbridge-launch diagnose` (tests/e2e/test_diagnose_e2e.py).

Done for real where it can be done without GPUs:
- the data prefixes of `dataset.data_path` are opened (.idx and .bin): a missing one raises
  Megatron's IndexedDataset assertion ("One or both of the .idx and .bin files cannot be found at
  the path prefix ..."); rank 0 builds first (and logs "Load the _IndexReader from ..."), the other
  ranks after it, as Megatron's BlendedMegatronDatasetBuilder does, so on a node-local path only
  the ranks of the other nodes fail;
- rank 0 of an srun-native job binds MASTER_PORT on its node (torch's TCPStore server; torchrun
  binds it itself, so only then): a listener already there raises torch's DistNetworkError
  "... code: -98, name: EADDRINUSE ...";
- on resume every rank reads its own checkpoint shard (`__<rank>_0.distcp`): a truncated or
  corrupt one raises torch.distributed.checkpoint's CheckpointException;
- `model.num_query_groups` against the tensor parallel size: Megatron Core's TransformerConfig
  ValueError;
- `model.cuda_graph_impl=local|transformer_engine` with `model.cpu_offloading=true`: Megatron
  Core's TransformerConfig ValueError ("CUDA graphs not supported with CPU offloading.");
- MBL_STANDIN_IMPORT_ERROR=MODULE really imports MODULE (a name that is not installed: Python's
  own ModuleNotFoundError, as from a container whose Megatron Core lacks it).

Knobs for what cannot be real here (no GPU, no NCCL):
- MBL_STANDIN_OOM_AT=K (+ MBL_STANDIN_OOM_RANK, default 0): at iteration K that rank raises
  torch.OutOfMemoryError (CUDA's message, GPU = its local rank) and stays in its exit path for a
  moment (as a rank whose NCCL communicator is still being torn down), then exits 1; every other
  rank is blocked in the collective of iteration K, prints the NCCL watchdog's timeout lines after
  MBL_STANDIN_NCCL_TIMEOUT_S (default 3) seconds and aborts (SIGABRT, as c10d's watchdog does);
- MBL_STANDIN_CUDA_GRAPH_CONFLICT=1: as if the recipe had set the conflicting CUDA graph options.

Every failure line a rank prints on stderr carries torch's `[rank<N>]:` prefix, so a shared step
log says which rank printed it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any


def _named(name: str, module: str, base: type) -> type:
    """An exception class that prints as `module.name` in a traceback, like torch's own."""
    cls = type(name, (base,), {})
    cls.__module__ = module
    cls.__qualname__ = name
    return cls


OutOfMemoryError = _named("OutOfMemoryError", "torch", RuntimeError)
DistNetworkError = _named("DistNetworkError", "torch.distributed", RuntimeError)
CheckpointException = _named("CheckpointException", "torch.distributed.checkpoint.api", BaseException)


class FailureExit(SystemExit):
    """The rank already printed its failure (traceback or watchdog lines): exit with this code."""


def prefix_lines(text: str, rank: int) -> str:
    return "".join(f"[rank{rank}]: {line}\n" for line in text.rstrip("\n").splitlines())


def print_exception(exc: BaseException, rank: int) -> None:
    """The traceback Python would print, with torch's per-rank prefix on every line."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(prefix_lines(text, rank))
    sys.stderr.flush()


def raise_printed(exc: BaseException, rank: int, code: int = 1, *, rank0_first: bool = False) -> None:
    """Raise `exc` so that its traceback is real, print it prefixed, exit `code`. `rank0_first`:
    a failure every rank hits at start (an import, the config): the other ranks wait a moment, so
    rank 0's comes first in the log and srun's --kill-on-bad-exit ends the rest (deterministic)."""
    if rank0_first and rank != 0:
        time.sleep(1.0)
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - printed, then the exit code says it
        print_exception(caught, rank)
    raise FailureExit(code)


# ---------------------------------------------------------------------- start-up checks
def check_imports(rank: int) -> None:
    module = os.environ.get("MBL_STANDIN_IMPORT_ERROR")
    if not module:
        return
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        if rank != 0:
            time.sleep(1.0)  # see raise_printed's rank0_first
        print_exception(exc, rank)
        raise FailureExit(1) from None


def check_config(values: dict[str, Any], tp: int, rank: int) -> None:
    """Megatron Core's TransformerConfig and Megatron Bridge's ConfigContainer checks the stand-in
    can make: run on every rank at start, as the real config validation is."""
    groups = values.get("model.num_query_groups")
    if groups not in (None, ""):
        groups = int(groups)
        if groups % tp != 0 and tp % groups != 0:
            raise_printed(ValueError(
                f"num_query_groups ({groups}) must be a multiple or divisor of "
                f"tensor_model_parallel_size ({tp})."), rank, rank0_first=True)
    if os.environ.get("MBL_STANDIN_CUDA_GRAPH_CONFLICT") == "1":  # as if the recipe set both
        values.setdefault("model.cuda_graph_impl", "transformer_engine")
        values.setdefault("model.cpu_offloading", True)
    graphs = str(values.get("model.cuda_graph_impl") or "none")
    if graphs in ("local", "transformer_engine") and values.get("model.cpu_offloading") in (True, "true", "True"):
        raise_printed(ValueError("CUDA graphs not supported with CPU offloading."), rank, rank0_first=True)


def data_prefixes(value: Any) -> list[str]:
    """dataset.data_path: one prefix, a list of prefixes, or a blend [w1, p1, w2, p2, ...]."""
    if value in (None, ""):
        return []
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if not isinstance(v, (int, float))]


def check_dataset(values: dict[str, Any], rank: int, world_size: int) -> None:
    """Megatron's IndexedDataset opens PREFIX.idx and PREFIX.bin on every rank; rank 0 first
    (the others wait for it in a barrier: here a short delay, so rank 0's error comes first)."""
    prefixes = data_prefixes(values.get("dataset.data_path"))
    if not prefixes:
        return
    if rank != 0 and world_size > 1:
        time.sleep(1.0)
    for prefix in prefixes:
        idx, bin_ = Path(prefix + ".idx"), Path(prefix + ".bin")
        if not (idx.is_file() and bin_.is_file()):
            raise_printed(AssertionError(
                f"One or both of the .idx and .bin files cannot be found at the path prefix {prefix}"), rank)
        with open(idx, "rb") as fh:  # a real read: unreadable is an error too (PermissionError)
            fh.read(16)
        if rank == 0:
            print(f"Load the _IndexReader from {idx}", flush=True)


class PortHolder:
    """Rank 0's TCPStore server socket on MASTER_PORT, held for the life of the process."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None

    def bind(self, port: int, rank: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as c10d's TCPStore does
        try:
            sock.bind(("0.0.0.0", port))
            sock.listen(16)
            in_use = False
        except OSError as exc:
            sock.close()
            if exc.errno != 98:
                raise
            in_use = True
        if in_use:  # raised outside the except block: torch's error comes from C++, with no Python chain
            raise_printed(DistNetworkError(
                f"The server socket has failed to listen on any local network address. port: {port}, "
                f"useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"), rank)
        self.sock = sock


def bind_master_port(dist, holder: PortHolder) -> None:
    """Rank 0 of an srun-native job creates the TCPStore (torchrun runs its own)."""
    # only inside a real Slurm job (SLURM_JOB_ID set): tests that fake SLURM_PROCID alone share port 29500
    if (dist.source == "slurm" and dist.rank == 0 and os.environ.get("SLURM_JOB_ID")
            and os.environ.get("MBL_STANDIN_BIND_PORT", "1") != "0"):
        holder.bind(int(dist.master_port), dist.rank)


def check_shard(directory: Path, rank: int) -> None:
    """Read this rank's own shard of the checkpoint being resumed (torch_dist: __<rank>_0.distcp)."""
    import json

    shard = directory / f"__{rank}_0.distcp"
    if not shard.is_file():
        return  # a checkpoint written by fewer ranks: Megatron reshards; nothing to read here
    data = shard.read_bytes()
    try:
        json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        inner = (f"Traceback (most recent call last): (RANK {rank})\n"
                 f"  File \"/usr/local/lib/python3.12/dist-packages/torch/distributed/checkpoint/utils.py\","
                 f" line 193, in reduce_scatter\n    local_data = map_fun()\n"
                 f"RuntimeError: unexpected EOF, expected {max(1, 64 - len(data))} more bytes."
                 f" The file might be corrupted: {shard}")
        raise_printed(CheckpointException(f"CheckpointException ranks:dict_keys([{rank}])\n{inner}"), rank)


# ---------------------------------------------------------------------- the OOM and its cascade
def oom_exit(exc: BaseException, rank: int) -> None:
    """The OOM rank: its traceback (prefixed), then its exit path waits on its communicator while
    the other ranks time out (MBL_STANDIN_NCCL_TIMEOUT_S + 2 s), then exit 1."""
    print_exception(exc, rank)
    time.sleep(float(os.environ.get("MBL_STANDIN_NCCL_TIMEOUT_S") or 3) + 2)
    raise FailureExit(1)


def _glog_stamp() -> str:
    """c10d's log prefix time: E<MMDD> <HH:MM:SS.micro>."""
    now = datetime.now()
    return now.strftime("%m%d %H:%M:%S.%f")


def oom_or_blocked(iteration: int, rank: int, local_rank: int, world_size: int) -> None:
    """MBL_STANDIN_OOM_AT: the OOM rank raises torch's CUDA OOM; the others time out in NCCL."""
    at = os.environ.get("MBL_STANDIN_OOM_AT")
    if not at or int(at) != iteration or world_size < 1:
        return
    oom_rank = int(os.environ.get("MBL_STANDIN_OOM_RANK") or 0)
    timeout_s = float(os.environ.get("MBL_STANDIN_NCCL_TIMEOUT_S") or 3)
    if rank == oom_rank:  # raised through the training loop; main() prints it (oom_exit)
        raise OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {local_rank} has a total capacity of 79.11 GiB"
            f" of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.87 GiB memory in use."
            f" Of the allocated memory 75.12 GiB is allocated by PyTorch, and 1.05 GiB is reserved by PyTorch but"
            f" unallocated. If reserved but unallocated memory is large try setting"
            f" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for"
            f" Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    time.sleep(timeout_s)
    ms = int(timeout_s * 1000)
    seq = iteration * 4
    work = (f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)={ms})")
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    lines = [
        (f"[E{_glog_stamp()} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout:"
        f" {work} ran for {ms + 17} milliseconds before timing out."),
        (f"[E{_glog_stamp()} ProcessGroupNCCL.cpp:2271] {pg}  failure detected by watchdog at work sequence id: {seq}"
        f" PG status: last enqueued work: {seq}, last completed work: {seq - 1}"),
        (f"[E{_glog_stamp()} ProcessGroupNCCL.cpp:670] Stack trace of the failed collective not found, potentially"
        f" because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero"
        f" value."),
        (f"[E{_glog_stamp()} ProcessGroupNCCL.cpp:684] [Rank {rank}] Some NCCL operations have failed or timed out. Due"
        f" to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete"
        f" data."),
        (f"[E{_glog_stamp()} ProcessGroupNCCL.cpp:698] [Rank {rank}] To avoid data inconsistency, we are taking the"
        f" entire process down."),
        (f"[E{_glog_stamp()} ProcessGroupNCCL.cpp:1895] {pg} Process group watchdog thread terminated with exception:"
        f" [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ms + 17} milliseconds before"
        f" timing out."),
    ]
    sys.stderr.write("".join(f"[rank{rank}]:{line}\n" for line in lines))
    sys.stderr.write(
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        f"  what():  {pg} Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught"
        f" collective operation timeout: {work} ran for {ms + 17} milliseconds before timing out.\n"
        "Exception raised from checkTimeout at /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635"
        " (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3a2c46c446 in"
        " /usr/local/lib/python3.12/dist-packages/torch/lib/libc10.so)\n"
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l,"
        " 1000l> > >) + 0x282 (0x7f3a2d7c8772 in /usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cuda.so)\n")
    sys.stderr.flush()
    os.abort()
