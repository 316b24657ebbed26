"""Hostile values (spaces, quotes, $(), backticks, ';', newlines) in paths, overrides and env
values never execute: every executor renders them quoted, the job runs on the real cluster, the
stand-in trainer receives them verbatim, and no canary file appears. Values that no quoting can
make safe are refused with a UserError before anything is written or run; a run name may only hold
letters, digits, '.', '_' and '-' (the Plan refuses others at load)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.base.errors import UserError
from mbridge_launch.executors import BUILTINS, get_executor
from mbridge_launch.executors.launch import render_plan, schedule

pytestmark = pytest.mark.usefixtures("english")

EXECUTORS = list(BUILTINS)  # every built-in executor (sbatch, nemo-run, submitit)


def injections(tag: str) -> str:
    """A value that creates canary files if any shell ever parses it (relative paths: they would
    appear in the job's working directory, which is under the test's directory)."""
    return (f"a b 'it''s' \"q\" $(touch canary-{tag}-subst) `touch canary-{tag}-tick`; "
            f"touch canary-{tag}-semi\nsecond line & touch canary-{tag}-amp | $HOME *")


def override_value() -> str:
    """The injections as an override value: without the line break, which Hydra's override grammar
    has no place for (the Plan refuses it; env values keep theirs)."""
    return injections("override").replace("\n", " ")


def hostile_plan(base: Path, entry: list[str], executor: str):
    name = "llama3-8b-hostile"  # a hostile run name is refused by the Plan itself (test below)
    save = base / ("ckpt " + injections("path").replace("\n", " ").replace("/", "_"))
    plan = pf.with_changes(
        pf.moe_ep(),
        top={"name": name,
             "overrides": [{"key": "logger.wandb_exp_name", "value": override_value(), "class": "execution"},
                           {"key": "train.train_iters", "value": "2", "class": "convergence"}],
             "env_vars": {"NCCL_NVLS_ENABLE": "0", "MBL_HOSTILE": injections("env")}},
        cluster={"partition": "h100", "account": None, "time": "00:10:00",
                 "env": ["MBL_STANDIN_REPORT_DIR", "MBL_STANDIN_ECHO_ENV"]},
        checkpoint={"save": str(save), "load": str(save), "save_interval": 2},
        launch={"entry": entry, "log_dir": str(base / "logs $(touch canary-logdir) ;x"),
                "workdir": str(base / "cwd")},
    )
    return plan, save


def _canaries(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("canary-*")]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_hostile_values_render_quoted(executor, tmp_path, standin_entry):
    plan, _ = hostile_plan(tmp_path, standin_entry, executor)
    options = {"nemorun_home": str(tmp_path / "home"), "experiment_id": f"{plan.name}_x"} if executor == "nemo-run" else {}
    rendered = get_executor(executor, **options).render(plan)
    script = tmp_path / "script.sh"
    script.write_text(rendered.text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "'logger.wandb_exp_name=a b '\"'\"'it'\"'\"''\"'\"'s" in rendered.text
    assert not _canaries(tmp_path)


@pytest.mark.slurm
@pytest.mark.parametrize("executor", EXECUTORS)
def test_hostile_values_reach_the_trainer_verbatim(executor, slurm_cluster, slurm_env, standin_entry, shared_dir,
                                                   monkeypatch):
    report = shared_dir / "report"
    monkeypatch.setenv("MBL_STANDIN_REPORT_DIR", str(report))
    monkeypatch.setenv("MBL_STANDIN_ECHO_ENV", "MBL_HOSTILE")
    monkeypatch.chdir(shared_dir)
    plan, save = hostile_plan(shared_dir, standin_entry, executor)
    (shared_dir / "cwd").mkdir()
    job_id = schedule(render_plan(plan, executor, shared_dir / "work")).job_ids[0]
    state = slurm_cluster.wait(job_id, timeout=150)
    assert state == "COMPLETED", state
    records = [json.loads(p.read_text()) for p in sorted(report.glob("rank-*.json"))]
    assert len(records) == 16
    for record in records:
        assert f"logger.wandb_exp_name={override_value()}" in record["argv"]
        assert f"checkpoint.save={save}" in record["argv"]
        assert record["env"]["MBL_HOSTILE"] == injections("env")
        assert record["env"]["SLURM_JOB_NAME"] == plan.name
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert not _canaries(shared_dir, Path.home())


# ------------------------------------------------------------------ refused: cannot be made safe
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("changes,key", pf.UNSAFE_VALUES)
def test_unsafe_values_are_refused_by_every_executor(executor, changes, key, tmp_path):
    plan = pf.with_changes(pf.moe_ep(), **changes)
    options = {"nemorun_home": str(tmp_path / "home")} if executor == "nemo-run" else {}
    with pytest.raises(UserError) as err:
        get_executor(executor, **options).render(plan)
    assert err.value.key == key
    message = err.value.render("en")
    assert message.count("\n") == 0 and ("name" in message or "contains" in message)
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("name", ["run $(touch canary)", "a;b", "with space", "quote'd", "run\n#SBATCH --qos=top"])
def test_unsafe_run_names_are_refused_by_the_plan(name, tmp_path):
    from mbridge_launch.plan.model import plan_from_dict

    data = pf.moe_ep().canonical_dict()
    data["name"] = name
    with pytest.raises(UserError) as err:
        plan_from_dict(data, "plan.yaml")
    message = err.value.render("en")
    assert err.value.exit_code == 2 and message.startswith("invalid plan plan.yaml: name: ") and "\n" not in message
    assert not _canaries(tmp_path, Path.cwd())
