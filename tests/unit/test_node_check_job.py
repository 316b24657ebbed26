"""The node-check job that `preflight --on-nodes` submits asks Slurm for its own few minutes, not
the Plan's training time limit (which would keep it pending behind long-job limits)."""

from __future__ import annotations

import re

import plan_fixtures as pf
from mbridge_launch.executors import get_executor
from mbridge_launch.executors.batch_script import NODE_CHECK_TIME
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.node_checks import node_check_job


def test_the_node_check_job_has_its_own_short_time_limit():
    plan = pf.four_node_gb200()
    script = node_check_job(PreflightContext(plan=plan, env={}))
    assert re.findall(r"^#SBATCH --time=(\S+)$", script, flags=re.M) == [NODE_CHECK_TIME]
    assert NODE_CHECK_TIME != plan.cluster.time and NODE_CHECK_TIME <= "00:15:00"
    training = get_executor("sbatch").render(plan).text
    assert re.findall(r"^#SBATCH --time=(\S+)$", training, flags=re.M) == [plan.cluster.time]
