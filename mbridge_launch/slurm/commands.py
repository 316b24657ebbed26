"""The one Slurm command layer: every sbatch / squeue / sacct / scancel / scontrol / sinfo /
sacctmgr / srun call of the package (executors, preflight, the ledger's reconcile, the CLI) goes
through `call()`.

`call()` runs a command (never through a shell) and returns a typed `SlurmResult` that keeps the
raw stdout and stderr whole, or raises `SlurmCommandError` (a `SlurmUnavailable`) when the command
gives no answer at all: not installed, could not start, or hung. Each caller decides what a
non-zero exit means for it: the executors turn a refused submission into a SubmissionError
(exit code 4) whose message is ONE line, Slurm's own reason ("Requested node configuration is not
available"), with the raw output kept on the exception for the ledger and for -v output;
preflight turns it into a finding, reconcile into "cannot tell".
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from mbridge_launch.base.errors import SubmissionError, UserError

DEFAULT_TIMEOUT_S = 60
# Field separator of parsable squeue/sacct output: the ASCII unit separator cannot occur in a job
# name typed on a command line, unlike '|' (a job named "a|b" shifted every field after it).
FIELD_SEP = "\x1f"
_JOB_ID = re.compile(r"^(\d+)(?:;\S+)?$")  # sbatch --parsable prints "ID" or "ID;CLUSTER"
_SUBMITTED = re.compile(r"Submitted batch job (\d+)")


class SlurmUnavailable(Exception):
    """Slurm could not be asked (commands missing, hanging, controller or accounting down):
    nothing may be concluded from the silence, in particular not that a job does not exist."""


class SlurmCommandError(SlurmUnavailable):
    """A Slurm command gave no answer. `kind`: missing (not on PATH), failed (could not start:
    `reason`), timeout (no answer within `seconds`)."""

    def __init__(self, kind: str, argv: Sequence[str], *, seconds: float = 0.0, reason: str = "") -> None:
        self.kind, self.argv, self.seconds, self.reason = kind, tuple(argv), seconds, reason
        super().__init__(f"{self.command}: {kind}" + (f" ({reason})" if reason else ""))

    @property
    def command(self) -> str:
        return self.argv[0] if self.argv else "?"

    def user_error(self) -> UserError:
        """The one-line error the executors and the CLI show."""
        if self.kind == "missing":
            return UserError("executors.slurm_missing", command=self.command)
        if self.kind == "timeout":
            return UserError("executors.slurm_timeout", command=" ".join(self.argv[:2]), seconds=int(self.seconds))
        return UserError("executors.command_failed", command=self.command, reason=self.reason)


@dataclass(frozen=True)
class SlurmResult:
    """A Slurm command's answer: its exit status and its raw output, kept whole."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        """stdout then stderr, as the ledger records a submission's answer."""
        return self.stdout + self.stderr

    @property
    def reason(self) -> str:
        """The one line worth showing from a failure (see slurm_reason)."""
        return slurm_reason(self.stderr or self.stdout)


def call(
    argv: Sequence[str],
    *,
    cwd: Optional[Path] = None,
    env: Optional[Mapping[str, str]] = None,
    stdin: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> SlurmResult:
    """Run a Slurm client command (never through a shell) and return its answer, whatever its exit
    status; SlurmCommandError when there is none. `env`: the whole environment (default: ours)."""
    argv = [str(a) for a in argv]
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=None if env is None else dict(env), input=stdin, capture_output=True,
            text=True, errors="replace", timeout=timeout, check=False,
        )
    except FileNotFoundError:
        raise SlurmCommandError("missing", argv) from None
    except subprocess.TimeoutExpired:
        raise SlurmCommandError("timeout", argv, seconds=timeout) from None
    except OSError as exc:  # not executable, too many processes, ...
        raise SlurmCommandError("failed", argv, reason=exc.strerror or str(exc)) from None
    return SlurmResult(tuple(argv), proc.returncode, proc.stdout or "", proc.stderr or "")


def run_slurm(
    argv: Sequence[str],
    *,
    cwd: Optional[Path] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> SlurmResult:
    """`call()` for the executors and the CLI: a command that gives no answer is a one-line
    UserError."""
    try:
        return call(argv, cwd=cwd, timeout=timeout)
    except SlurmCommandError as exc:
        raise exc.user_error() from None


def slurm_reason(output: str) -> str:
    """The one line worth showing from Slurm's error output: the last 'error:' line without its
    'sbatch: error:' prefix (Slurm often prints a generic line first and the reason last)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    chosen = errors[-1] if errors else (lines[-1] if lines else "no output")
    chosen = re.sub(r"^(?:\w+:\s*)?error:\s*", "", chosen)
    chosen = re.sub(r"^allocation failure:\s*", "", chosen)  # how sbatch --test-only says it
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
    if not proc.ok:
        raise submission_error(proc.output)
    return parse_job_id(proc.stdout), proc.output


def job_states(job_ids: Sequence[str]) -> dict[str, str]:
    """State of each job (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...): sacct first (it
    knows finished jobs), squeue where accounting is off, UNKNOWN where neither knows the job."""
    ids = [str(j) for j in job_ids]
    if not ids:
        return {}
    states: dict[str, str] = {}
    proc = run_slurm(["sacct", "-X", "-n", "-P", f"--delimiter={FIELD_SEP}", "-o", "JobIDRaw,State",
                      "-j", ",".join(ids)])
    if proc.ok:
        states.update(_id_state_rows(proc.stdout, ids))
    missing = [j for j in ids if j not in states]
    if missing:
        proc = run_slurm(["squeue", "-h", "-t", "all", "-o", f"%i{FIELD_SEP}%T", "-j", ",".join(missing)])
        if proc.ok:
            states.update(_id_state_rows(proc.stdout, missing))
    return {j: states.get(j, "UNKNOWN") for j in ids}


def _id_state_rows(text: str, wanted: Sequence[str]) -> dict[str, str]:
    """{job id: state word} from "ID<FIELD_SEP>STATE" lines ("CANCELLED by 0" -> CANCELLED)."""
    out: dict[str, str] = {}
    for line in text.splitlines()[:100_000]:  # bounded: the ids asked for, never a whole history
        parts = line.strip().split(FIELD_SEP)
        if len(parts) >= 2 and parts[0] in wanted and parts[1].strip():
            out[parts[0]] = parts[1].split()[0]
    return out


def scancel(job_ids: Sequence[str]) -> None:
    ids = [str(j) for j in job_ids]
    if not ids:
        return
    proc = run_slurm(["scancel", *ids])
    if not proc.ok:
        raise UserError("executors.command_failed", command="scancel", reason=proc.reason)
