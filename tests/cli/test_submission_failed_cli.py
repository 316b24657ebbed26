"""A run that never got a job (issue 33, item 8): `diagnose` says "submission failed: <reason>" and
exits 1 (it said "no failure found", exit 0); `status` prints Slurm's raw answer as lines, never a
literal `\\n` of its own; a controller that cannot be reached is said so, not "Slurm refused the job"."""

from __future__ import annotations

import json

import pytest

from cli_helpers import run_cli
from mbridge_launch.base.errors import SubmissionError
from mbridge_launch.runs import ledger as L
from mbridge_launch.slurm import commands as slurm_cli

NO_CONFIG = ("sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
             "sbatch: error: fetch_config: DNS SRV lookup failed\n"
             "sbatch: error: _establish_config_source: failed to fetch config\n"
             "sbatch: fatal: Could not establish a configuration source\n")
REFUSED = "sbatch: error: Batch job submission failed: Invalid partition name specified\n"


def _failed_run(path, output: str) -> L.RunRecord:
    with L.Ledger.open(path) as ledger:
        with pytest.raises(SubmissionError):
            with ledger.submission(name="r", plan_hash="h", plan_yaml="name: r\n", executor="sbatch") as sub:
                sub.call_scheduler(lambda: (_ for _ in ()).throw(slurm_cli.submission_error(output)))
        return ledger.get_run("r")


def test_a_run_slurm_refused_is_diagnosed_as_a_failed_submission(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    record = _failed_run(db, REFUSED)
    assert record.state == L.SUBMIT_FAILED and not record.may_have_job
    res = run_cli("diagnose", "r", "--ledger", db)
    assert res.returncode == 1, res
    assert res.stdout.splitlines()[0] == ("cause: submit_failed: submission failed: Slurm refused the job: "
                                          "Invalid partition name specified")
    assert "no failure found" not in res.stdout and "from its logs only" not in res.stderr
    data = json.loads(run_cli("diagnose", "r", "--ledger", db, "--format", "json").stdout)
    assert (data["cause"], data["retry"]) == ("submit_failed", "no")
    zh = run_cli("diagnose", "r", "--ledger", db, lang="zh")
    assert zh.returncode == 1 and "提交失败：" in zh.stdout


def test_status_prints_the_raw_answer_as_lines_without_escapes(tmp_path):
    db = tmp_path / "ledger.sqlite3"
    _failed_run(db, NO_CONFIG)
    res = run_cli("status", "r", "--ledger", db)
    assert res.returncode == 0, res
    assert "\\n" not in res.stdout and "\\x" not in res.stdout
    lines = res.stdout.splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("  error: "))
    assert lines[error] == ("  error: SubmissionError: cannot reach the Slurm controller (Could not establish a "
                            "configuration source); nothing was submitted: submit from a login node of the cluster "
                            "(SLURM_CONF set, `sinfo` answers)")
    assert lines[error + 1:error + 5] == ["    " + line for line in NO_CONFIG.splitlines()]


@pytest.mark.parametrize("output, key", [
    (NO_CONFIG, slurm_cli.UNREACHABLE),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
     slurm_cli.UNREACHABLE_INDEFINITE),
    ("sbatch: error: slurm_persist_conn_open_without_init: failed to open persistent connection: Connection refused\n",
     slurm_cli.UNREACHABLE_INDEFINITE),
])
def test_an_unreachable_controller_is_said_so(output, key):
    err = slurm_cli.submission_error(output)
    assert err.key == key
    text = err.render("en")
    assert text.startswith("cannot reach the Slurm controller (") and "refused" not in text.split("(")[0]
    assert err.render("zh").startswith("无法连接 Slurm 控制器（")


def test_no_configuration_is_definite_and_a_lost_connection_is_not(tmp_path):
    assert not _failed_run(tmp_path / "a.sqlite3", NO_CONFIG).may_have_job  # sbatch sent nothing
    lost = _failed_run(tmp_path / "b.sqlite3", "sbatch: error: Batch job submission failed: Unable to contact "
                                               "slurm controller (connect failure)\n")
    assert lost.may_have_job  # the classification of issue 32 is kept: the next command looks for it
    from mbridge_launch.runs.run_diagnosis import submission_failure

    found = submission_failure(lost)  # before any reconciliation: the fix says the job may exist
    assert found.cause == "submit_failed" and found.failed
    assert "a job may still exist" in found.fix.render("en") and "mbridge-launch status r" in found.fix.render("en")


def test_a_refusal_keeps_its_words():
    err = slurm_cli.submission_error(REFUSED)
    assert err.key == slurm_cli.REFUSED and err.render("en") == "Slurm refused the job: Invalid partition name specified"
