"""Issue 32, `runs recover` on the real local Slurm: a job whose run a damaged ledger lost is found
by the token in its comment and gets a run of its own in the rebuilt ledger (no job is missing from
the ledger); the rows that could be read are kept."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from tests.cli_helpers import run_cli
from tests.unit.test_ledger_faults import corrupt_page_holding, fingerprint, make_ledger

pytestmark = pytest.mark.slurm


def test_recover_finds_the_job_of_a_lost_run_by_its_token(slurm_env, tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    make_ledger(ledger, runs=60, first_job=90_000_000)
    corrupt_page_holding(ledger, b"name: run30\n")
    damaged = fingerprint(ledger)
    token = f"mbl-{secrets.token_hex(8)}"
    name = f"recover-{token[-6:]}"
    # held: it stays queued (no node used) until cancelled below
    submitted = subprocess.run(["sbatch", "--hold", f"--comment={token}", f"--job-name={name}", "-o", "/dev/null",
                                "--wrap", "sleep 60"], capture_output=True, text=True, check=True)
    job_id = submitted.stdout.strip().split()[-1]
    try:
        proc = run_cli("runs", "recover", "--reason", "disk fault", "--yes", "--ledger", ledger)
        assert proc.returncode == 0, proc.stderr
        assert "rebuilt the run ledger" in proc.stdout and "from Slurm (found by" in proc.stdout, proc.stdout
        runs = run_cli("runs", "--all", "--limit", "0", "--no-refresh", "--format", "json", "--ledger", ledger)
        assert runs.returncode == 0, runs.stderr
        by_name = {r["name"]: r for r in runs.json()}
        assert by_name[name]["job_ids"] == [job_id] and by_name[name]["state"] == "pending"
        assert {"run0", "run59"} <= set(by_name) and "run30" not in by_name
        # the cluster is shared with other tests: only live jobs of lost runs are added, never finished ones
        assert all(r["state"] in ("pending", "running", "submitted") for r in by_name.values() if r["executor"] == "unknown")
    finally:
        subprocess.run(["scancel", job_id], capture_output=True)
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("ledger.sqlite3.damaged-")
               and not p.name.endswith(("-wal", "-shm"))]
    assert len(backups) == 1 and fingerprint(backups[0]) == damaged
