"""Cluster-check logic on recorded Slurm output (a fake `run`): parsing of `scontrol -o` and
`sinfo --json`, GPU matching, node states, NVL72 segments, site features. The same checks run
against the real local cluster in test_preflight_cluster.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from mbridge_launch.preflight.cluster_checks import expected_segment, gpus_of_type, run_cluster_checks, type_matches
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.slurm import SlurmClient, node_from_json, parse_gpu_gres, parse_oneliner
from preflight_fixtures import edit, valid_plan

PARTITIONS = """\
PartitionName=h100 AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=h100-[1-2] State=UP TotalNodes=2
PartitionName=gb200 AllowGroups=ALL AllowAccounts=ALL Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=gb200-[1-4] State=UP TotalNodes=4
PartitionName=short AllowAccounts=llm,infra DenyAccounts=(null) Default=NO MaxNodes=1 MaxTime=00:30:00 Nodes=h100-[1-2] State=UP
PartitionName=maint AllowAccounts=ALL Default=NO MaxTime=UNLIMITED Nodes=h100-1 State=DOWN
"""


def _node(name, gres, partitions, state="idle", flags=(), features=""):
    return {"name": name, "gres": gres, "partitions": partitions, "state": state, "state_flags": list(flags),
            "features": features, "reason": "bad GPU" if flags else ""}


NODES_JSON = json.dumps({"meta": {}, "errors": [], "nodes": [
    _node("h100-1", "gpu:h100:8(S:0-1)", ["h100", "short", "maint"]),
    _node("h100-2", "gpu:h100:8(S:0-1)", ["h100", "short"], flags=["DRAIN"]),
    *[_node(f"gb200-{i}", "gpu:gb200:4", ["gb200"], features="gb200,nvl72") for i in range(1, 5)],
]})


class FakeSlurm(SlurmClient):
    """A SlurmClient whose commands answer from recorded output."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]]):
        super().__init__(env={})
        self.answers = answers

    def run(self, argv, stdin=None, timeout=30, cache=True):  # noqa: D102 - same contract as SlurmClient.run
        key = tuple(argv)
        cache = cache and stdin is None
        if cache and key in self._memo:
            return self._memo[key]
        self.calls.append(list(argv))
        rc, out, err = self.answers.get(key, (1, "", f"{argv[0]}: unrecognized option"))
        result = subprocess.CompletedProcess(argv, rc, out, err)
        if cache:
            self._memo[key] = result
        return result


def fake(extra: dict | None = None) -> FakeSlurm:
    answers = {
        ("scontrol", "show", "partition", "-o"): (0, PARTITIONS, ""),
        ("sinfo", "--json"): (0, NODES_JSON, ""),
        ("scontrol", "--version"): (0, "slurm-wlm 22.05.8\n", ""),
        ("scontrol", "show", "config"): (0, "AccountingStorageEnforce = none\nTopologyPlugin          = topology/none\n", ""),
        ("srun", "--help"): (0, "Usage: srun [OPTIONS...]\n  --container-image=IMAGE\n", ""),
        ("sacctmgr", "-n", "-P", "show", "assoc", "user=alice", "format=account"): (0, "llm\n", ""),
        ("sbatch", "--test-only"): (0, "", "sbatch: Job 7 to start at 2026-01-01T00:00:00 using 64 processors on nodes h100-1 in partition h100\n"),
    }
    answers.update(extra or {})
    return FakeSlurm(answers)


ENV = {"USER": "alice"}


def cluster_codes(plan, client=None, severity=None):
    ctx = PreflightContext(plan=plan, env=ENV)
    ctx.lookup("rendered_script", lambda: "#!/bin/bash\nsrun true\n")
    checks = run_cluster_checks(ctx, client or fake())
    return [c.code for c in checks if severity is None or c.severity == severity]


@pytest.fixture
def plan(shared_dir):
    return valid_plan(shared_dir)


def test_parsers():
    fields = parse_oneliner("NodeName=a1 OS=Linux 6.1 #1 SMP Reason=Not responding [slurm@2024-01-01] CfgTRES=cpu=64,gres/gpu=8 State=IDLE+DRAIN")
    assert fields["OS"] == "Linux 6.1 #1 SMP" and fields["Reason"] == "Not responding [slurm@2024-01-01]"
    assert fields["CfgTRES"] == "cpu=64,gres/gpu=8" and fields["State"] == "IDLE+DRAIN"
    assert parse_gpu_gres("gpu:h100:8(S:0-1),nic:mlx5:2") == {"h100": 8}
    assert parse_gpu_gres("gpu:4") == {"": 4} and parse_gpu_gres("(null)") == {}
    node = node_from_json({"name": "n", "state": ["IDLE", "DRAIN"], "gres": "gpu:a100:8", "partitions": ["p"]})
    assert node.state == "idle" and not node.available
    assert type_matches("nvidia_h100_80gb_hbm3", "h100") and not type_matches("gh100", "h100")


def test_valid_plan_passes_and_queries_are_few(plan):
    client = fake()
    assert cluster_codes(plan, client, "error") == []
    # scontrol node --json (unknown to 22.05) -> sinfo --json, partitions, sacctmgr, sbatch --test-only
    assert len(client.calls) <= 6, client.calls
    calls_before = len(client.calls)
    ctx = PreflightContext(plan=plan, env=ENV)
    ctx.lookup("rendered_script", lambda: "#!/bin/bash\n")
    run_cluster_checks(ctx, client)
    assert len(client.calls) == calls_before + 1  # cached: only sbatch --test-only (stdin) runs again


def test_partition_missing_lists_the_valid_ones(plan):
    ctx = PreflightContext(plan=edit(plan, **{"cluster.partition": "a100"}), env=ENV)
    check = run_cluster_checks(ctx, fake())[0]
    assert check.code == "cluster.partition_missing" and "gb200, h100, maint, short" in check.message("en")


def test_default_partition(plan):
    assert cluster_codes(edit(plan, **{"cluster.partition": None}))[0] == "cluster.partition_default"


def test_partition_down(plan):
    assert "cluster.partition_down" in cluster_codes(edit(plan, **{"cluster.partition": "maint"}))


def test_wrong_gpu_type_and_count(plan):
    assert "cluster.gpu_type_missing" in cluster_codes(edit(plan, **{"cluster.partition": "gb200"}))
    gb = edit(plan, **{"cluster.partition": "gb200", "cluster.gpu_type": "gb200"})
    assert "cluster.gpus_per_node_short" in cluster_codes(gb)  # 8 per node asked, 4 there


def test_drained_nodes_warn_and_too_many_nodes_fail(plan):
    two = edit(plan, **{"cluster.nodes": 2, "parallelism.dp": 16})
    assert "cluster.nodes_unavailable" in cluster_codes(two, severity="warning")
    three = edit(plan, **{"cluster.nodes": 3, "parallelism.dp": 24})
    assert "cluster.not_enough_nodes" in cluster_codes(three, severity="error")


def test_time_nodes_and_account_limits(plan):
    short = edit(plan, **{"cluster.partition": "short", "cluster.account": "llm", "cluster.time": "02:00:00"})
    assert "cluster.time_over_max" in cluster_codes(short, severity="error")
    assert "cluster.account_denied" in cluster_codes(edit(short, **{"cluster.account": "vision", "cluster.time": "20:00"}))
    assert "cluster.max_nodes" in cluster_codes(edit(short, **{"cluster.time": "20:00", "cluster.nodes": 2, "parallelism.dp": 16}))


def test_account_without_association(plan):
    assert "cluster.account_no_association" in cluster_codes(edit(plan, **{"cluster.account": "vision"}), severity="warning")
    enforcing = fake({("scontrol", "show", "config"): (0, "AccountingStorageEnforce = associations,limits\n", "")})
    assert "cluster.account_no_association" in cluster_codes(edit(plan, **{"cluster.account": "vision"}), enforcing, "error")


def test_nvl72_segments(plan):
    assert [expected_segment(n, 18) for n in (2, 18, 32, 36, 40)] == [2, 18, 16, 18, 10]
    gb = edit(plan, **{"cluster.partition": "gb200", "cluster.gpu_type": "gb200", "cluster.gpus_per_node": 4,
                       "cluster.nodes": 4, "parallelism.dp": 16})
    assert "cluster.nvl72_no_segment" in cluster_codes(gb, severity="info")  # 22.05 cannot do better
    found = cluster_codes(edit(gb, **{"cluster.segment": 3}))
    assert "cluster.segment_not_divisor" in found and "cluster.segment_unsupported" in found


def test_nvl72_node_count_and_segment_must_fit_the_domain(plan):
    gb = edit(plan, **{"cluster.partition": "gb200", "cluster.gpu_type": "gb200", "cluster.gpus_per_node": 4,
                       "cluster.nodes": 4, "parallelism.dp": 16})
    new = fake({("scontrol", "--version"): (0, "slurm 24.11.1\n", ""),
                ("scontrol", "show", "config"): (0, "TopologyPlugin = topology/block\n", "")})
    assert cluster_codes(edit(gb, **{"cluster.segment": 20}), new, "error") == ["cluster.segment_too_big"]
    assert cluster_codes(edit(gb, **{"cluster.segment": 2}), new, "warning") == ["cluster.segment_unusual"]
    assert cluster_codes(edit(gb, **{"cluster.segment": 4}), new, "warning") == []
    # 19 nodes of 18-node domains split only into segments of 1 node: the nearest good counts are named
    ctx = PreflightContext(plan=edit(gb, **{"cluster.nodes": 19, "parallelism.dp": 76, "parallelism.gbs": 76}), env=ENV)
    ctx.lookup("rendered_script", lambda: "#!/bin/bash\n")
    [split] = [c for c in run_cluster_checks(ctx, new) if c.code == "cluster.nvl72_nodes_split"]
    assert split.severity == "warning" and (split.params["count"], split.params["lower"], split.params["upper"]) == (1, 18, 20)
    assert "19 nodes" in split.message("en") and "18 or 20 nodes" in split.hint("en")
    ctx = PreflightContext(plan=edit(gb, **{"cluster.nodes": 36, "parallelism.dp": 144, "parallelism.gbs": 144}), env=ENV)
    ctx.lookup("rendered_script", lambda: "#!/bin/bash\n")
    assert "cluster.nvl72_nodes_split" not in [c.code for c in run_cluster_checks(ctx, new)]  # 2 x 18


def test_test_only_refusal_caused_by_drained_nodes_is_a_warning(plan):
    """Slurm's --test-only refuses a job whose nodes are drained now, although sbatch would accept it
    and let it wait: with enough nodes in total that is the drained-nodes warning, not an error."""
    refusing = fake({("sbatch", "--test-only"): (1, "", "allocation failure: Requested node configuration is not available\n")})
    two = edit(plan, **{"cluster.nodes": 2, "parallelism.dp": 16})
    codes = cluster_codes(two, refusing)
    assert "cluster.nodes_unavailable" in codes and "cluster.test_only_waits" in codes
    assert cluster_codes(two, refusing, "error") == []
    one = edit(plan, **{"cluster.nodes": 1})  # no node missing: the same refusal stays an error
    assert cluster_codes(one, refusing, "error") == ["cluster.test_only_failed"]


def test_segment_supported_on_24_11_with_topology_block(plan):
    new = fake({("scontrol", "--version"): (0, "slurm 24.11.1\n", ""),
                  ("scontrol", "show", "config"): (0, "TopologyPlugin = topology/block\n", "")})
    gb = edit(plan, **{"cluster.partition": "gb200", "cluster.gpu_type": "gb200", "cluster.gpus_per_node": 4,
                       "cluster.nodes": 4, "parallelism.dp": 16, "cluster.segment": 4})
    assert cluster_codes(gb, new, "error") == []
    assert "cluster.nvl72_no_segment" in cluster_codes(edit(gb, **{"cluster.segment": None}), new, "warning")


def test_container_needs_pyxis(plan):
    image = edit(plan, **{"cluster.container_image": "nvcr.io#nvidia/nemo:25.09"})
    assert "cluster.pyxis_missing" not in cluster_codes(image)
    no_pyxis = fake({("srun", "--help"): (0, "Usage: srun [OPTIONS...]\n", "")})
    assert "cluster.pyxis_missing" in cluster_codes(image, no_pyxis, "error")


def test_test_only_refusal_and_unreachable_cluster(plan):
    refusing = fake({("sbatch", "--test-only"): (1, "", "sbatch: error: Batch job submission failed: Requested node configuration is not available\n")})
    ctx = PreflightContext(plan=plan, env=ENV)
    ctx.lookup("rendered_script", lambda: "#!/bin/bash\n")
    check = run_cluster_checks(ctx, refusing)[-1]
    assert check.code == "cluster.test_only_failed" and "Requested node configuration is not available" in check.message("en")
    down = FakeSlurm({})
    assert cluster_codes(plan, down) == ["cluster.unreachable"]


def test_gpus_of_type_by_feature_when_gres_is_untyped():
    node = node_from_json({"name": "n", "state": "idle", "gres": "gpu:8", "features": "h100,ib", "partitions": ["p"]})
    assert gpus_of_type(node, "h100") == 8 and gpus_of_type(node, "a100") == 0
