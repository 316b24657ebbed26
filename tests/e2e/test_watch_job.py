"""The auto-rollback watcher as a Slurm job of its own (gate/watcher_job.py), started by the gate for plans
with auto_rollback.enabled:

- unit: its sbatch line (dependency on the training job, one CPU, no GPUs, quoted --wrap), that the
  gate starts it only when the plan enables auto_rollback (and not with --no-watcher), that a
  refused watcher job does not fail the submission, that SIGTERM (its time limit) makes an in-job
  watcher submit its successor, that a run cancelled by someone else is left alone, and that
  `cancel RUN` stops the watcher job too;
- end to end on the local Slurm cluster: NaN at iteration 25 -> the watcher JOB cancels, rolls back
  to 20 and resubmits through the gate (whose new run gets its own watcher job) -> the run
  completes, with no watcher process on the login side; and a training job killed by `scontrol
  requeue` while its watcher job runs resumes from its latest checkpoint with no rollback.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from checkpoint_fixtures import log_line, make_save_dir
from gate_fixtures import FakeScheduler, log_text, preflight_with, unique, write_plan
from mbridge_launch.gate.submit import GateOptions, submit_gated
from mbridge_launch.gate.watcher_job import PARTITION_ENV, watcher_sbatch_argv
from mbridge_launch.plan.model import AutoRollback
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.runs import ledger as L
from mbridge_launch.watch.watcher import Watcher
from plan_fixtures import single_node_h100, with_changes
from watch_fixtures import FakeSlurm


def auto_plan(tmp_path: Path, enabled: bool = True):
    return with_changes(single_node_h100(), checkpoint={"save": str(tmp_path / "ckpt"), "load": None},
                        auto_rollback=AutoRollback(enabled=enabled, spike_factor=4.0, window=10, max_rollbacks=2).model_dump())


def fake_slurm_bin(tmp_path: Path, *, sbatch_rc: int = 0, main_state: str = "RUNNING",
                   own_state: str = "COMPLETING Reason=TimeLimit") -> tuple[dict, Path]:
    """sbatch/squeue/sacct/scancel/scontrol that log their argv (one line of JSON each) to `calls`;
    sbatch answers job 900 (or refuses), squeue/sacct say job 41 is `main_state` until scancel'ed,
    `scontrol show job` says any other job (the watcher's own) is `own_state` (as Slurm 22.05 shows
    a job being signalled at its time limit, by default)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls.jsonl"
    gone = tmp_path / "cancelled"
    log = f"{sys.executable} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$(basename $0)\" \"$@\" >> {calls}"
    row = "41\\037%s\\0372026-11-29T20:00:00\\037None\\037demo\\037\\n"
    answer = "echo 900" if sbatch_rc == 0 else "echo 'sbatch: error: Invalid partition name specified' >&2"
    scripts = {
        "sbatch": f"{log}\n{answer}\nexit {sbatch_rc}\n",
        # rows as the ledger's query reads them without --json: id, state, submit, reason, name, comment
        "squeue": f"{log}\n[ -e {gone} ] || printf '{row}' '{main_state}'\n",
        "sacct": f"{log}\nif [ -e {gone} ]; then printf '{row}' 'CANCELLED by 0'; "
                 f"else printf '{row}' '{main_state}'; fi\n",
        "scancel": f"{log}\ntouch {gone}\n",
        "scontrol": f"{log}\necho 'JobId=777 JobName=x-watch JobState={own_state} Dependency=(null)'\n",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, calls


def read_calls(calls: Path, command: str) -> list[list[str]]:
    if not calls.exists():
        return []
    return [argv[1:] for argv in map(json.loads, calls.read_text().splitlines()) if argv[0] == command]


def recorded_run(ledger: L.Ledger, plan, tmp_path: Path, job: str = "41") -> L.RunRecord:
    run = ledger.begin_submission(name=plan.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                  executor="sbatch", work_dir=str(tmp_path), save_dir=str(tmp_path / "ckpt"))
    return ledger.mark_submitted(run.id, [job])


# ---------------------------------------------------------------------- the sbatch line
def test_watcher_sbatch_line(tmp_path, monkeypatch):
    monkeypatch.setenv(PARTITION_ENV, "elsewhere")  # read by recommend only: the Plan says where
    monkeypatch.setenv("MBL_TEST_TOKEN", "s3cret-value")
    odd = tmp_path / "state dir $HOME 'x'"
    plan = with_changes(auto_plan(tmp_path), cluster={"env": ["PATH"], "secrets": ["MBL_TEST_TOKEN"]},
                        launch={"log_dir": str(tmp_path / "wlogs")})
    with L.Ledger.open(tmp_path / "l.db") as ledger:
        run = recorded_run(ledger, plan, tmp_path)
    argv = watcher_sbatch_argv(plan, run, odd / "ledger.sqlite3", after="41")
    options = dict(a.split("=", 1) for a in argv[2:-2] if "=" in a)
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-2] == "--wrap"
    assert options["--dependency"] == "after:41" and "--kill-on-invalid-dep=yes" in argv
    assert (options["--ntasks"], options["--cpus-per-task"], options["--nodes"]) == ("1", "1", "1")
    assert not any(a.startswith(("--gres", "--gpus", "--exclusive")) for a in argv)  # no GPUs
    assert (options["--partition"], options["--account"], options["--time"]) == ("h100", "llm", "02:00:00")
    assert options["--job-name"] == f"{plan.name}-watch"
    assert options["--output"] == str(tmp_path / "wlogs" / f"{plan.name}-watch-%j.out")
    # names only, never ALL; the secret's NAME because its resubmission forwards it (max_rollbacks 2)
    exported = options["--export"].split(",")
    assert "ALL" not in exported and {"PATH", "HOME", "SLURM_CONF", "MBL_TEST_TOKEN"} <= set(exported)
    assert "s3cret-value" not in " ".join(argv)
    # the wrapped command survives the shell exactly, hostile path included
    wrapped = shlex.split(argv[-1])
    assert wrapped[0] == "exec" and wrapped[1:] == [sys.executable, "-m", "mbridge_launch", "watch", str(run.id),
                                                   "--ledger", str(odd / "ledger.sqlite3"), "--in-job", "--poll", "5"]
    placed = with_changes(plan, auto_rollback={"watcher_partition": "cpu", "max_rollbacks": 0})
    successor = watcher_sbatch_argv(placed, run, odd / "l.db", after="900", kind="afterany")
    assert "--partition=cpu" in successor and "--dependency=afterany:900" in successor
    # a watcher that never resubmits gets no secret at all
    assert "MBL_TEST_TOKEN" not in next(a for a in successor if a.startswith("--export=")).split("=", 1)[1].split(",")


# ---------------------------------------------------------------------- where it runs (preflight)
def _placement_codes(plan, nodes: dict) -> list[str]:
    from mbridge_launch.preflight.context import PreflightContext
    from mbridge_launch.preflight.slurm import Node, Partition
    from mbridge_launch.preflight.watcher_checks import watcher_checks

    parts = {"h100": Partition("h100", default=True), "cpu": Partition("cpu"),
             "down": Partition("down", state="down"), "gpuonly": Partition("gpuonly", allow_accounts=("other",))}
    facts = {name: Node(name, state, partitions=(part,)) for name, (state, part) in nodes.items()}
    ctx = PreflightContext(plan=plan, env={})
    return [c.code for c in watcher_checks(ctx, parts, facts, parts["h100"])]


@pytest.mark.parametrize("changes, states, code", [
    ({}, {"h1": ("idle", "h100"), "h2": ("idle", "h100")}, "cluster.watcher_same_exclusive"),
    ({"cluster.exclusive": False, "cluster.nodes": 2}, {"h1": ("idle", "h100"), "h2": ("idle", "h100")},
     "cluster.watcher_same_all_nodes"),
    ({"cluster.exclusive": False}, {"h1": ("idle", "h100"), "h2": ("idle", "h100")}, "cluster.watcher_placement_ok"),
    ({"auto_rollback.watcher_partition": "cpu"}, {"c1": ("idle", "cpu")}, "cluster.watcher_placement_ok"),
    ({"auto_rollback.watcher_partition": "cpu"}, {"c1": ("allocated", "cpu")}, "cluster.watcher_partition_busy"),
    ({"auto_rollback.watcher_partition": "nope"}, {}, "cluster.watcher_partition_missing"),
    ({"auto_rollback.watcher_partition": "down"}, {}, "cluster.watcher_partition_down"),
    ({"auto_rollback.watcher_partition": "gpuonly"}, {}, "cluster.watcher_account_denied"),
])
def test_preflight_names_where_the_watcher_cannot_start(tmp_path, changes, states, code):
    from plan_fixtures import edit

    plan = edit(auto_plan(tmp_path), **{"cluster.partition": "h100", **changes})
    assert _placement_codes(plan, states) == [code]
    assert _placement_codes(edit(plan, **{"auto_rollback.enabled": False}), states) == []


def test_recommend_records_the_watcher_partition_in_the_plan(tmp_path, mbl):
    """--watcher-partition, else $MBRIDGE_LAUNCH_WATCHER_PARTITION read at recommend time: the Plan
    holds it, so where the watcher runs no longer depends on the environment of `submit`."""
    import yaml

    def recorded(*flags, env=None):
        out = tmp_path / f"plan{len(list(tmp_path.iterdir()))}.yaml"
        proc = mbl.run("recommend", "--model", "llama32_1b", "--gpus", "2", "--dataset", "mock", *flags, "-o", out,
                       env=env)
        assert proc.returncode == 0, proc.stderr
        return yaml.safe_load(out.read_text())["auto_rollback"].get("watcher_partition")

    assert recorded(env={PARTITION_ENV: None}) is None
    assert recorded(env={PARTITION_ENV: "cpu"}) == "cpu"
    assert recorded("--watcher-partition", "serial", env={PARTITION_ENV: "cpu"}) == "serial"


# ---------------------------------------------------------------------- the gate starts it
@pytest.fixture
def gate_fakes(tmp_path, monkeypatch):
    """The scheduler and preflight faked (gate_fixtures.FakeScheduler), Slurm's commands faked."""
    scheduler = FakeScheduler()
    scheduler.install(monkeypatch)
    monkeypatch.setattr("mbridge_launch.preflight.runner.run_preflight", preflight_with())
    return scheduler


@pytest.mark.parametrize("enabled, watcher, started", [(True, True, True), (True, False, False), (False, True, False)])
def test_gate_starts_the_watcher_job_only_for_auto_rollback(tmp_path, monkeypatch, gate_fakes, enabled, watcher, started):
    import io

    env, calls = fake_slurm_bin(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    out = io.StringIO()
    with L.Ledger.open(tmp_path / "l.db") as ledger:
        result = submit_gated(auto_plan(tmp_path, enabled), GateOptions(yes=True, ledger=ledger, script_dir=tmp_path,
                                                                       cluster_checks=False, watcher=watcher, out=out))
        run = ledger.get_run(result.run_id)
        sbatch = read_calls(calls, "sbatch")
        if not started:
            assert sbatch == [] and result.watcher_job_id is None and run.watcher_job_id is None
            if enabled:
                assert "--no-watcher" in out.getvalue() and f"mbridge-launch watch {run.name}" in out.getvalue()
            return
        [argv] = sbatch
        assert f"--dependency=after:{run.job_ids[0]}" in argv  # after the training job the gate submitted
        assert result.watcher_job_id == run.watcher_job_id == "900"
        assert any(e["kind"] == "watcher_job" and e["detail"]["job_id"] == "900" for e in ledger.events(run.id))
        card = out.getvalue()
        assert "Auto-rollback: on NaN/Inf yes; loss spike > 4.0 x the median of the last 10 losses; at most 2" in card
        assert "watcher job" in card and "Slurm job 900" in card
        assert "watcher partition h100, account llm; secret names forwarded to it" in card


def test_a_refused_watcher_job_does_not_fail_the_submission(tmp_path, monkeypatch, gate_fakes):
    import io

    env, calls = fake_slurm_bin(tmp_path, sbatch_rc=1)
    monkeypatch.setenv("PATH", env["PATH"])
    out = io.StringIO()
    with L.Ledger.open(tmp_path / "l.db") as ledger:
        result = submit_gated(auto_plan(tmp_path), GateOptions(yes=True, ledger=ledger, script_dir=tmp_path,
                                                              cluster_checks=False, out=out))
        run = ledger.get_run(result.run_id)
        assert run.state == L.SUBMITTED and result.job_ids == ["501"] and result.watcher_job_id is None
        assert "Invalid partition name specified" in out.getvalue() and "mbridge-launch watch" in out.getvalue()
        [event] = [e for e in ledger.events(run.id) if e["kind"] == "watcher_job_failed"]
        assert "Invalid partition" in event["detail"]["reason"]


# ---------------------------------------------------------------------- the in-job watcher
def test_sigterm_makes_the_watcher_job_submit_its_successor(tmp_path, mbl):
    """Its time limit (SIGTERM) while the run is still active: the next watcher job is submitted to
    start after this one (afterany), and recorded; exit 0."""
    env, calls = fake_slurm_bin(tmp_path)
    plan = auto_plan(tmp_path)
    db = tmp_path / "l.db"
    log = tmp_path / "train.log"
    log.write_text("")
    with L.Ledger.open(db) as ledger:
        run = recorded_run(ledger, plan, tmp_path)
        ledger.conn.execute("UPDATE runs SET log_paths=? WHERE id=?", (json.dumps([str(log)]), run.id))
        ledger.set_watcher_job(run.id, "777")
    err = _sigterm_while_following(mbl, run, db, env, calls)
    [argv] = read_calls(calls, "sbatch")
    assert "--dependency=afterany:777" in argv
    assert "successor watcher job 900" in err
    with L.Ledger.open(db) as ledger:
        assert ledger.get_run(run.id).watcher_job_id == "900"
        assert not ledger.rollbacks(run_ids=[run.id])


def test_sigterm_of_a_scancel_is_not_a_time_limit_no_successor(tmp_path, mbl):
    """SIGTERM while Slurm shows the watcher's own job ending for no time limit (a scancel by hand,
    not `cancel RUN`): the run is still active, but no successor is submitted."""
    env, calls = fake_slurm_bin(tmp_path, own_state="COMPLETING Reason=None")  # 22.05 after a scancel
    db = tmp_path / "l.db"
    log = tmp_path / "train.log"
    log.write_text("")
    with L.Ledger.open(db) as ledger:
        run = recorded_run(ledger, auto_plan(tmp_path), tmp_path)
        ledger.conn.execute("UPDATE runs SET log_paths=? WHERE id=?", (json.dumps([str(log)]), run.id))
        ledger.set_watcher_job(run.id, "777")
    err = _sigterm_while_following(mbl, run, db, env, calls)
    assert read_calls(calls, "sbatch") == [] and "job 777 is COMPLETING, Reason=None (not its time limit)" in err
    with L.Ledger.open(db) as ledger:
        assert ledger.get_run(run.id).watcher_job_id == "777"


def test_in_job_watcher_leaves_a_run_cancelled_by_someone_else_alone(tmp_path):
    save = make_save_dir(tmp_path, (10, 20, 30))
    plan = with_changes(auto_plan(tmp_path), checkpoint={"save": str(save), "load": None})
    log = tmp_path / "train.log"
    log.write_text("".join(log_line(i, "4.0E+00", total=40) for i in range(1, 25)) + log_line(25, "nan", total=40))
    slurm = FakeSlurm()
    slurm.states["41"] = "CANCELLED by 0"  # someone ran scancel (or rollback --cancel)
    submitted = []
    with L.Ledger.open(tmp_path / "l.db") as ledger:
        run = recorded_run(ledger, plan, tmp_path)
        ledger.conn.execute("UPDATE runs SET log_paths=?, save_dir=? WHERE id=?", (json.dumps([str(log)]), str(save), run.id))
        job_watcher = Watcher(ledger, resubmit=lambda *a: submitted.append(a), cancel=lambda r: None, query=slurm,
                              poll_s=0.01, refresh_s=0.0, follow_resubmissions=False, act_on_cancelled=False)
        result = job_watcher.watch(ledger.get_run(run.id))
        assert result.outcome == "cancelled" and result.trigger.iteration == 25
        assert not submitted and not ledger.rollbacks(run_ids=[run.id])
    assert sorted(C.iter_dirs(save)) == [10, 20, 30] and not C.rolled_back_dirs(save)


def test_cancel_stops_the_watcher_job_too(tmp_path, mbl):
    env, calls = fake_slurm_bin(tmp_path)
    db = tmp_path / "l.db"
    with L.Ledger.open(db) as ledger:
        run = recorded_run(ledger, auto_plan(tmp_path), tmp_path)
        ledger.set_watcher_job(run.id, "900")
    out = mbl.run("cancel", run.id, "--yes", "--ledger", db, env=env)
    assert out.returncode == 0, out.stderr
    cancelled = [a for argv in read_calls(calls, "scancel") for a in argv]
    assert "900" in cancelled and "41" in cancelled


# ---------------------------------------------------------------------- on the real local Slurm
def _gate_plan(base_plan, shared_dir, name, **kw):
    return write_plan(base_plan, shared_dir, name, **kw)


def _watcher_jobs(cluster, chain: list) -> dict[str, str]:
    """The watcher job of every run of the chain (from the ledger) and its final state."""
    return {run.watcher_job_id: cluster.wait(run.watcher_job_id, timeout=180) for run in chain if run.watcher_job_id}


# The watcher jobs go to the cpu partition, where the Plan puts them (auto_rollback.watcher_partition):
# the training jobs here take their h100 node --exclusive, and other tests' jobs may hold the other
# one, which would keep a watcher in the h100 partition waiting.
WATCHER_ENV = {"MBRIDGE_LAUNCH_WATCHER_POLL": "0.3"}
WATCHER_PARTITION = "cpu"


@pytest.mark.slurm
def test_e2e_watcher_job_rolls_back_a_nan_and_the_run_finishes(base_plan, slurm_env, slurm_cluster, shared_dir, tmp_path, mbl):
    name = unique("wjob-nan")
    auto = {"enabled": True, "on_nan": True, "spike_factor": None, "window": 5, "max_rollbacks": 2,
            "watcher_partition": WATCHER_PARTITION}
    # the NaN at 25 must still be live when the watcher job (a second Slurm job, which may start
    # seconds later on a loaded machine) reads it: 35 iterations of 0.2 s after it, not 15 of 0.1 s
    # (in one CI run the run completed before its watcher started, and nothing was cancelled)
    plan = _gate_plan(base_plan, shared_dir, name, iters=60, save_interval=10, auto_rollback=auto,
                      env={"MBL_STANDIN_NAN_AT": "25", "MBL_STANDIN_ITER_SECONDS": "0.2"})
    db = shared_dir / "ledger.sqlite3"  # the watcher job opens it on a compute node
    env = {**WATCHER_ENV, "MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}
    first = mbl.run("submit", str(plan), "--yes", "--script-dir", str(shared_dir), "--ledger", str(db), "--format", "json",
                    env=env)
    assert first.returncode == 0, first.stderr
    submitted = json.loads(first.stdout)
    assert submitted["watcher_job_id"], first.stderr
    # nothing runs on this side: the watcher job does the cancel, rollback and resubmission
    deadline = time.monotonic() + 240
    while True:
        with L.Ledger.open(db) as ledger:
            runs = ledger.list_runs(limit=None)
        last = runs[0]
        if len(runs) == 2 and last.job_ids and slurm_cluster.state(last.job_ids[0]) == "COMPLETED":
            break
        watch_logs = "".join(p.read_text() for p in (shared_dir / "logs").glob(f"{name}-watch-*.out"))
        assert time.monotonic() < deadline, (runs, watch_logs[-3000:], log_text(shared_dir)[-2000:])
        time.sleep(1)
    with L.Ledger.open(db) as ledger:
        chain = ledger.run_chain(runs[0].id)
    watchers = _watcher_jobs(slurm_cluster, chain)
    watch_logs = "".join(p.read_text() for p in (shared_dir / "logs").glob(f"{name}-watch-*.out"))
    assert len(watchers) == 2 and set(watchers.values()) == {"COMPLETED"}, (watchers, watch_logs[-3000:])
    assert {slurm_cluster.partition(j) for j in watchers} == {WATCHER_PARTITION}
    with L.Ledger.open(db) as ledger:
        chain = ledger.run_chain(runs[0].id)
        assert [r.parent_run_id for r in chain] == [None, chain[0].id] and chain[0].state == L.CANCELLED
        assert chain[0].watcher_job_id == submitted["watcher_job_id"]
        [rb] = ledger.rollbacks(run_ids=[chain[0].id])
        assert (rb.state, rb.to_iter, rb.trigger["kind"], rb.trigger["iteration"]) == ("done", 20, "nan", 25)
        [conf] = ledger.confirmations(chain[1].id)
        assert (conf["action"], conf["method"]) == ("resubmit", "auto-rollback")
    assert "plan card" in watch_logs  # the resubmission went through the gate
    assert f"run {name} (#{chain[1].id}) is followed by its own watcher job" in watch_logs
    report = C.list_checkpoints(shared_dir / "ckpt")
    assert report.resume.loadable and report.resume.iteration == 60
    assert min(report.rolled_back[0].iterations) > 20


@pytest.mark.slurm
def test_e2e_requeue_with_a_watcher_job_resumes_without_rollback(base_plan, slurm_env, slurm_cluster, shared_dir, tmp_path, mbl):
    name = unique("wjob-requeue")
    auto = {"enabled": True, "on_nan": True, "spike_factor": 3.0, "window": 5, "max_rollbacks": 2,
            "watcher_partition": WATCHER_PARTITION}
    plan = _gate_plan(base_plan, shared_dir, name, iters=100, save_interval=10, auto_rollback=auto,
                      env={"MBL_STANDIN_ITER_SECONDS": "0.1"})
    db = shared_dir / "ledger.sqlite3"  # the watcher job opens it on a compute node
    env = {**WATCHER_ENV, "MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}
    first = mbl.run("submit", str(plan), "--yes", "--script-dir", str(shared_dir), "--ledger", str(db), "--format", "json",
                    env=env)
    assert first.returncode == 0, first.stderr
    job, watcher = json.loads(first.stdout)["job_ids"][0], json.loads(first.stdout)["watcher_job_id"]
    save = shared_dir / "ckpt"
    slurm_cluster.wait_state(watcher, "RUNNING", timeout=120)  # the watcher follows the job
    deadline = time.monotonic() + 120
    while C.latest_complete(save) is None or C.latest_complete(save) < 20:
        assert time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.2)
    assert slurm_cluster.squeue_state(job) == "RUNNING", "the job ended before it could be requeued"
    slurm_cluster.run(["scontrol", "requeue", job])
    assert slurm_cluster.wait(job, timeout=240) == "COMPLETED"
    assert slurm_cluster.wait(watcher, timeout=120) == "COMPLETED"
    resumed = [line for line in log_text(shared_dir).splitlines() if "loading checkpoint" in line]
    assert resumed and int(resumed[-1].rsplit("iteration", 1)[1].split()[0]) >= 20
    with L.Ledger.open(db) as ledger:
        [run] = ledger.list_runs(limit=None)  # no resubmission
        assert not ledger.rollbacks(run_ids=[run.id])
        assert not [e for e in ledger.events(run.id) if e["kind"] == "watch_trigger"]
    assert C.resolve_resume(save).iteration == 100 and not C.rolled_back_dirs(save)


def _sigterm_while_following(mbl, run, db, env, calls) -> str:
    """`watch --in-job` as watcher job 777, sent SIGTERM once it follows the run (it asked
    squeue); its stderr after a clean exit."""
    proc = mbl.popen("watch", run.id, "--ledger", db, "--in-job", "--poll", "0.05", env={**env, "SLURM_JOB_ID": "777"})
    try:
        deadline = time.monotonic() + 30
        while not read_calls(calls, "squeue"):  # it is following the run
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return err
