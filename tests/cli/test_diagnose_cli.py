"""`mbridge-launch diagnose` without a cluster: log files, ledger runs whose Slurm cannot be asked,
bad input, exit codes (0 no failure, 1 a failure, 2 bad input), the JSON shape, Chinese, and the
one line `status` shows for a failed run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.job_report import expand_hostlist, node_of_rank, parse_sacct, parse_scontrol

OOM_LOG = """\
 [2026-12-01 10:00:01] iteration        1/      10 | consumed samples:            8 | lm loss: 1.050000E+01 |
/usr/lib/python3/site-packages/torch/utils/checkpoint.py:90: UserWarning: None of the inputs have requires_grad=True.
  warnings.warn(
[rank3]: Traceback (most recent call last):
[rank3]:   File "/opt/Megatron-Bridge/scripts/training/run_recipe.py", line 112, in <module>
[rank3]:     main()
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.23 GiB is free.
[rank0]:[E1201 10:00:09.123456 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=3000) ran for 3017 milliseconds before timing out.
"""
CLEAN_LOG = """\
 [2026-12-01 10:00:01] iteration        1/       2 | consumed samples:            8 | lm loss: 1.050000E+01 |
 [2026-12-01 10:00:02] iteration        2/       2 | consumed samples:           16 | lm loss: 1.040000E+01 |
 [after training is done] datetime: 2026-12-01 10:00:03
"""

NO_SLURM: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _slurm_unreachable(tmp_path_factory):
    """Slurm that answers nothing: squeue/sacct/scontrol first on PATH, each failing at once as
    a client whose controller is down does (a missing slurm.conf made sacct retry for 60 s)."""
    import os

    fake = tmp_path_factory.mktemp("no-slurm-bin")
    for name in ("squeue", "sacct", "scontrol", "sinfo"):
        tool = fake / name
        tool.write_text(f"#!/bin/sh\necho '{name}: error: Unable to contact slurm controller (connect failure)' >&2\n"
                        "exit 1\n")
        tool.chmod(0o755)
    NO_SLURM["PATH"] = f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"
    yield
    NO_SLURM.clear()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _diagnose(*args: str, lang: str = "en"):
    return run_cli("diagnose", *args, env=NO_SLURM, lang=lang)


# ---------------------------------------------------------------------- log files
def test_a_log_file_with_an_oom_is_diagnosed_with_its_evidence_line(tmp_path):
    log = _write(tmp_path, "job.log", OOM_LOG)
    proc = _diagnose(str(log), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    got = json.loads(proc.stdout)
    assert {"cause", "rank", "node", "evidence", "fix", "retry"} <= set(got)
    assert (got["cause"], got["rank"]) == ("gpu_oom", 3)
    assert got["evidence"][0] == {"file": str(log), "line": 7,
                                  "text": OOM_LOG.splitlines()[6].removeprefix("[rank3]: ")}
    assert got["retry"] == "no" and got["fix"]
    assert [s["cause"] for s in got["symptoms"]] == ["nccl_timeout"]  # the timeout is a symptom
    assert got["running"] is False and got["job_id"] is None and got["run"] is None


def test_text_output_names_cause_rank_evidence_fix_retry_and_symptoms(tmp_path):
    log = _write(tmp_path, "job.log", OOM_LOG)
    proc = _diagnose(str(log))
    assert proc.returncode == 1
    out = proc.stdout
    assert out.startswith("cause: gpu_oom: ")
    assert "  rank: 3\n" in out
    assert f"    {log}:7: torch.OutOfMemoryError: CUDA out of memory." in out
    assert "\n  fix: " in out and "\n  retry: no: " in out
    assert "later symptoms (not the cause):" in out and "nccl_timeout on rank 0" in out


def test_a_clean_log_is_no_failure_and_exit_0(tmp_path):
    log = _write(tmp_path, "ok.log", CLEAN_LOG)
    proc = _diagnose(str(log), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert (got["cause"], got["evidence"], got["retry"]) == ("none", [], "no")


def test_several_log_files_are_one_job(tmp_path):
    """Per-rank logs given together: the failure is found in whichever holds it."""
    clean = _write(tmp_path, "rank0.log", CLEAN_LOG)
    oom = _write(tmp_path, "rank3.log", OOM_LOG)
    got = json.loads(_diagnose(str(clean), str(oom), "--format", "json").stdout)
    assert got["cause"] == "gpu_oom" and got["evidence"][0]["file"] == str(oom)


def test_chinese_output(tmp_path):
    log = _write(tmp_path, "job.log", OOM_LOG)
    proc = _diagnose(str(log), "--lang", "zh", lang="zh")
    assert proc.returncode == 1
    assert proc.stdout.startswith("原因：gpu_oom：") and "证据：" in proc.stdout and "修复：" in proc.stdout
    got = json.loads(_diagnose(str(log), "--lang", "zh", "--format", "json", lang="zh").stdout)
    assert got["cause"] == "gpu_oom"  # codes stay codes; the fix and summary are Chinese
    assert any("\u4e00" <= ch <= "\u9fff" for ch in got["fix"])


def test_a_log_line_with_control_characters_is_escaped_in_text(tmp_path):
    log = _write(tmp_path, "job.log", OOM_LOG.replace("GPU 3 has", "GPU 3 \x1b[2J has"))
    proc = _diagnose(str(log))
    assert proc.returncode == 1
    assert "\x1b" not in proc.stdout


# ---------------------------------------------------------------------- bad input: exit 2
def test_a_missing_file_is_bad_input_naming_it(tmp_path):
    missing = tmp_path / "nope" / "job.log"
    proc = _diagnose(str(missing))
    assert proc.returncode == 2
    assert "no such log file" in proc.stderr and str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_directory_is_bad_input(tmp_path):
    proc = _diagnose(str(tmp_path))
    assert proc.returncode == 2 and "is a directory, not a log file" in proc.stderr


def test_an_unknown_run_is_bad_input_naming_it(tmp_path):
    proc = _diagnose("no-such-run", "--ledger", str(tmp_path / "ledger.sqlite3"))
    assert proc.returncode == 2 and "no-such-run" in proc.stderr and "Traceback" not in proc.stderr


def test_a_job_id_slurm_does_not_know_is_bad_input(tmp_path):
    proc = _diagnose("4242", "--ledger", str(tmp_path / "ledger.sqlite3"))
    assert proc.returncode == 2 and "4242" in proc.stderr and "Traceback" not in proc.stderr


def test_no_argument_is_bad_input():
    proc = _diagnose()
    assert proc.returncode == 2


# ---------------------------------------------------------------------- ledger runs, status
def _ledger_run(tmp_path: Path, state: str, log: Path) -> Path:
    from plan_fixtures import single_node_h100

    db = tmp_path / "ledger.sqlite3"
    plan = single_node_h100()
    with L.Ledger.open(db, create=True) as ledger:
        run = ledger.begin_submission(name="diag-run", plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                      executor="sbatch", cluster={"partition": "h100", "nodes": 1}, save_dir=str(tmp_path))
        ledger.mark_submitted(run.id, ["4243"], log_paths=[str(log)])
        ledger.set_state(run.id, state, slurm_state=state.upper())
    return db


def test_a_failed_run_is_diagnosed_from_its_logs_and_the_diagnosis_recorded(tmp_path):
    log = _write(tmp_path, "run.log", OOM_LOG)
    db = _ledger_run(tmp_path, "failed", log)
    proc = _diagnose("diag-run", "--ledger", str(db), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    got = json.loads(proc.stdout)
    assert (got["cause"], got["rank"], got["run"]) == ("gpu_oom", 3, "diag-run")
    with L.Ledger.open(db) as ledger:
        [event] = [e for e in ledger.events(ledger.get_run("diag-run").id) if e["kind"] == "diagnosis"]
    assert event["detail"]["cause"] == "gpu_oom" and event["detail"]["rank"] == 3
    assert event["detail"]["evidence"][0]["line"] == 7
    assert _diagnose("diag-run", "--ledger", str(db)).returncode == 1  # the same diagnosis again: no new event
    with L.Ledger.open(db) as ledger:
        assert len([e for e in ledger.events(ledger.get_run("diag-run").id) if e["kind"] == "diagnosis"]) == 1


def test_status_of_a_failed_run_shows_the_diagnosis_in_one_line(tmp_path):
    log = _write(tmp_path, "run.log", OOM_LOG)
    db = _ledger_run(tmp_path, "failed", log)
    proc = run_cli("status", "diag-run", "--ledger", str(db), env=NO_SLURM)
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("diagnosis:")]
    assert "gpu_oom on rank 3" in line
    data = json.loads(run_cli("status", "diag-run", "--ledger", str(db), "--format", "json", env=NO_SLURM).stdout)
    assert data["diagnosis"]["cause"] == "gpu_oom" and data["diagnosis"]["rank"] == 3


def test_status_of_a_completed_run_has_no_diagnosis(tmp_path):
    log = _write(tmp_path, "run.log", OOM_LOG)
    db = _ledger_run(tmp_path, "completed", log)
    proc = run_cli("status", "diag-run", "--ledger", str(db), env=NO_SLURM)
    assert proc.returncode == 0 and "diagnosis:" not in proc.stdout
    data = json.loads(run_cli("status", "diag-run", "--ledger", str(db), "--format", "json", env=NO_SLURM).stdout)
    assert data["diagnosis"] is None


# ---------------------------------------------------------------------- Slurm's view, parsed
SEP = "\x1f"


def test_sacct_rows_become_the_job_and_its_steps():
    rows = [
        SEP.join(["77", "FAILED", "1:0", "0:0", "h100-[1-2]", "2026-12-01T10:00:00", "2026-12-01T10:01:00",
                  "00:01:00", "00:10:00", "NonZeroExitCode"]),
        SEP.join(["77.batch", "FAILED", "1:0", "", "h100-1", "2026-12-01T10:00:00", "2026-12-01T10:01:00",
                  "00:01:00", "", ""]),
        SEP.join(["77.0", "CANCELLED by 0", "0:15", "", "h100-[1-2]", "2026-12-01T10:00:01", "Unknown",
                  "00:00:59", "", ""]),
    ]
    job, steps = parse_sacct("\n".join(rows), "77")
    assert job is not None and job["State"] == "FAILED" and job["Reason"] == "NonZeroExitCode"
    assert [(s.step_id, s.state, s.exit_code, s.node_list) for s in steps] == [
        ("77.batch", "FAILED", "1:0", "h100-1"), ("77.0", "CANCELLED", "0:15", "h100-[1-2]")]
    assert steps[1].end is None and steps[1].start is not None


def test_scontrol_gives_restarts_and_log_paths():
    facts = parse_scontrol("JobId=9 JobName=x JobState=PENDING Reason=BeginTime Requeue=1 Restarts=2 "
                           "NodeList=(null) StdErr=/logs/a b.out StdIn=/dev/null StdOut=/logs/a b.out Power=")
    assert (facts.restarts, facts.state, facts.reason, facts.node_list) == (2, "PENDING", "BeginTime", "")
    assert facts.stdout == "/logs/a b.out" and facts.stderr == "/logs/a b.out"


@pytest.mark.parametrize("text,hosts", [
    ("h100-[1-2]", ["h100-1", "h100-2"]),
    ("gb200-[01,03-04],login", ["gb200-01", "gb200-03", "gb200-04", "login"]),
    ("cpu-1", ["cpu-1"]),
    ("", []),
])
def test_host_lists_expand_in_slurms_order(text, hosts):
    assert expand_hostlist(text) == hosts


def test_a_rank_is_placed_by_block_distribution():
    assert [node_of_rank("h100-[1-2]", r, 2) for r in range(5)] == ["h100-1", "h100-1", "h100-2", "h100-2", None]
    assert node_of_rank("h100-1", 7, 8) == "h100-1"


# ---------------------------------------------------------------------- the stand-in's real messages
STANDIN = Path(__file__).resolve().parents[1] / "standin_trainer.py"


def _standin_log(tmp_path: Path, *overrides: str, env: dict | None = None, rank: int = 0) -> tuple[int, Path]:
    """One rank of the stand-in as srun starts it (no cluster), its stdout+stderr in a log file."""
    import os
    import subprocess
    import sys

    log = tmp_path / f"standin-rank{rank}.log"
    child = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MBL_STANDIN_", "MASTER_", "RANK"))}
    child.update({"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(rank),
                  "SLURM_NODELIST": "localhost", "SLURM_JOB_ID": "4244", "MBL_STANDIN_ITER_SECONDS": "0",
                  "MBL_STANDIN_REPORT_DIR": str(tmp_path / "report"), **(env or {})})
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.run([sys.executable, str(STANDIN), "--recipe", "llama32_1b_pretrain_config",
                               "--save_dir", str(tmp_path / "ckpt"), "--load_dir", str(tmp_path / "ckpt"), "-ms", "4",
                               *overrides],
                              env=child, stdout=out, stderr=subprocess.STDOUT, timeout=60, check=False)
    return proc.returncode, log


@pytest.mark.parametrize("case,overrides,env,needle", [
    ("tp_kv_mismatch", ["-tp", "2", "model.num_query_groups=3"], {}, "num_query_groups (3) must be"),
    ("cuda_graph_conflict", [], {"MBL_STANDIN_CUDA_GRAPH_CONFLICT": "1"}, "CUDA graphs not supported"),
    ("import_error", [], {"MBL_STANDIN_IMPORT_ERROR": "megatron.core.no_such_module"}, "ModuleNotFoundError"),
    ("gpu_oom", [], {"MBL_STANDIN_OOM_AT": "2", "MBL_STANDIN_NCCL_TIMEOUT_S": "0"}, "torch.OutOfMemoryError"),
])
def test_the_standins_failures_are_diagnosed_from_its_log(tmp_path, case, overrides, env, needle):
    rc, log = _standin_log(tmp_path, *overrides, env=env)
    assert rc == 1, log.read_text()
    got = json.loads(_diagnose(str(log), "--format", "json").stdout)
    [line_no] = [n for n, text in enumerate(log.read_text().splitlines(), 1) if needle in text]
    assert (got["cause"], got["rank"], got["evidence"][0]["line"]) == (case, 0, line_no), got


def test_the_standins_port_in_use_is_a_real_bind(tmp_path):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen(1)
        rc, log = _standin_log(tmp_path, env={"MASTER_PORT": str(listener.getsockname()[1])})
    assert rc == 1
    got = json.loads(_diagnose(str(log), "--format", "json").stdout)
    assert got["cause"] == "port_in_use" and "EADDRINUSE" in got["evidence"][0]["text"]


def test_the_standins_corrupt_shard_fails_the_resume_of_the_rank_that_reads_it(tmp_path):
    rc, _ = _standin_log(tmp_path, "--save_interval", "2")
    assert rc == 0
    shard = tmp_path / "ckpt" / "iter_0000004" / "__1_0.distcp"
    shard.write_bytes(shard.read_bytes()[:5])
    rc1, log = _standin_log(tmp_path, "-ms", "6", rank=1)
    rc0, _ = _standin_log(tmp_path, "-ms", "6", rank=0)
    assert (rc1, rc0) == (1, 0)  # rank 0's own shard is whole
    got = json.loads(_diagnose(str(log), "--format", "json").stdout)
    assert (got["cause"], got["rank"]) == ("checkpoint_corrupt", 1)
