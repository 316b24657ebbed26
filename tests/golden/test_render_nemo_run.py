"""NeMo-Run adapter: pinned experiment scripts (fixed NEMORUN_HOME and experiment id), no side
effects when rendering, safe names only, values quoted by us, and the MBridgePlugin."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.base.errors import UserError
from mbridge_launch.executors import get_executor

pytestmark = pytest.mark.usefixtures("english")

HOME = "/shared/nemorun-home"


def _render(plan, home=HOME):
    return get_executor("nemo-run", nemorun_home=home, experiment_id=f"{plan.name}_golden").render(plan)


@pytest.mark.parametrize("name", sorted(pf.GOLDEN_PLANS))
def test_golden_experiment(name, tmp_path):
    plan = pf.GOLDEN_PLANS[name]()
    rendered = _render(plan)
    script_path = f"{HOME}/experiments/{plan.name}/{plan.name}_golden/train_sbatch.sh"
    assert list(rendered.files) == [script_path]
    assert rendered.submit_command == ["sbatch", "--requeue", "--parsable", script_path]
    pf.assert_golden(f"nemo_run/{name}.sh", rendered.text)
    script = tmp_path / "s.sh"
    script.write_text(rendered.text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_render_has_no_side_effects(tmp_path):
    home = tmp_path / "home"
    _render(pf.two_node_h100(), home=str(home))
    assert not home.exists()


def test_script_carries_the_plan():
    text = _render(pf.four_node_gb200()).text
    assert "#SBATCH --job-name=llama3-70b-gb200\n" in text  # the plan's name, no account prefix
    assert "#SBATCH --segment=4\n" in text and "#SBATCH --export=NEMO_HOME,HF_TOKEN\n" in text
    assert "export NCCL_NET_GDR_C2C=1\n" in text
    assert "--container-image nvcr.io/nvidia/nemo:25.11" in text
    assert "mbridge-node-check 4 gb200" in text  # the node check runs before the task
    assert text.index("mbridge-node-check 4 gb200") < text.index("# Command 1")
    assert "--export=ALL" in text


def test_hostile_override_is_quoted_in_the_srun_line():
    plan = pf.with_changes(pf.moe_ep(), top={"overrides": [
        {"key": "logger.wandb_exp_name", "value": "x; touch /tmp/pwned $(id)", "class": "execution"}]})
    text = _render(plan).text
    assert "'logger.wandb_exp_name=x; touch /tmp/pwned $(id)'" in text


@pytest.mark.parametrize("name", ["nemo_run-x"])  # other unsafe names: refused by the Plan (test_plan_validation)
def test_unsafe_titles_are_refused(name):
    plan = pf.with_changes(pf.moe_ep(), top={"name": name})
    with pytest.raises(UserError) as err:
        get_executor("nemo-run", nemorun_home=HOME).render(plan)
    assert err.value.key == "shell.unsafe_name"


@pytest.mark.parametrize("home", ["relative/home", "/shared/nemo_run", "/a b", "/x$(id)"])
def test_unsafe_homes_are_refused(home):
    with pytest.raises(UserError) as err:
        _render(pf.moe_ep(), home=home)
    assert err.value.key == "executors.nemo_run_home_unsafe"


def test_experiment_id_must_keep_the_title():
    plan = pf.moe_ep()
    ex = get_executor("nemo-run", nemorun_home=HOME, experiment_id="other_1")
    with pytest.raises(UserError) as err:
        ex.render(plan)
    assert err.value.key == "executors.experiment_id"
    default = get_executor("nemo-run", nemorun_home=HOME)._experiment_id(plan)
    assert default.startswith(f"{plan.name}_{plan.plan_hash()}-") and "_" not in default[len(plan.name) + 1:]


def test_plugin_applies_env_mounts_and_node_check():
    import nemo_run as run

    from mbridge_launch.executors.nemo_run import MBridgePlugin

    plan = pf.four_node_gb200()
    plugin = MBridgePlugin.from_plan(plan)
    assert isinstance(plugin, run.Plugin)
    executor = run.SlurmExecutor(account="acct", env_vars={"MINE": "1"}, setup_lines="echo mine")
    task = run.Script(inline="echo hi")
    plugin.setup(task, executor)
    assert executor.env_vars["MINE"] == "1" and executor.env_vars["NCCL_NET_GDR_C2C"] == "1"
    assert executor.container_mounts == ["/lustre:/lustre"]
    assert "HF_TOKEN" in executor.container_env
    assert executor.setup_lines.startswith("echo mine\n") and "mbridge-node-check 4 gb200" in executor.setup_lines
    assert "--export=ALL" in executor.srun_args
    # the Plan's signal, and the exit handler that makes the trainer save on it
    assert executor.signal == plan.cluster.signal == "TERM@60"
    assert task.args[-1:] == ["train.exit_signal_handler=true"]


def test_plugin_inside_a_users_own_experiment(tmp_path):
    """A NeMo-Run user's own experiment: their task, their SlurmExecutor, plus MBridgePlugin. The
    script NeMo-Run writes (its own dry run) carries the plan's env and mounts, and the node check
    runs before the user's srun line."""
    import os

    from mbridge_launch.executors.nemo_run import MBridgePlugin, _import_nemo_run, _no_stdin

    home = str(tmp_path / "home")
    run = _import_nemo_run(home)
    plan = pf.four_node_gb200()
    executor = run.SlurmExecutor(account="mine", partition="gb200", nodes=4, ntasks_per_node=4, gpus_per_node=4,
                                 time="01:00:00", container_image="nvcr.io/nvidia/nemo:25.11",
                                 env_vars={"MY_SETTING": "1"}, packager=run.Packager(),
                                 tunnel=run.LocalTunnel(job_dir=os.path.join(home, "experiments")))
    task = run.Script(path="my_train.py", entrypoint="python", args=["--lr", "3e-4"])
    with _no_stdin(), run.Experiment("users-exp", id="users-exp_1", base_dir=home, enable_goodbye_message=False,
                                     skip_status_at_exit=True) as exp:
        exp.add(task, executor=executor, name="mine", plugins=[MBridgePlugin.from_plan(plan)])
        exp.dryrun(log=False, delete_exp_dir=False)
    scripts = sorted(Path(home).rglob("*_sbatch.sh"))
    assert len(scripts) == 1
    text = scripts[0].read_text()
    assert "export MY_SETTING=1" in text  # the user's own env is kept
    for name, value in plan.env_vars.items():
        assert f"export {name}={value}" in text
    assert "/lustre:/lustre" in text and "HF_TOKEN" in text  # plan mounts and forwarded names
    check = text.index("mbridge-node-check 4 gb200")
    train = text.index("my_train.py")
    assert check < train  # the node check runs before the user's training step
    srun_line = next(line for line in text.splitlines() if "my_train.py" in line)
    assert "--export=ALL" in srun_line
    proc = subprocess.run(["bash", "-n", str(scripts[0])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
