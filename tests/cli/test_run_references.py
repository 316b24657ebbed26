"""One RUN grammar for every command (issue 32, "Smaller": `status 61` was a run and `diagnose 61`
a job): a name, an id (`12` or `#12`) or `job:JOBID` (the run holding that Slurm job).

A ledger whose run #1 holds Slurm job 2 and run #2 holds job 1, so that a bare number read as a job
id would name the other run. No Slurm on PATH: nothing here needs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mbridge_launch.runs import ledger as L

NO_SLURM = {"PATH": "/usr/bin:/bin"}


@pytest.fixture
def crossed(tmp_path) -> Path:
    db = tmp_path / "l.db"
    with L.Ledger.open(db, create=True) as ledger:
        for name, job in (("alpha", "2"), ("beta", "1")):
            run = ledger.begin_submission(name=name, plan_hash=f"{name:0>16}", plan_yaml=f"name: {name}\n",
                                          executor="sbatch")
            run = ledger.mark_submitted(run.id, [job])
            ledger.set_state(run.id, L.FAILED)
    return db


def _run_of(mbl, db: Path, command: str, ref: str) -> str:
    out = mbl.run(command, ref, "--ledger", str(db), "--format", "json", env=NO_SLURM)
    assert out.rc in (0, 1), out.stderr
    data = out.json()
    return data.get("name") or data.get("run")


@pytest.mark.parametrize("command", ["status", "diagnose"])
@pytest.mark.parametrize("ref,name", [("1", "alpha"), ("#1", "alpha"), ("alpha", "alpha"), ("job:1", "beta"),
                                      ("job:2", "alpha")])
def test_status_and_diagnose_read_a_reference_the_same_way(crossed, mbl, command, ref, name):
    assert _run_of(mbl, crossed, command, ref) == name


@pytest.mark.parametrize("command", ["status", "logs", "cancel", "diagnose"])
def test_an_unknown_job_reference_is_one_line_naming_it(crossed, mbl, command):
    out = mbl.run(command, "job:77", "--ledger", str(crossed), env=NO_SLURM)
    assert out.rc == 2 and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "77" in out.stderr


@pytest.mark.parametrize("ref", ["job:", "job:x1", "job:-3"])
def test_a_malformed_job_reference_is_refused(crossed, mbl, ref):
    for command in ("status", "diagnose"):
        out = mbl.run(command, ref, "--ledger", str(crossed), env=NO_SLURM)
        assert out.rc == 2 and len(out.stderr.strip().splitlines()) == 1, (command, out.stderr)


def test_help_documents_the_grammar(mbl):
    for command in ("status", "diagnose", "cancel", "logs"):
        text = mbl.run(command, "--help").stdout
        assert "job:JOBID" in text and "#12" in text, (command, text)


def test_the_ledger_finds_a_run_by_job(crossed):
    with L.Ledger.open(crossed) as ledger:
        assert ledger.get_run("job:2").name == "alpha" and ledger.get_run("2").name == "beta"
        with pytest.raises(Exception) as err:
            ledger.get_run("job:3")
        assert "job:JOBID" in json.dumps(str(err.value)) or getattr(err.value, "key", "") == "ledger.job_run_not_found"
