"""The diagnosis engine: every fixture in tests/fixtures/diagnose diagnosed as its expected.json
says, and the rules behind it (a symptom never wins, time order beats file order, Slurm's view,
bounded memory on a large log, the output shapes, Chinese)."""

from __future__ import annotations

import json
import os
import re
import tracemalloc
from pathlib import Path

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.diagnosis.classify import diagnose
from mbridge_launch.diagnosis.model import CAUSES, LEDGER_CAUSES, RETRY, RETRY_OF, Diagnosis, SlurmView, StepView

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagnose"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected.json").is_file())


def _load(case: str) -> tuple[dict, Diagnosis]:
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    slurm_file = d / "slurm.json"
    slurm = SlurmView.from_json(json.loads(slurm_file.read_text())) if slurm_file.exists() else None
    logs = expected.get("logs") or sorted(p.name for p in d.iterdir() if p.name not in ("expected.json", "slurm.json"))
    return expected, diagnose([d / name for name in logs], slurm)


def _where(file: str) -> str:
    return file if file.startswith("slurm:") else Path(file).name


@pytest.mark.parametrize("case", CASES)
def test_fixture_is_diagnosed_as_expected(case: str) -> None:
    expected, got = _load(case)
    assert (got.cause, got.rank, got.node) == (expected["cause"], expected["rank"], expected["node"])
    evidence = {(_where(e.file), e.line): e.text for e in got.evidence}
    for want in expected["evidence"]:
        assert (want["file"], want["line"]) in evidence, (want, got.evidence)
        assert want["text"] in evidence[(want["file"], want["line"])]
    assert got.retry == RETRY_OF[got.cause]


def test_every_cause_code_has_a_fixture() -> None:
    causes = {json.loads((FIXTURES / c / "expected.json").read_text())["cause"] for c in CASES}
    assert causes == set(CAUSES) - set(LEDGER_CAUSES)  # submit_failed comes from the ledger, not from logs


def test_retry_table_covers_every_cause() -> None:
    assert set(RETRY_OF) == set(CAUSES) and set(RETRY_OF.values()) <= set(RETRY)
    assert RETRY_OF["nan_loss"] == RETRY_OF["loss_spike"] == "rollback"  # a NaN is never retried blindly
    assert RETRY_OF["gpu_hardware"] == RETRY_OF["node_failure"] == "resubmit_excluding_node"
    assert {RETRY_OF[c] for c in ("gpu_oom", "dataset_missing", "import_error", "tp_kv_mismatch")} == {"no"}


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_oom_on_rank3_wins_over_the_timeouts_it_caused(tmp_path: Path) -> None:
    expected, got = _load("gpu_oom_rank3_then_nccl_timeouts")
    assert got.cause == "gpu_oom" and got.rank == 3
    symptom_ranks = {s["rank"] for s in got.symptoms if s["cause"] == "nccl_timeout"}
    assert symptom_ranks == {0, 1, 2}
    assert got.exclude_nodes == []


def test_a_symptom_never_wins_even_when_earlier(tmp_path: Path) -> None:
    log = _write(tmp_path / "a.log", [
        ("[rank1]:[E1201 10:00:01.000000 1 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out."),
        "[2025-12-01 10:05:00] later",
        "[rank0]: Traceback (most recent call last):",
        "[rank0]:   File \"x.py\", line 1, in <module>",
        "[rank0]: ModuleNotFoundError: No module named 'megatron.bridge'",
    ])
    got = diagnose([log])
    assert (got.cause, got.rank, got.evidence[0].line) == ("import_error", 0, 5)
    assert got.symptoms and got.symptoms[0]["cause"] == "nccl_timeout" and got.symptoms[0]["rank"] == 1


def test_time_order_beats_file_order(tmp_path: Path) -> None:
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
           "of 79.11 GiB of which 10.00 MiB is free.")
    missing = "FileNotFoundError: [Errno 2] No such file or directory: '/data/x_text_document.bin'"

    def logs(oom_at: str, data_at: str) -> list[Path]:
        a = _write(tmp_path / "node0.log", [f"[2025-12-01 12:00:{oom_at}] step", f"[rank1]: {oom}"])
        b = _write(tmp_path / "node1.log", [f"[2025-12-01 12:00:{data_at}] step", f"[rank4]: {missing}"])
        return [a, b]

    assert diagnose(logs("09", "05")).cause == "dataset_missing"  # node1's error came first
    assert diagnose(logs("05", "09")).cause == "gpu_oom"
    same = diagnose(logs("05", "05"))  # same time: the order of the files given decides
    assert (same.cause, same.rank) == ("gpu_oom", 1)


def test_interleaved_tracebacks_stay_apart(tmp_path: Path) -> None:
    log = _write(tmp_path / "x.log", [
        "[rank0]: Traceback (most recent call last):",
        "[rank1]: Traceback (most recent call last):",
        "[rank0]:   File \"a.py\", line 1, in <module>",
        "[rank1]:   File \"b.py\", line 2, in <module>",
        "[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "[rank0]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0.",
    ])
    got = diagnose([log])
    assert (got.cause, got.rank, got.evidence[0].line) == ("gpu_hardware", 1, 5)
    assert got.retry == "resubmit_excluding_node"


def test_warnings_and_frame_dumps_are_noise(tmp_path: Path) -> None:
    log = _write(tmp_path / "x.log", [
        "/usr/lib/python3/site.py:10: UserWarning: this error is only a warning",
        "  warnings.warn(\"this error is only a warning\")",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in libc10.so)",
        "Exception raised from checkTimeout at ProcessGroupNCCL.cpp:632 (most recent call first):",
        "h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; error none",
    ])
    got = diagnose([log])
    assert got.cause == "none" and not got.failed and got.first_error is None


def test_slurm_view_alone(tmp_path: Path) -> None:
    quiet = _write(tmp_path / "quiet.log", ["[2025-12-01 10:00:00] iteration 1/ 10 | lm loss: 2.0 |"])
    cases = {
        "time_limit": SlurmView("1", "TIMEOUT", "0:0", node_list="n1"),
        "preempted": SlurmView("1", "PREEMPTED", "0:15"),
        "node_failure": SlurmView("1", "NODE_FAIL", steps=(StepView("1.0", "NODE_FAIL", "0:0", "n7"),)),
        "host_oom": SlurmView("1", "OUT_OF_MEMORY", "0:125"),
        "nan_loss": SlurmView("1", "FAILED", "17:0"),
        "unknown": SlurmView("1", "FAILED", "1:0"),
        "none": SlurmView("1", "RUNNING"),
    }
    for cause, view in cases.items():
        got = diagnose([quiet], view)
        assert got.cause == cause, (cause, got.cause)
    failed = diagnose([quiet], cases["node_failure"])
    assert failed.node == "n7" and failed.exclude_nodes == ["n7"] and failed.evidence[0].file == "slurm:1"
    requeued = diagnose([quiet], SlurmView("9", "PREEMPTED", restarts=2))
    assert requeued.restarts == 2 and "requeued the job 2 times" in requeued.as_json()["summary"]


def test_a_log_root_cause_comes_before_slurms_view(tmp_path: Path) -> None:
    log = _write(tmp_path / "x.log", [("slurmstepd: error: Detected 1 oom_kill event in StepId=5.0. Some of the "
                                      "step tasks have been OOM Killed.")])
    got = diagnose([log], SlurmView("5", "TIMEOUT"))
    assert got.cause == "host_oom" and got.evidence[0].line == 1


def test_shared_fs_needs_rank0_to_have_found_the_file(tmp_path: Path) -> None:
    line = "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/nemo/packed/train.npy'"
    only_rank2 = _write(tmp_path / "a.log", [f"[rank2]: {line}"])
    assert diagnose([only_rank2]).cause == "shared_fs"
    every_rank = _write(tmp_path / "b.log", [f"[rank0]: {line}", f"[rank2]: {line}"])
    assert diagnose([every_rank]).cause == "dataset_missing"  # missing everywhere: not a node-local problem


def test_output_shapes_and_chinese() -> None:
    _, got = _load("gpu_hardware_ecc_xid48")
    data = got.as_json()
    assert {"cause", "rank", "node", "evidence", "fix", "retry", "summary", "symptoms", "exclude_nodes",
            "first_error"} <= set(data)
    assert data["evidence"][0] == {"file": got.evidence[0].file, "line": 5,
                                   "text": "RuntimeError: CUDA error: uncorrectable ECC error encountered"}
    assert data["exclude_nodes"] == ["b200-4"] and "b200-4" in data["fix"]
    json.dumps(data)  # plain JSON
    assert got.one_line().startswith("gpu_hardware on rank 2 (b200-4): ")
    zh = got.as_json("zh")
    assert re.search(r"[\u4e00-\u9fff]", zh["summary"]) and re.search(r"[\u4e00-\u9fff]", zh["fix"])
    assert re.search(r"[\u4e00-\u9fff]", got.one_line("zh")) and zh["cause"] == "gpu_hardware"


def test_gpu_oom_fix_uses_the_memory_model_with_a_plan() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plan_fixtures import single_node_h100

    d = FIXTURES / "gpu_oom_rank3_then_nccl_timeouts"
    with_plan = diagnose([d / "slurm-4021.out"], plan=single_node_h100())
    text = with_plan.fix.render("en")
    assert with_plan.fix.key.startswith("diagnose.fix.gpu_oom_model")
    assert re.search(r"estimates [\d.]+ GB per GPU for the current layout \(TP=1 PP=1", text)
    without = diagnose([d / "slurm-4021.out"])
    assert without.fix.key == "diagnose.fix.gpu_oom"


def test_overlong_line_partial_line_and_line_numbers(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    with open(log, "wb") as f:
        f.write(b"x" * (3 << 20) + b" error in a line that never seems to end\n")  # 3 MiB, one line
        f.write(b"ok\n")
        f.write(b"[rank5]: RuntimeError: CUDA error: out of memory")  # still being written: no newline yet
    got = diagnose([log])
    assert (got.cause, got.rank, got.evidence[0].line) == ("gpu_oom", 5, 3)


def test_max_bytes_stops_reading(tmp_path: Path) -> None:
    log = _write(tmp_path / "x.log", ["fine"] * 1000 + ["ImportError: cannot import name 'x' from 'y'"])
    assert diagnose([log]).cause == "import_error"
    assert diagnose([log], max_bytes=1000).cause == "none"


def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UserError):
        diagnose([fifo])


def test_bounded_memory_on_a_200_mb_log(tmp_path: Path) -> None:
    """200 MB of warnings, NCCL INFO, frame dumps and iteration lines, the real error at the end:
    the peak of Python allocations stays a few MB (the file is never held)."""
    noise = "\n".join([
        "/usr/lib/python3/dist-packages/torch/x.py:1: UserWarning: an error-prone path is deprecated",
        "  warnings.warn(",
        "h100-1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0/GDRDMA",
        "frame #1: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in libc10.so)",
        " [2025-12-01 10:00:00] iteration      100/  100000 | lm loss: 2.500000E+00 | number of nan iterations:   0 |",
    ] + ["plain progress output without anything interesting in it at all, padding the log"] * 20) + "\n"
    block = noise.encode() * 2000
    log = tmp_path / "big.log"
    lines = 0
    with open(log, "wb") as f:
        while f.tell() < 200_000_000:
            f.write(block)
            lines += block.count(b"\n")
        f.write(b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    tracemalloc.start()
    try:
        got = diagnose([log])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (got.cause, got.rank, got.evidence[0].line) == ("gpu_oom", 3, lines + 1)
    assert peak < 8 * 1024 * 1024, peak


def test_healthy_tool_output_is_not_a_fault(tmp_path: Path) -> None:
    """nvidia-smi -q and NCCL INFO mention ECC, remapping and IB without anything being wrong."""
    log = _write(tmp_path / "x.log", [
        "    ECC Errors",
        "        Volatile",
        "            SRAM Correctable                  : 0",
        "    Remapped Rows",
        "        Remapping Failure Occurred        : No",
        "h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.1<0>",
        " [2025-12-01 10:00:00] iteration       10/     100 | lm loss: 2.500000E+00 | number of nan iterations:   0 |",
    ])
    assert diagnose([log]).cause == "none"


def test_xid_numbers_decide_hardware(tmp_path: Path) -> None:
    app = _write(tmp_path / "a.log", ["NVRM: Xid (PCI:0000:1b:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1)"])
    assert diagnose([app]).cause == "none"  # Xid 13 is the application's fault, not the GPU's
    ecc = _write(tmp_path / "b.log", [("Dec  1 10:00:00 gpu-9 kernel: NVRM: Xid (PCI:0000:1b:00): 48, pid=1, "
                                      "DBE (double bit error) ECC error")])
    got = diagnose([ecc])
    assert (got.cause, got.node, got.exclude_nodes) == ("gpu_hardware", "gpu-9", ["gpu-9"])
