"""The one table of failure messages: regex -> cause, whether it is a root cause or a symptom.

Every regex is written from the message its producer really prints (PyTorch, NCCL, Megatron-LM,
Transformer Engine, Slurm, the NVIDIA driver); the fixtures in tests/fixtures/diagnose hold each
in the forms users report. Tiers: a ROOT cause is what broke; a SOFT root (a loss spike the run
survived) loses to any hard root; an EXCEPTION that matches nothing is an `unknown` root that
still beats every SYMPTOM (an NCCL timeout, a SIGTERM, a task that exited because another died);
an ERROR_LINE (any line saying "error") is only ever the `first_error` of an otherwise clean log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROOT, SOFT, EXCEPTION, SYMPTOM, ERROR_LINE = 4, 3, 2, 1, 0


@dataclass(frozen=True)
class Pattern:
    cause: str
    regex: re.Pattern[str]
    tier: int = ROOT


def _p(cause: str, regex: str, tier: int = ROOT, flags: int = 0) -> Pattern:
    return Pattern(cause, re.compile(regex, flags), tier)


_I = re.IGNORECASE

# Order matters only inside one line: the first pattern that matches names the line's cause (so
# the specific checkpoint and CUDA-graph messages come before the generic file and assertion ones).
PATTERNS: tuple[Pattern, ...] = (
    # --- GPU memory. torch >= 2.3: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
    # 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which ...`; older torch.cuda.OutOfMemoryError
    # / RuntimeError; a kernel launch that cannot allocate: `CUDA error: out of memory`.
    _p("gpu_oom", r"OutOfMemoryError: CUDA out of memory|CUDA out of memory\. Tried to allocate"
                  r"|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
                  r"|NCCL WARN Cuda failure 'out of memory'"),
    # --- host memory: slurmstepd (Slurm >= 21.08 says oom_kill, older oom-kill), srun's line naming
    # the node and task (`srun: error: node002: task 11: Out Of Memory`), the kernel, torch
    _p("host_oom", r"Detected \d+ oom[-_]kill event|oom[-_]kill event\(s\)|Out of memory: Kill(?:ed)? process"
                   r"|^srun: error: [^\s:]+: tasks? [\d,\-]+: Out Of Memory"
                   r"|invoked oom-killer|DataLoader worker \(pid \d+\) is killed by signal: Killed"
                   r"|^(?:\w+\.)*MemoryError\b"),
    # --- GPU hardware: driver Xid lines are handled in classify (the Xid number decides), the CUDA
    # runtime's own words for a broken device are here.
    _p("gpu_hardware", r"uncorrectable ECC error|DBE \(double bit error\)|ECC errors? (?:detected|encountered)"
                       r"|cudaErrorECCUncorrectable|GPU has fallen off the bus|NVLink: fatal error"
                       r"|CUDA error: an uncorrectable NVLink error|cudaErrorNvlinkUncorrectable"
                       r"|GPU is lost|Unable to determine the device handle for GPU"),
    # --- network: NCCL's IB transport (`NET/IB : Got completion from peer 10.0.0.2<38421> with error
    # 12, opcode 0, len 0, vendor err 129` / newer `with status=12 opcode=...`), async port events,
    # verbs errors, mlx5 link state.
    _p("network", r"NET/IB ?: ?Got completion from peer|NET/IB ?: ?Got async event|transport retry counter exceeded"
                  r"|IBV_WC_RETRY_EXC_ERR|ibv_poll_cq failed|ibv_modify_qp failed|NET/IB.*(?:port error|link down)"
                  r"|mlx5_core.*(?:link down|Link Down|module .*unplugged)"),
    # --- Slurm cancellations (the `*** JOB 123 ON h100-1 CANCELLED AT ... DUE TO TIME LIMIT ***` line)
    _p("time_limit", r"CANCELLED AT \S+ DUE TO TIME LIMIT|DUE TO TIME LIMIT"),
    # `scontrol requeue` / a preemption with requeue: "*** JOB N ON h100-2 CANCELLED AT ... DUE TO JOB REQUEUE ***"
    _p("preempted", r"CANCELLED AT \S+ DUE TO PREEMPTION|DUE TO PREEMPTION|DUE TO JOB REQUEUE"),
    _p("node_failure", r"DUE TO NODE FAILURE|srun: error: Node failure on|Node failure on \S+"),
    # --- checkpoints (before the generic file patterns: a missing .metadata is a broken checkpoint)
    _p("checkpoint_corrupt", r"CheckpointingException|CheckpointException|PytorchStreamReader failed"
                             r"|is not a distributed checkpoint|Common file .* does not exist"
                             r"|No such file or directory: \S*(?:\.metadata|common\.pt|metadata\.json|\.distcp)\b"
                             r"|UnpicklingError|unexpected EOF|EOFError: Ran out of input"
                             r"|failed finding central directory|invalid header or archive is corrupted"),
    # --- CUDA graphs with a feature that forbids them (Megatron-LM transformer_config/arguments, TE)
    _p("cuda_graph_conflict", r"cuda[ _-]?graphs?\b.*(?:not supported|cannot be|only supported|incompatible|must be)"
                              r"|(?:not supported|incompatible|only supported) with .{0,40}cuda[ _-]?graphs?"
                              r"|Cannot recapture CUDA graphs|operation not permitted when stream is capturing"
                              r"|cudaErrorStreamCapture\w*", flags=_I),
    # --- KV heads vs TP: Megatron Core's TransformerConfig (`num_query_groups (8) must be a multiple
    # or divisor of tensor_model_parallel_size (16).`), older Megatron, Transformer Engine
    _p("tp_kv_mismatch", r"num_query_groups \(\d+\) must be (?:a multiple or divisor of|divisible by) tensor"
                         r"|num_query_groups.*(?:divisible|multiple).*tensor[_ ]model[_ ]parallel"
                         r"|number of GQA groups must be divisible by tensor parallel"
                         r"|num_gqa_groups.*divisible|num_key_value_heads.*divisible.*tensor", flags=_I),
    # --- the rendezvous port (torch c10d TCPStore)
    _p("port_in_use", r"EADDRINUSE|Address already in use|server socket has failed to listen on any local network"
                      r"|errno: 98\b"),
    # --- imports: a container whose packages do not match the code
    _p("import_error", r"^(?:\w+\.)*(?:ImportError|ModuleNotFoundError): |undefined symbol: "
                       r"|cannot import name .* from"),
    # --- NaN: Megatron's checks (`found NaN in local grad norm for bucket #0 ...`, the rerun state
    # machine's `Unexpected result nan`), Megatron Bridge / NeMo wording
    _p("nan_loss", r"found (?:NaN|Inf) in local (?:grad norm|forward loss)|Unexpected result (?:nan|inf)\b"
                   r"|Rerun state machine.*(?:NaN|nan)|loss is (?:NaN|nan)\b|NaN (?:or Inf )?(?:found|detected) in"
                   r"|The loss (?:is|became) NaN", flags=_I),
    # --- data files: numpy.memmap / open() of the .bin/.idx, JSONL for fine-tuning, packed .npy
    _p("dataset_missing", r"(?:FileNotFoundError|No such file or directory|does not exist|PermissionError"
                          r"|Permission denied|IsADirectoryError).*\.(?:bin|idx|jsonl|npy|parquet|arrow)\b"
                          r"|\.(?:bin|idx|jsonl|npy|parquet|arrow)\b\S* (?:does not exist|not found|is missing)"
                          r"|(?:Could not find|missing) (?:the )?(?:data|dataset) (?:path|file|prefix)"
                          # Megatron Core's IndexedDataset (megatron/core/datasets/indexed_dataset.py)
                          r"|One or both of the \.idx and \.bin files cannot be found", flags=_I),
    # --- symptoms: what the other ranks print after one of them died
    _p("nccl_timeout", r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out"
                       r"|Timeout at NCCL work|NCCL communicator was aborted|Some NCCL operations have failed or timed out"
                       r"|ProcessGroupNCCL's watchdog got stuck|Heartbeat monitor timed out|ncclRemoteError"
                       r"|remote process exited or there was a network error|NCCL error in:.*unhandled system error"
                       r"|ncclSystemError|Connection closed by remote peer|DistNetworkError|DistBackendError"
                       r"|Connection reset by peer|Broken pipe", tier=SYMPTOM),
    _p("cascade", r"SignalException: Process \d+ got signal|Received \d+ death signal|got signal: (?:15|2)\b"
                  r"|KeyboardInterrupt|Exited with exit code|CANCELLED AT|Terminated$|^SystemExit\b"
                  r"|ChildFailedError", tier=SYMPTOM),
)

# NVIDIA Xid codes that mean the GPU or its memory failed (the driver's XID catalog): 48 double-bit
# ECC, 63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC rate, 94/95
# contained/uncontained ECC, 119/120 GSP, 123 SPI, 140 unrecovered ECC. 13, 31, 43 and 45 are
# application faults (an illegal address, a killed context): not the hardware's.
XID = re.compile(r"NVRM: Xid \((?:PCI:)?[0-9a-fA-F:.]+\): (\d+)")
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 123, 140})

# The exception line that ends a Python traceback: `torch.OutOfMemoryError: ...`, `AssertionError`.
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning)?(?::\s.*|:?$)")
GENERIC_ERROR = re.compile(r"\b(?:Error|ERROR|error|FATAL|Fatal|fatal|Exception)\b")

# A path where files live on one node only: data or NEMO_HOME here is seen by that node alone.
NODE_LOCAL = re.compile(r"['\"]?((?:/tmp|/local|/scratch[-_]?local|/dev/shm|/var/tmp|/raid|/localscratch|/lscratch"
                        r"|/mnt/local|/nvme)(?:/[^'\"\s]*)?)")
MISSING_FILE = re.compile(r"(?:FileNotFoundError|No such file or directory|does not exist|cannot be found at the path prefix)"
                          r"\b.*?['\"]?(/[^'\"\s]+)")
MEGATRON_RERUN_EXITS = {16: "nan_loss", 17: "nan_loss"}  # megatron/core/rerun_state_machine.py

# What the fast scan looks for, in the lowercased bytes of a block: a line without any of these
# is never parsed. A superset of every pattern above (each pattern's own keywords), plus the
# lines that open a traceback or torchrun's summary. `bytes.find` on a few literals runs at
# memory speed, where one regex alternation of them would run at a few MB/s.
ANCHORS: tuple[bytes, ...] = (
    b"traceback", b"error", b"exception", b"failures:", b"root cause", b"cancelled", b"due to", b"out of memory",
    b"oom", b"xid", b"ecc error", b"uncorrectable", b"double bit", b"fallen off", b"net/ib", b"roce", b"mlx5", b"address already", b"eaddrinuse",
    b"failed to listen", b"nan", b"unexpected result", b"iteration", b"watchdog", b"timeout", b"timed out",
    b"timing out", b"killed", b"node failure", b"undefined symbol", b"cannot import", b"no module", b"graph",
    b"stream is capturing", b"streamcapture", b"signal", b"exitcode", b"exited", b"terminated", b"broken pipe",
    b"reset by peer", b"closed by remote", b"nvlink", b"gpu is lost", b"no such file",
    b"does not exist", b"permission denied", b"ran out of input", b"unexpected eof", b"central directory",
    b"num_query_groups", b"gqa", b"divisible", b"interrupt", b"fatal", b"systemexit", b"errno",
    b"device handle", b"cublas_status", b"cudaerror",
)
# Lines dropped before they are even decoded (the commonest noise, checked on raw bytes).
FAST_NOISE: tuple[bytes, ...] = (b"NCCL INFO", b"frame #", b"Exception raised from ", b"Warning: ",
                                 b"closing signal SIGTERM")


def match_line(text: str) -> Pattern | None:
    """The first pattern of the table that matches `text`, or None."""
    for pattern in PATTERNS:
        if pattern.regex.search(text):
            return pattern
    return None


def hot_line_starts(low: bytes) -> list[int]:
    """The start offsets of the lines of `low` (a lowercased block of whole lines) that contain
    an anchor, in order."""
    starts: set[int] = set()
    find, rfind = low.find, low.rfind
    for anchor in ANCHORS:
        at = find(anchor)
        while at >= 0:
            starts.add(rfind(b"\n", 0, at) + 1)
            end = find(b"\n", at)
            if end < 0:
                break
            at = find(anchor, end)
    return sorted(starts)
