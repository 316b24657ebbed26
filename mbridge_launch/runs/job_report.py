"""Slurm's view of one job for `diagnose`: sacct's job and step rows, scontrol's requeue count and
log paths, as a diagnosis.model.SlurmView.

Everything goes through the bounded reads of runs/slurm_jobs.py (a few seconds, one retry; a
daemon already found silent is not asked again); when Slurm cannot be asked (no commands, controller or accounting down) the answer is None and the
diagnosis works from the logs alone. sacct rows are split on the unit separator (slurm.commands'
FIELD_SEP), the free-text Reason field last, so nothing in it can shift the other fields.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from mbridge_launch.diagnosis.model import SlurmView, StepView
from mbridge_launch.runs.slurm_jobs import READ_TIMEOUT_S, read_slurm
from mbridge_launch.slurm.commands import FIELD_SEP, SlurmUnavailable

TIMEOUT_S = READ_TIMEOUT_S
MAX_OUTPUT_CHARS = 4 * 1024 * 1024  # one job's rows; more is not one job
_SACCT_FIELDS = "JobID,State,ExitCode,DerivedExitCode,NodeList,Start,End,Elapsed,Timelimit,Reason"


@dataclass(frozen=True)
class JobFacts:
    """What scontrol knows about a job while the controller still holds it (MinJobAge)."""

    restarts: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    state: str = ""
    reason: str = ""
    node_list: str = ""


def _run(argv: list[str], timeout: float) -> Optional[str]:
    try:
        return read_slurm(argv, timeout=timeout, max_chars=MAX_OUTPUT_CHARS)
    except SlurmUnavailable:
        return None


def _epoch(text: str) -> Optional[float]:
    text = text.strip()
    if not text or text in ("Unknown", "None"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def parse_sacct(text: str, job_id: str) -> tuple[Optional[dict[str, str]], list[StepView]]:
    """(the job's own row, its step rows) from sacct's delimited answer for `job_id`. A requeued
    job has one row per attempt under the same id: the last one is the current attempt."""
    names = _SACCT_FIELDS.split(",")
    job: Optional[dict[str, str]] = None
    steps: dict[str, StepView] = {}
    for line in text.splitlines()[:10_000]:
        parts = line.split(FIELD_SEP, len(names) - 1)
        if len(parts) < len(names) - 1 or not parts[0].strip():
            continue
        row = dict(zip(names, (p.strip() for p in parts)))
        row.setdefault("Reason", "")
        if row["JobID"] == job_id:
            job = row
        elif row["JobID"].startswith(job_id + "."):
            steps[row["JobID"]] = StepView(row["JobID"], row["State"].split()[0] if row["State"] else "",
                                           row["ExitCode"], row["NodeList"], _epoch(row["Start"]), _epoch(row["End"]))
    return job, list(steps.values())


def parse_scontrol(text: str) -> JobFacts:
    """JobFacts from `scontrol show job -o ID` (one line of KEY=VALUE words). StdOut/StdErr come
    last-but-few and may hold spaces only if the user put some in a path: taken up to the next
    KEY= word."""
    words = text.split()
    fields: dict[str, str] = {}
    key = None
    for word in words:
        name, eq, value = word.partition("=")
        if eq and name and name[0].isupper() and name.replace(":", "").replace("/", "").isalnum():
            key = name
            fields[key] = value
        elif key is not None:
            fields[key] += " " + word
    restarts = fields.get("Restarts", "")
    return JobFacts(
        restarts=int(restarts) if restarts.isdigit() else None,
        stdout=fields.get("StdOut", ""),
        stderr=fields.get("StdErr", ""),
        state=fields.get("JobState", ""),
        reason=fields.get("Reason", ""),
        node_list=fields.get("NodeList", "") if fields.get("NodeList") not in ("(null)", None) else "",
    )


def job_facts(job_id: str, *, timeout: float = TIMEOUT_S) -> Optional[JobFacts]:
    out = _run(["scontrol", "-o", "show", "job", str(job_id)], timeout)
    return parse_scontrol(out) if out and out.strip() else None


def slurm_view(job_id: str, *, timeout: float = TIMEOUT_S, facts: Optional[JobFacts] = None) -> Optional[SlurmView]:
    """Slurm's view of `job_id`, or None when neither sacct nor scontrol knows it (or Slurm
    cannot be asked). `facts`: scontrol's answer if the caller asked already."""
    job_id = str(job_id)
    out = _run(["sacct", "-j", job_id, "--parsable2", "--noheader", f"--delimiter={FIELD_SEP}",
                f"--format={_SACCT_FIELDS}"], timeout)
    row, steps = parse_sacct(out or "", job_id)
    if facts is None:
        facts = job_facts(job_id, timeout=timeout)
    if row is None and facts is not None:  # accounting off or lagging: the controller's view only
        return SlurmView(job_id=job_id, state=facts.state, reason=facts.reason, node_list=facts.node_list,
                         restarts=facts.restarts)
    if row is None:
        return None
    state = row["State"].split()[0] if row["State"] else ""
    # sacct says "None" when there is no reason; the controller's reason is fresher while it knows the job
    reason = facts.reason if facts is not None and facts.reason else row["Reason"]
    return SlurmView(
        job_id=job_id, state=state, exit_code=row["ExitCode"], reason="" if reason == "None" else reason,
        node_list="" if row["NodeList"] in ("None assigned", "") else row["NodeList"],
        restarts=facts.restarts if facts is not None else None, time_limit=row["Timelimit"], elapsed=row["Elapsed"],
        steps=tuple(steps), derived_exit_code=row["DerivedExitCode"],
    )


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list ('h100-[1-2],gb200-[01,03-04]') as names, in Slurm's order
    (zero padding kept); what `scontrol show hostnames` prints, without asking Slurm."""
    import re

    hosts: list[str] = []
    for entry in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text or "")[:10_000]:
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\]([^\[\]]*)", entry.strip())
        if not m:
            if entry.strip():
                hosts.append(entry.strip())
            continue
        prefix, body, suffix = m.groups()
        for part in body.split(","):
            lo, dash, hi = part.partition("-")
            if dash and lo.isdigit() and hi.isdigit() and int(hi) - int(lo) < 100_000:
                hosts.extend(f"{prefix}{i:0{len(lo)}d}{suffix}" for i in range(int(lo), int(hi) + 1))
            else:
                hosts.append(f"{prefix}{part}{suffix}")
    return hosts


def node_of_rank(node_list: str, rank: int, tasks_per_node: int) -> Optional[str]:
    """The node a rank ran on under srun's default block distribution (ranks 0..T-1 on the first
    node, T..2T-1 on the second, ...), or None when the node list does not reach that rank."""
    hosts = expand_hostlist(node_list)
    if len(hosts) == 1:
        return hosts[0]
    if tasks_per_node < 1 or rank < 0 or rank // tasks_per_node >= len(hosts):
        return None
    return hosts[rank // tasks_per_node]
