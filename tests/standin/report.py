"""Per-rank JSON records, so tests can check what each rank received.

Directory: $MBL_STANDIN_REPORT_DIR, else <checkpoint.save>/../standin-report, else
<cwd>/standin-report. Each rank writes rank-<RANK>.json (atomically; rewritten at the end with
the outcome); rank 0 appends one line per run attempt to attempts.jsonl.

A record holds argv exactly as received, every SLURM_* variable, the derived distributed values,
hostname, and the values of CUDA_VISIBLE_DEVICES, FAKE_PYXIS_*, NCCL_*, TORCH_*, NVTE_*,
PYTORCH_*, CUDA_DEVICE_MAX_CONNECTIONS, HF_HOME, NEMO_HOME, MASTER_*, RANK-style variables,
plus the variables named in $MBL_STANDIN_ECHO_ENV (comma-separated; for tests of hostile values).
Other variables appear by NAME only (env_names), so forwarded secrets are visible without values.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Mapping

from .checkpoint import write_atomic

_PREFIXES = ("SLURM_", "SLURMD_", "FAKE_PYXIS_", "NCCL_", "TORCH_", "NVTE_", "PYTORCH_", "MBL_STANDIN_")
_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS", "HF_HOME", "NEMO_HOME", "MASTER_ADDR",
          "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "HOSTNAME")


def report_dir(save: str | None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("MBL_STANDIN_REPORT_DIR"):
        return Path(env["MBL_STANDIN_REPORT_DIR"])
    if save:
        return Path(save).resolve().parent / "standin-report"
    return Path.cwd() / "standin-report"


def selected_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    echo = {n.strip() for n in env.get("MBL_STANDIN_ECHO_ENV", "").split(",") if n.strip()}
    return {k: v for k, v in sorted(env.items()) if k.startswith(_PREFIXES) or k in _NAMES or k in echo}


class RankReport:
    def __init__(self, directory: Path, rank: int, record: dict[str, Any]):
        self.directory = directory
        self.rank = rank
        self.record = record

    @classmethod
    def start(cls, directory: Path, rank: int, argv: list[str], dist: dict[str, Any], extra: dict[str, Any]) -> "RankReport":
        record = {
            "argv": list(argv),
            "rank": rank,
            "dist": dist,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "started_at": time.time(),
            "env": selected_env(),
            "env_names": sorted(os.environ),
            "status": "running",
            **extra,
        }
        rep = cls(directory, rank, record)
        rep.write()
        return rep

    def write(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.directory / f"rank-{self.rank}.json", json.dumps(self.record, indent=1, sort_keys=True) + "\n")

    def finish(self, **outcome: Any) -> None:
        self.record.update(outcome)
        self.record["finished_at"] = time.time()
        self.write()
        if self.rank == 0:
            line = {k: self.record.get(k) for k in ("status", "start_iteration", "end_iteration", "resumed_from",
                                                   "resume_source", "exit_code")}
            line["job_id"] = os.environ.get("SLURM_JOB_ID")
            line["restart_count"] = os.environ.get("SLURM_RESTART_COUNT")
            with open(self.directory / "attempts.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
