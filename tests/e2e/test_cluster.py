"""The local test cluster itself: partitions, GRES, ranks under srun, accounting, refusals."""

from __future__ import annotations

import json
import os

import pytest

from slurmcluster import SlurmCommandError

pytestmark = pytest.mark.slurm


def _sinfo_nodes(cluster) -> dict[str, dict]:
    data = json.loads(cluster.run(["sinfo", "--json"]).stdout)
    return {n["name"]: n for n in data["nodes"]}


def test_partitions_and_gres(slurm_cluster):
    nodes = _sinfo_nodes(slurm_cluster)
    assert sorted(nodes) == ["cpu-1", "gb200-1", "gb200-2", "h100-1", "h100-2"]
    for name, node in nodes.items():
        kind = name.split("-")[0]
        assert node["gres"] == {"h100": "gpu:h100:8", "gb200": "gpu:gb200:4", "cpu": ""}[kind]
        assert "idle" in node["state"].lower() or "mixed" in node["state"].lower() or "alloc" in node["state"].lower()
    assert set(nodes["h100-1"]["partitions"]) == {"h100", "short"}
    assert nodes["gb200-1"]["partitions"] == ["gb200"]
    assert nodes["cpu-1"]["partitions"] == ["cpu"]  # where watcher jobs run while training holds the GPU nodes

    parts = slurm_cluster.partitions
    assert parts["h100"].default and not parts["gb200"].default
    assert (parts["h100"].gpu_type, parts["h100"].gpus_per_node, len(parts["h100"].nodes)) == ("h100", 8, 2)
    assert (parts["gb200"].gpu_type, parts["gb200"].gpus_per_node, len(parts["gb200"].nodes)) == ("gb200", 4, 2)
    # a partition with a short MaxTime, for preflight's "time over MaxTime" tests
    limits = dict(line.split() for line in slurm_cluster.run(["sinfo", "-h", "-o", "%P %l"]).stdout.splitlines())
    assert limits["short"] == "30:00" and parts["short"].max_time == "00:30:00"
    assert limits["h100*"] == "infinite"


def test_two_nodes_eight_gpus_sixteen_ranks(slurm_cluster, shared_dir):
    out = shared_dir / "ranks.txt"
    probe = ('echo "$SLURM_PROCID $SLURM_NTASKS $SLURM_LOCALID $SLURM_NODEID $(hostname) '
             '$SLURM_JOB_NODELIST $SLURM_GPUS_ON_NODE $CUDA_VISIBLE_DEVICES"')
    job = slurm_cluster.sbatch("-p", "h100", "--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "--exclusive",
                               "-t", "00:05:00", "-o", str(out), wrap=f"srun bash -c '{probe}'")
    assert slurm_cluster.wait(job, timeout=90) == "COMPLETED"
    rows = sorted((line.split() for line in out.read_text().splitlines() if line.strip()), key=lambda r: int(r[0]))
    assert [int(r[0]) for r in rows] == list(range(16))
    for procid, ntasks, localid, nodeid, host, nodelist, gpus, cvd in rows:
        assert ntasks == "16" and nodelist == "h100-[1-2]" and gpus == "8"
        assert int(localid) == int(procid) % 8 and int(nodeid) == int(procid) // 8
        assert host == f"h100-{int(nodeid) + 1}"
        assert cvd == "0,1,2,3,4,5,6,7"
    acct = slurm_cluster.settled_sacct(job, fields=("JobID", "State", "NNodes", "AllocTRES"))
    assert acct["State"] == "COMPLETED" and acct["NNodes"] == "2"
    assert "gres/gpu:h100=16" in acct["AllocTRES"]


def test_gb200_nodes_have_four_gpus(slurm_cluster, shared_dir):
    out = shared_dir / "gb200.txt"
    job = slurm_cluster.sbatch("-p", "gb200", "--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4", "-t", "5",
                               "-o", str(out), wrap="srun bash -c 'echo $(hostname) $SLURM_GPUS_ON_NODE'")
    assert slurm_cluster.wait(job, timeout=90) == "COMPLETED"
    lines = sorted(out.read_text().split("\n")[:-1])
    assert lines == ["gb200-1 4"] * 4 + ["gb200-2 4"] * 4
    with pytest.raises(SlurmCommandError) as refused:
        slurm_cluster.sbatch("-p", "gb200", "--nodes=1", "--gpus-per-node=8", wrap="true")
    assert "Requested node configuration is not available" in refused.value.stderr


def test_oversize_request_refused_at_submission(slurm_cluster):
    with pytest.raises(SlurmCommandError) as refused:
        slurm_cluster.sbatch("-p", "h100", "--nodes=1", "--gpus-per-node=9", wrap="true")
    assert refused.value.returncode != 0
    assert "Requested node configuration is not available" in refused.value.stderr


def test_fake_pyxis_and_pmix(slurm_cluster, shared_dir):
    # the step runs in the test image (make-image.sh): the mount is the only host path it sees
    out = shared_dir / "pyxis.txt"
    (shared_dir / "seen.txt").write_text("through the mount\n")
    mounts = f"{shared_dir}:/b"
    job = slurm_cluster.sbatch(
        "-p", "gb200", "-N1", "-o", str(out),
        wrap=(f"srun --mpi=pmix --container-image=mbl/python3 --container-mounts={mounts} --no-container-mount-home "
              "bash -c 'echo IMG=$FAKE_PYXIS_CONTAINER_IMAGE MNT=$FAKE_PYXIS_CONTAINER_MOUNTS PMIX=${PMIX_RANK:-none}; "
              "cat /b/seen.txt; ls /work >/dev/null 2>&1 || echo no-host-work'"))
    assert slurm_cluster.wait(job, timeout=60) == "COMPLETED", out.read_text()
    text = out.read_text()
    assert f"IMG=mbl/python3 MNT={mounts} PMIX=0" in text
    assert "through the mount" in text and "no-host-work" in text


def test_fake_nvidia_smi_reports_the_nodes_gres(slurm_cluster, shared_dir):
    out = shared_dir / "smi.txt"
    path = f"{slurm_cluster.fake_bin}:{os.environ['PATH']}"
    job = slurm_cluster.sbatch("-p", "gb200", "-N1", "--gpus-per-node=4", "-o", str(out), env={"PATH": path},
                               wrap="nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader")
    assert slurm_cluster.wait(job, timeout=60) == "COMPLETED", out.read_text()
    lines = out.read_text().splitlines()
    assert [line.split(" (UUID")[0] for line in lines[:4]] == [f"GPU {i}: NVIDIA GB200" for i in range(4)]
    assert lines[4:] == ["NVIDIA GB200, 189471 MiB"] * 4

