"""Step time, throughput and peak memory read from Megatron's log lines (runs/step_metrics.py),
on the lines the stand-in trainer prints (training_log's iteration line, Bridge's memory report)
and Megatron-LM's MB memory report."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from mbridge_launch.runs import step_metrics as S
from mbridge_launch.runs.step_metrics import parse_memory_line, read_step_metrics, tokens_per_sec_per_gpu
from standin.speed import memory_line
from standin.train import log_line


def iteration(i: int, ms: float, *, total: int = 100, gbs: int = 8) -> str:
    return log_line(i, total, i * gbs, ms, 1e-4, gbs, 3.0, 1.0, 0, 0)


def write(path: Path, lines: list[str], tail: str = "") -> Path:
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return path


def test_median_after_the_warm_up_iterations(tmp_path):
    times = [900.0, 400.0, 300.0, 101.0, 99.0, 100.0, 102.0, 98.0]
    log = write(tmp_path / "a.log", [iteration(i, ms) for i, ms in enumerate(times, start=1)])
    m = read_step_metrics([log], skip=3)
    assert m.samples == len(times) - 3
    assert m.step_time_s == pytest.approx(statistics.median(times[3:]) / 1000)
    assert m.iterations == len(times) and m.global_batch_size == 8
    everything = read_step_metrics([log], skip=0)
    assert everything.samples == len(times)
    assert everything.step_time_s == pytest.approx(statistics.median(times) / 1000)


def test_tokens_per_second_per_gpu_from_the_logged_batch():
    assert tokens_per_sec_per_gpu(0.5, 32, 4096, 8) == pytest.approx(32 * 4096 / (0.5 * 8))
    for bad in [(None, 32, 4096, 8), (0.5, None, 4096, 8), (0.0, 32, 4096, 8), (0.5, 32, 4096, 0), (-1.0, 32, 4096, 8)]:
        assert tokens_per_sec_per_gpu(*bad) is None


def test_tokens_filled_in_when_sequence_and_gpus_are_given(tmp_path):
    log = write(tmp_path / "a.log", [iteration(i, 250.0, gbs=16) for i in range(1, 8)])
    m = read_step_metrics([log], seq_length=2048, gpus=4)
    assert m.tokens_per_sec_per_gpu == pytest.approx(16 * 2048 / (0.25 * 4))
    assert read_step_metrics([log]).tokens_per_sec_per_gpu is None
    assert read_step_metrics([log]).with_throughput(seq_length=2048, gpus=4).tokens_per_sec_per_gpu == m.tokens_per_sec_per_gpu


def test_bridge_memory_line_max_over_ranks_in_gib(tmp_path):
    lines = [iteration(1, 100.0), memory_line(0, 1, 20.0), iteration(2, 100.0), memory_line(0, 2, 30.0),
             memory_line(4, 2, 45.5)]
    m = read_step_metrics([write(tmp_path / "a.log", lines)])
    assert m.memory_source == "max allocated"
    assert m.peak_memory_gb == pytest.approx(45.5, rel=1e-4)  # 5 significant digits in GB
    assert m.memory_by_rank[0] == pytest.approx(30.0, rel=1e-4) and set(m.memory_by_rank) == {0, 4}


def test_megatron_lm_memory_line_in_mib():
    line = "[Rank 3] (after 2 iterations) memory (MB) | allocated: 100.00 | max allocated: 40960.00 | reserved: 2.00 | max reserved: 51200.00"
    report = parse_memory_line("3: " + line)  # srun --label prefix
    assert report is not None and report.rank == 3 and report.iteration == 2
    assert report.max_allocated_gib == pytest.approx(40.0) and report.max_reserved_gib == pytest.approx(50.0)


def test_max_reserved_only_when_no_rank_printed_max_allocated(tmp_path):
    line = "[Rank 0] (after 1 iterations) memory (GB) | mem-reserved-gigabytes: 10.0 | mem-max-reserved-gigabytes: 32.212"
    m = read_step_metrics([write(tmp_path / "a.log", [iteration(1, 10.0), line])])
    assert m.memory_source == "max reserved"
    assert m.peak_memory_gb == pytest.approx(32.212e9 / 2**30)


def test_logged_throughput_and_bridge_step_time_line(tmp_path):
    with_tp = iteration(5, 100.0).replace(" | learning rate", " | throughput per GPU (TFLOP/s/GPU): 412.5 | learning rate")
    lines = [iteration(i, 100.0) for i in range(1, 5)] + [with_tp,
             "Step Time : 0.10s GPU utilization: 400.0MODEL_TFLOP/s/GPU", iteration(6, 100.0)]
    m = read_step_metrics([write(tmp_path / "a.log", lines)], skip=4)
    assert m.samples == 2 and m.tflops_per_gpu == pytest.approx(statistics.median([412.5, 400.0]))


def test_cut_and_garbled_lines_are_ignored(tmp_path):
    good = [iteration(i, 100.0) for i in range(1, 9)]
    cut = iteration(9, 123.4)
    cut = cut[: cut.index("(ms): 123") + len("(ms): 12")]  # a line cut inside its time
    garbled = [
        iteration(10, 100.0).replace("(ms): 100.0", "(ms): 1o0.0"),
        "iteration banana / 12 | elapsed time per iteration (ms): 5.0 |",
        "[Rank 0] (after 1 iterations) memory (GB) | mem-max-allocated-gigabytes: lots",
        "\x00\xff binary noise",
    ]
    m = read_step_metrics([write(tmp_path / "a.log", good + garbled, tail=cut)], skip=3)
    assert m.step_time_s == pytest.approx(0.1) and m.samples == 5
    assert m.peak_memory_gb is None
    # an unfinished memory line (a file still being written) is not read either
    partial = memory_line(0, 1, 20.0)
    partial = partial[: partial.index("mem-max-allocated-gigabytes: ") + len("mem-max-allocated-gigabytes: 2")]
    assert read_step_metrics([write(tmp_path / "b.log", good, tail=partial)]).peak_memory_gb is None


def test_restarts_replace_iterations_and_warm_up_again(tmp_path):
    first = write(tmp_path / "run-restart0.log", [iteration(i, 500.0) for i in range(1, 11)])
    # the second attempt resumed from iteration 6: its own warm-up, then faster steps replace 7..10
    second = write(tmp_path / "run-restart1.log", [" loading checkpoint from /ckpt at iteration 6"]
                   + [iteration(i, 900.0 if i <= 9 else 100.0) for i in range(7, 15)])
    m = read_step_metrics([first, second], skip=3)
    # first file: 4..6 steady (500); second: 7..9 warm-up (900, replacing 7..9), 10..14 steady (100)
    assert m.samples == 3 + 5 and m.iterations == 14
    assert m.step_time_s == pytest.approx(0.1)


def test_missing_and_non_regular_paths_are_passed_over(tmp_path):
    log = write(tmp_path / "a.log", [iteration(i, 100.0) for i in range(1, 6)])
    m = read_step_metrics([tmp_path / "nope.log", tmp_path, log])
    assert m.files_read == 1 and m.samples == 2
    empty = read_step_metrics([])
    assert empty.step_time_s is None and empty.samples == 0 and empty.peak_memory_gb is None


def test_reading_is_bounded_head_and_tail(tmp_path, monkeypatch):
    lines = [iteration(1, 100.0), memory_line(0, 1, 20.0)]
    lines += [iteration(i, 999.0) for i in range(2, 2000)]  # the middle: never read
    lines += [iteration(i, 100.0) for i in range(2000, 2100)]
    log = write(tmp_path / "big.log", lines)
    budget = 100 * len(iteration(2050, 100.0)) * 2
    assert log.stat().st_size > budget
    m = read_step_metrics([log], max_bytes=budget)
    assert m.truncated and m.peak_memory_gb == pytest.approx(20.0, rel=1e-4)  # the head is read
    assert m.step_time_s == pytest.approx(0.1) and m.iterations == 2099  # the tail is read
    # an endless line costs at most MAX_LINE per read and parses as nothing
    monkeypatch.setattr(S, "MAX_LINE", 256)
    huge = write(tmp_path / "huge.log", ["x" * 10_000 + iteration(1, 5.0)] + [iteration(i, 100.0) for i in range(2, 7)])
    m = read_step_metrics([huge], skip=0)
    assert m.samples == 5 and m.step_time_s == pytest.approx(0.1)


def test_points_kept_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "MAX_POINTS", 10)
    log = write(tmp_path / "a.log", [iteration(i, 100.0 if i > 20 else 700.0) for i in range(1, 31)])
    m = read_step_metrics([log], skip=0)
    assert m.samples <= 10 and m.step_time_s == pytest.approx(0.1)


def test_a_logging_interval_skips_only_the_lines_holding_warm_up_iterations(tmp_path):
    # logger.log_interval=10: the first line averages iterations 1-10 (warm-up among them), the next do not
    fresh = write(tmp_path / "a.log", [iteration(i, 900.0 if i == 10 else 100.0) for i in range(10, 101, 10)])
    m = read_step_metrics([fresh], skip=3)
    assert m.samples == 9 and m.step_time_s == pytest.approx(0.1)
    # skip=25 covers the first three intervals
    assert read_step_metrics([fresh], skip=25).samples == 7
    resumed = write(tmp_path / "b.log", [" loading checkpoint from /c at iteration 100"]
                    + [iteration(i, 100.0) for i in range(110, 201, 10)])
    assert read_step_metrics([resumed], skip=3).samples == 9
