"""Slurm reads for the ledger (runs/slurm_jobs.py): a silent Slurm is never "no jobs", and every
read is bounded (issue 32, "Unreachable is said").

Fake squeue/sacct/scontrol scripts on PATH stand in for Slurm; each records its calls, so the
tests count how often Slurm was asked instead of timing anything.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from mbridge_launch.runs import ledger as L
from mbridge_launch.runs import slurm_jobs
from mbridge_launch.runs.reconcile import reconcile_submitting, refresh_runs
from mbridge_launch.runs.slurm_jobs import SacctQuery, SlurmNotAsked, read_slurm
from mbridge_launch.runs.slurm_outage import age_text, not_asked_line
from mbridge_launch.slurm.commands import SlurmUnavailable

# What squeue --json of Slurm 22.05 prints, exit 0, when the controller does not answer
# (captured from the local cluster with SlurmctldPort pointing nowhere).
SQUEUE_22_05_DOWN = {
    "meta": {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
             "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}},
    "errors": [{"description": "Failed while looking for jobs", "error_number": -1, "error": "Unspecified error",
                "source": "slurm_load_jobs"}],
    "jobs": [],
}
SACCT_EMPTY = {"meta": {}, "errors": [], "jobs": []}


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """fake_slurm(name, body): an executable `name` on PATH running the shell `body`; every call
    appends its arguments to calls/<name>. Returns a function reading those calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    slurm_jobs.forget_unreachable()

    def make(name: str, body: str) -> None:
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\necho \"$*\" >> {calls / name}\n" + textwrap.dedent(body))
        path.chmod(0o755)

    def asked(name: str) -> list[str]:
        f = calls / name
        return f.read_text().splitlines() if f.exists() else []

    make.asked = asked  # type: ignore[attr-defined]
    yield make
    slurm_jobs.forget_unreachable()


def _json_answer(data: dict) -> str:
    return f"cat <<'EOF'\n{json.dumps(data)}\nEOF\n"


def test_squeue_errors_array_is_not_an_empty_queue(fake_slurm):
    fake_slurm("squeue", _json_answer(SQUEUE_22_05_DOWN))
    fake_slurm("sacct", _json_answer(SACCT_EMPTY))
    with pytest.raises(SlurmNotAsked) as err:
        SacctQuery(user="someone").job_states(["41"])
    assert err.value.how == "json_errors" and err.value.daemon == "controller"
    assert "slurm_load_jobs" in err.value.reason and "Failed while looking for jobs" in err.value.reason
    # a silent controller is never "no such job" for reconciliation either
    with pytest.raises(SlurmUnavailable):
        SacctQuery(user="someone").find_jobs(name="x", token="mbl-1", since=0)


def test_errors_array_from_sacct_is_not_an_empty_history(fake_slurm):
    fake_slurm("squeue", _json_answer({"errors": [], "jobs": []}))
    fake_slurm("sacct", _json_answer({"errors": [{"error": "Unable to connect to database", "source": "slurmdb"}],
                                      "jobs": []}))
    with pytest.raises(SlurmNotAsked) as err:
        SacctQuery(user="someone").job_states(["41"])  # not in the queue: only accounting could say
    assert err.value.daemon == "accounting" and "Unable to connect to database" in err.value.reason


# What sacct --json of Slurm 22.05 prints, exit 0, for a window without jobs (captured from the
# local cluster right after start-up): an empty history, not an accounting that could not be asked.
SACCT_22_05_NOTHING_FOUND = {"meta": {}, "errors": [{"description": "Nothing found", "error_number": 9003,
                                                     "error": "Nothing found with query", "source": "slurmdb_jobs_get"}],
                             "jobs": []}


def test_sacct_nothing_found_is_an_empty_history(fake_slurm):
    fake_slurm("squeue", _json_answer({"errors": [], "jobs": []}))
    fake_slurm("sacct", _json_answer(SACCT_22_05_NOTHING_FOUND))
    assert SacctQuery(user="someone").find_jobs(name="x", token="mbl-1", since=0) == []
    assert SacctQuery(user="someone").job_states(["41"]) == {}  # answered: no such job, no SlurmNotAsked


def test_a_job_in_the_queue_needs_no_accounting(fake_slurm):
    job = {"job_id": 41, "name": "n", "job_state": "RUNNING", "user_name": "someone", "comment": "mbl-1"}
    fake_slurm("squeue", _json_answer({"errors": [], "jobs": [job]}))
    fake_slurm("sacct", "echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1\n")
    assert SacctQuery(user="someone").job_states(["41"])["41"].state == "RUNNING"
    assert fake_slurm.asked("sacct") == []


def test_a_non_zero_answer_is_not_an_empty_one(fake_slurm):
    fake_slurm("squeue", "echo 'squeue: error: Unable to contact slurm controller (connect failure)' >&2; exit 1\n")
    fake_slurm("sacct", _json_answer(SACCT_EMPTY))
    with pytest.raises(SlurmNotAsked) as err:
        SacctQuery(user="someone").job_states(["41"])
    assert "Unable to contact slurm controller" in err.value.reason


def test_a_read_that_fails_once_is_asked_once_more(fake_slurm, tmp_path):
    flag = tmp_path / "second"
    job = {"job_id": 7, "name": "n", "job_state": "PENDING", "user_name": "someone"}
    fake_slurm("squeue", f"""\
        if [ -e {flag} ]; then
        {_json_answer({"errors": [], "jobs": [job]})}
        exit 0
        fi
        touch {flag}
        """ + _json_answer(SQUEUE_22_05_DOWN))
    assert SacctQuery(user="someone").job_states(["7"])["7"].state == "PENDING"
    assert len(fake_slurm.asked("squeue")) == 2


def test_a_hanging_read_is_bounded_and_not_repeated(fake_slurm):
    fake_slurm("squeue", "exec sleep 60\n")
    with pytest.raises(SlurmNotAsked) as err:
        read_slurm(["squeue", "--json"], timeout=0.5, budget=3.0, json_errors=True)
    assert err.value.how == "timeout" and "no answer within" in err.value.reason
    assert len(fake_slurm.asked("squeue")) == 2  # the read and its one retry
    # the silence is remembered: the next reads of the controller do not wait again
    with pytest.raises(SlurmNotAsked):
        SacctQuery(user="someone").job_states(["1"])
    with pytest.raises(SlurmNotAsked):
        read_slurm(["scontrol", "show", "job", "1"])
    assert len(fake_slurm.asked("squeue")) == 2 and fake_slurm.asked("scontrol") == []


def test_old_slurm_without_json_reads_the_delimited_form(fake_slurm):
    sep = "\\037"
    fake_slurm("squeue", f"""\
        case "$*" in *--json*) echo "squeue: unrecognized option '--json'" >&2; exit 1;; esac
        printf '12{sep}RUNNING{sep}2026-01-01T00:00:00{sep}None{sep}a|b{sep}mbl-9\\n'
        """)
    jobs = SacctQuery(user="someone").job_states(["12"])
    assert jobs["12"].state == "RUNNING" and jobs["12"].name == "a|b"


def test_reconcile_leaves_a_run_alone_when_the_controller_is_silent(fake_slurm, tmp_path):
    fake_slurm("squeue", _json_answer(SQUEUE_22_05_DOWN))
    fake_slurm("sacct", _json_answer(SACCT_EMPTY))  # accounting answers: nothing (the job is only queued)
    fake_slurm("scontrol", "echo 'AccountingStoreFlags = job_comment'\n")
    with L.Ledger.open(tmp_path / "l.db", create=True) as ledger:
        run = ledger.begin_submission(name="r", plan_hash="0123456789abcdef", plan_yaml="name: r\n", executor="sbatch")
        ledger.conn.execute("UPDATE runs SET submitter='elsewhere:1' WHERE id=?", (run.id,))
        [result] = reconcile_submitting(ledger, SacctQuery(user="someone"), now=run.created_at + 10_000)
        assert result.outcome == "unknown"
        assert ledger.get_run(run.id).state == L.SUBMITTING  # not "lost": the queue was never seen


def test_refresh_keeps_recorded_states_and_the_line_says_how_old(fake_slurm, tmp_path, english):
    fake_slurm("squeue", _json_answer(SQUEUE_22_05_DOWN))
    fake_slurm("sacct", _json_answer(SACCT_EMPTY))
    with L.Ledger.open(tmp_path / "l.db", create=True) as ledger:
        run = ledger.begin_submission(name="r", plan_hash="0123456789abcdef", plan_yaml="name: r\n", executor="sbatch")
        run = ledger.mark_submitted(run.id, ["41"])
        with pytest.raises(SlurmNotAsked) as err:
            refresh_runs(ledger, SacctQuery(user="someone"), [run], raise_unavailable=True)
        assert ledger.get_run(run.id).state == L.SUBMITTED
    line = not_asked_line(err.value, [run], now=run.updated_at + 12 * 60 + 5)
    assert line.startswith("Slurm could not be asked (squeue: slurm_load_jobs") and line.endswith("12 min ago")


@pytest.mark.parametrize("seconds,text", [(-5, "0 s"), (59, "59 s"), (60, "1 min"), (7199, "119 min"),
                                          (7200, "2 h"), (3 * 86400, "3 d")])
def test_age_text(seconds, text, english):
    assert age_text(seconds) == text


def test_status_and_runs_say_slurm_could_not_be_asked(fake_slurm, tmp_path, mbl):
    fake_slurm("squeue", _json_answer(SQUEUE_22_05_DOWN))
    fake_slurm("sacct", _json_answer(SACCT_EMPTY))
    db = tmp_path / "l.db"
    with L.Ledger.open(db, create=True) as ledger:
        run = ledger.begin_submission(name="r", plan_hash="0123456789abcdef", plan_yaml="name: r\n", executor="sbatch")
        ledger.mark_submitted(run.id, ["41"])
        ledger.conn.execute("UPDATE runs SET updated_at=? WHERE id=?", (time.time() - 7 * 60 - 30, run.id))
    env = {"PATH": os.environ["PATH"]}
    for args in (("status", str(run.id)), ("runs",)):
        out = mbl.run(*args, "--ledger", str(db), env=env)
        assert out.rc == 0, out.stderr
        assert out.stderr.splitlines() == [("warning: Slurm could not be asked (squeue: slurm_load_jobs Failed while "
                                            "looking for jobs Unspecified error); states as last recorded 7 min ago")]
        assert "submitted" in out.stdout  # the state as recorded, not a guess
    assert Path(db).exists()
