"""The watcher after a run that failed without a loss trigger: the diagnosis decides (one retry
table, diagnosis.model.RETRY_OF), the policy bounds it. A hardware fault is resubmitted without
its node, a software error is not retried, a NaN is rolled back (never retried as "flaky"), and
nothing automatic happens where the policy forbids it or the budget is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoint_fixtures import log_line, make_save_dir
from mbridge_launch.base.i18n import msg
from mbridge_launch.diagnosis.model import RETRY_OF, Diagnosis, Evidence
from mbridge_launch.plan.model import AutoRollback
from mbridge_launch.plan.resubmission import excluding_nodes_plan
from mbridge_launch.policy.files import load_policy
from mbridge_launch.runs import ledger as L
from mbridge_launch.watch.watcher import AUTO_RETRY_EVENT, TRIGGER_CAUSE, Watcher, auto_rollbacks_in_chain
from plan_fixtures import single_node_h100, with_changes
from watch_fixtures import FakeSlurm


def diagnosis(cause: str, node: str | None = "h100-2") -> Diagnosis:
    retry = RETRY_OF[cause]
    return Diagnosis(cause=cause, rank=3, node=node,
                     evidence=[Evidence("job.log", 7, f"the {cause} line")], retry=retry,
                     fix=msg("watch.finished", run="x", id=1, state="failed"),
                     summary=msg("watch.finished", run="x", id=1, state="failed"),
                     exclude_nodes=[node] if node and retry == "resubmit_excluding_node" else [])


class Harness:
    def __init__(self, tmp: Path, ledger: L.Ledger) -> None:
        self.tmp, self.ledger, self.slurm = tmp, ledger, FakeSlurm()
        self.save = make_save_dir(tmp, (10, 20))
        self.retried: list[tuple[int, str]] = []
        self.cancelled: list[str] = []

    def start(self, *, enabled: bool = True, max_rollbacks: int = 3, state: str = "FAILED", losses=None) -> L.RunRecord:
        plan = with_changes(single_node_h100(), checkpoint={"save": str(self.save), "load": None, "save_interval": 10},
                            auto_rollback=AutoRollback(enabled=enabled, max_rollbacks=max_rollbacks).model_dump())
        log = self.tmp / "job-1.log"
        log.write_text("".join(log_line(i, v, total=40) for i, v in enumerate(losses or ["5.0E+00"] * 12, start=1)))
        run = self.ledger.begin_submission(name="demo", plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                           executor="fake", save_dir=str(self.save), work_dir=str(self.tmp))
        run = self.ledger.mark_submitted(run.id, ["1"], log_paths=[str(log)])
        self.slurm.states["1"] = state
        return run

    def retry(self, ledger: L.Ledger, run: L.RunRecord, found: Diagnosis) -> L.RunRecord:
        """A retry hook without the gate (gate/retry.py is the real one): the excluded-node plan as a child run."""
        plan = excluding_nodes_plan(run.plan(), found.exclude_nodes)
        self.retried.append((run.id, found.cause))
        job = str(100 + len(self.retried))
        with ledger.submission(name=run.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(), executor="fake",
                               plan_path=None, cluster=run.cluster, job_name=run.job_name, work_dir=run.work_dir,
                               save_dir=run.save_dir, parent_run_id=run.id) as sub:
            self.slurm.states[job] = "COMPLETED"
            log = self.tmp / f"job-{job}.log"
            log.write_text(log_line(21, "4.0E+00", total=40))

            class Submitted:
                job_ids, log_paths, script_path, raw_output = [job], [str(log)], None, ""
            return sub.done(Submitted())

    def watcher(self, found: Diagnosis, policy=None, **kw) -> Watcher:
        return Watcher(self.ledger, diagnose=lambda lg, run: found, retry=self.retry, policy=policy,
                       cancel=lambda run: self.cancelled.append(run.job_ids[0]), query=self.slurm, poll_s=0.01,
                       refresh_s=0.0, say=lambda text: None, **kw)


@pytest.fixture
def h(tmp_path):
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        yield Harness(tmp_path, ledger)


@pytest.fixture
def no_policy(tmp_path):
    """An empty policy, read the way the tool reads one (no site, user or project file)."""
    return load_policy(cwd=tmp_path, env={"HOME": str(tmp_path), "MBRIDGE_LAUNCH_SITE_POLICY": str(tmp_path / "none")})


def policy_from(tmp_path: Path, text: str):
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / ".mbridge-launch.yaml").write_text(text)
    return load_policy(cwd=project, env={"HOME": str(tmp_path), "MBRIDGE_LAUNCH_SITE_POLICY": str(tmp_path / "none")})


def test_the_retry_table_covers_every_cause_and_keeps_numeric_failures_for_rollback():
    from mbridge_launch.diagnosis.model import CAUSES, RETRY

    assert set(RETRY_OF) == set(CAUSES) and set(RETRY_OF.values()) <= set(RETRY)
    assert {RETRY_OF[c] for c in TRIGGER_CAUSE.values()} == {"rollback"}  # a loss trigger is never a plain retry
    assert RETRY_OF["gpu_hardware"] == RETRY_OF["node_failure"] == "resubmit_excluding_node"
    assert all(RETRY_OF[c] == "no" for c in ("gpu_oom", "import_error", "dataset_missing", "tp_kv_mismatch"))


def test_a_hardware_fault_is_resubmitted_without_its_node(h, no_policy):
    run = h.start()
    result = h.watcher(diagnosis("gpu_hardware"), policy=no_policy).watch(run)
    assert h.retried == [(run.id, "gpu_hardware")]
    assert result.outcome == "finished" and result.run.state == L.COMPLETED
    chain = h.ledger.run_chain(result.run.id)
    assert [r.job_ids for r in chain] == [["1"], ["101"]]
    assert "--exclude=h100-2" in chain[1].plan().cluster.sbatch_args
    kinds = [e["kind"] for e in h.ledger.events(run.id)]
    assert "diagnosis" in kinds and AUTO_RETRY_EVENT in kinds
    [event] = [e for e in h.ledger.events(run.id) if e["kind"] == "diagnosis"]
    assert event["detail"]["cause"] == "gpu_hardware" and event["detail"]["exclude_nodes"] == ["h100-2"]
    assert [c["action"] for c in h.ledger.confirmations(run.id)] == ["resubmit"]


@pytest.mark.parametrize("cause", ["gpu_oom", "import_error", "dataset_missing", "checkpoint_corrupt", "unknown"])
def test_a_software_error_is_diagnosed_and_not_retried(h, no_policy, cause):
    run = h.start()
    result = h.watcher(diagnosis(cause), policy=no_policy).watch(run)
    assert result.outcome == "not_retried" and result.diagnosis.cause == cause and not h.retried
    assert [e["detail"]["cause"] for e in h.ledger.events(run.id) if e["kind"] == "diagnosis"] == [cause]


def test_a_nan_that_ended_the_job_is_not_retried_blindly(h, no_policy):
    result = h.watcher(diagnosis("nan_loss"), policy=no_policy).watch(h.start())
    assert result.outcome == "not_retried" and not h.retried


def test_a_plan_without_auto_rollback_is_diagnosed_but_never_resubmitted(h, no_policy):
    run = h.start(enabled=False)
    result = h.watcher(diagnosis("node_failure"), policy=no_policy, act=False).watch(run)
    assert result.outcome == "not_retried" and not h.retried


def test_the_policy_forbids_automatic_resubmission(h, tmp_path):
    policy = policy_from(tmp_path, "auto_rollback: {allow: false}\n")
    result = h.watcher(diagnosis("gpu_hardware"), policy=policy).watch(h.start())
    assert result.outcome == "not_allowed" and not h.retried


def test_the_policy_caps_the_automatic_actions_of_a_run_chain(h, tmp_path):
    policy = policy_from(tmp_path, "auto_rollback: {allow: true, max_per_run: 1}\n")
    run = h.start(max_rollbacks=5)
    h.ledger.add_event(run.id, AUTO_RETRY_EVENT, {"cause": "gpu_hardware"})  # one earlier retry
    assert auto_rollbacks_in_chain(h.ledger, run) == 1
    result = h.watcher(diagnosis("gpu_hardware"), policy=policy).watch(run)
    assert result.outcome == "max_rollbacks" and not h.retried


def test_a_loss_trigger_where_the_policy_forbids_rollback_cancels_nothing(h, tmp_path):
    policy = policy_from(tmp_path, "auto_rollback: {allow: false}\n")
    run = h.start(state="RUNNING", losses=["5.0E+00"] * 12 + ["nan"])
    result = h.watcher(diagnosis("nan_loss"), policy=policy).watch(run)
    assert result.outcome == "not_allowed" and result.trigger.kind == "nan"
    assert not h.cancelled and not h.retried


def test_excluding_nodes_keeps_and_extends_the_users_exclude_list():
    plan = with_changes(single_node_h100(), cluster={"sbatch_args": ["--exclude=h100-9", "--mail-type=END"]})
    once = excluding_nodes_plan(plan, ["h100-2"])
    twice = excluding_nodes_plan(once, ["h100-2", "h100-3"])
    assert twice.cluster.sbatch_args == ["--mail-type=END", "--exclude=h100-9,h100-2,h100-3"]
    assert once.plan_hash() != plan.plan_hash() and once.checkpoint.load == plan.checkpoint.save
    assert [o.model_dump() for o in twice.overrides] == [o.model_dump() for o in plan.overrides]  # training untouched


def test_a_save_dir_outside_the_policys_rollback_dirs_is_not_touched(h, tmp_path):
    elsewhere = tmp_path / "allowed-only-here"
    elsewhere.mkdir()
    policy = policy_from(tmp_path, f"rollback_dirs: [{elsewhere}]\n")
    run = h.start(state="RUNNING", losses=["5.0E+00"] * 12 + ["nan"])
    result = h.watcher(diagnosis("nan_loss"), policy=policy).watch(run)
    assert result.outcome == "not_allowed" and not h.cancelled and not h.ledger.rollbacks(run_ids=[run.id])


def test_a_node_name_from_log_text_that_is_not_a_host_name_is_not_excluded():
    plan = with_changes(single_node_h100(), cluster={"sbatch_args": []})
    odd = excluding_nodes_plan(plan, ["h100-1; rm -rf ~", "$(id)", "", "h100-[2-3]"])
    assert odd.cluster.sbatch_args == ["--exclude=h100-[2-3]"]
