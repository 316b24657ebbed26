"""The plan card shown before anything is submitted: what, where, how long, what it costs."""

from __future__ import annotations

from typing import Any, Optional

from mbridge_launch.base.i18n import t
from mbridge_launch.plan.model import Plan
from mbridge_launch.planner.layout_words import vp_word
from mbridge_launch.policy import cost


def gpu_hours(plan: Plan) -> float:
    return cost.gpu_hours(plan.cluster.total_gpus, plan.cluster.time)


def convergence_overrides(plan: Plan) -> list[Any]:
    return [o for o in plan.overrides if o.change_class == "convergence"]


def render_card(plan: Plan, *, executor: str, script_path: str, report: Any = None,
                parent_run_id: Optional[int] = None, watcher: bool = True, policy: Any = None,
                resubmission: Optional[dict[str, Any]] = None) -> str:
    """`resubmission`: why a run with a parent is submitted again (the gate's confirmation detail:
    {"reason": "diagnosis", "cause": ...} from a failure retry, {"reason": "plan.auto_rollback",
    "to_iter": ...} from the watcher; none from `rollback --resubmit`)."""
    p, c, e = plan.parallelism, plan.cluster, plan.estimates
    kind = t(f"card.kind.{plan.recipe.kind}")
    lines = [f"== {t('gate.card.title')} ({plan.name}, {plan.plan_hash()}) =="]
    if parent_run_id is not None:
        lines.append(_parent_line(plan, parent_run_id, resubmission or {}))
    lines.append(f"{t('card.recipe')}: {plan.recipe.name}  [{kind}]")
    data = plan.dataset.selector + (t("gate.card.prefixes", count=len(plan.dataset.data_paths)) if plan.dataset.data_paths else "")
    lines.append(f"{t('card.mode')}: {plan.mode}    {t('card.dataset')}: {data}")
    vp = vp_word(p.vp)  # VP one way, as every text says it
    etp = f" ETP={p.etp}" if p.etp and p.etp > 1 else ""
    lines.append(f"{t('card.layout')}: TP={p.tp} PP={p.pp} {vp} CP={p.cp} EP={p.ep}{etp} "
                 f"DP={p.dp}  MBS={p.mbs} GBS={p.gbs} seq={p.seq_length}")
    lines.append(t("gate.card.where", nodes=t("count.nodes", count=c.nodes), per_node=c.gpus_per_node, gpu_type=c.gpu_type.upper(),
                   partition=c.partition or "-", account=c.account or "-", time=c.time))
    if e.step_time_s and e.tokens_per_sec_per_gpu:
        lines.append(t("gate.card.speed", step=e.step_time_s, tps=e.tokens_per_sec_per_gpu,
                       total=e.tokens_per_sec_per_gpu * c.total_gpus))
    else:
        lines.append(t("gate.card.speed_unknown"))
    lines.append(t("gate.card.cost", hours=gpu_hours(plan), gpus=t("count.gpus", count=c.total_gpus), time=c.time))
    conv = convergence_overrides(plan)
    lines.append(t("gate.card.convergence", count=len(conv)))
    for o in conv:
        lines.append(f"    {o.key}={o.value}" + (f"  ({o.reason})" if o.reason else ""))
    warnings = [(w.code, w.message) for w in plan.warnings]
    if report is not None:
        warnings += [(ch.code, ch.message()) for ch in report.warnings]
    if warnings:
        lines.append(f"{t('card.warnings')}:")
        lines.extend(f"    ! {code}: {message}" for code, message in warnings)
    ar = plan.auto_rollback
    if ar.enabled:
        spike = t("gate.card.auto_rollback_spike", factor=ar.spike_factor, window=ar.window) if ar.spike_factor else "-"
        lines.append(t("gate.card.auto_rollback", nan=t("gate.card.yes") if ar.on_nan else t("gate.card.no"),
                       spike=spike, count=_automatic_actions(ar.max_rollbacks, policy)))
        lines.append("    " + (t("gate.card.watcher_job") if watcher else t("gate.card.watcher_none", name=plan.name)))
        if watcher:
            lines.append("    " + _watcher_place(plan))
    if policy is not None and policy.limits:  # which limits apply and which file set each; nothing without a policy
        lines.append(t("policy.card.title"))
        lines.extend(policy.summary_lines())
    lines.append(t("gate.card.script", executor=executor, path=script_path))
    return "\n".join(lines)


def _parent_line(plan: Plan, parent_run_id: int, why: dict[str, Any]) -> str:
    """The real reason of a resubmission: a diagnosed failure retried (node failure: the nodes
    left out), an automatic rollback by the watcher, or a rollback by hand."""
    load = plan.checkpoint.load or "-"
    if why.get("reason") == "diagnosis":
        nodes = ", ".join(str(n) for n in why.get("exclude_nodes") or []) or "-"
        return t("gate.card.parent_retry", id=parent_run_id, cause=why.get("cause") or "-", nodes=nodes, load=load)
    if why.get("reason") == "plan.auto_rollback":
        return t("gate.card.parent_auto_rollback", id=parent_run_id, to_iter=why.get("to_iter", "-"), load=load)
    return t("gate.card.parent", id=parent_run_id, load=load)


def _watcher_place(plan: Plan) -> str:
    """Where the watcher job runs and which secret NAMES reach it: only those its resubmission
    forwards to the new training job (gate/watcher_job.py)."""
    from mbridge_launch.gate.watcher_job import may_resubmit
    from mbridge_launch.preflight.watcher_checks import watcher_placement

    partition, account = watcher_placement(plan)
    secrets = ", ".join(plan.cluster.secrets) if may_resubmit(plan) and plan.cluster.secrets else "-"
    return t("gate.card.watcher_place", partition=partition or "-", account=account or "-", secrets=secrets)


def _automatic_actions(asked: int, policy: Any) -> int:
    """What the watcher will really allow: the Plan's max_rollbacks capped by the policy (3 without one)."""
    if policy is None:
        from mbridge_launch.policy.files import Policy

        policy = Policy()
    return policy.max_auto_rollbacks(asked)[0]
