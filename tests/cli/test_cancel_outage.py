"""`cancel` records only what happened (issue 32, "Smaller"): during an outage it said exit 2 (bad
input) and recorded `cancel_requested` although scancel had failed.

Fake squeue/sacct/scancel on PATH (each logs its calls); a ledger with one submitted run whose
auto-rollback watcher job is 900.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mbridge_launch.runs import ledger as L

SQUEUE_DOWN = json.dumps({"errors": [{"description": "Failed while looking for jobs", "error": "Unspecified error",
                                      "source": "slurm_load_jobs"}], "jobs": []})
SQUEUE_RUNNING = json.dumps({"errors": [], "jobs": [{"job_id": 41, "name": "r", "job_state": "RUNNING",
                                                      "user_name": os.environ.get("USER", "root")}]})


def _slurm(tmp_path: Path, *, squeue: str, scancel_rc: int) -> tuple[dict, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    scripts = {
        "squeue": f"cat <<'EOF'\n{squeue}\nEOF\n",
        "sacct": "echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1\n",
        "scancel": ("echo 'scancel: error: Kill job error on job id 41: Unable to contact slurm controller "
                    f"(connect failure)' >&2; exit {scancel_rc}\n" if scancel_rc else "exit 0\n"),
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\necho \"{name} $*\" >> {calls}\n{body}")
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, calls


@pytest.fixture
def ledger_with_run(tmp_path) -> tuple[Path, int]:
    db = tmp_path / "l.db"
    with L.Ledger.open(db, create=True) as ledger:
        run = ledger.begin_submission(name="r", plan_hash="0123456789abcdef", plan_yaml="name: r\n", executor="sbatch",
                                      work_dir=str(tmp_path))
        ledger.mark_submitted(run.id, ["41"])
        ledger.set_watcher_job(run.id, "900")
    return db, run.id


def _kinds(db: Path, run_id: int) -> list[str]:
    with L.Ledger.open(db) as ledger:
        return [e["kind"] for e in ledger.events(run_id)]


def test_cancel_with_slurm_silent_refuses_and_records_nothing(tmp_path, ledger_with_run, mbl):
    db, run_id = ledger_with_run
    before = _kinds(db, run_id)
    env, calls = _slurm(tmp_path, squeue=SQUEUE_DOWN, scancel_rc=1)
    out = mbl.run("cancel", str(run_id), "--yes", "--ledger", str(db), env=env)
    assert out.rc == 1, out.stderr  # "check failed, try again" (base/errors.py), not 2 (bad input)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Slurm could not be asked" in lines[0] and "nothing was cancelled" in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert _kinds(db, run_id) == before  # no cancel_requested, no cancel, nothing
    assert "scancel" not in calls.read_text()
    with L.Ledger.open(db) as ledger:
        assert ledger.get_run(run_id).state == L.SUBMITTED and not ledger.confirmations(run_id)


def test_cancel_whose_scancel_fails_records_no_cancel(tmp_path, ledger_with_run, mbl):
    db, run_id = ledger_with_run
    env, calls = _slurm(tmp_path, squeue=SQUEUE_RUNNING, scancel_rc=1)
    out = mbl.run("cancel", str(run_id), "--yes", "--ledger", str(db), env=env)
    assert out.rc == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed" in lines[0] and "Unable to contact slurm controller" in lines[0], out.stderr
    kinds = _kinds(db, run_id)
    assert "cancel_requested" not in kinds and "cancel" not in kinds, kinds
    assert "scancel 900" not in calls.read_text()  # the watcher keeps watching a run that still runs


def test_cancel_records_the_request_after_the_jobs_were_cancelled(tmp_path, ledger_with_run, mbl):
    db, run_id = ledger_with_run
    env, calls = _slurm(tmp_path, squeue=SQUEUE_RUNNING, scancel_rc=0)
    out = mbl.run("cancel", str(run_id), "--yes", "--ledger", str(db), env=env)
    assert out.rc == 0, out.stderr
    kinds = _kinds(db, run_id)
    assert kinds.index("cancel") < kinds.index("cancel_requested") and kinds.count("cancel") == 2, kinds
    assert calls.read_text().splitlines()[-2:] == ["scancel 41", "scancel 900"]
