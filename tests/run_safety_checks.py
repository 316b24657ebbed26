"""What "nothing lost" means, checked the same way after every fault test of tests/**/test_run_safety*.py:
every Slurm job the tool started for a run name (its training jobs, its watcher jobs) is in the
ledger, with the state Slurm reports, after the next command has run.

Jobs are found in Slurm itself (sacct, all states, since the test began), not in the ledger, so a
job the ledger never heard of is caught: they are the test's jobs because the test's run names are
unique (gate_fixtures.unique). Node-check jobs (`<name>-node-check`) are not runs and are checked
by their own tests.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from mbridge_launch.runs.reconcile import run_state_for
from mbridge_launch.runs.records import ACTIVE_STATES

WATCH_SUFFIX = "-watch"
NODE_CHECK_SUFFIX = "-node-check"


def slurm_jobs_named(cluster, prefix: str, since: float) -> dict[str, dict]:
    """{job id: {"name", "state"}} of every job whose name starts with `prefix`, from accounting
    (squeue for the freshest state of live ones)."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 5))
    out = cluster.run(["sacct", "-X", "-n", "-P", "--delimiter=\x1f", "-S", start, "-o", "JobIDRaw,State,JobName"]).stdout
    jobs: dict[str, dict] = {}
    for line in out.splitlines():
        job_id, state, name = (line.split("\x1f", 2) + ["", ""])[:3]
        if name.startswith(prefix):
            jobs[job_id] = {"name": name, "state": state.split()[0]}
    live = cluster.run(["squeue", "-h", "-o", "%i\x1f%T\x1f%j"], check=False).stdout
    for line in live.splitlines():
        job_id, state, name = (line.split("\x1f", 2) + ["", ""])[:3]
        if name.startswith(prefix):
            jobs[job_id] = {"name": name, "state": state}
    return jobs


def ledger_rows(ledger_path: str | Path) -> list[dict]:
    conn = sqlite3.connect(str(ledger_path))
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        conn.close()


def assert_nothing_lost(cluster, ledger_path: str | Path, prefix: str, since: float) -> dict[str, dict]:
    """Every training and watcher job named `prefix`... is recorded; a training job's run has the
    ledger state of its Slurm state (call after a command that refreshes, e.g. `runs` or `status`).
    Returns the jobs found, for further assertions."""
    jobs = slurm_jobs_named(cluster, prefix, since)
    rows = ledger_rows(ledger_path)
    by_job = {j: r for r in rows for j in json.loads(r["job_ids"] or "[]")}
    watchers = {r["watcher_job_id"]: r for r in rows if r.get("watcher_job_id")}
    problems = []
    for job_id, job in sorted(jobs.items()):
        if job["name"].endswith(NODE_CHECK_SUFFIX):
            continue
        if job["name"].endswith(WATCH_SUFFIX):
            if job_id not in watchers and not _watcher_event(ledger_path, job_id):
                problems.append(f"watcher job {job_id} ({job['name']}, {job['state']}) is in no run of the ledger")
            continue
        row = by_job.get(job_id)
        if row is None:
            problems.append(f"job {job_id} ({job['name']}, {job['state']}) is in no run of the ledger")
            continue
        want = run_state_for(job["state"])
        # a live job may move on (pending -> running) between the refreshing command and this look
        both_live = want in ACTIVE_STATES and row["state"] in ACTIVE_STATES
        if want and not both_live and row["state"] != want and json.loads(row["job_ids"])[-1] == job_id:
            problems.append(f"job {job_id}: Slurm says {job['state']}, run {row['id']} says {row['state']}")
    assert not problems, "; ".join(problems)
    return jobs


def _watcher_event(ledger_path: str | Path, job_id: str) -> bool:
    """A watcher job recorded in an event (a successor, or one replaced later) counts as recorded."""
    conn = sqlite3.connect(str(ledger_path))
    try:
        for (detail,) in conn.execute("SELECT detail FROM events WHERE kind LIKE 'watcher%'"):
            if json.loads(detail or "{}").get("job_id") == job_id:
                return True
    finally:
        conn.close()
    return False


def jobs_with_token(cluster, token: str) -> list[str]:
    """Every job Slurm has (live or finished) whose comment is `token`."""
    live = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i\x1f%k"], check=False).stdout
    done = cluster.run(["sacct", "-X", "-n", "-P", "--delimiter=\x1f", "-o", "JobIDRaw,Comment",
                        "-S", "now-3600"], check=False).stdout
    return sorted({line.split("\x1f")[0] for line in (live + done).splitlines()
                   if line.count("\x1f") == 1 and line.split("\x1f")[1].strip() == token})
