"""The one Slurm command layer: every sbatch / squeue / sacct / scancel / scontrol / sinfo /
sacctmgr / srun call of the package (executors, preflight, the ledger's reconcile, the CLI) goes
through `call()`.

`call()` runs a command (never through a shell) and returns a typed `SlurmResult` that keeps the
raw stdout and stderr whole, or raises `SlurmCommandError` (a `SlurmUnavailable`) when the command
gives no answer at all: not installed, could not start, hung, or interrupted. Each caller decides
what a non-zero exit means for it: the executors turn a failed submission into a SubmissionError
(exit code 4) whose message is ONE line, Slurm's own reason ("Requested node configuration is not
available"), with the raw output kept on the exception for the ledger and for -v output, and
classified (submission_error): a definite refusal by the controller, or an indefinite answer (a
timeout, a lost connection, an interrupt) after which the job may exist; preflight turns a failure
into a finding, reconcile into "cannot tell".
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from mbridge_launch.base.errors import SubmissionError, UserError
from mbridge_launch.base.signals import interrupt_pending

DEFAULT_TIMEOUT_S = 60
# sbatch waits for the controller itself (MessageTimeout, 10 s by default, then retries): a
# submission gets longer than a query, and is bounded all the same
SUBMIT_TIMEOUT_S = 60
POLL_S = 0.1
INTERRUPT_GRACE_S = 2.0
# The controller refused: Slurm's own reason, the job does not exist (executors.submit_refused).
REFUSED = "executors.submit_refused"
# No definite answer: the job may or may not exist, reconciliation looks for it by its token.
INDEFINITE = "executors.submit_indefinite"
# What sbatch says when it could not get the controller's answer (Slurm's slurm_strerror texts
# of the communication errors, and its own retry lines): the request may have been received and
# the job queued; only a later lookup by token can tell.
NO_ANSWER = (
    "socket timed out",
    "unable to contact slurm controller",
    "connection refused",
    "zero bytes were transmitted or received",
    "transport endpoint is not connected",
    "communication connection failure",
    "communication send failure",
    "communication receive failure",
    "communication shutdown failure",
    "connection reset by peer",
    "connection timed out",
    "broken pipe",
    "no route to host",
    "network is unreachable",
    "slurm backup controller in standby mode",
    "slurmctld is not responding",
    "unable to establish controller machine",
    "slurm temporarily unable to accept job",
    "resource temporarily unavailable",
    "insane message length",
)
# What sbatch says when it never reached a controller: no configuration naming one (no slurm.conf,
# no DNS SRV record), or no connection to it. Said as "cannot reach the Slurm controller", not as a
# refusal (no controller refused anything) nor as a silence; whether a job may exist is still
# decided by indefinite_answer above, only the words change.
UNREACHABLE_PHRASES = (
    "could not establish a configuration source",
    "unable to contact slurm controller",
    "unable to establish controller machine",
    "connect failure",
    "connection refused",
    "no route to host",
    "network is unreachable",
    "slurmctld is not responding",
)
# The same two outcomes as REFUSED / INDEFINITE (the job does not exist / may exist), worded for a
# controller that could not be reached.
UNREACHABLE = "executors.submit_unreachable"
UNREACHABLE_INDEFINITE = "executors.submit_unreachable_indefinite"
DEFINITE = (REFUSED, UNREACHABLE)  # the keys of a submission that certainly made no job
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
    `reason`), timeout (no answer within `seconds`), interrupted (stopped after a deferred
    Ctrl-C / SIGTERM / SIGHUP, base/signals.py)."""

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
        if self.kind == "interrupted":
            return UserError("executors.slurm_interrupted", command=" ".join(self.argv[:2]))
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
    status; SlurmCommandError when there is none. `env`: the whole environment (default: ours).

    Bounded twice: by `timeout`, and by an interrupt deferred around it (base/signals.py: the
    gate's window from the scheduler call to the recorded job id). The child is polled; once an
    interrupt is pending it has INTERRUPT_GRACE_S to answer (a healthy sbatch answers in
    milliseconds, and its job id is then recorded), then it is killed and the call is
    `interrupted`. The child runs in a session of its own, so that the terminal's Ctrl-C reaches
    only us and a kill reaches whatever the command started (a wrapper's own children)."""
    argv = [str(a) for a in argv]
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=None if env is None else dict(env),
            stdin=subprocess.PIPE if stdin is not None else None, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
        )
    except FileNotFoundError:
        raise SlurmCommandError("missing", argv) from None
    except OSError as exc:  # not executable, too many processes, ...
        raise SlurmCommandError("failed", argv, reason=exc.strerror or str(exc)) from None
    try:
        stdout, stderr = _answer(proc, argv, stdin, timeout)
    finally:
        if proc.poll() is None:  # a timeout, an interrupt, or KeyboardInterrupt outside a window
            _kill(proc)
    return SlurmResult(tuple(argv), proc.returncode, stdout or "", stderr or "")


def _answer(proc: subprocess.Popen, argv: list[str], stdin: Optional[str], timeout: float) -> tuple[str, str]:
    """The child's output once it exits; SlurmCommandError(timeout | interrupted) otherwise."""
    start = time.monotonic()
    interrupted_at: Optional[float] = None
    while True:
        try:
            return proc.communicate(stdin, timeout=POLL_S)  # a retry loses no output (subprocess docs)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now - start >= timeout:
            _kill(proc)
            raise SlurmCommandError("timeout", argv, seconds=timeout)
        if interrupted_at is None and interrupt_pending():
            interrupted_at = now
        if interrupted_at is not None and now - interrupted_at >= INTERRUPT_GRACE_S:
            _kill(proc)
            raise SlurmCommandError("interrupted", argv, seconds=now - start)


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL to the child's whole session (the signals the gate defers are blocked in it: its
    mask is ours), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


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
    errors = [ln for ln in lines if "error:" in ln or "fatal:" in ln]  # `sbatch: fatal:` ends it, when said
    chosen = errors[-1] if errors else (lines[-1] if lines else "no output")
    chosen = re.sub(r"^(?:\w+:\s*)?(?:error|fatal):\s*", "", chosen)
    chosen = re.sub(r"^allocation failure:\s*", "", chosen)  # how sbatch --test-only says it
    return chosen.replace("Batch job submission failed: ", "")


def submission_error(output: str, returncode: int = 1) -> SubmissionError:
    """A failed submission, classified: `executors.submit_refused` only where the controller
    refused (an invalid partition, a node configuration that is not available, an account, QOS
    or limit refused, ...: the job does not exist); `executors.submit_indefinite` where sbatch
    could not get an answer (NO_ANSWER), was killed by a signal (negative `returncode`) or said
    nothing: the job may exist. The raw output is kept on the error either way."""
    if indefinite_answer(output, returncode):
        reason = slurm_reason(output) if output.strip() else f"exit status {returncode}"
        return SubmissionError(indefinite_key(output), raw_output=output, reason=reason)
    key = UNREACHABLE if controller_unreachable(output) else REFUSED
    return SubmissionError(key, raw_output=output, reason=slurm_reason(output))


def controller_unreachable(output: str) -> bool:
    """Whether a Slurm command's output says it never reached the controller (UNREACHABLE_PHRASES)."""
    text = output.lower()
    return any(phrase in text for phrase in UNREACHABLE_PHRASES)


def indefinite_key(output: str) -> str:
    """The message of a submission whose job may exist: worded for an unreachable controller when
    the output says so, else as a submission Slurm did not answer."""
    return UNREACHABLE_INDEFINITE if controller_unreachable(output) else INDEFINITE


def indefinite_answer(output: str, returncode: int = 1) -> bool:
    """Whether a failed submission's answer leaves it open whether the job exists."""
    if returncode < 0 or not output.strip():
        return True
    text = output.lower()
    return any(phrase in text for phrase in NO_ANSWER)


def no_answer_error(exc: SlurmCommandError) -> UserError:
    """A submission command that gave no answer: a timeout or an interrupt may have reached the
    controller first (indefinite); a command that is missing or could not start sent nothing."""
    if exc.kind in ("timeout", "interrupted"):
        what = exc.user_error().render("en")
        return SubmissionError(INDEFINITE, raw_output=str(exc), reason=what)
    return exc.user_error()


def parse_job_id(stdout: str, executor: str = "sbatch") -> str:
    for line in stdout.splitlines():
        line = line.strip()
        match = _JOB_ID.match(line) or _SUBMITTED.search(line)
        if match:
            return match.group(1)
    raise SubmissionError("executors.submit_no_job_id", raw_output=stdout, executor=executor, output=stdout.strip()[:200])


def submit(argv: Sequence[str], *, cwd: Path, executor: str = "sbatch",
           timeout: float = SUBMIT_TIMEOUT_S) -> tuple[str, SlurmResult]:
    """Run a submission command (sbatch ..., from `cwd`) bounded by `timeout` and by a deferred
    interrupt (call); returns (job id, the answer). Every failure is a one-line UserError, a
    SubmissionError classified as refused or indefinite (submission_error, no_answer_error)."""
    try:
        proc = call(argv, cwd=cwd, timeout=timeout)
    except SlurmCommandError as exc:
        raise no_answer_error(exc) from None
    if not proc.ok:
        raise submission_error(proc.output, proc.returncode)
    return parse_job_id(proc.stdout, executor), proc


def sbatch(script: Path, *, cwd: Path, extra_args: Sequence[str] = ()) -> tuple[str, str]:
    """Submit a script; returns (job id, raw output)."""
    job_id, proc = submit(["sbatch", "--parsable", *extra_args, str(script)], cwd=cwd)
    return job_id, proc.output


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
