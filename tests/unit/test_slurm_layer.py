"""One Slurm command layer (mbridge_launch/slurm/commands.py) under the executors, preflight and the
ledger's reconcile: typed results with the raw output kept, one "cannot ask Slurm" exception,
and each caller's own reading of a failure. One Slurm time grammar (base/slurm_time.py)."""

from __future__ import annotations

import os
import stat

import pytest

from mbridge_launch.base import slurm_time
from mbridge_launch.base.errors import SubmissionError, UserError
from mbridge_launch.preflight import slurm as preflight_slurm
from mbridge_launch.runs import reconcile
from mbridge_launch.slurm import commands as slurm_cli


def fake(tmp_path, name: str, script: str):
    path = tmp_path / name
    path.write_text("#!/bin/bash\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_failure_keeps_the_raw_output_and_one_reason(tmp_path, monkeypatch):
    sbatch = fake(tmp_path, "sbatch", "echo out; echo 'sbatch: error: first' >&2; "
                                      "echo 'sbatch: error: Batch job submission failed: no nodes' >&2; exit 1\n")
    result = slurm_cli.call([sbatch, "job.sh"])
    assert not result.ok and result.returncode == 1 and result.stdout == "out\n"
    assert "error: first" in result.stderr and result.reason == "no nodes"
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(SubmissionError) as err:
        slurm_cli.sbatch(tmp_path / "job.sh", cwd=tmp_path)
    assert err.value.raw_output == result.output and err.value.exit_code == 4
    assert err.value.render("en") == "Slurm refused the job: no nodes"


def test_no_answer_is_one_exception_every_caller_knows(tmp_path, monkeypatch):
    assert preflight_slurm.SlurmUnavailable is reconcile.SlurmUnavailable is slurm_cli.SlurmUnavailable
    with pytest.raises(slurm_cli.SlurmCommandError) as err:
        slurm_cli.call([str(tmp_path / "no-such-squeue")])
    assert err.value.kind == "missing" and isinstance(err.value, slurm_cli.SlurmUnavailable)
    hang = fake(tmp_path, "scontrol", "sleep 5\n")
    with pytest.raises(slurm_cli.SlurmCommandError) as err:
        slurm_cli.call([hang, "show"], timeout=0.2)
    assert err.value.kind == "timeout"
    not_executable = tmp_path / "sinfo"
    not_executable.write_text("#!/bin/bash\n")
    with pytest.raises(slurm_cli.SlurmCommandError) as err:
        slurm_cli.call([not_executable])
    assert err.value.kind == "failed" and err.value.reason


def test_each_caller_reads_no_answer_its_own_way(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError) as err:  # executors and the CLI: one line
        slurm_cli.run_slurm(["scancel", "1"])
    assert err.value.key == "executors.slurm_missing"
    client = preflight_slurm.SlurmClient({"PATH": str(tmp_path)})
    with pytest.raises(preflight_slurm.SlurmUnavailable) as err:  # preflight: a finding's reason
        client.partitions()
    assert "scontrol" in str(err.value)
    assert reconcile.SacctQuery(user="u")._run(["squeue"]) is None  # reconcile: "cannot tell"


def test_preflight_keeps_caching_and_sends_its_environment(tmp_path):
    fake(tmp_path, "scontrol", 'echo "PartitionName=gpu Nodes=n1 State=UP MaxTime=$MBL_TEST_MAX"\n')
    client = preflight_slurm.SlurmClient({"PATH": f"{tmp_path}:{os.environ['PATH']}", "MBL_TEST_MAX": "04:00:00"})
    assert client.partitions()["gpu"].max_time == "04:00:00"
    client.partitions()
    assert client.calls == [["scontrol", "show", "partition", "-o"]]


@pytest.mark.parametrize("text,seconds,minutes", [
    ("30", 1800, 30), ("10:30", 630, 11), ("04:00:00", 14400, 240), ("2-12", 216000, 3600),
    ("1-00:00:01", 86401, 1441), ("0", 0, 1), ("UNLIMITED", None, None),
])
def test_one_slurm_time_grammar(text, seconds, minutes):
    from mbridge_launch.executors import submitit as submitit_adapter

    assert slurm_time.parse_seconds(text) == seconds and slurm_time.minutes(text) == minutes
    if minutes is None:
        with pytest.raises(UserError):  # submitit has no unlimited timeout
            submitit_adapter.slurm_time_minutes(text)
    else:
        assert submitit_adapter.slurm_time_minutes(text) == minutes
