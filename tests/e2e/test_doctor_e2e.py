"""`mbridge-launch doctor` and `versions` on the real local cluster (tests/cluster): Slurm
22.05.x, accounting through slurmdbd, topology/none (so no --segment), the fake Pyxis SPANK plugin's
container options, the GRES GPU types of each partition; everything supported, exit 0. The
expected values come from the cluster's own description (DIR/cluster.json), not from doctor."""

from __future__ import annotations

import pytest

from cli_helpers import run_cli

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def report(slurm_cluster):
    proc = run_cli("doctor", "--format", "json", env=slurm_cluster.env)
    assert proc.rc == 0, proc.stdout + proc.stderr
    return proc.json()


def test_slurm_version_and_controller(report, slurm_cluster):
    slurm = report["slurm"]
    assert slurm["state"] == "ok" and slurm["reason"] == ""
    assert slurm["controller_version"] == slurm_cluster.slurm_version
    assert slurm["controller_version"].startswith("22.05.")
    row = next(r for r in report["components"] if r["component"] == "slurm")
    assert row["status"] == "supported" and row["version"] == slurm_cluster.slurm_version


def test_accounting_on_and_sacct_answers(report):
    accounting = report["cluster"]["accounting"]
    assert accounting == {"storage_type": "accounting_storage/slurmdbd", "enabled": True, "sacct": True,
                          "sacct_json": True}
    assert report["cluster"]["features"]["accounting"] is True


def test_no_topology_block_so_no_segment(report):
    cluster = report["cluster"]
    assert cluster["topology"]["block"] is False and cluster["topology"]["plugin"] != "topology/block"
    assert cluster["features"]["segment"] is False


def test_the_fake_pyxis_options_are_present(report):
    from mbridge_launch.knowledge.compatibility import pyxis_options

    pyxis = report["cluster"]["pyxis"]
    assert pyxis["present"] is True
    assert pyxis["options"] == {option: True for option in pyxis_options()}
    assert next(r for r in report["components"] if r["component"] == "pyxis")["status"] == "supported"


def test_gres_gpu_types_per_partition(report, slurm_cluster):
    expected = {name: ({p.gpu_type: p.gpus_per_node} if p.gpus_per_node else {})
                for name, p in slurm_cluster.partitions.items()}
    assert report["cluster"]["gpu_types"] == expected
    assert expected["h100"] == {"h100": 8} and expected["gb200"] == {"gb200": 4}


def test_pmix_and_nothing_unsupported(report):
    assert report["cluster"]["features"]["pmix"] is True  # the Plan's default srun --mpi=pmix
    assert report["cluster"]["errors"] == []
    assert report["unsupported"] == [] and report["exit_code"] == 0


def test_text_report(slurm_cluster):
    proc = run_cli("doctor", env=slurm_cluster.env)
    assert proc.rc == 0, proc.stdout + proc.stderr
    assert f"Slurm {slurm_cluster.slurm_version}: the controller answers" in proc.stdout
    assert "accounting: on (accounting_storage/slurmdbd)" in proc.stdout
    assert "--segment unavailable" in proc.stdout
    assert "--container-image" in proc.stdout
    assert "partition gb200: GPU types gb200 x4" in proc.stdout
    assert "doctor: everything found is supported" in proc.stdout
    zh = run_cli("doctor", "--lang", "zh", env=slurm_cluster.env)
    assert zh.rc == 0 and "作业记账：开启" in zh.stdout


def test_versions_prints_the_version_found(slurm_cluster):
    proc = run_cli("versions", env=slurm_cluster.env)
    assert proc.rc == 0
    assert f"Slurm found: {slurm_cluster.slurm_version}" in proc.stdout
    info = run_cli("versions", "--format", "json", env=slurm_cluster.env).json()
    assert info["slurm"] == slurm_cluster.slurm_version and info["slurm_state"]["state"] == "ok"


def test_a_pyxis_lacking_an_option_the_executors_emit_is_unsupported(slurm_cluster, tmp_path):
    """The real cluster seen through an srun whose --help lacks --container-workdir (a Pyxis older
    than the flags the executors write): doctor names it unsupported and exits 1."""
    import shutil

    real = shutil.which("srun", path=slurm_cluster.env.get("PATH"))
    assert real
    wrapper = tmp_path / "bin" / "srun"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = --help ]; then "{real}" --help | grep -v -- --container-workdir; '
                       f'else exec "{real}" "$@"; fi\n', encoding="utf-8")
    wrapper.chmod(0o755)
    env = dict(slurm_cluster.env, PATH=f"{wrapper.parent}:{slurm_cluster.env.get('PATH', '')}")
    proc = run_cli("doctor", "--format", "json", env=env)
    assert proc.rc == 1, proc.stdout + proc.stderr
    report = proc.json()
    assert report["cluster"]["pyxis"]["options"]["--container-workdir"] is False
    assert report["cluster"]["pyxis"]["options"]["--container-image"] is True
    assert report["unsupported"] == ["pyxis"] and report["exit_code"] == 1
    text = run_cli("doctor", env=env)
    assert text.rc == 1 and "doctor: unsupported: pyxis" in text.stdout
    assert "srun --help lacks --container-workdir" in text.stdout
