"""The stand-in trainer: command line, rank derivation, log format, checkpoints, resume, faults,
signals; locally (SLURM_* set by hand) and under srun on the local cluster."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mbridge_launch.base.quoting import sh_join
from standin import checkpoint, distenv, train
from standin.config import parse
from standin.faults import clean_loss

REPO = Path(__file__).resolve().parents[2]
LOG_RE = re.compile(
    r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +(?P<it>\d+)/ +(?P<total>\d+) \|"
    r" consumed samples: +(?P<consumed>\d+) \| elapsed time per iteration \(ms\): [\d.]+ \|"
    r" learning rate: [\d.E+-]+ \| global batch size: +(?P<gbs>\d+) \| lm loss: (?P<loss>nan|[\d.E+-]+) \|"
    r" loss scale: 1\.0 \| grad norm: (?:nan|[\d.]+) \| number of skipped iterations: +(?P<skipped>\d+) \|"
    r" number of nan iterations: +(?P<nans>\d+) \|$")
ENV_PREFIXES = ("SLURM_", "MBL_STANDIN_")
ENV_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No inherited rank variables; fast iterations; reports under tmp_path."""
    for k in list(os.environ):
        if k.startswith(ENV_PREFIXES) or k in ENV_NAMES:
            monkeypatch.delenv(k)
    monkeypatch.setenv("MBL_STANDIN_ITER_SECONDS", "0")
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(tmp_path / "report"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_inprocess(argv: list[str], capsys) -> tuple[int, list[str]]:
    """Run the trainer's main() here (fast); restore the signal handlers it installs."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)}
    train._stop_signal.clear()
    try:
        rc = train.main(argv)
    except BaseException:
        capsys.readouterr()  # drop this run's output so the next run's lines stand alone
        raise
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    out = capsys.readouterr().out
    return rc, out.splitlines()


def iterations(lines: list[str]) -> list[dict]:
    found = []
    for line in lines:
        m = LOG_RE.match(line)
        if m:
            d = m.groupdict()
            found.append({k: (float(v) if k == "loss" else int(v)) for k, v in d.items()})
    return found


def args(save: Path, *extra: str) -> list[str]:
    return ["--recipe", "llama3_8b_pretrain_config", "--dataset", "mock", "--save_dir", str(save),
            "--load_dir", str(save), *extra]


# ---------------------------------------------------------------- pure functions
def test_log_line_matches_the_documented_format():
    doc = (REPO / "docs" / "internals.md").read_text(encoding="utf-8")
    documented = next(line for line in doc.splitlines() if line.startswith(" [") and "iteration" in line)
    line = train.log_line(10, 100, 1280, 812.3, 3.0e-4, 128, 7.654321, 1.234, 0, 0)
    assert re.sub(r"^ \[[^\]]+\]", "", line) == re.sub(r"^ \[[^\]]+\]", "", documented)
    nan_line = train.log_line(11, 100, 1408, 800.0, 3.0e-4, 128, math.nan, math.nan, 0, 1)
    assert "| lm loss: nan |" in nan_line and "number of nan iterations:   1 |" in nan_line


def test_loss_is_deterministic_and_strictly_decreasing():
    for seed in (1, 1234, 99):
        losses = [clean_loss(i, seed) for i in range(1, 300)]
        assert all(a > b for a, b in zip(losses, losses[1:]))
    assert clean_loss(5, 1) == clean_loss(5, 1) and clean_loss(5, 1) != clean_loss(5, 2)


@pytest.mark.parametrize("text,hosts", [
    ("h100-[1-2]", ["h100-1", "h100-2"]),
    ("gb200-1", ["gb200-1"]),
    ("h100-[1-2],gb200-[01,03-04]", ["h100-1", "h100-2", "gb200-01", "gb200-03", "gb200-04"]),
    ("node[8-10]x,login", ["node8x", "node9x", "node10x", "login"]),
])
def test_expand_hostlist(text, hosts):
    assert distenv.expand_hostlist(text) == hosts


def test_rank_derivation_slurm_and_torchrun():
    slurm = {"SLURM_PROCID": "11", "SLURM_NTASKS": "16", "SLURM_LOCALID": "3", "SLURM_NODELIST": "h100-[1-2]",
             "SLURM_JOB_ID": "123456"}
    d = distenv.derive(slurm)
    assert (d.rank, d.world_size, d.local_rank, d.master_addr, d.master_port, d.source) == \
        (11, 16, 3, "h100-1", 15000 + 3456, "slurm")
    torchrun = dict(slurm, RANK="2", WORLD_SIZE="8", LOCAL_RANK="2", MASTER_ADDR="n0", MASTER_PORT="29400")
    d = distenv.derive(torchrun)
    assert (d.rank, d.world_size, d.local_rank, d.master_addr, d.master_port, d.source) == \
        (2, 8, 2, "n0", 29400, "torchrun")
    assert distenv.derive({}).world_size == 1


def test_command_line_precedence_and_overrides(tmp_path):
    cfg = parse(["--model", "llama3_8b", "--mode", "sft", "--dataset", "squad", "-ms", "50", "-gb", "32", "-tp", "2",
                 "--lr", "1e-4", "train.train_iters=70", "+foo.bar=x y", "~checkpoint.load", "rng.seed=7",
                 "train.iterations_to_skip=[3,4]"], cwd=str(tmp_path))
    v = cfg.values
    assert v["train.train_iters"] == 70 and v["train.global_batch_size"] == 32  # override beats shortcut
    assert v["model.tensor_model_parallel_size"] == 2 and v["optimizer.lr"] == 1e-4
    assert v["foo.bar"] == "x y" and v["checkpoint.load"] is None and v["rng.seed"] == 7
    assert v["train.iterations_to_skip"] == [3, 4]
    assert v["checkpoint.save"] == str(tmp_path / "nemo_experiments" / "default" / "checkpoints")
    assert parse(["--recipe", "qwen3_8b_sft_config"]).mode == "sft"
    assert parse(["--recipe", "llama3_8b_peft_config"]).mode == "lora"


@pytest.mark.parametrize("bad", [
    ["--recipe", "a", "--model", "b"],
    ["--recipe", "a", "--bogus"],
    ["--recipe", "a", "not-an-override"],
    ["--recipe", "a", "--mode", "sft", "--dataset", "mock"],
    ["--mode", "pretrain"],
])
def test_bad_command_lines_exit_2(bad, clean_env, capsys):
    rc, _ = run_inprocess(bad, capsys)
    assert rc == 2


# ---------------------------------------------------------------- logging, checkpoints, resume
def test_log_and_checkpoint_layout(clean_env, capsys, monkeypatch):
    save = clean_env / "ckpt"
    order: list[str] = []
    real_write = checkpoint.write_atomic
    monkeypatch.setattr(checkpoint, "write_atomic",
                        lambda p, data: (order.append(str(Path(p).relative_to(save))), real_write(p, data)))
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    rc, lines = run_inprocess(args(save, "-ms", "6", "-gb", "16", "--save_interval", "3"), capsys)
    assert rc == 0
    its = iterations(lines)
    assert [i["it"] for i in its] == [1, 2, 3, 4, 5, 6] and {i["total"] for i in its} == {6}
    assert [i["consumed"] for i in its] == [16 * n for n in range(1, 7)] and {i["gbs"] for i in its} == {16}
    assert all(a["loss"] > b["loss"] for a, b in zip(its, its[1:]))
    saved = [line for line in lines if "successfully saved checkpoint" in line]
    assert saved == [f" successfully saved checkpoint from iteration       {n} to {save} [ t 1/1, p 1/1 ]" for n in (3, 6)]

    it6 = save / "iter_0000006"
    assert sorted(p.name for p in it6.iterdir()) == sorted(
        [".metadata", "__0_0.distcp", "__1_0.distcp", "common.pt", "metadata.json", "run_config.yaml", "train_state.pt"])
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "6"
    state = json.loads((save / "latest_train_state.pt").read_text())
    assert state == {"iteration": 6, "consumed_train_samples": 96, "floating_point_operations_so_far": 0,
                     "do_train": True}
    assert json.loads((it6 / "train_state.pt").read_text()) == state
    # each save: the whole iteration directory, .metadata last in it, then the two trackers
    per_save = [order[i:i + 9] for i in range(0, len(order), 9)]
    assert len(per_save) == 2
    for chunk, n in zip(per_save, (3, 6)):
        d = f"iter_{n:07d}"
        assert all(x.startswith(d + "/") for x in chunk[:7]) and chunk[6] == f"{d}/.metadata"
        assert chunk[7:] == ["latest_train_state.pt", "latest_checkpointed_iteration.txt"]
    assert not list(save.rglob(".tmp-*"))


def test_resume_continues_with_identical_losses(clean_env, capsys):
    a, b = clean_env / "a", clean_env / "b"
    run_inprocess(args(a, "-ms", "4", "--save_interval", "2"), capsys)
    rc, lines = run_inprocess(args(a, "-ms", "8"), capsys)
    assert rc == 0
    assert f" loading checkpoint from {a} at iteration 4" in lines
    resumed = iterations(lines)
    _, straight = run_inprocess(args(b, "-ms", "8"), capsys)
    assert [i["it"] for i in resumed] == [5, 6, 7, 8]
    assert [i["loss"] for i in resumed] == [i["loss"] for i in iterations(straight)][4:]
    assert resumed[0]["consumed"] == 5 * 8


def test_resume_resolution_order(clean_env, capsys):
    save = clean_env / "ckpt"
    run_inprocess(args(save, "-ms", "6", "--save_interval", "2"), capsys)

    # load naming an iteration directory wins over everything
    rc, lines = run_inprocess(args(clean_env / "o1", "-ms", "7", "checkpoint.ckpt_step=4")
                              + ["--load_dir", str(save / "iter_0000002")], capsys)
    assert rc == 0 and iterations(lines)[0]["it"] == 3
    # ckpt_step
    rc, lines = run_inprocess(args(clean_env / "other", "-ms", "5", "checkpoint.ckpt_step=4") + ["--load_dir", str(save)],
                              capsys)
    assert rc == 0 and iterations(lines)[0]["it"] == 5
    # editing only the .txt does not roll back: latest_train_state.pt wins
    (save / "latest_checkpointed_iteration.txt").write_text("2\n")
    fresh = clean_env / "fresh"
    rc, lines = run_inprocess(args(fresh, "-ms", "8") + ["--load_dir", str(save)], capsys)
    assert iterations(lines)[0]["it"] == 7
    # the .txt is the fallback when latest_train_state.pt is absent
    (save / "latest_train_state.pt").unlink()
    rc, lines = run_inprocess(args(clean_env / "fresh2", "-ms", "8") + ["--load_dir", str(save)], capsys)
    assert iterations(lines)[0]["it"] == 3


def test_missing_ckpt_step_is_an_error(clean_env, capsys):
    save = clean_env / "ckpt"
    run_inprocess(args(save, "-ms", "4", "--save_interval", "2"), capsys)
    with pytest.raises(checkpoint.CheckpointError, match="iter_0000003"):
        run_inprocess(args(save, "-ms", "6", "checkpoint.ckpt_step=3"), capsys)
    report = json.loads((clean_env / "report" / "rank-0.json").read_text())
    assert report["status"] == "crashed" and "ckpt_step=3" in report["error"]


def test_most_recent_k_keeps_highest_iterations(clean_env, capsys):
    save = clean_env / "ckpt"
    run_inprocess(args(save, "-ms", "10", "--save_interval", "2", "checkpoint.most_recent_k=2"), capsys)
    assert sorted(p.name for p in save.glob("iter_*")) == ["iter_0000008", "iter_0000010"]
    # a rollback that leaves a newer (abandoned) directory in place loses the new timeline
    (save / "iter_0000010").rename(save / "iter_0000040")
    (save / "latest_train_state.pt").write_text((save / "iter_0000008" / "train_state.pt").read_text())
    (save / "latest_checkpointed_iteration.txt").write_text("8\n")
    run_inprocess(args(save, "-ms", "12", "--save_interval", "2", "checkpoint.most_recent_k=2"), capsys)
    assert sorted(p.name for p in save.glob("iter_*")) == ["iter_0000012", "iter_0000040"]


def test_nonzero_rank_neither_logs_nor_saves(clean_env, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setenv("SLURM_NODELIST", "h100-[1-2]")
    rc, lines = run_inprocess(args(clean_env / "ckpt", "-ms", "3", "odd=a'b\"c $(x) `y`; z\nw"), capsys)
    assert rc == 0 and lines == []
    assert not (clean_env / "ckpt").exists()
    rep = json.loads((clean_env / "report" / "rank-3.json").read_text())
    assert rep["argv"][-1] == "odd=a'b\"c $(x) `y`; z\nw"
    assert rep["dist"]["rank"] == 3 and rep["dist"]["world_size"] == 4 and rep["dist"]["master_addr"] == "h100-1"
    assert rep["env"]["SLURM_NODELIST"] == "h100-[1-2]" and rep["status"] == "completed"


# ---------------------------------------------------------------- faults
def test_crash_at_iteration_on_chosen_rank(clean_env, monkeypatch):
    env = dict(os.environ, MBL_STANDIN_CRASH_AT="3", MBL_STANDIN_CRASH_RANK="1", SLURM_PROCID="1",
               SLURM_NTASKS="2")
    cmd = [sys.executable, str(REPO / "tests" / "standin_trainer.py"), *args(clean_env / "c", "-ms", "5")]
    crashed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert crashed.returncode == 1
    assert "Traceback (most recent call last)" in crashed.stderr
    assert "RuntimeError: stand-in: simulated crash at iteration 3 on rank 1" in crashed.stderr
    rank0 = subprocess.run(cmd, env=dict(env, SLURM_PROCID="0"), capture_output=True, text=True, timeout=60)
    assert rank0.returncode == 0 and len(iterations(rank0.stdout.splitlines())) == 5


def test_crash_once_then_resume(clean_env, capsys, monkeypatch):
    save, marker = clean_env / "ckpt", clean_env / "crashed-once"
    monkeypatch.setenv("MBL_STANDIN_CRASH_AT", "5")
    monkeypatch.setenv("MBL_STANDIN_CRASH_ONCE", str(marker))
    with pytest.raises(RuntimeError, match="iteration 5"):
        run_inprocess(args(save, "-ms", "8", "--save_interval", "2"), capsys)
    assert marker.exists()
    rc, lines = run_inprocess(args(save, "-ms", "8", "--save_interval", "2"), capsys)
    assert rc == 0 and [i["it"] for i in iterations(lines)] == [5, 6, 7, 8]


def test_crash_in_save_leaves_an_incomplete_checkpoint(clean_env, capsys, monkeypatch):
    save = clean_env / "ckpt"
    monkeypatch.setenv("MBL_STANDIN_CRASH_IN_SAVE", "4")
    with pytest.raises(checkpoint.CheckpointError):
        run_inprocess(args(save, "-ms", "6", "--save_interval", "2"), capsys)
    assert (save / "iter_0000004" / "__0_0.distcp").exists() and not (save / "iter_0000004" / ".metadata").exists()
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    monkeypatch.delenv("MBL_STANDIN_CRASH_IN_SAVE")
    rc, lines = run_inprocess(args(save, "-ms", "6"), capsys)
    assert rc == 0 and iterations(lines)[0]["it"] == 3


def test_nan_persists_and_is_avoided_by_new_seed_or_skip(clean_env, capsys, monkeypatch):
    save = clean_env / "ckpt"
    monkeypatch.setenv("MBL_STANDIN_NAN_AT", "4")
    rc, lines = run_inprocess(args(save, "-ms", "6", "--save_interval", "3"), capsys)
    its = iterations(lines)
    assert rc == 0 and [math.isnan(i["loss"]) for i in its] == [False] * 3 + [True] * 3
    assert [i["nans"] for i in its] == [0, 0, 0, 1, 1, 1]
    # resuming from a checkpoint saved after the NaN stays NaN (the weights are poisoned)
    _, lines = run_inprocess(args(save, "-ms", "8"), capsys)
    assert all(math.isnan(i["loss"]) for i in iterations(lines))
    # from iteration 3 with the same seed, the bad batch comes again
    _, lines = run_inprocess(args(clean_env / "x", "-ms", "6") + ["--load_dir", str(save / "iter_0000003")], capsys)
    assert math.isnan(iterations(lines)[0]["loss"])
    # ... with a new seed or with iteration 4 skipped, it does not
    for extra in ("rng.seed=99", "train.iterations_to_skip=[4]"):
        _, lines = run_inprocess(args(clean_env / extra[:3], "-ms", "6", extra) + ["--load_dir", str(save / "iter_0000003")],
                                 capsys)
        assert not any(math.isnan(i["loss"]) for i in iterations(lines)), extra


def test_loss_spike(clean_env, capsys, monkeypatch):
    monkeypatch.setenv("MBL_STANDIN_SPIKE_AT", "5")
    monkeypatch.setenv("MBL_STANDIN_SPIKE_FACTOR", "4")
    _, lines = run_inprocess(args(clean_env / "s", "-ms", "7"), capsys)
    loss = {i["it"]: i["loss"] for i in iterations(lines)}
    assert loss[5] == pytest.approx(4 * clean_loss(5, 1234), rel=1e-6)
    assert loss[6] < loss[4] < loss[5]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_signal_checkpoints_and_exits_cleanly(clean_env, sig):
    """With Bridge's exit handler on, for its train.exit_signal (SIGTERM by default, another by number)."""
    save = clean_env / "ckpt"
    env = dict(os.environ, MBL_STANDIN_ITER_SECONDS="0.1")
    handler = ["train.exit_signal_handler=true"] + ([] if sig == signal.SIGTERM else [f"train.exit_signal={int(sig)}"])
    cmd = [sys.executable, str(REPO / "tests" / "standin_trainer.py"), *args(save, "-ms", "1000"), *handler]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line.rstrip("\n"))
        if LOG_RE.match(line.rstrip("\n")) and len(iterations(seen)) >= 3:
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    lines = seen + out.splitlines()
    last = iterations(lines)[-1]["it"]
    assert proc.returncode == 0, err
    assert any(f"exiting program after receiving {sig.name}" in line for line in lines)
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == str(last)
    assert (save / f"iter_{last:07d}" / ".metadata").exists()
    assert 3 <= last < 1000


# ---------------------------------------------------------------- under srun
@pytest.mark.slurm
def test_sixteen_ranks_under_srun(slurm_cluster, standin_entry, shared_dir):
    save, report = shared_dir / "ckpt", shared_dir / "report"
    hostile = "dataset.note=a b;$(touch /tmp/pwned-mbl)`id` 'q' \"d\""
    script = "#!/bin/bash\nsrun " + sh_join(
        [*standin_entry, "--recipe", "llama3_8b_pretrain_config", "--dataset", "mock", "-ms", "6",
         "--save_interval", "3", "--save_dir", str(save), "--load_dir", str(save), hostile]) + "\n"
    job = slurm_cluster.sbatch("-p", "h100", "--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "-t", "5",
                               "-o", str(shared_dir / "out-%j.txt"), script=script,
                               env={"MBL_STANDIN_REPORT_DIR": str(report), "MBL_STANDIN_ITER_SECONDS": "0.01"})
    assert slurm_cluster.wait(job, timeout=120) == "COMPLETED", (shared_dir / f"out-{job}.txt").read_text()
    reports = [json.loads((report / f"rank-{r}.json").read_text()) for r in range(16)]
    for r, rep in enumerate(reports):
        d = rep["dist"]
        assert (d["rank"], d["world_size"], d["local_rank"], d["source"]) == (r, 16, r % 8, "slurm")
        assert d["master_addr"] == "h100-1" and d["master_port"] == 15000 + int(job[-4:])
        assert rep["hostname"] == f"h100-{r // 8 + 1}" and rep["master_addr_resolves_to"] == "127.0.0.1"
        assert rep["argv"][-1] == hostile and rep["status"] == "completed"
    assert not Path("/tmp/pwned-mbl").exists()
    log = (shared_dir / f"out-{job}.txt").read_text().splitlines()
    assert [i["it"] for i in iterations(log)] == [1, 2, 3, 4, 5, 6]  # rank 0 only
    assert len(list((save / "iter_0000006").glob("__*_0.distcp"))) == 16
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "6"


@pytest.mark.slurm
def test_requeue_checkpoints_on_sigterm_and_resumes(slurm_cluster, standin_entry, shared_dir):
    """scontrol requeue: Slurm SIGTERMs the ranks, rank 0 checkpoints, the job restarts and resumes
    from that checkpoint (the shape of a preemption)."""
    save, report, out = shared_dir / "ckpt", shared_dir / "report", shared_dir / "out.txt"
    script = "#!/bin/bash\nsrun " + sh_join(
        [*standin_entry, "--recipe", "llama3_8b_pretrain_config", "--dataset", "mock", "-ms", "40",
         "--save_dir", str(save), "--load_dir", str(save), "train.exit_signal_handler=true"]) + "\n"
    job = slurm_cluster.sbatch("-p", "gb200", "--nodes=1", "--ntasks-per-node=4", "--gpus-per-node=4", "-t", "5",
                               "--requeue", "--open-mode=append", "-o", str(out), script=script,
                               env={"MBL_STANDIN_REPORT_DIR": str(report), "MBL_STANDIN_ITER_SECONDS": "0.1"})
    deadline = time.monotonic() + 60
    while not (out.exists() and len(iterations(out.read_text().splitlines())) >= 3):
        assert time.monotonic() < deadline, "trainer never logged 3 iterations"
        time.sleep(0.1)
    # cred_expire=10 lets the requeued job start again within ~15 s (Slurm's default: 2 min); the
    # setting is checked here, not the time it takes (no timed asserts in tests)
    cred_expire = re.search(r"^AuthInfo=.*\bcred_expire=(\d+)", Path(slurm_cluster.slurm_conf).read_text(), re.M)
    assert cred_expire and int(cred_expire.group(1)) <= 10, "the test cluster must set cred_expire=10"
    slurm_cluster.run(["scontrol", "requeue", job])
    assert slurm_cluster.wait(job, timeout=120) == "COMPLETED", out.read_text()
    log = out.read_text().splitlines()
    stopped = [line for line in log if "exiting program after receiving SIGTERM" in line]
    assert len(stopped) == 1
    at = int(re.search(r"at iteration (\d+)", stopped[0]).group(1))
    assert f" loading checkpoint from {save} at iteration {at}" in log
    assert [i["it"] for i in iterations(log)] == list(range(1, 41))  # nothing repeated, nothing lost
    attempts = [json.loads(line) for line in (report / "attempts.jsonl").read_text().splitlines()]
    assert [(a["status"], a["restart_count"]) for a in attempts] == [("signalled", None), ("completed", "1")]
