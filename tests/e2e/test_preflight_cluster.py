"""Preflight against the real local Slurm cluster (tests/cluster): partitions, GPUs, MaxTime,
NVL72 nodes, `sbatch --test-only`, `--on-nodes`; and proof that preflight submits nothing (job
counts) and writes nothing outside its cache (file-system snapshots)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mbridge_launch.preflight.runner import run_preflight
from mbridge_launch.preflight.slurm import SlurmClient
from preflight_fixtures import codes, edit, preflight_json, valid_plan, write

pytestmark = pytest.mark.slurm


@pytest.fixture
def env(slurm_cluster, shared_dir, tmp_path):
    """The submitting environment: the cluster's SLURM_CONF, a private HOME and cache, and the
    harness's shared directory declared shared (all fake nodes see it)."""
    home = tmp_path / "home"
    home.mkdir()
    return dict(slurm_cluster.env, HOME=str(home), MBRIDGE_LAUNCH_CACHE_DIR=str(tmp_path / "cache"),
                MBRIDGE_LAUNCH_SHARED_PREFIXES=str(shared_dir.parent), MBRIDGE_LAUNCH_LANG="en")


def jobs_named(cluster, prefix: str, expect: int | None = None) -> int:
    """Jobs (queued or accounted) whose name starts with `prefix` (the plan's unique name; other
    sessions share the cluster). With `expect`, polls a few seconds for sacct to catch up."""
    import time

    deadline = time.monotonic() + (8 if expect is not None else 0)
    while True:
        queued = cluster.run(["squeue", "-h", "-o", "%i %j"]).stdout.splitlines()
        accounted = cluster.run(["sacct", "-n", "-X", "-P", "-o", "JobID,JobName", "-S", "1970-01-01", "-a"]).stdout.splitlines()
        ids = {line.split(" ")[0] for line in queued if line.split(" ", 1)[-1].startswith(prefix)}
        ids |= {line.split("|")[0] for line in accounted if line.split("|", 1)[-1].startswith(prefix)}
        if expect is None or len(ids) == expect or time.monotonic() > deadline:
            return len(ids)
        time.sleep(0.5)


def unique(plan):
    """The plan under a name no other test or session uses (job names derive from it)."""
    import uuid

    return edit(plan, name=f"pf-{uuid.uuid4().hex[:10]}")


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under `roots` with its size and mtime."""
    found: dict[str, tuple[int, int]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                found[path] = (st.st_size, st.st_mtime_ns)
        found[str(root)] = (0, os.lstat(root).st_mtime_ns)
    return found


def test_valid_plan_passes_with_sbatch_test_only(slurm_cluster, shared_dir, env, tmp_path):
    plan = unique(valid_plan(shared_dir, nodes=2))
    plan_dir = tmp_path / "plan"
    plan_path = write(plan, plan_dir)
    watched = (shared_dir, plan_dir, Path(env["HOME"]))
    before_fs = snapshot(*watched)
    rc, report = preflight_json(plan_path, env=env, cwd=plan_dir)
    assert rc == 0 and report["ok"] is True, [c for c in report["checks"] if c["severity"] != "info"]
    assert {"cluster.gpus_ok", "cluster.test_only_ok", "data.blend_ok", "plan.memory_ok"} <= set(codes(report))
    test_only = next(c for c in report["checks"] if c["code"] == "cluster.test_only_ok")
    assert "h100-[1-2]" in test_only["message"] and "partition h100" in test_only["message"]
    # read-only: nothing submitted, nothing written (not even the cache)
    assert jobs_named(slurm_cluster, plan.name) == 0
    assert snapshot(*watched) == before_fs
    assert not Path(env["MBRIDGE_LAUNCH_CACHE_DIR"]).exists()


def test_partition_without_those_gpus(slurm_cluster, shared_dir, env, tmp_path):
    plan = edit(valid_plan(shared_dir), **{"cluster.partition": "gb200"})
    rc, report = preflight_json(write(plan, tmp_path), env=env)
    assert rc == 1
    check = next(c for c in report["checks"] if c["code"] == "cluster.gpu_type_missing")
    assert check["severity"] == "error" and "gb200" in check["message"] and "4x gb200 (2 nodes)" in check["message"]
    assert "cluster.test_only_skipped" in codes(report)


def test_more_gpus_per_node_than_the_partition_has(slurm_cluster, shared_dir, env, tmp_path):
    plan = edit(valid_plan(shared_dir), **{"cluster.partition": "gb200", "cluster.gpu_type": "gb200", "cluster.gpus_per_node": 8})
    rc, report = preflight_json(write(plan, tmp_path), env=env)
    assert rc == 1 and "cluster.gpus_per_node_short" in codes(report, "error")


def test_time_over_max_time(slurm_cluster, shared_dir, env, tmp_path):
    plan = edit(valid_plan(shared_dir), **{"cluster.partition": "short", "cluster.time": "02:00:00"})
    rc, report = preflight_json(write(plan, tmp_path), env=env)
    assert rc == 1
    check = next(c for c in report["checks"] if c["code"] == "cluster.time_over_max")
    assert "02:00:00" in check["message"] and "00:30:00" in check["message"] and "short" in check["message"]
    within = edit(plan, **{"cluster.time": "00:20:00"})
    rc, report = preflight_json(write(within, tmp_path / "ok"), env=env)
    assert rc == 0, report


def test_unknown_partition_and_too_many_nodes(slurm_cluster, shared_dir, env, tmp_path):
    rc, report = preflight_json(write(edit(valid_plan(shared_dir), **{"cluster.partition": "a100"}), tmp_path), env=env)
    assert rc == 1 and "cluster.partition_missing" in codes(report, "error")
    three = edit(valid_plan(shared_dir), **{"cluster.nodes": 3, "parallelism.dp": 24, "parallelism.gbs": 96})
    rc, report = preflight_json(write(three, tmp_path / "three"), env=env)
    assert rc == 1 and "cluster.not_enough_nodes" in codes(report, "error")


def test_nvl72_nodes_and_segment_support(slurm_cluster, shared_dir, env, tmp_path):
    gb = edit(valid_plan(shared_dir, nodes=2), **{"cluster.partition": "gb200", "cluster.gpu_type": "gb200",
                                                  "cluster.gpus_per_node": 4, "parallelism.dp": 8, "parallelism.gbs": 32})
    rc, report = preflight_json(write(gb, tmp_path), env=env)
    assert rc == 0, report
    assert "cluster.nvl72_no_segment" in codes(report, "info")  # Slurm 22.05: --segment does not exist
    segmented = edit(gb, **{"cluster.segment": 2})
    rc, report = preflight_json(write(segmented, tmp_path / "seg"), env=env)
    assert rc == 1
    check = next(c for c in report["checks"] if c["code"] == "cluster.segment_unsupported")
    assert "22.05" in check["message"] and "24.11" in check["message"]


def test_drained_node_is_a_warning_on_the_real_cluster(slurm_cluster, shared_dir, env, tmp_path):
    """A drained node (scontrol update state=drain): a 2-node plan gets the nodes_unavailable
    warning naming it, and --test-only's refusal becomes a warning (a real sbatch would queue)."""
    reason = f"mbl-preflight-{os.getpid()}"
    plan_path = write(valid_plan(shared_dir, nodes=2), tmp_path)
    one_node = write(valid_plan(shared_dir), tmp_path / "one")
    slurm_cluster.run(["scontrol", "update", "nodename=h100-2", "state=drain", f"reason={reason}"])
    try:
        rc, report = preflight_json(plan_path, env=env)
        rc_one, report_one = preflight_json(one_node, env=env)
    finally:
        slurm_cluster.run(["scontrol", "update", "nodename=h100-2", "state=resume"], check=False)
    assert rc == 0, [c for c in report["checks"] if c["severity"] == "error"]
    down = next(c for c in report["checks"] if c["code"] == "cluster.nodes_unavailable")
    assert down["severity"] == "warning" and "h100-2 (idle+drain" in down["message"] and reason in down["message"]
    assert "only 1 of the h100 nodes is available now" in down["message"]
    waits = next(c for c in report["checks"] if c["code"] == "cluster.test_only_waits")
    assert waits["severity"] == "warning" and "h100-2" in waits["message"]
    # one node is enough with h100-1 up: no warning, and --test-only places it there
    assert rc_one == 0 and "cluster.nodes_unavailable" not in codes(report_one)
    assert "cluster.test_only_ok" in codes(report_one)


def test_account_association_on_the_real_cluster(slurm_cluster, shared_dir, env, tmp_path):
    """The cluster's accounting database (sacctmgr) knows which accounts the user may charge: one
    of them passes; another is a warning (AccountingStorageEnforce=none here: Slurm would accept
    it), with the user's real accounts listed."""
    import getpass

    user = env.get("USER") or getpass.getuser()
    mine = slurm_cluster.run(["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=account"]).stdout.split()
    assert mine, "the test cluster records an association for the user"
    rc, report = preflight_json(write(edit(valid_plan(shared_dir), **{"cluster.account": mine[0]}), tmp_path), env=env)
    assert rc == 0 and not [c for c in codes(report) if c.startswith("cluster.account")], report
    other = edit(valid_plan(shared_dir), **{"cluster.account": "no-such-account"})
    rc, report = preflight_json(write(other, tmp_path / "other"), env=env)
    check = next(c for c in report["checks"] if c["code"] == "cluster.account_no_association")
    assert rc == 0 and check["severity"] == "warning"
    assert "no-such-account" in check["message"] and mine[0] in check["message"] and user in check["message"]


def test_container_plan_on_a_cluster_with_pyxis(slurm_cluster, shared_dir, env, tmp_path):
    # the checkpoints and data must come through a mount (container.path_unmounted otherwise)
    plan = edit(valid_plan(shared_dir), **{"cluster.container_image": "nvcr.io#nvidia/nemo:25.09", "cluster.profile.pyxis": True,
                                           "cluster.container_mounts": [{"source": str(shared_dir), "target": str(shared_dir)}]})
    rc, report = preflight_json(write(plan, tmp_path), env=env)
    assert rc == 0 and "cluster.pyxis_missing" not in codes(report), report


def test_queries_are_few_and_cached(slurm_cluster, shared_dir, env):
    client = SlurmClient(env)
    report = run_preflight(valid_plan(shared_dir), env=env, client=client)
    assert report.ok, [c.to_dict() for c in report.errors]
    commands = [" ".join(c[:3]) for c in client.calls]
    assert len(commands) == len(set(commands)) and len(commands) <= 6, commands


def test_on_nodes_reports_per_node(slurm_cluster, shared_dir, env, tmp_path):
    """--on-nodes submits the node-check step only (one job), with its output in the cache, and
    reports each node; the fake nvidia-smi (forwarded PATH) gives the NVLink matrix."""
    path = f"{slurm_cluster.fake_bin}:{os.environ['PATH']}"
    plan = unique(edit(valid_plan(shared_dir, nodes=2), **{"cluster.env": ["PATH"]}))
    plan_path = write(plan, tmp_path / "plan")
    before_fs = snapshot(shared_dir)
    rc, report = preflight_json(plan_path, "--on-nodes", env=dict(env, PATH=path))
    assert rc == 0, report
    per_node = {c["subject"]: c["message"] for c in report["checks"] if c["code"] == "nodes.node_ok"}
    assert sorted(per_node) == ["h100-1", "h100-2"]
    assert all("8 x NVIDIA H100 80GB HBM3" in m and "nvidia-smi" in m for m in per_node.values())
    assert sorted(c["subject"] for c in report["checks"] if c["code"] == "nodes.nvlink_ok") == ["h100-1", "h100-2"]
    assert jobs_named(slurm_cluster, plan.name, expect=1) == 1  # exactly one job: the node check
    assert snapshot(shared_dir) == before_fs  # its output went to the cache, not the plan's log dir
    outputs = list(Path(env["MBRIDGE_LAUNCH_CACHE_DIR"]).rglob("node-check-*.out"))
    assert len(outputs) == 1 and "node check h100-1" in outputs[0].read_text()  # a 2-node check covers both


def test_on_nodes_finds_the_wrong_gpus(slurm_cluster, shared_dir, env, tmp_path):
    """Nodes whose GPUs are not what the plan says fail the node check, reported per node."""
    path = f"{slurm_cluster.fake_bin}:{os.environ['PATH']}"
    plan = edit(valid_plan(shared_dir), **{"cluster.env": ["PATH", "FAKE_NVIDIA_SMI_TYPE"]})
    rc, report = preflight_json(write(plan, tmp_path), "--on-nodes", env=dict(env, PATH=path, FAKE_NVIDIA_SMI_TYPE="a100"))
    assert rc == 1
    bad = [c for c in report["checks"] if c["code"] == "nodes.node_mismatch"]
    assert len(bad) == 1 and "expected 8 x h100" in bad[0]["message"] and "A100" in bad[0]["message"]


def test_on_nodes_without_nvidia_smi(slurm_cluster, shared_dir, env, tmp_path):
    rc, report = preflight_json(write(valid_plan(shared_dir), tmp_path), "--on-nodes", env=env)
    assert rc == 0, report
    ok = [c for c in report["checks"] if c["code"] == "nodes.node_ok"]
    assert len(ok) == 1 and "SLURM_GPUS_ON_NODE" in ok[0]["message"]
    assert "nodes.topology_unavailable" in codes(report, "info")


# ---------------------------------------------------------------------- what preflight does to the system
AUDITED = r"""
import atexit, json, os, sys
events, on = [], [True]
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

def hook(name, args):
    if not on[0]:
        return
    if name == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags or 0) & WRITE_FLAGS
        if writes and isinstance(path, (str, bytes, os.PathLike)):
            events.append(["write", os.path.abspath(os.fsdecode(path))])
    elif name in ("os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.truncate", "os.symlink",
                  "os.link", "os.chmod", "os.chown", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move"):
        if isinstance(args[0], (str, bytes, os.PathLike)):
            events.append(["write", os.path.abspath(os.fsdecode(args[0]))])
    elif name == "subprocess.Popen":
        events.append(["exec", [os.fsdecode(a) for a in args[1]]])

def dump():
    on[0] = False
    with open(os.environ["MBL_AUDIT_OUT"], "w") as fh:
        json.dump(events, fh)

sys.addaudithook(hook)
atexit.register(dump)
from mbridge_launch.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
sys.exit(code)
"""


def audited_preflight(plan_path: Path, *extra: str, env: dict, tmp_path: Path) -> tuple[int, dict, list]:
    """`mbridge-launch preflight` with a Python audit hook recording every file opened for writing,
    every directory or file created, moved, removed or changed, and every process started."""
    import json
    import subprocess
    import sys

    out = tmp_path / "audit.json"
    proc = subprocess.run([sys.executable, "-c", AUDITED, "preflight", str(plan_path), "--format", "json", *extra],
                          capture_output=True, text=True, timeout=300,
                          env={**env, "MBL_AUDIT_OUT": str(out), "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout), json.loads(out.read_text())


def _slurm_commands(events: list) -> list[list[str]]:
    return [argv for kind, argv in events if kind == "exec"]


def test_preflight_writes_nothing_and_submits_nothing(slurm_cluster, shared_dir, env, tmp_path):
    """Every write and every process of a full preflight (cluster checks and sbatch --test-only
    included), seen by an audit hook: no file is written anywhere, and the only processes are
    read-only Slurm queries and `sbatch --test-only`."""
    plan = unique(valid_plan(shared_dir, nodes=2))
    rc, report, events = audited_preflight(write(plan, tmp_path / "plan"), env=env, tmp_path=tmp_path)
    assert rc == 0 and "cluster.test_only_ok" in codes(report), report
    assert [e for e in events if e[0] == "write"] == []
    commands = _slurm_commands(events)
    assert commands and {argv[0] for argv in commands} <= {"scontrol", "sinfo", "sacctmgr", "srun", "sbatch"}
    assert all(argv[:2] == ["srun", "--help"] for argv in commands if argv[0] == "srun")
    assert all("--test-only" in argv for argv in commands if argv[0] == "sbatch")
    assert all(argv[1] in ("show", "--version") for argv in commands if argv[0] == "scontrol")
    assert all(argv[3] == "show" for argv in commands if argv[0] == "sacctmgr")
    assert jobs_named(slurm_cluster, plan.name) == 0


def test_on_nodes_writes_only_its_cache_and_submits_one_job(slurm_cluster, shared_dir, env, tmp_path):
    plan = unique(valid_plan(shared_dir))
    rc, report, events = audited_preflight(write(plan, tmp_path / "plan"), "--on-nodes", env=env, tmp_path=tmp_path)
    assert rc == 0, report
    cache = os.path.abspath(env["MBRIDGE_LAUNCH_CACHE_DIR"])
    writes = [path for kind, path in events if kind == "write"]
    assert writes and all(path == cache or path.startswith(cache + os.sep) for path in writes), writes
    submissions = [argv for argv in _slurm_commands(events) if argv[0] == "sbatch" and "--test-only" not in argv]
    assert len(submissions) == 1 and jobs_named(slurm_cluster, plan.name, expect=1) == 1
