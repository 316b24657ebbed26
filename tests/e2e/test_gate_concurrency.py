"""Serialised submission on the local Slurm cluster (issue 32, item 1), for each executor (sbatch,
nemo-run, submitit): 20 rounds of two concurrent `mbridge-launch submit` processes (and one round
of eight) of ONE Plan, and the same for as many Plans sharing ONE checkpoint directory, give
exactly one job each round.

The submit processes are forked from one warm interpreter (tests/warm_cli.py: the CLI and nemo_run
imported once) and released all at once, then waited for (`--yes`, mock data, no cluster checks:
the race is between the gate's checks and its ledger insert, not in preflight or imports).
Each round has run names and a checkpoint directory of its own; after it, the round's job is
cancelled by its id. Per round the test asserts: one process exits 0, every other one exits 1
with the existing refusal naming the winner's run (gate.duplicate, or ownership.owned for the
shared directory) and no traceback; the ledger has one row for the round; Slurm has exactly one
job carrying that row's token, and no other job of the round's names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cli_helpers import ROOT, cli_env
from gate_fixtures import unique, write_plan
from run_safety_checks import jobs_with_token, ledger_rows, slurm_jobs_named
from warm_cli import WarmCli

pytestmark = pytest.mark.slurm
EXECUTORS = ("sbatch", "nemo-run", "submitit")
ROUNDS = [2] * 20 + [8]
REFUSALS = {"one-plan": ("is already submitted and not finished", "belongs to run"),
            "shared-dir": ("belongs to run",)}


@pytest.fixture
def ledger_db(slurm_env, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    db = tmp_path / "ledger.sqlite3"
    from mbridge_launch.runs.ledger import Ledger

    Ledger.open(db).close()  # created once: the race under test is the submissions', not the first open's
    return db


def round_plans(base_plan: dict, shared: Path, prefix: str, mode: str, count: int) -> list[tuple[str, Path]]:
    """(run name, plan file) per submit process: one Plan `count` times, or `count` Plans (each
    its own name and hash) with one checkpoint directory."""
    directory = shared / prefix
    if mode == "one-plan":
        plan = write_plan(base_plan, directory, prefix, iters=200, env={"MBL_STANDIN_ITER_SECONDS": "0.5"})
        return [(prefix, plan)] * count
    return [(f"{prefix}-p{i}", write_plan(base_plan, directory, f"{prefix}-p{i}", iters=200,
                                          env={"MBL_STANDIN_ITER_SECONDS": "0.5"}))
            for i in range(count)]


def submit_all(cli: WarmCli, plans: list[tuple[str, Path]], db: Path, shared: Path, executor: str,
               outputs: Path) -> list[tuple[int, str, str]]:
    """Start every submit at once, then wait for each: (exit code, stdout, stderr) in start order."""
    argvs = [["submit", str(plan), "--yes", "--no-cluster-checks", "--ledger", str(db), "--script-dir", str(shared),
              "--executor", executor] for _name, plan in plans]
    return cli.run_all(argvs, outputs)


@pytest.mark.parametrize("mode", ["one-plan", "shared-dir"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_concurrent_submits_give_exactly_one_job(executor, mode, base_plan, ledger_db, shared_dir, slurm_cluster,
                                                 tmp_path):
    since = time.time()
    problems = []
    with WarmCli(cli_env(), ROOT) as cli:
        for number, count in enumerate(ROUNDS):
            check_round(cli, number, count, executor, mode, base_plan, ledger_db, shared_dir, slurm_cluster, since,
                        tmp_path / f"round-{number}", problems)
    assert not problems, "\n".join(problems)


def check_round(cli, number, count, executor, mode, base_plan, ledger_db, shared_dir, slurm_cluster, since,
                outputs, problems) -> None:
    """One round: submit, look in the ledger and in Slurm, cancel the round's job, note what is wrong."""
    prefix = unique(f"cc-{executor[:2]}-{mode[:3]}-{number}")
    plans = round_plans(base_plan, shared_dir, prefix, mode, count)
    results = submit_all(cli, plans, ledger_db, shared_dir, executor, outputs)
    rows = [r for r in ledger_rows(ledger_db) if r["name"].startswith(prefix)]
    jobs = [j for r in rows for j in jobs_with_token(slurm_cluster, r["job_token"])]
    named = slurm_jobs_named(slurm_cluster, prefix, since)
    for job in set(jobs) | set(named):
        slurm_cluster.cancel(job)  # by id: the round's job only
    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    where = f"round {number} ({count} submits)"
    for _code, _out, err in results:
        assert "Traceback" not in err, f"{where}: {err}"
    if len(winners) != 1 or len(rows) != 1 or len(jobs) != 1 or set(named) - set(jobs):
        problems.append(f"{where}: {len(winners)} exited 0, {len(rows)} ledger rows, jobs by token {jobs}, "
                        f"jobs by name {sorted(named)}; stderr: {[r[2][-300:] for r in losers]}")
        return
    [row] = rows
    assert row["state"] in ("submitted", "pending", "running") and json.loads(row["job_ids"]) == jobs, row
    for code, _out, err in losers:
        last = err.strip().splitlines()[-1]
        if code != 1 or not any(text in last for text in REFUSALS[mode]) or row["name"] not in last:
            problems.append(f"{where}: a loser exited {code} with {last!r} (winner {row['name']})")
