"""The real sbatch of the local cluster, pointed at no controller (issue 33, item 8): its answer is
"cannot reach the Slurm controller", never "Slurm refused the job"."""

from __future__ import annotations

import shutil

import pytest

from mbridge_launch.base.errors import SubmissionError
from mbridge_launch.slurm import commands as slurm_cli

pytestmark = pytest.mark.slurm


def test_sbatch_without_a_configuration_cannot_reach_the_controller(slurm_env, tmp_path, monkeypatch):
    assert shutil.which("sbatch")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    monkeypatch.delenv("SLURM_CONF")  # and no DNS SRV record: sbatch finds no controller at all
    with pytest.raises(SubmissionError) as err:
        slurm_cli.sbatch(script, cwd=tmp_path)
    assert err.value.key == slurm_cli.UNREACHABLE, err.value.raw_output
    assert err.value.render("en").startswith("cannot reach the Slurm controller (")


def test_sbatch_with_a_dead_controller_port_cannot_reach_it(slurm_env, slurm_cluster, tmp_path, monkeypatch):
    conf = tmp_path / "slurm.conf"
    lines = open(slurm_cluster.slurm_conf).read().splitlines()
    conf.write_text("\n".join("SlurmctldPort=1" if ln.startswith("SlurmctldPort=") else ln for ln in lines) + "\n")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with pytest.raises(SubmissionError) as err:
        slurm_cli.sbatch(script, cwd=tmp_path)
    assert err.value.key == slurm_cli.UNREACHABLE_INDEFINITE, err.value.raw_output
    assert err.value.render("en").startswith("cannot reach the Slurm controller (")
