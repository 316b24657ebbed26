"""Where the auto-rollback watcher job runs, and whether it can start while training runs.

The watcher acts on a NaN or a loss spike only while it runs; a watcher queued behind its own
training job starts when training has ended and acts on nothing (gate/watcher_job.py says why it
is a job of its own). These rules read the cluster facts the other cluster checks already hold
(partitions, nodes) and warn, naming the fix (`recommend --watcher-partition`, or
auto_rollback.watcher_partition in the Plan), when:
- the watcher partition does not exist, is not up, or refuses the watcher's account;
- it is the training partition and the training job takes its nodes whole (--exclusive), or
  asks for every node of it;
- every node of the watcher partition is busy or unavailable now.
"""

from __future__ import annotations

from typing import Any, Optional

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.model import Check
from mbridge_launch.preflight.slurm import Node, Partition

# node states that take no new job now (allocated: every CPU of it is in use)
_BUSY_STATES = {"allocated", "completing"}


def watcher_placement(plan: Any) -> tuple[Optional[str], Optional[str]]:
    """(partition, account) of the watcher job: the Plan's watcher placement, else the training
    job's (None: Slurm's default partition)."""
    ar, cluster = plan.auto_rollback, plan.cluster
    return ar.watcher_partition or cluster.partition, ar.watcher_account or cluster.account


def watcher_checks(ctx: PreflightContext, partitions: dict[str, Partition], nodes: dict[str, Node],
                   training: Partition) -> list[Check]:
    """The watcher placement warnings for a Plan with auto_rollback (none otherwise). `training`:
    the training job's partition, resolved by the cluster checks."""
    plan = ctx.plan
    if not plan.auto_rollback.enabled:
        return []
    name, account = watcher_placement(plan)
    part = partitions.get(name) if name else training
    if part is None:
        valid = ", ".join(sorted(partitions)) or "-"
        return [Check("cluster.watcher_partition_missing", "warning", {"partition": name, "valid": valid}, subject=name or "")]
    params = {"partition": part.name}
    if part.state != "up":
        return [Check("cluster.watcher_partition_down", "warning", {**params, "state": part.state.upper()}, subject=part.name)]
    denied = _account_denied(part, account)
    if denied:
        return [Check("cluster.watcher_account_denied", "warning", {**params, "account": account}, subject=part.name)]
    members = [n for n in nodes.values() if part.name in n.partitions]
    if part.name == training.name:
        blocked = _blocked_by_training(plan, members)
        if blocked:
            return [Check(blocked, "warning", {**params, "nodes": plan.cluster.nodes, "count": len(members)}, subject=part.name)]
    if members and not any(n.available and n.state not in _BUSY_STATES for n in members):
        busy = ", ".join(f"{n.name} ({n.state_text})" for n in members[:6])
        return [Check("cluster.watcher_partition_busy", "warning", {**params, "busy": busy}, subject=part.name)]
    return [Check("cluster.watcher_placement_ok", "info", params, subject=part.name)]


def _account_denied(part: Partition, account: Optional[str]) -> bool:
    if not account:
        return False
    wanted = account.lower()
    return wanted in part.deny_accounts or (part.allow_accounts != ("all",) and wanted not in part.allow_accounts)


def _blocked_by_training(plan: Any, members: list[Node]) -> Optional[str]:
    """The check code when the training job leaves no room for the watcher in its own partition."""
    if plan.cluster.exclusive:
        return "cluster.watcher_same_exclusive"
    if members and plan.cluster.nodes >= len(members):
        return "cluster.watcher_same_all_nodes"
    return None
