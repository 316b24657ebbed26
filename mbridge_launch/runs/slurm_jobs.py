"""What the ledger asks Slurm about jobs, parsed without ambiguous delimiters.

A job's name and comment are free text (a hand-submitted job may be called `a|b`), so output split
on '|' shifted every field after the name. Read instead, in this order:
- `squeue --json` / `sacct --json` (Slurm 21.08+; the openapi v0.0.38 shapes of 22.05, and the
  newer ones where `job_state` is a list and times are {"number": N}); squeue's --json ignores
  filters on 22.05, so jobs are filtered here;
- where --json is missing or broken, delimited output with a separator that cannot occur in a job
  name (the unit separator "\\x1f") and the free-text fields last.

What is read is bounded: squeue's own jobs of this user, sacct from the run's submit time (or the
given job ids), and at most MAX_OUTPUT_CHARS of output (more is "cannot tell", never a guess).

Silence is not an answer: a read that times out, exits non-zero, or answers with Slurm's JSON
`errors` array (squeue --json on 22.05 exits 0 with `"errors": [...]` and no jobs when the
controller is down) raises SlurmNotAsked, never "no jobs". Reads are bounded: READ_TIMEOUT_S per
attempt, one retry, READ_BUDGET_S in all; a daemon found unreachable is not asked again by this
process for UNREACHABLE_MEMO_S (a `status` asks several times: the first silence answers the rest).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from mbridge_launch.base.i18n import t
from mbridge_launch.runs.ledger import _user
from mbridge_launch.slurm.commands import FIELD_SEP, SlurmCommandError, SlurmUnavailable, call, slurm_reason

MAX_OUTPUT_CHARS = 64 * 1024 * 1024
# A live controller answers squeue/sacct/scontrol for one user's jobs in well under a second; a
# stopped one made each read wait for Slurm's own MessageTimeout and retries (`status` took 140 s).
READ_TIMEOUT_S = 5.0
READ_BUDGET_S = 8.0  # one read and its one retry together
RETRY_PAUSE_S = 0.5
# Another daemon already silent (the controller stopped; is accounting?): one short try, no retry,
# so that a command asking both answers within seconds, not budget after budget.
READ_TIMEOUT_IN_OUTAGE_S = 3.0
UNREACHABLE_MEMO_S = 30.0  # short: a long-running watcher asks again once it has passed
CONTROLLER, ACCOUNTING = "controller", "accounting"
_DAEMON_OF = {"sacct": ACCOUNTING, "sacctmgr": ACCOUNTING}  # the rest ask slurmctld
_SQUEUE_FORMAT = FIELD_SEP.join(("%i", "%T", "%V", "%r", "%j", "%k"))
_SACCT_FIELDS = "JobIDRaw,State,Submit,Reason,JobName,Comment"


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    name: str
    state: str  # Slurm's word, e.g. RUNNING
    submit_time: Optional[float]  # epoch seconds
    comment: str = ""
    reason: str = ""  # Slurm's pending reason (Priority, Resources, BeginTime, ...), "None" when none
    restarts: Optional[int] = None  # requeues so far (squeue only: sacct has no such field on 22.05)


class SlurmNotAsked(SlurmUnavailable):
    """A Slurm read got no usable answer: `daemon` (controller or accounting) did not answer within
    the read's time, answered with an error, or the command exited non-zero. `how`: timeout, error
    (non-zero exit), json_errors (exit 0 with Slurm's `errors` array), missing (no such command).
    `reason`: one line for the user, e.g. "squeue: no answer within 5 s"."""

    def __init__(self, daemon: str, how: str, reason: str) -> None:
        self.daemon, self.how, self.reason = daemon, how, reason
        super().__init__(reason)


# (daemon, PATH, SLURM_CONF) -> (monotonic time it was found unreachable, the error). Only the
# daemon's silence is remembered: a non-zero exit is quick, and may be an old Slurm refusing --json.
_MEMOISED = ("timeout", "json_errors")
_unreachable: dict[tuple[str, str, str], tuple[float, SlurmNotAsked]] = {}


def _memo_key(daemon: str) -> tuple[str, str, str]:
    # keyed by the environment too: another PATH or SLURM_CONF (a test's fake commands) is another Slurm
    return daemon, os.environ.get("PATH", ""), os.environ.get("SLURM_CONF", "")


def forget_unreachable() -> None:
    """Ask every daemon again on the next read (a new outage check)."""
    _unreachable.clear()


def read_slurm(argv: Sequence[str], *, timeout: float = READ_TIMEOUT_S, budget: float = READ_BUDGET_S,
               json_errors: bool = False, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """stdout of a read-only Slurm command, or SlurmNotAsked: the command is tried once more after
    a failure while `budget` seconds allow (each try at most `timeout`). `json_errors`: stdout is a
    --json answer whose non-empty `errors` array means the daemon could not be asked. An answer
    longer than `max_chars` is "cannot tell" (SlurmNotAsked), never a guess from part of it."""
    argv = [str(a) for a in argv]
    daemon = _DAEMON_OF.get(os.path.basename(argv[0]), CONTROLLER)
    key = _memo_key(daemon)
    known = _unreachable.get(key)
    if known is not None and time.monotonic() - known[0] < UNREACHABLE_MEMO_S:
        raise known[1]
    tries = 2  # one retry: a controller busy for a moment answers the second time
    if any(time.monotonic() - when < UNREACHABLE_MEMO_S for when, _ in _unreachable.values()):
        tries, timeout = 1, min(timeout, READ_TIMEOUT_IN_OUTAGE_S)
    started = time.monotonic()
    deadline = started + budget
    failure: Optional[SlurmNotAsked] = None
    for attempt in range(tries):
        left = deadline - time.monotonic()
        if attempt and left < 1.0 + RETRY_PAUSE_S:
            break  # no time left worth a second try
        if attempt:
            time.sleep(RETRY_PAUSE_S)
            left -= RETRY_PAUSE_S
        try:
            proc = call(argv, timeout=max(0.5, min(timeout, left)))
        except SlurmCommandError as exc:
            if exc.kind != "timeout":  # not installed, cannot start: asking again changes nothing
                reason = t("ledger.slurm_reason.missing", command=argv[0]) if exc.kind == "missing" else str(exc)
                raise SlurmNotAsked(daemon, "missing", reason) from None
            failure = _timed_out(daemon, argv[0], time.monotonic() - started)
            continue
        problem = _answer_problem(proc.returncode, proc.stdout, proc.stderr, json_errors=json_errors)
        if problem is None:
            if len(proc.stdout) > max_chars:
                raise SlurmNotAsked(daemon, "error", f"{argv[0]}: answer longer than {max_chars} characters")
            _unreachable.pop(key, None)
            return proc.stdout
        failure = SlurmNotAsked(daemon, problem[0], f"{argv[0]}: {problem[1]}")
    failure = failure or _timed_out(daemon, argv[0], budget)
    if failure.how in _MEMOISED:
        _unreachable[key] = (time.monotonic(), failure)
    raise failure


def _timed_out(daemon: str, command: str, seconds: float) -> SlurmNotAsked:
    return SlurmNotAsked(daemon, "timeout", t("ledger.slurm_reason.timeout", command=command, seconds=f"{seconds:.0f}"))


def _answer_problem(returncode: int, stdout: str, stderr: str, *, json_errors: bool) -> Optional[tuple[str, str]]:
    """(how, one-line reason) when an answer says Slurm could not be asked; None when it is one."""
    if returncode != 0:
        return "error", slurm_reason(stderr or stdout)
    if json_errors:
        try:
            data = json.loads(stdout)
        except ValueError:
            return None  # not JSON: an old Slurm without --json; the caller reads the delimited form
        errors = data.get("errors") if isinstance(data, dict) else None
        if isinstance(errors, list):
            errors = [e for e in errors if not _empty_result(e)]
        if isinstance(errors, list) and errors:
            first = errors[0] if isinstance(errors[0], dict) else {}
            words = [str(first.get(k) or "") for k in ("source", "description", "error")]
            return "json_errors", " ".join(w for w in words if w)[:200] or "errors in the answer"
    return None


# Slurm's "errors" entry for a query that matched no job (ESLURM_REST_EMPTY_RESULT; sacct --json on
# 22.05 answers a window without jobs so, exit 0): an answer, not a daemon that could not be asked
_EMPTY_RESULT_ERROR = 9003


def _empty_result(error: object) -> bool:
    if not isinstance(error, dict):
        return False
    return error.get("error_number") == _EMPTY_RESULT_ERROR or str(error.get("description")) == "Nothing found"


class SacctQuery:
    """squeue (live jobs, freshest state) + sacct (finished jobs), through the one Slurm layer.
    Every read is bounded (read_slurm); an unreachable daemon raises SlurmNotAsked."""

    def __init__(self, user: str | None = None, timeout_s: float = READ_TIMEOUT_S) -> None:
        self.user = user or _user()
        self.timeout_s = timeout_s
        self._comments_kept: Optional[bool] = None

    def _read(self, argv: list[str], *, json_errors: bool = False) -> str:
        return read_slurm(argv, timeout=self.timeout_s, json_errors=json_errors)

    def _run(self, argv: list[str]) -> Optional[str]:
        """stdout, or None when the command is missing, hangs, fails or says too much."""
        try:
            return self._read(argv)
        except SlurmUnavailable:
            return None

    def _json_or_delimited(self, json_argv: list[str], delimited_argv: list[str], convert: Any,
                           user_key: str) -> list[JobInfo]:
        """The jobs of a --json read; the delimited form where --json is not understood (no JSON,
        or a quick non-zero exit: an old Slurm, no serializer plugin). A timeout or Slurm's
        `errors` is the daemon's silence: asked once, not twice."""
        try:
            out = self._read(json_argv, json_errors=True)
        except SlurmNotAsked as exc:
            if exc.how != "error":
                raise
        else:
            jobs = _json_jobs(out, convert, user_key=user_key, user=self.user)
            if jobs is not None:
                return jobs
        return _delimited_jobs(self._read(delimited_argv))

    def _squeue(self) -> list[JobInfo]:
        # -u: newer Slurm filters --json output itself; 22.05 ignores it (filtered here)
        return self._json_or_delimited(["squeue", "--json", "-u", self.user],
                                       ["squeue", "-h", "-u", self.user, "-o", _SQUEUE_FORMAT],
                                       _squeue_job, "user_name")

    def _sacct(self, extra: list[str]) -> list[JobInfo]:
        return self._json_or_delimited(["sacct", "--json", "-X", "-u", self.user, *extra],
                                       ["sacct", "-X", "-P", "-n", f"--delimiter={FIELD_SEP}", "-u", self.user,
                                        f"--format={_SACCT_FIELDS}", *extra],
                                       _sacct_job, "user")

    def job_states(self, job_ids: list[str]) -> dict[str, JobInfo]:
        """The state of each job Slurm knows. SlurmNotAsked when the controller cannot be asked,
        or when accounting cannot be asked about a job that has left the queue: a job missing
        from the answer is then unknown, not gone."""
        if not job_ids:
            return {}
        wanted = set(job_ids)
        live = {j.job_id: j for j in self._squeue() if j.job_id in wanted}  # the controller first: it decides
        if wanted <= set(live):
            return live
        history = self._sacct(["-j", ",".join(sorted(wanted - set(live)))])
        found = {j.job_id: j for j in history if j.job_id in wanted}
        # squeue wins for live jobs: sacct lags a few seconds behind the controller.
        found.update(live)
        return found

    def find_jobs(self, *, name: str | None, token: str | None, since: float) -> list[JobInfo]:
        """Jobs submitted since `since` whose comment is `token` (or, with no token, named `name`).
        A finished job's comment is in accounting only where the site keeps comments
        (AccountingStoreFlags=job_comment, not Slurm's default): there the token is also looked
        for in the job's submit line, where the sbatch adapter puts it (`--comment=TOKEN`).
        The controller must answer (a job it just queued may not be in accounting yet: a silent
        controller is never "no such job"); without accounting a finished job is invisible, so
        "not found" is SlurmNotAsked there too."""
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        live = self._squeue()
        try:
            history: Optional[list[JobInfo]] = self._sacct(["-S", start])
        except SlurmNotAsked:
            history = None
            accounting_silent = True
        else:
            accounting_silent = False
        jobs = {j.job_id: j for j in history or []}
        jobs.update({j.job_id: j for j in live})
        matches = [j for j in jobs.values()
                   if (token and j.comment.strip() == token) or (not token and name and j.name == name)]
        if token and not matches and not accounting_silent and not self.comments_kept():
            ids = self._submit_lines_with(token, start)
            matches = [replace(jobs[i], comment=token) for i in ids if i in jobs]
        if not matches and accounting_silent:
            # Without accounting a finished job is invisible: "not found" would be a guess.
            raise SlurmUnavailable("sacct failed; cannot tell whether the job ever existed")
        return matches

    def jobs_since(self, since: float) -> list[JobInfo]:
        """Every job of this user Slurm knows since `since` (squeue's live ones win over sacct's
        rows), for `runs recover`, which looks for the tokens of runs a damaged ledger lost. A
        finished job shows its comment only where accounting keeps comments."""
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        jobs = {j.job_id: j for j in self._sacct(["-S", start]) or []}
        jobs.update({j.job_id: j for j in self._squeue()})
        return list(jobs.values())

    def comments_kept(self) -> bool:
        """Whether accounting keeps job comments (scontrol show config: AccountingStoreFlags has
        job_comment). Asked once per query object; when Slurm cannot say, assume it does not."""
        if self._comments_kept is None:
            out = self._run(["scontrol", "show", "config"]) or ""
            flags = next((line.split("=", 1)[1] for line in out.splitlines()
                          if line.strip().startswith("AccountingStoreFlags") and "=" in line), "")
            self._comments_kept = "job_comment" in flags
        return self._comments_kept

    def _submit_lines_with(self, token: str, start: str) -> list[str]:
        """Ids of jobs since `start` whose submit line carries `--comment=TOKEN` (id first, the one
        free-text field last, so nothing in the line can shift the id)."""
        out = self._run(["sacct", "-X", "-P", "-n", f"--delimiter={FIELD_SEP}", "-u", self.user, "-S", start,
                         "--format=JobIDRaw,SubmitLine"]) or ""
        wanted = f"--comment={token}"
        return [job_id for job_id, _, line in (row.partition(FIELD_SEP) for row in out.splitlines())
                if job_id.strip() and wanted in line.split()]


# ---------------------------------------------------------------------- JSON (openapi shapes)
def _json_jobs(text: str, convert: Any, *, user_key: str, user: str) -> Optional[list[JobInfo]]:
    """The jobs of `user` in a --json answer, or None when it is not one (old Slurm, no plugin)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        return None
    out = []
    for job in data["jobs"]:
        if isinstance(job, dict) and (not user or str(job.get(user_key) or user) == user):
            info = convert(job)
            if info is not None:
                out.append(info)
    return out


def _number(value: Any) -> Optional[float]:
    """22.05 gives a bare number; newer versions {"set": true, "infinite": false, "number": N}."""
    if isinstance(value, dict):
        if value.get("set") is False or value.get("infinite"):
            return None
        value = value.get("number")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _word(value: Any) -> str:
    """A state: "RUNNING" (22.05) or ["RUNNING"] / ["PENDING", "REQUEUED"] (newer): the first."""
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value or "")


def _squeue_job(job: dict[str, Any]) -> Optional[JobInfo]:
    if job.get("job_id") is None:
        return None
    restarts = _number(job.get("restart_cnt"))
    return JobInfo(str(job["job_id"]), str(job.get("name") or ""), _word(job.get("job_state")),
                   _number(job.get("submit_time")), str(job.get("comment") or ""),
                   str(job.get("state_reason") or ""), int(restarts) if restarts is not None else 0)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _sacct_job(job: dict[str, Any]) -> Optional[JobInfo]:
    if job.get("job_id") is None:
        return None
    state = _mapping(job.get("state"))
    times = _mapping(job.get("time"))
    comment = job.get("comment")
    text = comment.get("job") if isinstance(comment, dict) else comment
    return JobInfo(str(job["job_id"]), str(job.get("name") or ""), _word(state.get("current")),
                   _number(times.get("submission")), str(text or ""), str(state.get("reason") or ""))


# ---------------------------------------------------------------------- delimited (no --json)
def _parse_time(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def _delimited_jobs(text: str) -> list[JobInfo]:
    """Rows of id, state, submit, reason, name, comment separated by FIELD_SEP: the name and the
    comment (free text) come last, so whatever they hold cannot shift the other fields."""
    jobs = []
    for line in text.splitlines():
        parts = line.split(FIELD_SEP, 5)
        if len(parts) < 5 or not parts[0].strip():
            continue
        job_id, state, submit, reason = (p.strip() for p in parts[:4])
        comment = parts[5] if len(parts) > 5 else ""
        jobs.append(JobInfo(job_id, parts[4], state, _parse_time(submit), comment.strip(), reason))
    return jobs
