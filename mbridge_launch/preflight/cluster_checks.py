"""Cluster checks: read-only Slurm queries (partition, account, GPUs, time, node states, NVLink
domains, site features) and, as the final say, `sbatch --test-only` of the rendered script.

`sbatch --test-only` validates a job and estimates its start without creating it; the script goes
on stdin so nothing is written to disk.
"""

from __future__ import annotations

import getpass
import re

from mbridge_launch.base.slurm_time import format_seconds, parse_seconds
from mbridge_launch.knowledge.vocabulary import NVL72, gpu_type_or_none
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.model import Check
from mbridge_launch.preflight.slurm import (
    Node,
    Partition,
    SlurmClient,
    SlurmUnavailable,
)
from mbridge_launch.preflight.storage import detail_text as _d
from mbridge_launch.preflight.watcher_checks import watcher_checks

# (GPUs per node, GPUs per NVLink domain) of the NVL72 systems, used when the hardware catalog
# cannot say: 4-GPU nodes in 72-GPU NVLink domains.
_NVL72_SHAPE = (4, 72)
_SEGMENT_MIN_VERSION = (24, 11)


def run_cluster_checks(ctx: PreflightContext, client: SlurmClient) -> list[Check]:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.preflight.progress import Progress

    # three steps that can each take seconds on a busy controller: the queries, the checks (which
    # may ask sacctmgr / scontrol show config), sbatch --test-only
    with Progress(ctx.progress_stream, t("preflight.progress.cluster"), 3) as progress:
        return _cluster_checks(ctx, client, progress)


def _cluster_checks(ctx: PreflightContext, client: SlurmClient, progress) -> list[Check]:  # noqa: ANN001
    try:
        partitions = client.partitions()
        nodes = client.nodes()
    except SlurmUnavailable as exc:
        return [Check("cluster.unreachable", "warning", {"reason": str(exc)})]
    progress.advance()

    checks: list[Check] = []
    part = _resolve_partition(ctx, partitions, checks)
    if part is None:
        return checks
    checks += _partition_state(part)
    checks += _account(ctx, client, part)
    checks += _time_limit(ctx, part)
    checks += _max_nodes(ctx, part)
    checks += _gpus(ctx, part, nodes)
    checks += _nvlink_domain(ctx, client, nodes, part)
    checks += _site_features(ctx, client)
    checks += watcher_checks(ctx, partitions, nodes, part)  # preflight/watcher_checks.py
    progress.advance()
    if any(c.severity == "error" for c in checks):
        checks.append(Check("cluster.test_only_skipped", "info", {}))
    else:
        unavailable = next((c for c in checks if c.code == "cluster.nodes_unavailable"), None)
        checks += _test_only(ctx, client, unavailable)
    progress.advance()
    return checks


# ---------------------------------------------------------------------- partition and account
def _resolve_partition(ctx: PreflightContext, partitions: dict[str, Partition], checks: list[Check]) -> Partition | None:
    name = ctx.plan.cluster.partition
    valid = ", ".join(sorted(partitions)) or "-"
    if name is None:
        default = next((p for p in partitions.values() if p.default), None)
        if default is None:
            checks.append(Check("cluster.partition_unset", "error", {"valid": valid}))
            return None
        checks.append(Check("cluster.partition_default", "info", {"partition": default.name}, subject=default.name))
        return default
    part = partitions.get(name)
    if part is None:
        checks.append(Check("cluster.partition_missing", "error", {"partition": name, "valid": valid}, subject=name))
    return part


def _partition_state(part: Partition) -> list[Check]:
    if part.state != "up":
        return [Check("cluster.partition_down", "error", {"partition": part.name, "state": part.state.upper()}, subject=part.name)]
    return []


def _account(ctx: PreflightContext, client: SlurmClient, part: Partition) -> list[Check]:
    account = ctx.plan.cluster.account
    if not account:
        return []
    wanted = account.lower()
    params = {"account": account, "partition": part.name}
    if wanted in part.deny_accounts:
        return [Check("cluster.account_denied", "error", {**params, "allowed": _d("accounts_except", accounts=", ".join(part.deny_accounts))}, subject=account)]
    if part.allow_accounts != ("all",) and wanted not in part.allow_accounts:
        return [Check("cluster.account_denied", "error", {**params, "allowed": ", ".join(part.allow_accounts)}, subject=account)]
    user = ctx.env.get("USER") or ctx.env.get("LOGNAME") or getpass.getuser()
    accounts = client.user_accounts(user)
    if accounts is not None and wanted not in accounts:
        try:
            enforce = client.config().get("AccountingStorageEnforce", "")
        except SlurmUnavailable:
            enforce = ""
        severity = "error" if "associations" in enforce.lower() else "warning"
        return [Check("cluster.account_no_association", severity, {**params, "user": user, "accounts": ", ".join(sorted(accounts))}, subject=account)]
    return []


def _time_limit(ctx: PreflightContext, part: Partition) -> list[Check]:
    try:
        wanted = parse_seconds(ctx.plan.cluster.time)
        limit = parse_seconds(part.max_time)
    except ValueError:
        return []  # the partition's MaxTime is not a Slurm time (the Plan's always is: plan.model)
    if limit is not None and (wanted is None or wanted > limit):
        return [Check("cluster.time_over_max", "error", {"time": ctx.plan.cluster.time, "max_time": format_seconds(limit), "partition": part.name}, subject=part.name)]
    return []


def _max_nodes(ctx: PreflightContext, part: Partition) -> list[Check]:
    if part.max_nodes.isdigit() and ctx.plan.cluster.nodes > int(part.max_nodes):
        return [Check("cluster.max_nodes", "error", {"nodes": ctx.plan.cluster.nodes, "max_nodes": part.max_nodes, "partition": part.name}, subject=part.name)]
    return []


# ---------------------------------------------------------------------- GPUs and nodes
def type_matches(gres_type: str, wanted: str) -> bool:
    """GRES type names vary by site: `h100`, `h100_80gb`, `nvidia_h100_80gb_hbm3` all are H100."""
    gres_type, wanted = gres_type.lower(), wanted.lower()
    return gres_type == wanted or wanted in re.split(r"[_\-.]", gres_type)


def gpus_of_type(node: Node, wanted: str) -> int:
    """GPUs of the wanted type on a node: by GRES type, or untyped GRES on a node whose features
    name the type."""
    counts = node.gpus()
    typed = sum(n for t, n in counts.items() if t and type_matches(t, wanted))
    if typed:
        return typed
    if counts.get("") and any(type_matches(f, wanted) for f in node.features):
        return counts[""]
    return 0


def _describe_gpus(nodes: list[Node]) -> str:
    seen: dict[str, int] = {}
    for node in nodes:
        for gtype, count in node.gpus().items():
            label = f"{count}x {gtype or _d('untyped')}"
            seen[label] = seen.get(label, 0) + 1
    return ", ".join(_d("gpu_nodes", label=label, count=n) for label, n in sorted(seen.items())) or _d("no_gpus")


def _gpus(ctx: PreflightContext, part: Partition, nodes: dict[str, Node]) -> list[Check]:
    cluster = ctx.plan.cluster
    members = [n for n in nodes.values() if part.name in n.partitions]
    params = {"partition": part.name, "gpu_type": cluster.gpu_type, "gpus_per_node": cluster.gpus_per_node, "nodes": cluster.nodes}
    wanted = gpu_type_or_none(cluster.gpu_type) or cluster.gpu_type  # dgx-h100 is GRES type h100
    typed = [(n, gpus_of_type(n, wanted)) for n in members]
    with_type = [(n, c) for n, c in typed if c > 0]
    if not with_type:
        return [Check("cluster.gpu_type_missing", "error", {**params, "found": _describe_gpus(members)}, subject=part.name)]
    fitting = [n for n, c in with_type if c >= cluster.gpus_per_node]
    if not fitting:
        most = max(c for _, c in with_type)
        return [Check("cluster.gpus_per_node_short", "error", {**params, "found": most}, subject=part.name)]
    checks: list[Check] = []
    if len(fitting) < cluster.nodes:
        return [Check("cluster.not_enough_nodes", "error", {**params, "count": len(fitting)}, subject=part.name)]
    available = [n for n in fitting if n.available]
    if len(available) < cluster.nodes:
        down = ", ".join(f"{n.name} ({n.state_text}{': ' + n.reason if n.reason else ''})" for n in fitting if not n.available)
        checks.append(Check("cluster.nodes_unavailable", "warning", {**params, "count": len(available), "down": down}, subject=part.name))
    most = max(c for _, c in with_type)
    if cluster.exclusive and most > cluster.gpus_per_node:
        checks.append(Check("cluster.gpus_unused", "warning", {**params, "found": most}, subject=part.name))
    checks.append(Check("cluster.gpus_ok", "info", {**params, "count": len(fitting), "available": len(available)}, subject=part.name))
    return checks


# ---------------------------------------------------------------------- NVLink domains and site features
def _nvl_shape(ctx: PreflightContext, part_nodes: list[Node]) -> tuple[int, int] | None:
    """(GPUs per node, GPUs per NVLink domain) when the domain spans several nodes."""
    hw = ctx.hardware()
    if hw.ok:
        per_node = getattr(hw.value, "gpus_per_node", None)
        domain = getattr(hw.value, "nvlink_domain", None) or getattr(hw.value, "nvlink_domain_gpus", None)
        if isinstance(per_node, int) and isinstance(domain, int):
            return (per_node, domain) if domain > per_node else None
    shape = _NVL72_SHAPE if gpu_type_or_none(ctx.plan.cluster.gpu_type) in NVL72 else None
    if shape is None and any("nvl72" in n.features for n in part_nodes):
        shape = (ctx.plan.cluster.gpus_per_node, 72)
    return shape


def expected_segment(nodes: int, domain_nodes: int) -> int:
    """NVIDIA's benchmark launcher: the node count up to a domain, else its largest divisor that
    fits in one domain, so that a job's nodes sit inside NVLink domains (the same rule the sbatch
    executor renders)."""
    from mbridge_launch.knowledge.perf_env import nvl72_segment

    return nvl72_segment(nodes, domain_nodes)


def _segment_support(client: SlurmClient) -> tuple[bool, str, str]:
    try:
        version, version_text = client.version()
        topology = client.config().get("TopologyPlugin", "?")
    except SlurmUnavailable as exc:
        return False, "?", str(exc)
    ok = version is not None and version >= _SEGMENT_MIN_VERSION and topology.strip() == "topology/block"
    return ok, version_text, topology


def _nvlink_domain(ctx: PreflightContext, client: SlurmClient, nodes: dict[str, Node], part: Partition) -> list[Check]:
    cluster = ctx.plan.cluster
    shape = _nvl_shape(ctx, [n for n in nodes.values() if part.name in n.partitions])
    if shape is None or cluster.nodes <= 1:
        return []
    per_node, domain = shape
    domain_nodes = max(1, domain // max(1, per_node))
    want = expected_segment(cluster.nodes, domain_nodes)
    params = {"nodes": cluster.nodes, "segment": cluster.segment, "domain_nodes": domain_nodes, "domain": domain, "expected": want}
    checks: list[Check] = _node_count_fit(cluster.nodes, domain_nodes, domain, want)
    if cluster.segment is None:
        supported, _, _ = _segment_support(client)
        return checks + [Check("cluster.nvl72_no_segment", "warning" if supported else "info", params)]
    if cluster.segment > domain_nodes:
        checks.append(Check("cluster.segment_too_big", "error", params))
    elif cluster.nodes % cluster.segment:
        checks.append(Check("cluster.segment_not_divisor", "error", params))
    elif cluster.segment != want:
        checks.append(Check("cluster.segment_unusual", "warning", params))
    return checks


def _good_split(nodes: int, domain_nodes: int) -> bool:
    """Whether `nodes` splits into equal segments of at least half an NVLink domain each."""
    return nodes <= domain_nodes or expected_segment(nodes, domain_nodes) * 2 >= domain_nodes


def _node_count_fit(nodes: int, domain_nodes: int, domain: int, segment: int) -> list[Check]:
    """More nodes than one NVLink domain holds: the job spans domains, in equal segments of at
    most a domain. A node count whose best segment is under half a domain (19 nodes of 18-node
    domains: segments of 1) leaves the cross-node NVLink mostly unused; name the nearest counts
    that split well."""
    if _good_split(nodes, domain_nodes):
        return []
    lower = next(n for n in range(nodes - 1, 0, -1) if _good_split(n, domain_nodes))
    upper = next(n for n in range(nodes + 1, nodes + 2 * domain_nodes + 2) if _good_split(n, domain_nodes))
    return [Check("cluster.nvl72_nodes_split", "warning", {"nodes": nodes, "domain_nodes": domain_nodes, "domain": domain,
                                                          "count": segment, "lower": lower, "upper": upper})]


def _site_features(ctx: PreflightContext, client: SlurmClient) -> list[Check]:
    cluster = ctx.plan.cluster
    checks: list[Check] = []
    if cluster.segment is not None or cluster.profile.segment:
        supported, version, topology = _segment_support(client)
        if not supported:
            checks.append(Check("cluster.segment_unsupported", "error", {"version": version, "topology": topology}))
    if cluster.container_image or cluster.profile.pyxis:
        try:
            pyxis = client.has_pyxis()
        except SlurmUnavailable:
            pyxis = False
        if not pyxis:
            checks.append(Check("cluster.pyxis_missing", "error", {"image": cluster.container_image or "-"}))
    return checks


# ---------------------------------------------------------------------- sbatch --test-only
def _test_only(ctx: PreflightContext, client: SlurmClient, unavailable: Check | None = None) -> list[Check]:
    """`unavailable`: the nodes_unavailable warning, if there is one. Slurm's test-only refuses a
    job that cannot be placed on the nodes up NOW ("Requested node configuration is not
    available") although a real submission would be accepted and wait for the down/drained nodes
    to return; with enough nodes of the right kind in total (checked above) that refusal is the
    same warning, not an error."""
    from mbridge_launch.base.errors import UserError

    rendered = ctx.rendered_script()
    if isinstance(rendered.error, UserError):
        return []  # the executor refused the Plan: reported by plan checks (plan.render_failed)
    if not rendered.ok:
        return [Check("cluster.test_only_no_script", "info", {"reason": rendered.reason})]
    try:
        result = client.run(["sbatch", "--test-only"], stdin=rendered.value)
    except SlurmUnavailable as exc:
        return [Check("cluster.test_only_failed", "error", {"reason": str(exc)})]
    output = "\n".join(x for x in (result.stderr.strip(), result.stdout.strip()) if x)
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    verdict = next((line for line in lines if "to start at" in line), None)
    if result.returncode == 0 and verdict is not None:
        return [Check("cluster.test_only_ok", "info", {"result": verdict.removeprefix("sbatch: ")})]
    reason = lines[-1].removeprefix("sbatch: ") if lines else _d("exited", command="sbatch", code=result.returncode)
    if unavailable is not None and "node configuration is not available" in reason:
        return [Check("cluster.test_only_waits", "warning", {"reason": reason, "down": unavailable.params["down"]})]
    return [Check("cluster.test_only_failed", "error", {"reason": reason})]
