"""The submission gate, through the real CLI (`python -m mbridge_launch ...`) and, where it matters,
the real local Slurm cluster with the stand-in trainer:

- no path submits without confirmation or --yes (no terminal: refused, nothing in Slurm, no ledger
  row; a real terminal (pty): "yes" works below the GPU-hour threshold, above it only the run name);
- a failing preflight blocks; --force needs --reason, which is recorded in the ledger;
- a duplicate of an active plan is refused unless --resubmit (which still may not share the active
  run's checkpoint directory); `cancel` is gated like submit;
- `kill -9` between the ledger write and sbatch (MBL_GATE_CRASH_AFTER) is reconciled by the next
  command: lost before sbatch, the real job id after it;
- `rollback --resubmit [--seed] [--skip-iters]` resubmits through the gate as a child run;
- `watch`: NaN at K -> cancel -> rollback -> resubmission through the gate -> the run completes.

Plans come from `mbridge-launch recommend` (Llama 3.2 1B on 2 GPUs, which passes preflight on the
local cluster) with the stand-in trainer as entry; every test has its own ledger and a run name
no other test or session uses (reconciliation matches jobs by name).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from cli_helpers import popen_cli
from gate_fixtures import FakeScheduler, log_text, preflight_with, unique, write_plan
from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.gate.submit import GateOptions, confirm_submission, confirmation_threshold
from mbridge_launch.plan.model import save_plan
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.runs import ledger as L
from plan_fixtures import single_node_h100


# ---------------------------------------------------------------------- helpers
def cli_on_terminal(*args: str, answer: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the CLI with a pseudo-terminal as stdin (so it may ask) and type `answer`."""
    master, slave = pty.openpty()
    try:
        proc = popen_cli(*args, stdin=slave)
        os.close(slave)
        slave = -1
        os.write(master, (answer + "\n").encode())
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def jobs_named(cluster, name: str) -> set[str]:
    """Every job with this name that Slurm knows: queued/running (squeue) or finished (sacct)."""
    live = cluster.run(["squeue", "-h", "-n", name, "-o", "%i"]).stdout.split()
    done = cluster.run(["sacct", "-X", "-n", "-P", "--name", name, "--format", "JobIDRaw", "-S", "now-7200"]).stdout.split()
    return set(live) | set(done)


def ledger_rows(db: Path) -> list[L.RunRecord]:
    with L.Ledger.open(db) as ledger:
        return ledger.list_runs(limit=None)


@pytest.fixture
def gate_env(slurm_env, tmp_path, monkeypatch):
    """The cluster's SLURM_CONF (slurm_env) and a state dir of this test's own."""
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "ledger.sqlite3"


# ---------------------------------------------------------------------- confirmation (unit)
def _plan_of_hours():
    plan = single_node_h100()  # 8 GPUs x 02:00:00 = 16 GPU-hours
    return plan, 16.0


class Asker:
    def __init__(self, answer: str | BaseException):
        self.answer, self.prompts = answer, []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer,method", [("yes", "typed-yes"), ("Y", "typed-yes"), (" llama3-8b-sft ", "typed-name")])
def test_below_threshold_yes_or_the_name_confirms(answer, method):
    plan, hours = _plan_of_hours()
    ask = Asker(answer)
    got = confirm_submission(plan, GateOptions(threshold_gpu_hours=hours + 1, ask=ask, isatty=lambda: True))
    assert got == method and len(ask.prompts) == 1 and "yes" in ask.prompts[0]


@pytest.mark.parametrize("answer", ["no", "", "llama3-8b", EOFError()])
def test_below_threshold_anything_else_aborts(answer):
    plan, hours = _plan_of_hours()
    with pytest.raises(CheckFailed) as err:
        confirm_submission(plan, GateOptions(threshold_gpu_hours=hours + 1, ask=Asker(answer), isatty=lambda: True))
    assert err.value.key == "gate.aborted" and err.value.exit_code == 1


def test_above_threshold_only_the_typed_name_confirms():
    plan, hours = _plan_of_hours()
    for answer in ("yes", "y", "YES"):
        ask = Asker(answer)
        with pytest.raises(CheckFailed) as err:
            confirm_submission(plan, GateOptions(threshold_gpu_hours=hours - 1, ask=ask, isatty=lambda: True))
        assert err.value.key == "gate.aborted"
        assert "16.0 GPU-hours (over 15)" in ask.prompts[0] and "'llama3-8b-sft'" in ask.prompts[0]
    ok = confirm_submission(plan, GateOptions(threshold_gpu_hours=hours - 1, ask=Asker("llama3-8b-sft"), isatty=lambda: True))
    assert ok == "typed-name"


def test_no_terminal_refuses_and_yes_needs_no_terminal():
    plan, _ = _plan_of_hours()
    ask = Asker("yes")
    with pytest.raises(CheckFailed) as err:
        confirm_submission(plan, GateOptions(ask=ask, isatty=lambda: False))
    assert err.value.key == "gate.no_tty" and not ask.prompts
    assert confirm_submission(plan, GateOptions(yes=True, ask=ask, isatty=lambda: False)) == "flag-yes"
    assert not ask.prompts


def test_plan_card_shows_everything_the_issue_lists():
    """recipe and kind, dataset, layout, nodes x GPUs and type, partition, time limit, step time and
    tokens/s, GPU-hours at the time limit, convergence overrides, warnings, the exact script."""
    from mbridge_launch.base.i18n import set_lang
    from mbridge_launch.gate.card import render_card
    from mbridge_launch.preflight.model import Check, Report
    from plan_fixtures import with_changes

    plan = with_changes(single_node_h100(), estimates={"step_time_s": 2.5, "tokens_per_sec_per_gpu": 4096.0},
                        top={"warnings": [{"code": "recommend.small_gbs", "message": "global batch is small"}]})
    report = Report([Check("path.save_maybe_local", "warning", text="checkpoints on local disk (fake)")])
    set_lang("en")
    try:
        card = render_card(plan, executor="sbatch", script_path="/w/llama3-8b-sft.sbatch", report=report)
    finally:
        set_lang(None)
    for expected in ("llama3_8b_sft_8gpu_h100_bf16_config", "library recipe", "squad", "TP=1 PP=1", "DP=8",
                     "1 node x 8 H100", "partition h100", "account llm", "time limit 02:00:00",
                     "2.50 s per step", "4,096 tokens/s per GPU", "32,768 tokens/s in all",
                     "16.0 GPU-hours if it runs to the time limit", "Convergence-changing overrides: 1",
                     "train.train_iters=1000  (token budget)", "recommend.small_gbs: global batch is small",
                     "path.save_maybe_local: checkpoints on local disk (fake)", "Exact script (sbatch): /w/llama3-8b-sft.sbatch"):
        assert expected in card, (expected, card)
    assert "Auto-rollback" not in card  # shown only when the plan enables it


def test_threshold_from_environment(monkeypatch):
    monkeypatch.setenv("MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS", "12.5")
    assert confirmation_threshold(None) == 12.5 and confirmation_threshold(3.0) == 3.0
    plan, _ = _plan_of_hours()  # 16 > 12.5: "yes" is no longer enough
    with pytest.raises(CheckFailed):
        confirm_submission(plan, GateOptions(ask=Asker("yes"), isatty=lambda: True))
    monkeypatch.setenv("MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS", "lots")
    with pytest.raises(UserError) as err:
        confirmation_threshold(None)
    assert err.value.key == "gate.threshold_invalid" and err.value.exit_code == 2


def test_cancel_confirmation_needs_the_run_name():
    from mbridge_launch.gate.submit import confirm_cancel

    class Run:
        name, job_ids = "llama3-8b-sft", ["77"]

    for answer in ("yes", "y", "llama3", EOFError()):
        with pytest.raises(CheckFailed) as err:
            confirm_cancel(Run, yes=False, ask=Asker(answer), isatty=lambda: True)
        assert err.value.key == "gate.cancel_aborted"
    ask = Asker("llama3-8b-sft")
    assert confirm_cancel(Run, yes=False, ask=ask, isatty=lambda: True) == "typed-name" and "77" in ask.prompts[0]
    with pytest.raises(CheckFailed) as err:
        confirm_cancel(Run, yes=False, ask=ask, isatty=lambda: False)
    assert err.value.key == "gate.no_tty"
    assert confirm_cancel(Run, yes=True, isatty=lambda: False) == "flag-yes"


# ---------------------------------------------------------------------- CLI argument rules (no cluster)
def test_force_without_reason_is_bad_input(tmp_path, mbl):
    plan = tmp_path / "plan.yaml"
    save_plan(single_node_h100(), plan)
    db = tmp_path / "l.db"
    proc = mbl.run("submit", str(plan), "--yes", "--force", "--ledger", str(db), "--script-dir", str(tmp_path))
    assert proc.returncode == 2 and "--force needs --reason" in proc.stderr
    assert not db.exists()  # refused before the ledger was even opened


def test_rollback_resubmit_argument_rules(tmp_path, mbl):
    from checkpoint_fixtures import make_save_dir

    save = make_save_dir(tmp_path, (10, 20))
    db = str(tmp_path / "l.db")
    bare = mbl.run("rollback", str(save), "--to", "10", "--resubmit", "--yes", "--ledger", db)
    assert bare.returncode == 2 and "needs a recorded run" in bare.stderr
    assert sorted(C.iter_dirs(save)) == [10, 20]  # refused before anything moved
    seed_alone = mbl.run("rollback", str(save), "--to", "10", "--seed", "3", "--yes", "--ledger", db)
    assert seed_alone.returncode == 2 and "--seed applies only with --resubmit" in seed_alone.stderr
    bad = mbl.run("rollback", str(save), "--to", "10", "--resubmit", "--skip-iters", "5-2", "--ledger", db)
    assert bad.returncode == 2 and "'5-2'" in bad.stderr
    force_alone = mbl.run("rollback", str(save), "--to", "10", "--force", "--reason", "r", "--yes", "--ledger", db)
    assert force_alone.returncode == 2 and "--force applies only with --resubmit" in force_alone.stderr
    no_reason = mbl.run("rollback", str(save), "--to", "10", "--resubmit", "--force", "--yes", "--ledger", db)
    assert no_reason.returncode == 2 and "--force needs --reason" in no_reason.stderr
    assert sorted(C.iter_dirs(save)) == [10, 20]


def test_skip_iters_parsing():
    from mbridge_launch.cli.commands.rollback import _parse_skip_iters

    assert _parse_skip_iters("25, 30-32,25") == [25, 30, 31, 32]
    for bad in ("", "x", "3-", "-3", "4-2", "1-200000", "2.5"):
        with pytest.raises(UserError):
            _parse_skip_iters(bad)


# ---------------------------------------------------------------------- the gate on the cluster
@pytest.mark.slurm
def test_no_terminal_and_no_yes_submits_nothing(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = unique("gate-notty")
    plan = write_plan(base_plan, shared_dir, name)
    proc = mbl.run("submit", str(plan), "--ledger", str(gate_env), "--script-dir", str(shared_dir))
    assert proc.returncode == 1, proc.stderr
    assert "no terminal to confirm on" in proc.stderr and "plan card" in proc.stderr  # shown, then refused
    assert ledger_rows(gate_env) == []
    assert jobs_named(slurm_cluster, name) == set()


@pytest.mark.slurm
def test_terminal_confirmation_above_threshold_needs_the_name(base_plan, gate_env, shared_dir, slurm_cluster):
    name = unique("gate-tty")
    plan = write_plan(base_plan, shared_dir, name)
    args = ["submit", str(plan), "--ledger", str(gate_env), "--script-dir", str(shared_dir), "--confirm-threshold", "0.01"]
    refused = cli_on_terminal(*args, answer="yes")
    assert refused.returncode == 1 and "not confirmed" in refused.stderr, refused.stderr
    assert f"Type the run name '{name}'" in refused.stdout
    assert ledger_rows(gate_env) == [] and jobs_named(slurm_cluster, name) == set()

    typed = cli_on_terminal(*args, answer=name)
    assert typed.returncode == 0, typed.stderr
    [run] = ledger_rows(gate_env)
    assert jobs_named(slurm_cluster, name) == set(run.job_ids) and len(run.job_ids) == 1
    with L.Ledger.open(gate_env) as ledger:
        [conf] = ledger.confirmations(run.id)
    assert (conf["action"], conf["method"]) == ("submit", "typed-name")
    assert slurm_cluster.wait(run.job_ids[0], timeout=90) == "COMPLETED"


@pytest.mark.slurm
def test_failing_preflight_blocks_and_force_records_the_reason(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = unique("gate-force")
    plan = write_plan(base_plan, shared_dir, name, dp=4)  # 4-way DP on 2 GPUs: plan.world_mismatch
    common = ["submit", str(plan), "--yes", "--ledger", str(gate_env), "--script-dir", str(shared_dir)]
    blocked = mbl.run(*common)
    assert blocked.returncode == 1 and "plan.world_mismatch" in blocked.stderr
    assert "preflight found 1 error; nothing was submitted" in blocked.stderr
    assert ledger_rows(gate_env) == [] and jobs_named(slurm_cluster, name) == set()

    no_reason = mbl.run(*common, "--force")
    assert no_reason.returncode == 2 and ledger_rows(gate_env) == []

    forced = mbl.run(*common, "--force", "--reason", "stand-in ignores the layout", "--format", "json")
    assert forced.returncode == 0, forced.stderr
    out = json.loads(forced.stdout)
    assert jobs_named(slurm_cluster, name) == set(out["job_ids"])
    with L.Ledger.open(gate_env) as ledger:
        [override] = ledger.overrides(out["run_id"])
        [conf] = ledger.confirmations(out["run_id"])
    assert override["kind"] == "preflight" and override["reason"] == "stand-in ignores the layout"
    assert override["detail"]["errors"] == ["plan.world_mismatch"]
    assert conf["method"] == "flag-yes"
    assert slurm_cluster.wait(out["job_ids"][0], timeout=90) == "COMPLETED"


@pytest.mark.slurm
def test_duplicate_is_refused_unless_resubmit_and_cancel_is_gated(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = unique("gate-dup")
    plan = write_plan(base_plan, shared_dir, name, iters=200, env={"MBL_STANDIN_ITER_SECONDS": "0.5"})
    common = ["submit", str(plan), "--yes", "--ledger", str(gate_env), "--script-dir", str(shared_dir)]
    first = mbl.run(*common, "--format", "json")
    assert first.returncode == 0, first.stderr
    job_a = json.loads(first.stdout)["job_ids"][0]

    dup = mbl.run(*common)
    assert dup.returncode == 1 and "already submitted and not finished" in dup.stderr, dup.stderr
    assert len(ledger_rows(gate_env)) == 1 and jobs_named(slurm_cluster, name) == {job_a}

    # --resubmit skips the duplicate check, not the checkpoint directory's owner (issue 13): the
    # first run still writes it, so a second job there would corrupt its checkpoints
    again = mbl.run(*common, "--resubmit", "--format", "json")
    assert again.returncode == 1 and f"belongs to run {name} (id 1, " in again.stderr, again.stderr
    assert jobs_named(slurm_cluster, name) == {job_a}

    ledger_arg = ["--ledger", str(gate_env)]
    refused = mbl.run("cancel", "1", *ledger_arg)
    assert refused.returncode == 1 and "no terminal to confirm on" in refused.stderr
    assert slurm_cluster.squeue_state(job_a) in ("PENDING", "RUNNING")
    assert mbl.run("cancel", "1", "--yes", "--wait", *ledger_arg).returncode == 0
    assert slurm_cluster.wait(job_a, timeout=60) == "CANCELLED"
    with L.Ledger.open(gate_env) as ledger:
        assert [(c["action"], c["method"]) for c in ledger.confirmations(1)] == [("submit", "flag-yes"), ("cancel", "flag-yes")]
        assert ledger.get_run(1).state == L.CANCELLED


def submit_killed_after(step: str, prefix: str, base_plan, gate_env: Path, shared_dir: Path, mbl) -> str:
    """`submit --yes` of a new run named after `prefix`, killed -9 right after `step`
    (MBL_GATE_CRASH_AFTER): it leaves one ledger row, SUBMITTING with no job ids. Returns the name."""
    name = unique(prefix)
    plan = write_plan(base_plan, shared_dir, name)
    crashed = mbl.run("submit", str(plan), "--yes", "--ledger", str(gate_env), "--script-dir", str(shared_dir),
                      env={"MBL_GATE_CRASH_AFTER": step})
    assert crashed.returncode == 137, crashed.stderr
    [row] = ledger_rows(gate_env)
    assert row.state == L.SUBMITTING and row.job_ids == []
    return name


@pytest.mark.slurm
def test_kill9_after_the_ledger_write_is_reconciled_as_lost(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = submit_killed_after("ledger", "gate-lost", base_plan, gate_env, shared_dir, mbl)
    assert jobs_named(slurm_cluster, name) == set()

    listed = mbl.run("runs", "--ledger", str(gate_env))
    assert listed.returncode == 0 and "marked lost" in listed.stderr, listed.stderr
    [row] = ledger_rows(gate_env)
    assert row.state == L.LOST and row.job_ids == []


@pytest.mark.slurm
def test_kill9_after_sbatch_is_reconciled_with_the_real_job(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = submit_killed_after("sbatch", "gate-found", base_plan, gate_env, shared_dir, mbl)
    [job] = jobs_named(slurm_cluster, name)  # the job exists; only the ledger does not know it

    status = mbl.run("status", name, "--ledger", str(gate_env), "--format", "json")
    assert status.returncode == 0, status.stderr
    assert f"Slurm has it as job {job}: recorded" in status.stderr
    assert json.loads(status.stdout)["job_ids"] == [job]
    [row] = ledger_rows(gate_env)
    assert row.job_ids == [job] and row.state != L.SUBMITTING
    assert slurm_cluster.wait(job, timeout=90) == "COMPLETED"


# ---------------------------------------------------------------------- resubmission through the gate
@pytest.mark.slurm
def test_rollback_resubmit_goes_through_the_gate(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = unique("gate-rb")
    plan = write_plan(base_plan, shared_dir, name)
    ledger_arg = ["--ledger", str(gate_env)]
    first = mbl.run("submit", str(plan), "--yes", "--script-dir", str(shared_dir), "--format", "json", *ledger_arg)
    assert first.returncode == 0, first.stderr
    assert slurm_cluster.wait(json.loads(first.stdout)["job_ids"][0], timeout=90) == "COMPLETED"
    save = shared_dir / "ckpt"
    assert C.resolve_resume(save).iteration == 6

    refused = mbl.run("rollback", name, "--to", "3", "--resubmit", *ledger_arg)  # no terminal, no --yes
    assert refused.returncode == 1 and sorted(C.iter_dirs(save)) == [3, 6]

    proc = mbl.run("rollback", name, "--to", "3", "--resubmit", "--seed", "7", "--skip-iters", "4", "--yes",
                   "--format", "json", *ledger_arg)
    assert proc.returncode == 0, proc.stderr
    assert "plan card" in proc.stderr and "rng.seed=7" in proc.stderr  # the gate showed the change
    assert "Resubmission of run #1 after a rollback" in proc.stderr
    child = json.loads(proc.stdout)["resubmitted"]
    assert child["parent_run_id"] == 1 and child["confirmation"] == "flag-yes"
    assert slurm_cluster.wait(child["job_ids"][0], timeout=90) == "COMPLETED"

    with L.Ledger.open(gate_env) as ledger:
        run = ledger.get_run(child["id"])
        changed = {o.key: o for o in run.plan().overrides if o.key in ("rng.seed", "train.iterations_to_skip")}
        assert changed["rng.seed"].value == "7" and changed["train.iterations_to_skip"].value == "[4]"
        assert all(o.change_class == "convergence" and "rollback of run" in o.reason.render("en") for o in changed.values())
        assert sorted(o["detail"]["key"] for o in ledger.overrides(run.id) if o["kind"] == "convergence") == \
            ["rng.seed", "train.iterations_to_skip"]
        assert [(c["action"], c["method"]) for c in ledger.confirmations(1)] == [("submit", "flag-yes"), ("rollback", "flag-yes")]
        assert [(c["action"], c["method"]) for c in ledger.confirmations(run.id)] == [("resubmit", "flag-yes")]
        [rb] = ledger.rollbacks(run_ids=[1])
        assert (rb.to_iter, rb.state) == (3, "done")
    logs = log_text(shared_dir)
    assert "loading checkpoint from" in logs and f"{save} at iteration 3" in logs
    assert C.resolve_resume(save).iteration == 6 and C.rolled_back_dirs(save)


@pytest.mark.slurm
def test_watch_cli_rolls_back_a_nan_and_resubmits_through_the_gate(base_plan, gate_env, shared_dir, slurm_cluster, mbl):
    name = unique("gate-watch")
    auto = {"enabled": True, "on_nan": True, "spike_factor": None, "window": 5, "max_rollbacks": 2}
    plan = write_plan(base_plan, shared_dir, name, iters=40, save_interval=10, auto_rollback=auto,
                      env={"MBL_STANDIN_NAN_AT": "25", "MBL_STANDIN_ITER_SECONDS": "0.05"})
    ledger_arg = ["--ledger", str(gate_env)]
    # --no-watcher: this test is the login-node watcher (test_watch_job.py has the watcher job)
    first = mbl.run("submit", str(plan), "--yes", "--no-watcher", "--script-dir", str(shared_dir), *ledger_arg)
    assert first.returncode == 0, first.stderr
    assert "no watcher job (--no-watcher)" in first.stderr

    watched = mbl.run("watch", name, "--poll", "0.2", "--format", "json", *ledger_arg, timeout=180)
    result = json.loads(watched.stdout or "{}")
    assert watched.returncode == 0, (watched.stderr[-3000:], log_text(shared_dir)[-2000:])
    assert result["outcome"] == "finished" and result["run"]["state"] == L.COMPLETED
    assert [(r["to_iter"], r["trigger"]["kind"], r["trigger"]["iteration"]) for r in result["rollbacks"]] == [(20, "nan", 25)]
    assert "plan card" in watched.stderr and "Resubmission of run #1" in watched.stderr  # through the gate

    with L.Ledger.open(gate_env) as ledger:
        chain = ledger.run_chain(result["run"]["id"])
        assert [r.parent_run_id for r in chain] == [None, chain[0].id] and chain[0].state == L.CANCELLED
        [rb] = ledger.rollbacks(run_ids=[chain[0].id])
        assert rb.state == "done" and rb.to_iter == 20 and rb.trigger["kind"] == "nan"
        [conf] = ledger.confirmations(chain[1].id)
        assert (conf["action"], conf["method"]) == ("resubmit", "auto-rollback")
        assert conf["detail"]["trigger"]["iteration"] == 25 and conf["detail"]["to_iter"] == 20
        [skip] = [o for o in chain[1].plan().overrides if o.key == "train.iterations_to_skip"]
        assert skip.value == "[25]" and skip.change_class == "convergence"
        assert [o["detail"]["key"] for o in ledger.overrides(chain[1].id)] == ["train.iterations_to_skip"]
    report = C.list_checkpoints(shared_dir / "ckpt")
    assert report.resume.loadable and report.resume.iteration == 40
    assert min(report.rolled_back[0].iterations) > 20  # the poisoned timeline moved aside, not deleted


# ---------------------------------------------------------------------- the watcher's resubmission (unit)
@pytest.fixture
def parent_run(tmp_path, monkeypatch):
    """A recorded run whose plan has auto_rollback, with the scheduler and preflight faked."""
    from mbridge_launch.plan.model import AutoRollback
    from plan_fixtures import with_changes

    scheduler = FakeScheduler()
    scheduler.install(monkeypatch)
    plan = with_changes(single_node_h100(), checkpoint={"save": str(tmp_path / "ckpt"), "load": None},
                        auto_rollback=AutoRollback(enabled=True).model_dump())
    ledger = L.Ledger.open(tmp_path / "ledger.sqlite3")
    run = ledger.begin_submission(name=plan.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                  executor="sbatch", work_dir=str(tmp_path), save_dir=str(tmp_path / "ckpt"))
    run = ledger.set_state(ledger.mark_submitted(run.id, ["41"]).id, L.CANCELLED)
    yield ledger, run, scheduler
    ledger.close()


def test_auto_resubmit_refused_by_preflight_says_how_to_continue(parent_run, monkeypatch):
    from mbridge_launch.gate.submit import auto_resubmit
    from mbridge_launch.rollback.lossmon import Trigger

    ledger, run, scheduler = parent_run
    monkeypatch.setattr("mbridge_launch.preflight.runner.run_preflight", preflight_with("path.save_space"))
    with pytest.raises(CheckFailed) as err:
        auto_resubmit(ledger, run, 20, Trigger("nan", 25, float("nan")))
    text = err.value.render("en")
    assert err.value.key == "gate.auto_resubmit_refused" and "preflight found 1 error;" in text
    assert f"mbridge-launch rollback {run.name} --to 20 --resubmit" in text
    assert not scheduler.submitted and [r.id for r in ledger.list_runs()] == [run.id]


def test_auto_resubmit_carries_a_forced_preflight_over_and_records_the_change(parent_run, monkeypatch):
    from mbridge_launch.gate.submit import auto_resubmit
    from mbridge_launch.rollback.lossmon import Trigger

    ledger, run, scheduler = parent_run
    ledger.record_override(run.id, "preflight", "site quota is wrong", {"errors": ["path.save_space"]})
    monkeypatch.setattr("mbridge_launch.preflight.runner.run_preflight", preflight_with("path.save_space"))
    child = auto_resubmit(ledger, run, 20, Trigger("nan", 25, float("nan")))
    assert child.parent_run_id == run.id and child.job_ids == ["501"] and child.state == L.SUBMITTED
    [plan] = scheduler.submitted
    assert [o.value for o in plan.overrides if o.key == "train.iterations_to_skip"] == ["[25]"]
    [conf] = ledger.confirmations(child.id)
    assert (conf["action"], conf["method"]) == ("resubmit", "auto-rollback")
    assert conf["detail"]["trigger"]["kind"] == "nan" and conf["detail"]["to_iter"] == 20
    kinds = {o["kind"]: o for o in ledger.overrides(child.id)}
    assert kinds["preflight"]["reason"] == f"carried over from run #{run.id}, which was submitted with --force: site quota is wrong"
    assert kinds["convergence"]["detail"]["key"] == "train.iterations_to_skip"

    # the carried-over reason covers the parent's error, not a new one (the watcher cancels the
    # child first: a still-active parent would own the checkpoint directory)
    child = ledger.set_state(child.id, L.CANCELLED)
    monkeypatch.setattr("mbridge_launch.preflight.runner.run_preflight", preflight_with("path.save_space", "plan.memory_oom"))
    with pytest.raises(CheckFailed) as err:
        auto_resubmit(ledger, child, 30, Trigger("nan", 35, float("nan")))
    assert "does not cover: plan.memory_oom" in err.value.render("en") and len(scheduler.submitted) == 1


def test_an_accepted_estimate_passes_the_gate_and_is_recorded(tmp_path, monkeypatch):
    """A plan that accepts the memory estimate goes through the gate without --force; the ledger
    keeps the acceptance and its reason next to the run."""
    import io

    from mbridge_launch.gate.submit import submit_gated
    from mbridge_launch.preflight.acceptance import apply_acceptances
    from mbridge_launch.preflight.model import Check, Report
    from plan_fixtures import edit

    # the gate writes its claim file into the checkpoint directory: a test's own, never a shared path
    plan = edit(single_node_h100(), accepted_checks=[{"code": "plan.memory_oom", "reason": "ran before as job 4711"}],
                checkpoint={"save": str(tmp_path / "ckpt"), "load": None})

    def preflight(p, **kw):  # the real acceptance step over a faked memory error
        return Report(apply_acceptances([Check("plan.memory_oom", "error", text="OOM (fake)")], p.accepted_checks))

    scheduler = FakeScheduler()
    scheduler.install(monkeypatch)
    monkeypatch.setattr("mbridge_launch.preflight.runner.run_preflight", preflight)
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        result = submit_gated(plan, GateOptions(yes=True, script_dir=tmp_path, ledger=ledger, out=io.StringIO(),
                                                watcher=False))
        [override] = ledger.overrides(result.run_id)
    assert result.job_ids == ["501"] and len(scheduler.submitted) == 1
    assert (override["kind"], override["reason"], override["detail"]) == ("accepted", "ran before as job 4711",
                                                                           {"code": "plan.memory_oom"})
