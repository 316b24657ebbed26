"""The local test cluster as seen from pytest: start it once, share it, query it.

`ensure_running(dir)` starts tests/cluster/start-cluster.sh under a file lock unless a cluster
already runs there; `SlurmCluster` wraps sbatch/squeue/sacct with the cluster's SLURM_CONF.
Sessions hold a lease file (DIR/leases/<pid>) while they use the cluster; a cluster that a pytest
session started is stopped by the last session to leave, one that a developer started is left
running (MBL_KEEP_SLURM=1 keeps any).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

TESTS = Path(__file__).resolve().parent
CLUSTER_SCRIPTS = TESTS / "cluster"
FAKE_BIN = CLUSTER_SCRIPTS / "fake-bin"
STARTED_BY_PYTEST = "started-by-pytest"

ACTIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
                 "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                "BOOT_FAIL", "DEADLINE", "REVOKED"}
SACCT_FIELDS = ("JobID", "JobName", "Partition", "State", "ExitCode", "NNodes", "NTasks", "AllocTRES", "NodeList")


def default_dir() -> Path:
    return Path(os.environ.get("MBL_SLURM_DIR") or "/tmp/mbl-slurm")


class SlurmCommandError(RuntimeError):
    """A Slurm command exited non-zero; keeps what it printed."""

    def __init__(self, cmd: Sequence[str], returncode: int, stdout: str, stderr: str):
        self.cmd, self.returncode, self.stdout, self.stderr = list(cmd), returncode, stdout, stderr
        super().__init__(f"{' '.join(cmd)} exited {returncode}: {stderr.strip() or stdout.strip()}")


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    gpu_type: str
    gpus_per_node: int
    max_time: str
    default: bool
    features: str


class SlurmCluster:
    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.info = json.loads((self.dir / "cluster.json").read_text(encoding="utf-8"))
        self.slurm_conf = self.info["slurm_conf"]
        self.slurm_version = self.info["slurm_version"]
        self.fake_bin = FAKE_BIN
        self.env = dict(os.environ, SLURM_CONF=self.slurm_conf, MBL_SLURM_DIR=str(self.dir))
        self.partitions: dict[str, Partition] = {}
        for name, p in self.info["partitions"].items():
            group = p["groups"][0]  # one node group per partition in this harness
            self.partitions[name] = Partition(name=name, nodes=tuple(group["nodes"]), gpu_type=group["gpu_type"],
                                              gpus_per_node=int(group["gpus_per_node"]), max_time=p["max_time"],
                                              default=bool(p["default"]), features=group["features"])

    # ------------------------------------------------------------------ commands
    def run(self, args: Sequence[str], *, check: bool = True, timeout: float = 60, cwd: str | Path | None = None,
            input: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, input=input,
                              env={**self.env, **(env or {})})
        if check and proc.returncode != 0:
            raise SlurmCommandError(args, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def sbatch(self, *args: str, script: str | None = None, wrap: str | None = None, cwd: str | Path | None = None,
               env: dict[str, str] | None = None) -> str:
        """Submit; return the job id. `script` is the batch script text (given on stdin), `wrap`
        a command for --wrap. Raises SlurmCommandError (with sbatch's stderr) when refused."""
        cmd = ["sbatch", "--parsable", *args]
        if wrap is not None:
            cmd += ["--wrap", wrap]
        out = self.run(cmd, cwd=cwd, input=script, env=env).stdout.strip()
        return out.split(";")[0]

    def squeue_state(self, job_id: str) -> str | None:
        proc = self.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T"], check=False)
        lines = proc.stdout.split()
        return lines[0] if proc.returncode == 0 and lines else None

    def sacct(self, job_id: str, fields: Sequence[str] = SACCT_FIELDS, allocations: bool = False) -> list[dict[str, str]]:
        """One dict per sacct record (job, batch, extern and step lines unless allocations=True)."""
        cmd = ["sacct", "-n", "-P", "-j", str(job_id), "--format=" + ",".join(fields)]
        if allocations:
            cmd.append("-X")
        out = self.run(cmd).stdout
        return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line.strip()]

    def settled_sacct(self, job_id: str, fields: Sequence[str] = SACCT_FIELDS, timeout: float = 20) -> dict[str, str]:
        """The job's allocation record once every field has a value: slurmdbd can store a job
        that ended quickly from its completion message first and fill in the rest (its
        partition, once in CI) a moment later."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.sacct(job_id, fields=fields, allocations=True)
            if (rows and all(rows[0].values())) or time.monotonic() > deadline:
                return rows[0] if rows else {}
            time.sleep(0.5)

    def node_list(self, job_id: str) -> str:
        """The nodes the job ran on: slurmctld's NodeList while it still holds the job (MinJobAge =
        300 s here), else the settled accounting record. slurmdbd can first store a quickly ended
        job with its batch host alone and the whole list a moment later (seen in CI)."""
        shown = self.run(["scontrol", "show", "job", "-o", str(job_id)], check=False).stdout
        found = next((t.split("=", 1)[1] for t in shown.split() if t.startswith("NodeList=")), "")
        if found and found != "(null)":
            return found
        return self.settled_sacct(job_id, fields=("JobID", "NodeList")).get("NodeList", "")

    def state(self, job_id: str) -> str | None:
        """The job's state in sacct ('CANCELLED by 0' -> 'CANCELLED'), or None if not recorded yet."""
        rows = self.sacct(job_id, fields=("JobID", "State"), allocations=True)
        return rows[0]["State"].split()[0] if rows else None

    def scontrol_job(self, job_id: str) -> dict[str, str]:
        out = self.run(["scontrol", "show", "job", "-o", str(job_id)]).stdout
        info: dict[str, str] = {}
        for tok in out.split():
            if "=" in tok:
                k, v = tok.split("=", 1)
                info.setdefault(k, v)
        return info

    def partition(self, job_id: str) -> str:
        """The partition the job ran in (slurmctld's word while it still holds the job, which
        it does for MinJobAge = 300 s here, else the settled accounting record)."""
        shown = self.run(["scontrol", "show", "job", "-o", str(job_id)], check=False).stdout
        found = next((t.split("=", 1)[1] for t in shown.split() if t.startswith("Partition=")), "")
        return found or self.settled_sacct(job_id, fields=("JobID", "Partition")).get("Partition", "")

    def cancel(self, job_id: str) -> None:
        self.run(["scancel", str(job_id)], check=False)

    # ------------------------------------------------------------------ waiting
    def wait(self, job_id: str, timeout: float = 120, poll: float = 0.25) -> str:
        """Poll until the job has left the queue AND sacct shows a final state (sacct can lag
        ~2 s behind); return that state (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...)."""
        deadline = time.monotonic() + timeout
        q = s = None
        while time.monotonic() < deadline:
            q = self.squeue_state(job_id)
            if q is None or q not in ACTIVE_STATES:
                s = self.state(job_id)
                if s in FINAL_STATES:
                    return s
            time.sleep(poll)
        raise TimeoutError(f"job {job_id} not finished after {timeout}s (squeue: {q}, sacct: {s})")

    def wait_state(self, job_id: str, wanted: str = "RUNNING", timeout: float = 60, poll: float = 0.1) -> None:
        deadline = time.monotonic() + timeout
        q = None
        while time.monotonic() < deadline:
            q = self.squeue_state(job_id)
            if q == wanted:
                return
            if q in FINAL_STATES:
                raise RuntimeError(f"job {job_id} ended ({q}) while waiting for {wanted}")
            time.sleep(poll)
        raise TimeoutError(f"job {job_id} not {wanted} after {timeout}s (squeue: {q})")


# ---------------------------------------------------------------------- lifecycle
def _pid_alive(pid: int) -> bool:
    try:
        st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return st not in ("Z", "X")


def is_running(directory: Path) -> bool:
    pidfile = directory / "run" / "slurmctld.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return False
    if not (_pid_alive(pid) and (directory / "cluster.json").is_file() and (directory / "env.sh").is_file()):
        return False
    conf = directory / "etc" / "slurm.conf"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20,
                              env=dict(os.environ, SLURM_CONF=str(conf)))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ping.returncode == 0 and "UP" in ping.stdout


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    lockfile = Path(f"{directory}.lock")
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class StartFailed(RuntimeError):
    pass


def _live_leases(directory: Path) -> list[int]:
    pids = []
    for f in (directory / "leases").glob("*"):
        try:
            pid = int(f.name)
        except ValueError:
            continue
        if _pid_alive(pid):
            pids.append(pid)
        else:
            f.unlink(missing_ok=True)
    return pids


def acquire(directory: Path, timeout: float = 900) -> tuple[SlurmCluster, bool]:
    """Start the cluster in `directory` unless it runs; take a lease. Returns (cluster, started).
    Raises StartFailed with the tail of the start log."""
    with _locked(directory):
        started = False
        if not is_running(directory):
            directory.mkdir(parents=True, exist_ok=True)
            log = directory / "start.log"
            t0 = time.monotonic()
            with open(log, "w") as fh:
                try:
                    rc = subprocess.run([str(CLUSTER_SCRIPTS / "start-cluster.sh"), str(directory)], stdout=fh,
                                        stderr=subprocess.STDOUT, timeout=timeout,
                                        env=dict(os.environ, RESTART_STALE="1")).returncode
                except (OSError, subprocess.TimeoutExpired) as exc:
                    rc = f"not run: {exc}"
            if rc != 0 or not is_running(directory):
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                raise StartFailed(f"the local Slurm cluster did not start in {directory} (start-cluster.sh: {rc});"
                                  f" last lines of {log}:\n{tail}")
            (directory / STARTED_BY_PYTEST).write_text(f"{os.getpid()} {time.monotonic() - t0:.1f}s\n")
            started = True
        (directory / "leases").mkdir(exist_ok=True)
        (directory / "leases" / str(os.getpid())).write_text("")
        return SlurmCluster(directory), started


def release(directory: Path) -> str:
    """Drop this process's lease; stop the cluster if a pytest session started it and no other
    live session holds a lease. Returns what happened (for the terminal summary)."""
    with _locked(directory):
        (directory / "leases" / str(os.getpid())).unlink(missing_ok=True)
        if os.environ.get("MBL_KEEP_SLURM") == "1":
            return "kept (MBL_KEEP_SLURM=1)"
        if not (directory / STARTED_BY_PYTEST).exists():
            return "left running (not started by a test session)"
        others = _live_leases(directory)
        if others:
            return f"left running for sessions {others}"
        proc = subprocess.run([str(CLUSTER_SCRIPTS / "stop-cluster.sh"), str(directory)], capture_output=True,
                              text=True, timeout=180)
        (directory / STARTED_BY_PYTEST).unlink(missing_ok=True)
        return "stopped" if proc.returncode == 0 else f"stop-cluster.sh exited {proc.returncode}: {proc.stderr[-500:]}"
