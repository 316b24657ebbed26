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
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Optional

from mbridge_launch.runs.ledger import _user
from mbridge_launch.slurm.commands import FIELD_SEP, SlurmUnavailable, call

MAX_OUTPUT_CHARS = 64 * 1024 * 1024
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


class SacctQuery:
    """squeue (live jobs, freshest state) + sacct (finished jobs), through the executors' Slurm layer."""

    def __init__(self, user: str | None = None, timeout_s: float = 30.0) -> None:
        self.user = user or _user()
        self.timeout_s = timeout_s
        self._comments_kept: Optional[bool] = None

    def _run(self, argv: list[str]) -> Optional[str]:
        """stdout, or None when the command is missing, hangs, fails or says too much."""
        try:
            proc = call(argv, timeout=self.timeout_s)
        except SlurmUnavailable:
            return None
        if not proc.ok or len(proc.stdout) > MAX_OUTPUT_CHARS:
            return None
        return proc.stdout

    def _squeue(self) -> Optional[list[JobInfo]]:
        # -u: newer Slurm filters --json output itself; 22.05 ignores it (filtered below)
        out = self._run(["squeue", "--json", "-u", self.user])
        jobs = _json_jobs(out, _squeue_job, user_key="user_name", user=self.user) if out is not None else None
        if jobs is not None:
            return jobs
        out = self._run(["squeue", "-h", "-u", self.user, "-o", _SQUEUE_FORMAT])
        return None if out is None else _delimited_jobs(out)

    def _sacct(self, extra: list[str]) -> Optional[list[JobInfo]]:
        out = self._run(["sacct", "--json", "-X", "-u", self.user, *extra])
        jobs = _json_jobs(out, _sacct_job, user_key="user", user=self.user) if out is not None else None
        if jobs is not None:
            return jobs
        out = self._run(["sacct", "-X", "-P", "-n", f"--delimiter={FIELD_SEP}", "-u", self.user,
                         f"--format={_SACCT_FIELDS}", *extra])
        return None if out is None else _delimited_jobs(out)

    def job_states(self, job_ids: list[str]) -> dict[str, JobInfo]:
        if not job_ids:
            return {}
        wanted = set(job_ids)
        history, live = self._sacct(["-j", ",".join(job_ids)]), self._squeue()
        if history is None and live is None:
            raise SlurmUnavailable("squeue and sacct both failed")
        found = {j.job_id: j for j in history or [] if j.job_id in wanted}
        # squeue wins for live jobs: sacct lags a few seconds behind the controller.
        found.update({j.job_id: j for j in live or [] if j.job_id in wanted})
        return found

    def find_jobs(self, *, name: str | None, token: str | None, since: float) -> list[JobInfo]:
        """Jobs submitted since `since` whose comment is `token` (or, with no token, named `name`).
        A finished job's comment is in accounting only where the site keeps comments
        (AccountingStoreFlags=job_comment, not Slurm's default): there the token is also looked
        for in the job's submit line, where the sbatch adapter puts it (`--comment=TOKEN`)."""
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        history, live = self._sacct(["-S", start]), self._squeue()
        jobs = {j.job_id: j for j in history or []}
        jobs.update({j.job_id: j for j in live or []})
        matches = [j for j in jobs.values()
                   if (token and j.comment.strip() == token) or (not token and name and j.name == name)]
        if token and not matches and not self.comments_kept():
            ids = self._submit_lines_with(token, start)
            matches = [replace(jobs[i], comment=token) for i in ids if i in jobs]
        if not matches and history is None:
            # Without accounting a finished job is invisible: "not found" would be a guess.
            raise SlurmUnavailable("sacct failed; cannot tell whether the job ever existed")
        return matches


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
