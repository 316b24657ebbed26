"""The permission policy on the command line: for each limit, a Plan exceeding it is reported by
`preflight --no-cluster` (exit 1, a `policy.*` error naming the limit and the file, text and JSON)
and refused by the gate before the scheduler is called, --force or not; the strictest file wins;
HOME / XDG_CONFIG_HOME / MBRIDGE_LAUNCH_SITE_POLICY and the working directory select the files;
rollback only modifies the directories the policy allows; and the tool cancels only runs its
ledger records. Every command is the real CLI in a fresh process (the `mbl` fixture), with its
environment and working directory in tmp dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkpoint_fixtures import make_save_dir
from mbridge_launch.policy.files import SITE_POLICY
from mbridge_launch.runs.ledger import Ledger
from preflight_fixtures import edit, valid_plan, write

# the machine's own site policy would add its limits to every case here
pytestmark = pytest.mark.skipif(os.path.lexists(SITE_POLICY), reason=f"{SITE_POLICY} exists on this machine")

# limit -> (the policy line, the Plan's changes that exceed it, the policy.* code, the limit's name in the message)
LIMITS = {
    "max_gpus": ("max_gpus: 4\n", {}, "policy.max_gpus", "max_gpus"),
    "max_nodes": ("max_nodes: 1\n", {"cluster.nodes": 2, "parallelism.dp": 16, "parallelism.gbs": 64},
                  "policy.max_nodes", "max_nodes"),
    "max_time": ('max_time: "00:30:00"\n', {}, "policy.max_time", "max_time"),
    "max_gpu_hours": ("max_gpu_hours: 4\n", {}, "policy.max_gpu_hours", "max_gpu_hours"),
    # 8 GPU-hours already in the ledger (_record_usage) + 8 for the Plan > 12; the Plan alone fits
    "max_gpu_hours_per_day": ("max_gpu_hours_per_day: 12\n", {}, "policy.max_gpu_hours_per_day",
                              "max_gpu_hours_per_day"),
    "accounts": ("accounts: [a1, a3]\n", {"cluster.account": "a2"}, "policy.account", "accounts"),
    "partitions": ("partitions: [cpu]\n", {}, "policy.partition", "partitions"),
    "allow_benchmark_recipes": ("allow_benchmark_recipes: false\n", {"recipe.kind": "benchmark"},
                                "policy.benchmark_recipe", "allow_benchmark_recipes"),
    "auto_rollback.allow": ("auto_rollback: {allow: false}\n", {"auto_rollback.enabled": True},
                            "policy.auto_rollback", "auto_rollback.allow"),
    "auto_rollback.max_per_run": ("auto_rollback: {max_per_run: 1}\n",
                                  {"auto_rollback.enabled": True, "auto_rollback.max_rollbacks": 3},
                                  "policy.auto_rollback", "auto_rollback.max_per_run"),
}
# where each limit's file lives, in turn: every place is exercised
PLACES = ("site", "user", "xdg", "project")


class Setup:
    """tmp dirs for one test: the files, the environment that selects them, a fake sbatch."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.home, self.xdg, self.proj = tmp_path / "home", tmp_path / "xdg", tmp_path / "proj"
        self.site = tmp_path / "site" / "policy.yaml"
        self.state = tmp_path / "state"
        self.marker = tmp_path / "scheduler-called"
        bin_dir = tmp_path / "bin"
        for d in (self.home, self.proj, self.site.parent, bin_dir):
            d.mkdir(parents=True, exist_ok=True)
        # a scheduler that records being called: the refused submissions must never reach it
        (bin_dir / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" >> {self.marker}\necho 99\n")
        for name in ("squeue", "sacct"):
            (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        for f in bin_dir.iterdir():
            f.chmod(0o755)
        self.env = {"HOME": str(self.home), "XDG_CONFIG_HOME": None, "MBRIDGE_LAUNCH_SITE_POLICY": str(self.site),
                    "MBRIDGE_LAUNCH_STATE_DIR": str(self.state), "MBRIDGE_LAUNCH_LEDGER": None,
                    "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def write_policy(self, place: str, text: str) -> Path:
        path = {"site": self.site, "user": self.home / ".config/mbridge-launch/policy.yaml",
                "xdg": self.xdg / "mbridge-launch/policy.yaml", "project": self.proj / ".mbridge-launch.yaml"}[place]
        if place == "xdg":
            self.env["XDG_CONFIG_HOME"] = str(self.xdg)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def plan(self, **changes) -> Path:
        plan = valid_plan(self.root / "base")
        return write(edit(plan, **changes) if changes else plan, self.root)

    def run(self, mbl, *args):
        return mbl.run(*args, env=self.env, cwd=self.proj)

    def ledger_runs(self) -> list:
        path = self.state / "ledger.sqlite3"
        if not path.exists():
            return []
        with Ledger.open(path) as ledger:
            return ledger.list_runs(limit=None)


def _record_usage(setup: Setup, gpus: int = 8, time: str = "01:00:00") -> None:
    """A submission of this user made a moment ago, as the gate records it."""
    setup.state.mkdir(parents=True, exist_ok=True)
    with Ledger.open(setup.state / "ledger.sqlite3") as ledger:
        run = ledger.begin_submission(name="earlier", plan_hash="e" * 16, plan_yaml="name: earlier\n",
                                      executor="sbatch", cluster={"nodes": 1, "gpus_per_node": gpus, "time": time})
        ledger.record_confirmation(run.id, "submit", "flag-yes")
        ledger.mark_submitted(run.id, ["12345"])
        ledger.set_state(run.id, "completed")


@pytest.fixture
def setup(tmp_path):
    return Setup(tmp_path)


@pytest.mark.parametrize("limit", list(LIMITS), ids=list(LIMITS))
def test_each_limit_is_reported_by_preflight_and_refused_by_the_gate(setup, mbl, limit):
    text, changes, code, name = LIMITS[limit]
    place = PLACES[list(LIMITS).index(limit) % len(PLACES)]
    policy_file = setup.write_policy(place, text)
    if limit == "max_gpu_hours_per_day":
        _record_usage(setup)
    plan = setup.plan(**changes)

    shown = setup.run(mbl, "preflight", plan, "--no-cluster")
    assert shown.rc == 1, shown.stdout + shown.stderr
    [line] = [ln for ln in shown.stdout.splitlines() if f" {code} " in ln]
    assert "ERROR" in line and name in line and str(policy_file) in line

    as_json = setup.run(mbl, "preflight", plan, "--no-cluster", "--format", "json")
    assert as_json.rc == 1
    [check] = [c for c in as_json.json()["checks"] if c["code"] == code]
    assert check["severity"] == "error" and name in check["message"] and str(policy_file) in check["message"]

    for extra in ((), ("--force", "--reason", "I know better")):  # --force does not lift a policy
        refused = setup.run(mbl, "submit", plan, "--yes", "--no-cluster-checks", *extra)
        assert refused.rc == 1, refused.stderr
        assert code in refused.stderr and "cannot be overridden with --force" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert not setup.marker.exists()  # the scheduler was never called
    assert [r.name for r in setup.ledger_runs()] == (["earlier"] if limit == "max_gpu_hours_per_day" else [])

    dry = setup.run(mbl, "submit", plan, "--dry-run", "--no-cluster-checks", "--force", "--reason", "x",
                    "--format", "json")
    assert dry.rc == 1 and dry.json()["would_submit"] is False


def test_the_per_day_limit_counts_the_ledger(setup, mbl):
    setup.write_policy("site", "max_gpu_hours_per_day: 12\n")
    plan = setup.plan()
    assert setup.run(mbl, "preflight", plan, "--no-cluster").rc == 0  # 8 GPU-hours alone fit
    _record_usage(setup)
    shown = setup.run(mbl, "preflight", plan, "--no-cluster")
    assert shown.rc == 1 and "8.0 GPU-hours submitted in the last 24 h plus 8.0" in shown.stdout


def test_a_plan_within_every_limit_passes_and_the_card_lists_the_limits(setup, mbl):
    site = setup.write_policy("site", 'max_gpus: 16\nmax_time: "02:00:00"\npartitions: [h100, cpu]\n')
    project = setup.write_policy("project", "max_gpus: 8\nauto_rollback: {allow: false}\n")
    plan = setup.plan()
    shown = setup.run(mbl, "preflight", plan, "--no-cluster", "--format", "json")
    assert shown.rc == 0 and not [c for c in shown.json()["checks"] if c["severity"] == "error"]
    submitted = setup.run(mbl, "submit", plan, "--yes", "--no-cluster-checks")
    assert submitted.rc == 0, submitted.stderr
    assert f"max_gpus 8 (from {project})" in submitted.stderr
    assert f"max_time 02:00:00 (from {site})" in submitted.stderr
    assert setup.marker.exists() and [r.name for r in setup.ledger_runs()] == ["pf-valid"]


def test_the_strictest_file_wins_and_is_named(setup, mbl):
    setup.write_policy("site", "max_gpus: 16\n")
    user = setup.write_policy("user", "max_gpus: 4\n")
    setup.write_policy("project", "max_gpus: 32\n")
    shown = setup.run(mbl, "preflight", setup.plan(), "--no-cluster", "--format", "json")
    [check] = [c for c in shown.json()["checks"] if c["code"] == "policy.max_gpus"]
    assert f"at most 4 (set by {user})" in check["message"]


def test_home_xdg_and_the_working_directory_decide_the_files(setup, mbl):
    plan = setup.plan()
    setup.write_policy("user", "max_gpus: 4\n")  # under $HOME/.config
    assert setup.run(mbl, "preflight", plan, "--no-cluster").rc == 1
    setup.env["XDG_CONFIG_HOME"] = str(setup.xdg)  # now the user file is under XDG_CONFIG_HOME: none there
    assert setup.run(mbl, "preflight", plan, "--no-cluster").rc == 0
    setup.env["XDG_CONFIG_HOME"] = ""  # empty counts as unset
    assert setup.run(mbl, "preflight", plan, "--no-cluster").rc == 1
    (setup.home / ".config/mbridge-launch/policy.yaml").unlink()
    setup.write_policy("project", "max_nodes: 0\n")
    assert setup.run(mbl, "preflight", plan, "--no-cluster").rc == 1
    elsewhere = mbl.run("preflight", plan, "--no-cluster", env=setup.env, cwd=setup.root)  # no project file there
    assert elsewhere.rc == 0, elsewhere.stdout


def test_no_policy_changes_nothing(setup, mbl):
    shown = setup.run(mbl, "preflight", setup.plan(), "--no-cluster", "--format", "json")
    assert shown.rc == 0 and not [c for c in shown.json()["checks"] if c["code"].startswith("policy.")]


def test_a_bad_policy_file_is_one_line_naming_file_and_key(setup, mbl):
    path = setup.write_policy("user", "max_gpus: -2\n")
    for args in (("preflight", setup.plan(), "--no-cluster"), ("submit", setup.plan(), "--yes")):
        out = setup.run(mbl, *args)
        assert out.rc == 2 and "Traceback" not in out.stderr
        [line] = out.stderr.strip().splitlines()
        assert str(path) in line and "max_gpus" in line
    assert not setup.marker.exists()


# ---------------------------------------------------------------------- rollback directories
def _record_run(setup: Setup, save: Path, state: str = "completed") -> None:
    setup.state.mkdir(parents=True, exist_ok=True)
    with Ledger.open(setup.state / "ledger.sqlite3") as ledger:
        run = ledger.begin_submission(name="demo", plan_hash="d" * 16, plan_yaml="name: demo\n", executor="sbatch",
                                      save_dir=str(save))
        ledger.mark_submitted(run.id, ["4242"])
        ledger.set_state(run.id, state)


def test_rollback_refuses_a_directory_outside_the_policys_rollback_dirs(setup, mbl):
    save = make_save_dir(setup.root / "outside")
    allowed = setup.root / "allowed"
    allowed.mkdir()
    policy = setup.write_policy("site", f"rollback_dirs: [{allowed}]\n")
    _record_run(setup, save)
    before = sorted(p.name for p in save.iterdir())
    for ref in ("demo", str(save)):
        out = setup.run(mbl, "rollback", ref, "--to", "100", "--yes")
        assert out.rc == 1 and "policy.rollback_dirs" in out.stderr and str(policy) in out.stderr
    assert sorted(p.name for p in save.iterdir()) == before
    inside = make_save_dir(allowed)
    done = setup.run(mbl, "rollback", str(inside), "--to", "100", "--yes")
    assert done.rc == 0, done.stderr


def test_rollback_of_a_runs_own_save_dir_is_allowed_by_default(setup, mbl):
    save = make_save_dir(setup.root)
    _record_run(setup, save)
    out = setup.run(mbl, "rollback", "demo", "--to", "100", "--yes")
    assert out.rc == 0, out.stderr


# ---------------------------------------------------------------------- only the ledger's own runs
def test_cancel_and_rollback_touch_only_jobs_the_ledger_records(setup, mbl):
    """A Slurm job the ledger does not record is never cancelled: `cancel JOBID` names no run, and
    `rollback DIR --cancel` over a directory a foreign job writes cancels nothing."""
    bin_dir = setup.root / "bin"
    (bin_dir / "scancel").write_text(f"#!/bin/sh\necho \"$@\" >> {setup.root / 'scancel-called'}\n")
    (bin_dir / "squeue").write_text("#!/bin/sh\nprintf '777\\037RUNNING\\0372026-11-29T20:00:00\\037None\\037x\\037c\\n'\n")
    (bin_dir / "scancel").chmod(0o755)
    _record_run(setup, setup.root / "mine", state="running")
    refused = setup.run(mbl, "cancel", "777", "--yes")
    assert refused.rc == 2 and "777" in refused.stderr
    save = make_save_dir(setup.root / "foreign")
    rolled = setup.run(mbl, "rollback", str(save), "--to", "100", "--yes", "--cancel")
    assert "no recorded run writes" in rolled.stderr
    assert not (setup.root / "scancel-called").exists()


# ---------------------------------------------------------------------- resubmissions
def _record_planned_run(setup: Setup, changes: dict | None = None) -> Path:
    """A finished run of the valid Plan with checkpoints in its save dir, as the gate records it."""
    plan = edit(valid_plan(setup.root / "base"), **(changes or {}))
    save = make_save_dir(setup.root / "base")
    setup.state.mkdir(parents=True, exist_ok=True)
    with Ledger.open(setup.state / "ledger.sqlite3") as ledger:
        run = ledger.begin_submission(name=plan.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                      executor="sbatch", cluster=plan.cluster.model_dump(mode="json"),
                                      work_dir=str(setup.proj), save_dir=str(save))
        ledger.mark_submitted(run.id, ["4343"])
        ledger.set_state(run.id, "completed")
    return save


def test_rollback_resubmit_passes_through_the_policy(setup, mbl):
    save = _record_planned_run(setup)
    before = sorted(p.name for p in save.iterdir())
    policy = setup.write_policy("project", "max_gpus: 4\n")
    for extra in ((), ("--force", "--reason", "resume anyway")):
        out = setup.run(mbl, "rollback", "pf-valid", "--to", "100", "--resubmit", "--yes", *extra)
        assert out.rc == 1 and "policy.max_gpus" in out.stderr and str(policy) in out.stderr
        assert "cannot be overridden with --force" in out.stderr
    assert sorted(p.name for p in save.iterdir()) == before  # refused before the rollback touched anything
    assert not setup.marker.exists()
    assert [r.name for r in setup.ledger_runs()] == ["pf-valid"]  # no child run


def test_the_watchers_resubmission_passes_through_the_policy(setup, monkeypatch):
    """gate.submit.auto_resubmit (the watcher's hook), in process: refused by the policy, and the
    scheduler (here a stand-in that records calls) is never reached."""
    from gate_fixtures import FakeScheduler
    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.gate.submit import auto_resubmit
    from mbridge_launch.rollback.lossmon import Trigger

    _record_planned_run(setup, {"auto_rollback.enabled": True})
    setup.write_policy("site", "auto_rollback: {allow: false}\n")
    for key, value in setup.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(setup.proj)
    scheduler = FakeScheduler()
    scheduler.install(monkeypatch)
    with Ledger.open(setup.state / "ledger.sqlite3") as ledger:
        run = ledger.get_run("pf-valid")
        with pytest.raises(CheckFailed) as info:
            auto_resubmit(ledger, run, 100, Trigger("nan", 250, float("nan")))
    assert info.value.key == "gate.auto_resubmit_refused" and "policy.auto_rollback" in info.value.render("en")
    assert scheduler.submitted == []
