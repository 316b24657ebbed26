"""Where a failure happened (issue 33, item 8): the node and rank of a host OOM from srun's and
slurmstepd's lines, and a node fix that names the node or says it is unknown (never `--exclude=?`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from mbridge_launch.diagnosis.classify import diagnose
from mbridge_launch.diagnosis.model import SlurmView

OOM_LINES = [
    "slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of the step tasks have been OOM Killed.",
    "srun: error: node002: task 11: Out Of Memory",
    "srun: error: node001: tasks 0-7: Killed",
]
XID = "NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus."


def _log(tmp_path: Path, lines: list[str], name: str = "slurm-7.out") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_host_oom_names_the_node_and_rank_srun_reports(tmp_path):
    got = diagnose([_log(tmp_path, OOM_LINES)], SlurmView("7", "OUT_OF_MEMORY", "0:125", node_list="node[001-002]"))
    assert (got.cause, got.node, got.rank) == ("host_oom", "node002", 11)
    assert got.evidence[0].line == 1  # slurmstepd's line stays the evidence: it comes first
    assert got.as_json()["node"] == "node002"


def test_srun_alone_places_a_host_oom(tmp_path):
    got = diagnose([_log(tmp_path, OOM_LINES[1:2])])
    assert (got.cause, got.node, got.rank) == ("host_oom", "node002", 11)


def test_under_torchrun_srun_task_is_a_node_index_not_a_rank(tmp_path):
    plan = SimpleNamespace(launch=SimpleNamespace(shape="torchrun"))
    got = diagnose([_log(tmp_path, OOM_LINES[:2])], None, plan=plan)
    assert (got.cause, got.node, got.rank) == ("host_oom", "node002", None)


def test_slurmstepd_prefix_with_the_node_name_places_it(tmp_path):
    line = "slurmstepd-gpu-a100-12: error: Detected 1 oom-kill event(s) in StepId=9.0 cgroup."
    got = diagnose([_log(tmp_path, [line])])
    assert (got.cause, got.node) == ("host_oom", "gpu-a100-12")


def test_an_xid_without_a_node_says_the_node_is_unknown(tmp_path):
    got = diagnose([_log(tmp_path, [XID], "job.log")])
    fix = got.fix.render("en")
    assert got.cause == "gpu_hardware" and got.node is None and got.exclude_nodes == []
    assert "?" not in fix and "do not name that node" in fix and "dmesg" in fix
    assert "?" not in got.fix.render("zh") and "日志未指明" in got.fix.render("zh")


def test_an_xid_on_a_known_node_names_it(tmp_path):
    got = diagnose([_log(tmp_path, [f"Dec  1 13:01:57 h100-7 kernel: [812347.001122] {XID}"], "syslog.log")])
    assert got.node == "h100-7" and got.exclude_nodes == ["h100-7"]
    assert "--exclude=h100-7" in got.fix.render("en")


def test_a_node_found_later_from_slurm_goes_into_the_fix(tmp_path):
    from mbridge_launch.runs.run_diagnosis import Subject

    subject = Subject(logs=[_log(tmp_path, [XID], "job.log")], slurm=SlurmView("8", "FAILED", "1:0", node_list="h100-3"))
    got = subject.diagnose()
    assert got.node == "h100-3" and got.exclude_nodes == ["h100-3"]
    assert "--exclude=h100-3" in got.fix.render("en") and "?" not in got.fix.render("en")
