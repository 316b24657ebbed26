"""Issue 13 item 6 without a cluster: which python runs submitit's task runner and how it finds
submitit in an image; nemo-run's container workdir and step log; preflight's mount checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import plan_fixtures as pf
from mbridge_launch.base.errors import UserError
from mbridge_launch.executors import get_executor
from mbridge_launch.preflight.container_checks import run_container_checks
from mbridge_launch.preflight.context import PreflightContext

pytestmark = pytest.mark.usefixtures("english")
FOLDER = "/lustre/logs/llama3-70b-gb200/submitit"  # four_node_gb200: launch.log_dir + /submitit


def _srun_line(text: str, marker: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("srun") and marker in line)


def test_submitit_in_an_image_runs_its_python3_with_a_copied_submitit():
    pytest.importorskip("submitit")
    text = get_executor("submitit").render(pf.four_node_gb200()).text
    line = _srun_line(text, "submitit.core._submit")
    assert line.endswith(f" env PYTHONPATH={FOLDER}/pylib python3 -u -m submitit.core._submit {FOLDER}")
    assert sys.executable not in text  # the login node's venv is not in the image
    assert f"# Task runner: python3 in the image nvcr.io/nvidia/nemo:25.11; submitit, cloudpickle, " \
           f"typing_extensions copied at submit to {FOLDER}/pylib (PYTHONPATH)" in text


def test_submitit_python_follows_the_plan_and_stays_the_submitter_without_an_image():
    pytest.importorskip("submitit")
    chosen = pf.with_changes(pf.four_node_gb200(), launch={"python": "/opt/venv/bin/python"})
    line = _srun_line(get_executor("submitit").render(chosen).text, "submitit.core._submit")
    assert f" env PYTHONPATH={FOLDER}/pylib /opt/venv/bin/python -u -m submitit.core._submit " in line
    plain = get_executor("submitit").render(pf.two_node_h100()).text
    assert f" {sys.executable} -u -m submitit.core._submit " in _srun_line(plain, "submitit.core._submit")
    assert "PYTHONPATH" not in plain


def test_submitit_folder_outside_the_mounts_is_refused():
    pytest.importorskip("submitit")
    plan = pf.with_changes(pf.four_node_gb200(), cluster={"container_mounts": [{"source": "/lustre/ckpt",
                                                                                 "target": "/lustre/ckpt"}]})
    with pytest.raises(UserError) as err:
        get_executor("submitit").render(plan)
    assert err.value.key == "executors.submitit_folder_unmounted"
    assert "add the mount /lustre/logs/llama3-70b-gb200:/lustre/logs/llama3-70b-gb200" in str(err.value)


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs a system python3")
def test_the_copied_runner_imports_on_a_python_without_the_venv(tmp_path):
    pytest.importorskip("submitit")
    from mbridge_launch.executors import submitit as adapter

    lib = tmp_path / "pylib"
    adapter.copy_runner_packages(lib)
    adapter.copy_runner_packages(lib)  # again over the old copy (a resubmission)
    assert sorted(p.name for p in lib.iterdir()) == ["cloudpickle", "submitit", "typing_extensions.py"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(lib)}
    code = "import submitit.core._submit, submitit.helpers, cloudpickle; print(submitit.__file__)"
    out = subprocess.run(["/usr/bin/python3", "-S", "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(lib))


def test_nemo_run_container_step_uses_the_plans_workdir_and_log_dir():
    pytest.importorskip("nemo_run")
    text = get_executor("nemo-run").render(pf.four_node_gb200()).text
    line = _srun_line(text, "run_recipe.py")
    log = '/lustre/logs/llama3-70b-gb200/llama3-70b-gb200-%j-restart"${SLURM_RESTART_COUNT:-0}".log'
    assert line.startswith(f"srun --output {log} --container-image nvcr.io/nvidia/nemo:25.11 ")
    assert " --container-workdir /opt/Megatron-Bridge " in line and "/nemo_run/code" not in line
    no_workdir = pf.with_changes(pf.four_node_gb200(), launch={"workdir": None})
    line = _srun_line(get_executor("nemo-run").render(no_workdir).text, "run_recipe.py")
    assert "--container-workdir" not in line  # the image's own working directory, as with pyxis


def test_nemo_run_records_the_step_log_in_log_dir(tmp_path):
    pytest.importorskip("nemo_run")
    from mbridge_launch.executors import nemo_run as adapter

    plan = pf.with_changes(pf.four_node_gb200(), launch={"log_dir": str(tmp_path)})
    (tmp_path / "llama3-70b-gb200-7-restart1.log").write_text("")
    assert adapter.step_logs(plan, ["7"], tmp_path) == [tmp_path / "llama3-70b-gb200-7-restart0.log",
                                                        tmp_path / "llama3-70b-gb200-7-restart1.log"]


def _container_codes(plan):
    checks = run_container_checks(PreflightContext(plan=plan, env={}))
    return {(c.code, c.severity, c.params.get("field"), c.params.get("mount")) for c in checks}


def test_preflight_names_the_mount_for_checkpoints_and_data_outside_the_mounts():
    plan = pf.with_changes(pf.four_node_gb200(), cluster={"container_mounts": [{"source": "/lustre/data",
                                                                                 "target": "/lustre/data"}]})
    found = _container_codes(plan)
    # the suggested mount is the nearest directory that exists here (a missing source fails pyxis)
    assert {(code, severity, field) for code, severity, field, _ in found} == {
        ("container.path_unmounted", "error", "checkpoint.save"),
        ("container.path_unmounted", "error", "checkpoint.load")}  # the data is under /lustre/data
    assert all(Path("/lustre/ckpt/llama3-70b-gb200").is_relative_to(mount.split(":")[0]) for *_, mount in found)
    assert _container_codes(pf.four_node_gb200()) == set()  # /lustre:/lustre covers them all


def test_preflight_warns_about_a_host_checkout_the_image_will_not_see(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    plan = pf.with_changes(pf.four_node_gb200(), launch={"entry": ["python3", str(script)]})
    found = _container_codes(plan)
    assert found == {("container.host_path_unmounted", "warning", "launch.entry", f"{tmp_path}:{tmp_path}")}
    mounted = pf.with_changes(plan, cluster={"container_mounts": [{"source": "/lustre", "target": "/lustre"},
                                                                  {"source": str(tmp_path), "target": str(tmp_path)}]})
    assert _container_codes(mounted) == set()


def test_no_container_no_mount_checks():
    assert _container_codes(pf.two_node_h100()) == set()


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and nm")
def test_fake_pyxis_builds_warning_free_with_the_task_hooks(tmp_path):
    """start-cluster.sh's build line with -Werror; the .so has the hooks that enter the image."""
    source = Path(__file__).resolve().parents[1] / "cluster" / "fake_pyxis.c"
    so = tmp_path / "p.so"
    out = subprocess.run(["gcc", "-x", "c", "-shared", "-fPIC", "-O2", "-Wall", "-Wno-format-truncation", "-Werror",
                          "-o", str(so), str(source)], capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    assert out.returncode == 0, out.stderr
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
    assert "slurm_spank_task_init_privileged" in symbols and "slurm_spank_task_init" in symbols
