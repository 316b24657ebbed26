"""Signals that save (issue 13, item 5), on the local Slurm cluster with the stand-in trainer,
which now behaves like Megatron Bridge (a signal without its exit handler kills it).

A `recommend`-made Plan (default cluster.signal TERM@60, train.exit_signal_handler=true) runs
under each executor; its time limit is then shortened (`scontrol update TimeLimit=`) to the run
time plus less than the lead, so Slurm itself sends the Plan's --signal at its next time-limit
check. The trainer must save at the iteration it stopped and exit 0 before the limit: the job ends
COMPLETED (the limit's own SIGTERM would end it TIMEOUT). A hand-edited Plan with USR1@300 and no
handler is a preflight error, and its job's trainer dies of the signal without a checkpoint.

The four jobs run at once (one module fixture) so that Slurm's timer (measured here: the signal
came 14 s after the update; its check runs every 30 s) is waited for once.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gate_fixtures import unique, write_plan
from mbridge_launch.base import slurm_time
from mbridge_launch.executors import BUILTINS
from mbridge_launch.executors.launch import render_plan, schedule
from mbridge_launch.plan.model import Plan, load_plan

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("english")]
EXECUTORS = list(BUILTINS)  # sbatch, nemo-run, submitit
ITERS = 3000  # never reached: the signal stops every run
STOPPED = re.compile(r"exiting program after receiving (SIG\w+) at iteration (\d+)")
ITERATION = re.compile(r"\] iteration +(\d+)/")


@dataclass
class Run:
    label: str
    plan: Plan
    shared: Path
    executor: str
    remaining_s: int  # time left once the limit is shortened: below the signal's lead
    job: str = ""
    rendered: str = ""
    state: str = ""
    shortened_at: float = 0.0
    ended_after_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def save(self) -> Path:
        return Path(self.plan.checkpoint.save or "")

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.shared.rglob("*"))
                         if p.is_file() and p.suffix in (".out", ".err", ".log"))


def _plan(base: dict, shared: Path, executor: str, *, signal: str | None = None, handler: bool = True) -> Plan:
    shared.mkdir(parents=True, exist_ok=True)
    data = copy.deepcopy(base)
    data["cluster"]["exclusive"] = False  # the four jobs share the two h100 nodes at once
    if signal is not None:
        data["cluster"]["signal"] = signal
    if not handler:
        data["overrides"] = [o for o in data["overrides"] if not o["key"].startswith("train.exit_signal")]
    path = write_plan(data, shared, unique(f"sig-{executor}"), iters=ITERS, save_interval=ITERS,
                      env={"MBL_STANDIN_ITER_SECONDS": "0.2"})
    return load_plan(path)


def _wait_iterations(run: Run, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(ITERATION.findall(run.log())) < count:
        assert time.monotonic() < deadline, f"{run.label}: fewer than {count} iterations logged\n{run.log()[-2000:]}"
        time.sleep(0.5)


def _shorten(cluster, run: Run) -> None:
    """TimeLimit = the time run so far + remaining_s (Slurm reads M:S as minutes:seconds)."""
    ran = slurm_time.parse_seconds(cluster.scontrol_job(run.job)["RunTime"]) or 0
    limit = ran + run.remaining_s
    cluster.run(["scontrol", "update", f"JobId={run.job}", f"TimeLimit={limit // 60}:{limit % 60:02d}"])
    run.shortened_at = time.monotonic()


@pytest.fixture(scope="module")
def signalled(base_plan, slurm_cluster, _shared_root) -> dict[str, Run]:
    root = _shared_root / unique("run-safety-signals")
    runs: dict[str, Run] = {}
    for executor in EXECUTORS:
        shared = root / executor
        runs[executor] = Run(executor, _plan(base_plan, shared, executor), shared, executor, remaining_s=50)
    shared = root / "usr1"
    runs["usr1"] = Run("usr1", _plan(base_plan, shared, "usr1", signal="USR1@300", handler=False), shared, "sbatch",
                       remaining_s=240)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SLURM_CONF", slurm_cluster.slurm_conf)
        env.setenv("MBL_SLURM_DIR", str(slurm_cluster.dir))
        try:
            for run in runs.values():
                run.rendered = render_plan(run.plan, run.executor, run.shared / "render").text
                run.job = schedule(render_plan(run.plan, run.executor, run.shared / "work")).job_ids[0]
            for run in runs.values():
                _wait_iterations(run, 3, timeout=90)
                _shorten(slurm_cluster, run)
            for run in runs.values():
                run.state = slurm_cluster.wait(run.job, timeout=150)
                run.ended_after_s = round(time.monotonic() - run.shortened_at, 1)
        finally:
            for run in runs.values():
                if run.job and not run.state:
                    slurm_cluster.cancel(run.job)
    return runs


@pytest.mark.parametrize("executor", EXECUTORS)
def test_default_signal_saves_a_checkpoint_and_exits_before_the_limit(signalled, executor):
    run = signalled[executor]
    plan = run.plan
    assert plan.cluster.signal == "TERM@60"  # recommend's default: Bridge's signal and lead
    assert [(o.key, o.value, o.change_class) for o in plan.overrides if o.key.startswith("train.exit_signal")] == [
        ("train.exit_signal_handler", "true", "execution")]
    assert "#SBATCH --signal=TERM@60\n" in run.rendered and "USR2@90" not in run.rendered.split("# Signal:")[0]
    log = run.log()
    # exit 0 before the limit, on the --signal: the limit's own SIGTERM would leave the job TIMEOUT
    assert run.state == "COMPLETED", f"{executor}: {run.state} after {run.ended_after_s} s\n{log[-3000:]}"
    stops = STOPPED.findall(log)
    assert len(stops) == 1 and stops[0][0] == "SIGTERM", log[-3000:]
    at = int(stops[0][1])
    assert 3 <= at < ITERS
    assert max(int(i) for i in ITERATION.findall(log)) == at  # stopped at the iteration it was in
    assert (run.save / "latest_checkpointed_iteration.txt").read_text().strip() == str(at)
    assert (run.save / f"iter_{at:07d}" / ".metadata").is_file()
    assert f"successfully saved checkpoint from iteration {at:7d}" in log


def test_usr1_without_the_handler_is_refused_by_preflight_and_kills_the_trainer(signalled, mbl):
    run = signalled["usr1"]
    plan_file = next(run.shared.glob("*.yaml"))
    proc = mbl.run("preflight", plan_file, "--no-cluster")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "plan.signal_not_handled" in proc.stdout
    assert "would kill the trainer 300 s before the limit without a checkpoint" in proc.stdout
    # the stand-in, like Bridge, has no handler for it: the ranks die of SIGUSR1, nothing is saved
    log = run.log()
    assert run.state == "FAILED", f"{run.state}\n{log[-3000:]}"
    assert "User defined signal 1" in log
    assert not STOPPED.search(log) and "saving checkpoint" not in log
    assert len(ITERATION.findall(log)) >= 3
    assert not run.save.exists() or not any(run.save.glob("iter_*"))
