"""Run the preflight groups in order and collect one Report.

Python API: `run_preflight(plan, *, cluster=True, on_nodes=False) -> Report`. Groups: plan, data,
paths, training entry, environment, permission policy (no cluster needed), then cluster (read-only Slurm queries and `sbatch
--test-only`) unless cluster=False, then the node check (the only submission) if on_nodes.
A group that crashes becomes an error check naming it: a preflight that cannot look must not
pass.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.paths import cache_dir
from mbridge_launch.plan.model import Plan
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.model import Check, Report


def _guard(group: str, func: Callable[[], list[Check]]) -> list[Check]:
    try:
        return func()
    except (KeyboardInterrupt, UserError):
        # a UserError is the user's input refused (a --ledger that is a folder): the command's
        # one-line error and exit code, not a crashed group reported as a bug
        raise
    except Exception as exc:  # noqa: BLE001 - report, never a traceback
        if os.environ.get("MBRIDGE_LAUNCH_DEBUG"):
            raise
        return [Check("preflight.group_crashed", "error", {"group": group, "error": f"{type(exc).__name__}: {exc}"}, subject=group)]


def run_preflight(
    plan: Plan | str | Path,
    *,
    cluster: bool = True,
    on_nodes: bool = False,
    env: Mapping[str, str] | None = None,
    plan_text: str | None = None,
    progress_stream: Any = None,
    client: Any = None,
    node_timeout_s: float | None = None,
    submit_dir: Path | None = None,
    save_dir_ownership: Callable[[str], Any] | None = None,
    policy: Any = None,
    gpu_hours_used: Callable[[], float] | None = None,
) -> Report:
    """Check `plan` and return the Report (report.ok, report.exit_code, report.to_json()).

    plan: a Plan, or the path of a Plan file (an unreadable or invalid file raises UserError,
    exit code 2, as on the command line).
    env: the submitting environment (default os.environ; SLURM_CONF and secrets come from it).
    plan_text: the Plan file as written, scanned for secret values along with the Plan.
    progress_stream: where a progress bar may draw (only if it is a terminal).
    client: a SlurmClient (tests pass one to count queries).
    submit_dir: where the submit will run (the gate's script directory), where a Plan without
    launch.workdir starts its job; None: not known yet (a preflight of its own).
    save_dir_ownership: who owns a checkpoint directory (runs.ownership, given by the CLI and the
    gate: preflight cannot import the ledger); None: not checked, said as an info.
    policy: the permission policy (policy.files.Policy); None: loaded from the site, user and
    project files of `env` and the current directory (a bad file raises UserError, exit 2).
    gpu_hours_used: the GPU-hours this user submitted in the last 24 h (runs.usage), asked only
    when a policy sets max_gpu_hours_per_day."""
    if not isinstance(plan, Plan):
        from mbridge_launch.plan.model import load_plan, read_plan_text

        path = Path(plan)
        plan = load_plan(path)
        if plan_text is None:
            plan_text = read_plan_text(path)
    environment = dict(os.environ if env is None else env)
    if policy is None:
        from mbridge_launch.policy.files import load_policy

        policy = load_policy(None, environment)
    ctx = PreflightContext(plan=plan, env=environment, plan_text=plan_text, cache_dir=cache_dir(environment), progress_stream=progress_stream,
                           submit_dir=submit_dir, save_dir_ownership=save_dir_ownership, policy=policy,
                           gpu_hours_used=gpu_hours_used)
    report = _run_groups(ctx, cluster, on_nodes, environment, client, node_timeout_s)
    from mbridge_launch.preflight.acceptance import apply_acceptances

    report.checks = apply_acceptances(report.checks, plan.accepted_checks)
    return report


def _run_groups(ctx: PreflightContext, cluster: bool, on_nodes: bool, environment: dict, client: Any,
                node_timeout_s: float | None) -> Report:
    from mbridge_launch.preflight.data_checks import run_data_checks
    from mbridge_launch.preflight.entry_checks import run_entry_checks
    from mbridge_launch.preflight.env_checks import run_env_checks
    from mbridge_launch.preflight.path_checks import run_path_checks
    from mbridge_launch.preflight.plan_checks import run_plan_checks
    from mbridge_launch.preflight.policy_checks import run_policy_checks

    report = Report()
    report.add(_guard("plan", lambda: run_plan_checks(ctx)))
    report.add(_guard("data", lambda: run_data_checks(ctx)))
    report.add(_guard("paths", lambda: run_path_checks(ctx)))
    report.add(_guard("entry", lambda: run_entry_checks(ctx)))
    report.add(_guard("env", lambda: run_env_checks(ctx)))
    report.add(_guard("policy", lambda: run_policy_checks(ctx)))  # no cluster needed: --no-cluster too
    if not cluster and not on_nodes:
        report.add([Check("cluster.skipped", "info", {})])
        return report
    from mbridge_launch.preflight.slurm import SlurmClient

    slurm = client if client is not None else SlurmClient(environment)
    cluster_errors = False
    if cluster:
        from mbridge_launch.preflight.cluster_checks import run_cluster_checks

        cluster_checks = _guard("cluster", lambda: run_cluster_checks(ctx, slurm))
        cluster_errors = any(c.severity == "error" for c in cluster_checks)
        report.add(cluster_checks)
    else:
        report.add([Check("cluster.skipped", "info", {})])
    if on_nodes and cluster_errors:
        # Slurm would refuse or never start the node-check job: do not submit it.
        report.add([Check("nodes.skipped", "info", {})])
    elif on_nodes:
        from mbridge_launch.preflight.node_checks import WAIT_TIMEOUT_S, run_node_checks

        timeout = WAIT_TIMEOUT_S if node_timeout_s is None else node_timeout_s
        report.add(_guard("nodes", lambda: run_node_checks(ctx, slurm, timeout)))
    return report


def default_progress_stream() -> Any:
    return sys.stderr if sys.stderr.isatty() else None
