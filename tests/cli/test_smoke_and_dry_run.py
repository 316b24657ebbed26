"""`recommend --smoke-test` writes a plan a new user can run in minutes and that passes
`preflight --no-cluster` on a fresh machine; `submit --dry-run` tells what a real submit would do;
`submit --workdir` is refused (one meaning of --workdir: the job's start directory, in the plan)."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.plan.model import load_plan


def smoke_plan(mbl, directory, *extra):
    proc = mbl.run("recommend", "--smoke-test", "-o", "p.yaml", *extra, cwd=directory)
    assert proc.rc == 0, proc.stderr
    return directory / "p.yaml", proc


CHECKOUT_ROUTE = ("--entry", "python", "scripts/training/run_recipe.py")  # no container: the job needs a checkout


def checkout(directory):
    script = directory / "scripts" / "training" / "run_recipe.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    return directory


def overrides(plan):
    return {o.key: o.value for o in plan.overrides}


def test_smoke_test_plan_passes_preflight_no_cluster(mbl, tmp_path):
    """`recommend --smoke-test -o p.yaml && preflight p.yaml --no-cluster` in an empty directory on
    node-local disk, no shared file system, no GPU, no Megatron Bridge checkout: exit 0."""
    path, _ = smoke_plan(mbl, tmp_path)
    proc = mbl.run("preflight", "p.yaml", "--no-cluster", "--format", "json", cwd=tmp_path)
    assert proc.rc == 0, proc.stdout + proc.stderr
    report = proc.json()
    found = {c["code"]: c["severity"] for c in report["checks"]}
    assert not [code for code, severity in found.items() if severity == "error"]
    assert found["path.save_space_none"] == "info"  # no checkpoint: no 2 x 17 GB to find room for
    assert found["entry.in_image_path"] == "info"  # the release's NeMo image holds the trainer: no checkout needed


def test_smoke_test_runs_in_the_release_container(mbl, tmp_path):
    """The image and in-image Megatron Bridge path come from the compatibility matrix; the start
    directory is mounted at its own path, so relative paths mean one place on host and in image."""
    from mbridge_launch.knowledge.compatibility import release_container

    path, _ = smoke_plan(mbl, tmp_path)
    plan = load_plan(path)
    container = release_container(plan.catalog.version)
    assert container is not None and plan.cluster.container_image == container.image
    assert plan.launch.entry == ["python", f"{container.megatron_bridge_path}/scripts/training/run_recipe.py"]
    start = str(tmp_path.resolve())
    assert plan.launch.workdir == start
    assert [(m.source, m.target) for m in plan.cluster.container_mounts] == [(start, start)]


@pytest.mark.parametrize("flag", [("--workdir", "mb"), ("--container-image", "img.sqsh"), CHECKOUT_ROUTE])
def test_the_user_s_route_wins_over_the_container(mbl, tmp_path, flag):
    checkout(tmp_path / "mb")
    plan = load_plan(smoke_plan(mbl, tmp_path, *flag)[0])
    assert plan.cluster.container_image == (flag[1] if flag[0] == "--container-image" else None)
    assert plan.launch.entry[-1] == "scripts/training/run_recipe.py"


@pytest.mark.parametrize("route", [(), CHECKOUT_ROUTE])
def test_preflight_and_the_dry_run_classify_alike(mbl, tmp_path, route):
    """One classification: every check has the same severity in `preflight` and in the dry run
    (the container route passes both; the checkout route without a checkout fails both)."""
    smoke_plan(mbl, tmp_path, *route)
    pre = mbl.run("preflight", "p.yaml", "--no-cluster", "--format", "json", cwd=tmp_path)
    dry = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", "--format", "json", cwd=tmp_path)
    pre_checks = {(c["code"], c["severity"]) for c in pre.json()["checks"] if c["code"] != "cluster.skipped"}
    dry_checks = {(c["code"], c["severity"]) for c in json.loads(dry.stdout)["preflight"]["checks"]
                  if c["code"] != "cluster.skipped"}
    assert pre_checks == dry_checks and pre.rc == dry.rc == (1 if route else 0), (pre_checks ^ dry_checks)
    if route:
        assert ("entry.missing_submit_dir", "error") in pre_checks


def test_smoke_test_is_a_short_run_with_a_consistent_schedule(mbl, tmp_path):
    path, _ = smoke_plan(mbl, tmp_path)
    plan = load_plan(path)
    values = overrides(plan)
    iters = int(values["train.train_iters"])
    assert iters == 50 and plan.cluster.time == "00:30:00"
    assert (plan.cluster.nodes, plan.cluster.gpus_per_node) == (1, 1)
    # Megatron Bridge: warmup shorter than the decay, decay within the run
    assert 0 < int(values["scheduler.lr_warmup_iters"]) < int(values["scheduler.lr_decay_iters"]) <= iters
    assert int(values["validation.eval_iters"]) <= 2 and int(values["validation.eval_interval"]) <= iters
    assert values["checkpoint.save_interval"] == "0"
    assert plan.parallelism.gbs == plan.parallelism.mbs * plan.parallelism.dp * 2
    reasons = {o.key: o.reason.key for o in plan.overrides if o.reason is not None}
    assert reasons["train.train_iters"] == "change.reason.smoke_test"
    assert reasons["scheduler.lr_warmup_iters"] == "change.reason.smoke_test_schedule"
    assert reasons["checkpoint.save_interval"] == "change.reason.smoke_test_checkpoint"
    classes = {o.key: o.change_class for o in plan.overrides}
    assert classes["checkpoint.save_interval"] == "execution" and classes["train.train_iters"] == "convergence"


def test_smoke_test_keeps_what_the_user_sets(mbl, tmp_path):
    path, _ = smoke_plan(mbl, tmp_path, "train.train_iters=20", "--time", "00:10:00")
    plan = load_plan(path)
    values = overrides(plan)
    assert values["train.train_iters"] == "20" and plan.cluster.time == "00:10:00"
    assert values["scheduler.lr_decay_iters"] == "20" and values["scheduler.lr_warmup_iters"] == "2"


def test_smoke_test_names_the_next_steps(mbl, tmp_path):
    _, proc = smoke_plan(mbl, tmp_path)
    assert "mbridge-launch preflight p.yaml --no-cluster" in proc.stderr
    assert "mbridge-launch submit p.yaml --dry-run" in proc.stderr


def test_a_real_recommend_keeps_its_time_limit_default(mbl, tmp_path):
    proc = mbl.run("recommend", "--model", "llama32_1b", "-o", "p.yaml", cwd=tmp_path)
    assert proc.rc == 0, proc.stderr
    assert load_plan(tmp_path / "p.yaml").cluster.time == "04:00:00"


def test_dry_run_of_a_plan_a_submit_would_refuse_says_so_and_exits_1(mbl, tmp_path):
    smoke_plan(mbl, tmp_path, *CHECKOUT_ROUTE)
    state = tmp_path / "state"
    proc = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", cwd=tmp_path,
                   env={"MBRIDGE_LAUNCH_STATE_DIR": str(state), "MBRIDGE_LAUNCH_LEDGER": None})
    assert proc.rc == 1, proc.stderr
    assert "entry.missing_submit_dir" in proc.stderr and "a real submit would be refused: 1 preflight error" in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# dry run: nothing was submitted.")
    assert lines[1] == "# dry run: a real submit would be refused: 1 preflight error (entry.missing_submit_dir); nothing was submitted"
    assert "#!/bin/bash" in proc.stdout  # the script is still there to be read
    assert not state.exists() and not list(tmp_path.glob("*.sbatch"))  # no ledger, no file written


def test_dry_run_of_a_plan_that_passes_exits_0(mbl, tmp_path):
    smoke_plan(mbl, checkout(tmp_path), *CHECKOUT_ROUTE)
    proc = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", cwd=tmp_path)
    assert proc.rc == 0, proc.stderr
    assert proc.stdout.splitlines()[1].startswith("# dry run: preflight passed")


def test_dry_run_json_carries_the_verdict(mbl, tmp_path):
    smoke_plan(mbl, tmp_path, *CHECKOUT_ROUTE)
    proc = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", "--format", "json", cwd=tmp_path)
    assert proc.rc == 1
    data = json.loads(proc.stdout)
    assert data["would_submit"] is False and "refused" in data["verdict"]
    assert [c["code"] for c in data["preflight"]["checks"] if c["severity"] == "error"] == ["entry.missing_submit_dir"]
    assert data["text"].startswith("#!/bin/bash")


def test_dry_run_with_force_and_reason_says_the_submit_would_go_on(mbl, tmp_path):
    smoke_plan(mbl, tmp_path, *CHECKOUT_ROUTE)
    proc = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", "--force", "--reason", "entry in image",
                   cwd=tmp_path)
    assert proc.rc == 0, proc.stderr
    assert "only because of --force, overriding 1 preflight error (entry.missing_submit_dir)" in proc.stdout


def test_script_dir_is_where_a_plan_without_workdir_starts(mbl, tmp_path):
    """The job starts where the scheduler is called: --script-dir, for a plan without launch.workdir."""
    smoke_plan(mbl, tmp_path, *CHECKOUT_ROUTE)
    checkout(tmp_path / "mb")
    proc = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", "--script-dir", "mb", cwd=tmp_path)
    assert proc.rc == 0, proc.stderr
    assert not list((tmp_path / "mb").glob("*.sbatch"))  # a dry run writes nothing there


def test_recommend_workdir_sets_where_the_job_starts(mbl, tmp_path):
    checkout(tmp_path / "mb")
    path, _ = smoke_plan(mbl, tmp_path, "--workdir", str(tmp_path / "mb"))
    assert load_plan(path).launch.workdir == str(tmp_path / "mb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = mbl.run("submit", str(path), "--dry-run", "--no-cluster-checks", cwd=elsewhere)
    assert proc.rc == 0, proc.stderr
    assert f"#SBATCH --chdir={tmp_path / 'mb'}" in proc.stdout


@pytest.mark.parametrize("lang, words", [("en", ["--script-dir /x", "recommend --workdir"]),
                                         ("zh", ["--script-dir /x", "recommend --workdir", "launch.workdir"])])
def test_submit_workdir_is_refused_with_both_pointers(mbl, tmp_path, lang, words):
    smoke_plan(mbl, tmp_path)
    proc = mbl.run("submit", "p.yaml", "--workdir", "/x", "--dry-run", cwd=tmp_path, lang=lang)
    assert proc.rc == 2 and proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and all(word in errors[0] for word in words), proc.stderr
