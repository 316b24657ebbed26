"""The distributed environment a rank sees, derived the way Megatron Bridge does.

torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) win when RANK
and WORLD_SIZE are set; otherwise, under srun, RANK/WORLD_SIZE/LOCAL_RANK come from
SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, MASTER_ADDR is the first host of SLURM_NODELIST
(SLURM_JOB_NODELIST as fallback) and MASTER_PORT is 15000 + the last four digits of
SLURM_JOB_ID (the Lightning/NeMo convention) unless MASTER_PORT is set. Without either, one rank.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import asdict, dataclass
from typing import Mapping


@dataclass
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    source: str  # "torchrun", "slurm" or "single"
    nodelist: str | None = None
    hosts: list[str] | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def expand_hostlist(text: str) -> list[str]:
    """Expand Slurm's compressed host list: 'h100-[1-2],gb200-[01,03-04],login' -> names.

    Handles one bracket group per host entry (what Slurm prints for these clusters); zero
    padding of ranges is kept. `scontrol show hostnames` gives the same answer.
    """
    hosts: list[str] = []
    for entry in _split_top_level(text):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\]([^\[\]]*)", entry)
        if not m:
            if entry:
                hosts.append(entry)
            continue
        prefix, body, suffix = m.groups()
        for part in body.split(","):
            if "-" in part:
                lo, hi = part.split("-", 1)
                width = len(lo)
                for i in range(int(lo), int(hi) + 1):
                    hosts.append(f"{prefix}{i:0{width}d}{suffix}")
            else:
                hosts.append(f"{prefix}{part}{suffix}")
    return hosts


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def slurm_master_port(job_id: str | None) -> int:
    digits = re.sub(r"\D", "", job_id or "")
    return 15000 + int(digits[-4:]) if digits else 29500


def derive(env: Mapping[str, str] | None = None) -> DistEnv:
    env = os.environ if env is None else env
    if env.get("RANK") is not None and env.get("WORLD_SIZE") is not None:
        return DistEnv(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            master_addr=env.get("MASTER_ADDR", "localhost"),
            master_port=int(env.get("MASTER_PORT", "29500")),
            source="torchrun",
        )
    if env.get("SLURM_PROCID") is not None:
        nodelist = env.get("SLURM_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        hosts = expand_hostlist(nodelist)
        port = env.get("MASTER_PORT")
        return DistEnv(
            rank=int(env["SLURM_PROCID"]),
            world_size=int(env.get("SLURM_NTASKS", "1")),
            local_rank=int(env.get("SLURM_LOCALID", "0")),
            master_addr=hosts[0] if hosts else "localhost",
            master_port=int(port) if port else slurm_master_port(env.get("SLURM_JOB_ID")),
            source="slurm",
            nodelist=nodelist,
            hosts=hosts,
        )
    return DistEnv(rank=0, world_size=1, local_rank=0, master_addr="localhost", master_port=29500, source="single")


def resolve(host: str) -> str | None:
    """The address MASTER_ADDR resolves to on this node, or None (for the rank report)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return None
