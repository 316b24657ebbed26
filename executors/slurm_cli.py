"""Running sbatch / squeue / sacct / scancel with typed failures.

A refused submission becomes a SubmissionError (exit code 4) whose message is ONE line, Slurm's own
reason ("Requested node configuration is not available"), while the raw stderr is kept on the
exception for the ledger and for -v output.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Optional, Sequence

from mbridge_launch.base.errors import SubmissionError, UserError

DEFAULT_TIMEOUT_S = 60
_JOB_ID = re.compile(r"^(\d+)(?:;\S+)?$")  # sbatch --parsable prints "ID" or "ID;CLUSTER"
_SUBMITTED = re.compile(r"Submitted batch job (\d+)")


def run_slurm(
    argv: Sequence[str],
    *,
    cwd: Optional[Path] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> subprocess.CompletedProcess:
    """Run a Slurm client command (never through a shell); missing or hanging commands become
    one-line UserErrors."""
    try:
        return subprocess.run(
            list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise UserError("executors.slurm_missing", command=argv[0]) from None
    except subprocess.TimeoutExpired:
        raise UserError("executors.slurm_timeout", command=" ".join(argv[:2]), seconds=int(timeout)) from None


def slurm_reason(output: str) -> str:
    """The one line worth showing from Slurm's error output: the last 'error:' line without its
    'sbatch: error:' prefix (Slurm often prints a generic line first and the reason last)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    chosen = errors[-1] if errors else (lines[-1] if lines else "no output")
    chosen = re.sub(r"^(?:\w+:\s*)?error:\s*", "", chosen)
    return chosen.replace("Batch job submission failed: ", "")


def submission_error(output: str) -> SubmissionError:
    return SubmissionError("executors.submit_refused", raw_output=output, reason=slurm_reason(output))


def parse_job_id(stdout: str, executor: str = "sbatch") -> str:
    for line in stdout.splitlines():
        line = line.strip()
        match = _JOB_ID.match(line) or _SUBMITTED.search(line)
        if match:
            return match.group(1)
    raise SubmissionError("executors.submit_no_job_id", raw_output=stdout, executor=executor, output=stdout.strip()[:200])


def sbatch(script: Path, *, cwd: Path, extra_args: Sequence[str] = ()) -> tuple[str, str]:
    """Submit a script; returns (job id, raw output)."""
    proc = run_slurm(["sbatch", "--parsable", *extra_args, str(script)], cwd=cwd)
    raw = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        raise submission_error(raw)
    return parse_job_id(proc.stdout), raw


def job_states(job_ids: Sequence[str]) -> dict[str, str]:
    """State of each job (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...): sacct first (it
    knows finished jobs), squeue where accounting is off, UNKNOWN where neither knows the job."""
    ids = [str(j) for j in job_ids]
    if not ids:
        return {}
    states: dict[str, str] = {}
    proc = run_slurm(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(ids)])
    if proc.returncode == 0:
        for line in proc.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) >= 2 and parts[0] in ids:
                states[parts[0]] = parts[1].split()[0]  # "CANCELLED by 0" -> CANCELLED
    missing = [j for j in ids if j not in states]
    if missing:
        proc = run_slurm(["squeue", "-h", "-t", "all", "-o", "%i|%T", "-j", ",".join(missing)])
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 2 and parts[0] in missing:
                    states[parts[0]] = parts[1]
    return {j: states.get(j, "UNKNOWN") for j in ids}


def scancel(job_ids: Sequence[str]) -> None:
    ids = [str(j) for j in job_ids]
    if not ids:
        return
    proc = run_slurm(["scancel", *ids])
    if proc.returncode != 0:
        raise UserError("executors.command_failed", command="scancel", reason=slurm_reason(proc.stderr or proc.stdout))
