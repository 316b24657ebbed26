"""`mbridge-launch doctor` and `versions` where Slurm cannot be asked, run as a user runs them
(the installed console script in a fresh process): no Slurm client on PATH, a SLURM_CONF naming a
missing file, a configuration whose controller does not answer. The local cluster's own report is
tests/e2e/test_doctor_e2e.py."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import cli_env, run_cli

SCRIPT = Path(sys.executable).parent / "mbridge-launch"
TOP_KEYS = {"mbridge_launch", "python", "megatron_bridge_catalogs", "catalogs", "libraries", "slurm", "cluster", "components",
            "unsupported", "untested", "exit_code"}


def _console(*args: str, env: dict[str, str | None], lang: str = "en") -> subprocess.CompletedProcess:
    if not SCRIPT.is_file():
        pytest.skip(f"the console script is not installed next to {sys.executable}")
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env=cli_env(env, lang=lang), stdin=subprocess.DEVNULL)


@pytest.fixture
def no_slurm_path(tmp_path) -> str:
    """A PATH with no Slurm client on it (an empty directory)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    return str(empty)


def test_no_slurm_says_so_and_exits_1(no_slurm_path):
    proc = _console("doctor", env={"PATH": no_slurm_path, "SLURM_CONF": None})
    assert proc.returncode == 1, proc.stderr
    assert "no Slurm on this machine: sinfo/scontrol not found" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert "python" in proc.stdout and "0.6.2" in proc.stdout  # the rest is still reported


def test_no_slurm_in_chinese(no_slurm_path):
    proc = _console("doctor", "--lang", "zh", env={"PATH": no_slurm_path, "SLURM_CONF": None})
    assert proc.returncode == 1
    assert "本机没有 Slurm：找不到 sinfo/scontrol" in proc.stdout


def test_no_slurm_json_shape(no_slurm_path):
    proc = _console("doctor", "--format", "json", env={"PATH": no_slurm_path, "SLURM_CONF": None})
    assert proc.returncode == 1
    import json

    report = json.loads(proc.stdout)
    assert set(report) == TOP_KEYS
    assert report["slurm"] == {"state": "missing", "client_version": None, "controller_version": None, "reason": ""}
    assert report["cluster"] is None and report["exit_code"] == 1
    assert "0.6.2" in report["megatron_bridge_catalogs"]
    for row in report["components"]:
        assert set(row) == {"component", "version", "status", "note"}
        assert row["status"] in {"supported", "untested", "unsupported", "absent"}
    python = next(r for r in report["components"] if r["component"] == "python")
    assert python["version"] == ".".join(map(str, sys.version_info[:3])) and python["status"] == "supported"


def test_versions_names_the_reason_instead_of_a_question_mark(no_slurm_path):
    proc = _console("versions", env={"PATH": no_slurm_path, "SLURM_CONF": None})
    assert proc.returncode == 0
    assert "no Slurm on this machine: sinfo/scontrol not found" in proc.stdout
    assert "Slurm found: ?" not in proc.stdout


needs_client = pytest.mark.skipif(not (shutil.which("sinfo") and shutil.which("scontrol")),
                                  reason="no Slurm client installed on this machine")


@needs_client
def test_slurm_conf_naming_a_missing_file(tmp_path):
    missing = tmp_path / "nowhere" / "slurm.conf"
    proc = run_cli("doctor", "--format", "json", env={"SLURM_CONF": str(missing)})
    assert proc.rc == 1
    assert proc.json()["slurm"]["state"] == "no_config"
    text = run_cli("doctor", env={"SLURM_CONF": str(missing)})
    assert "finds no slurm.conf" in text.stdout and str(missing) in text.stdout
    versions = run_cli("versions", env={"SLURM_CONF": str(missing)})
    assert versions.rc == 0 and "finds no slurm.conf" in versions.stdout and "Slurm found: ?" not in versions.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@needs_client
def test_controller_unreachable(tmp_path):
    """A readable configuration whose controller port has nobody listening: the client answers
    `sinfo -V`, the controller does not answer `scontrol show config`."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=doctortest\nSlurmctldHost=localhost\nSlurmctldPort={_free_port()}\n"
                    "MessageTimeout=2\nNodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n",
                    encoding="utf-8")
    proc = run_cli("doctor", "--format", "json", env={"SLURM_CONF": str(conf)})
    assert proc.rc == 1
    slurm = proc.json()["slurm"]
    assert slurm["state"] == "unreachable" and slurm["client_version"] and "contact" in slurm["reason"]
    text = run_cli("doctor", env={"SLURM_CONF": str(conf)})
    assert "Slurm controller unreachable:" in text.stdout


def test_bad_arguments_exit_2():
    proc = run_cli("doctor", "--format", "xml")
    assert proc.rc == 2 and "Traceback" not in proc.stderr
