"""Preflight against the permission policy (mbridge_launch.policy): every limit the Plan exceeds is
an error `policy.<key>` naming the limit, the Plan's value and the file that set it. These run
without a cluster (`preflight --no-cluster`), so CI can check a Plan against the policy.

The policy is a bound on the submitter, so these errors cannot be accepted (acceptance.py lists
only estimate checks) and the gate refuses them even with --force. The GPU-hours already submitted
in the last 24 h come from the ledger, which this layer cannot read: the caller passes them
(ctx.gpu_hours_used, from runs.usage).
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.base import slurm_time
from mbridge_launch.policy.cost import gpu_hours
from mbridge_launch.policy.files import Policy, shown_value
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.model import Check


def plan_gpu_hours(plan: Any) -> float:
    return gpu_hours(plan.cluster.total_gpus, plan.cluster.time)


def run_policy_checks(ctx: PreflightContext) -> list[Check]:
    policy: Policy | None = ctx.policy
    if policy is None or not policy.files:
        return []  # no policy file: nothing to report (golden outputs stay as they were)
    checks = [Check("policy.applied", "info", {"files": ", ".join(policy.files)})]
    for func in (_sizes, _time, _hours, _per_day, _names, _benchmark, _auto_rollback):
        checks += func(ctx, policy)
    return checks


def _over(code: str, limit: Any, value: Any, key: str | None = None, **extra: Any) -> Check:
    return Check(code, "error", {"limit": limit.key, "value": value, "allowed": shown_value(limit.key, limit.value),
                                 "path": limit.source, **extra}, subject=limit.key, key=key)


def _sizes(ctx: PreflightContext, policy: Policy) -> list[Check]:
    c = ctx.plan.cluster
    out = []
    for key, value in (("max_gpus", c.total_gpus), ("max_nodes", c.nodes)):
        limit = policy.get(key)
        if limit is not None and value > limit.value:
            out.append(_over(f"policy.{key}", limit, value))
    return out


def _time(ctx: PreflightContext, policy: Policy) -> list[Check]:
    limit = policy.get("max_time")
    seconds = slurm_time.parse_seconds(ctx.plan.cluster.time)  # the Plan's model validated it
    if limit is None or (seconds is not None and seconds <= limit.value):
        return []
    return [_over("policy.max_time", limit, ctx.plan.cluster.time)]


def _hours(ctx: PreflightContext, policy: Policy) -> list[Check]:
    limit = policy.get("max_gpu_hours")
    hours = plan_gpu_hours(ctx.plan)
    if limit is None or hours <= limit.value:
        return []
    c = ctx.plan.cluster
    return [_over("policy.max_gpu_hours", limit, hours, gpus=c.total_gpus, time=c.time)]


def _per_day(ctx: PreflightContext, policy: Policy) -> list[Check]:
    limit = policy.get("max_gpu_hours_per_day")
    if limit is None:
        return []
    out = []
    if ctx.gpu_hours_used is None:
        used = 0.0
        out.append(Check("policy.usage_unknown", "info", {}))
    else:
        used = float(ctx.gpu_hours_used())
    hours = plan_gpu_hours(ctx.plan)
    if used + hours > limit.value:
        out.append(_over("policy.max_gpu_hours_per_day", limit, hours, used=used, total=used + hours))
    return out


def _names(ctx: PreflightContext, policy: Policy) -> list[Check]:
    out = []
    c = ctx.plan.cluster
    for key, code, value in (("accounts", "policy.account", c.account), ("partitions", "policy.partition", c.partition)):
        limit = policy.get(key)
        if limit is None or (value is not None and value in limit.value):
            continue
        # no account / partition in the Plan: Slurm's default, which the policy cannot vouch for
        source = policy.refusing_source(key, value) if value is not None else limit.source
        out.append(Check(code, "error", {"limit": key, "value": value or "-", "allowed": shown_value(key, limit.value),
                                         "path": source or limit.source}, subject=key))
    return out


def _benchmark(ctx: PreflightContext, policy: Policy) -> list[Check]:
    limit = policy.get("allow_benchmark_recipes")
    if limit is None or limit.value or ctx.plan.recipe.kind != "benchmark":
        return []
    return [_over("policy.benchmark_recipe", limit, ctx.plan.recipe.name)]


def _auto_rollback(ctx: PreflightContext, policy: Policy) -> list[Check]:
    ar = ctx.plan.auto_rollback
    if not ar.enabled:
        return []
    allowed, _source = policy.auto_rollback_allowed(True)
    if not allowed:
        return [_over("policy.auto_rollback", policy.limits["auto_rollback.allow"], "true")]
    limit = policy.get("auto_rollback.max_per_run")
    if limit is not None and ar.max_rollbacks > limit.value:
        return [_over("policy.auto_rollback", limit, ar.max_rollbacks, key="preflight.policy.auto_rollback_max")]
    return []
