"""Catalogs live with the user (issue 35): `catalog sync` writes to the site folder
($MBRIDGE_LAUNCH_CATALOGS), else the user's data folder ($XDG_DATA_HOME/mbridge-launch/catalogs),
never into the package; lookups search site, user, package (first wins); `--catalog FILE`;
`versions` and `doctor` say where each catalog comes from; one line for each bad input.

The synced tree is the miniature Megatron Bridge of tests/fixtures/catalog/mini_bridge.py
(version 9.8.7); the committed 0.7.0 tree fixture has its own test below when it is present."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from mbridge_launch.base.data_dirs import CATALOGS_ENV, catalog_folders, sync_target_dir, user_catalog_dir
from mbridge_launch.base.errors import UserError
from mbridge_launch.base.resources import catalog_dir
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.catalog import available_versions, catalog_entries, find_catalog, load_catalog

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "catalog" / "megatron-bridge-0.6.2.json"
TREE_070 = REPO / "tests" / "fixtures" / "megatron-bridge-0.7.0-tree"


def _mini():
    path = REPO / "tests" / "fixtures" / "catalog" / "mini_bridge.py"
    spec = importlib.util.spec_from_file_location("mini_bridge_locations", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mini = _mini()


def _package_state() -> dict[str, str]:
    """Every file of the package's catalog folder and the digest of its bytes."""
    folder = catalog_dir()
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def data_home(tmp_path, monkeypatch) -> Path:
    """An empty XDG_DATA_HOME, no site folder."""
    home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv(CATALOGS_ENV, raising=False)
    return home


def _with_version(version: str, target: Path) -> Path:
    """The shipped 0.6.2 catalog saved as another version (what a sync of that release writes)."""
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    data["megatron_bridge_version"] = version
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"megatron-bridge-{version}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- where things are ------------------------------------------------------------------------------
def test_folders_follow_xdg_and_the_site_variable(tmp_path):
    env = {"HOME": str(tmp_path / "home")}
    assert user_catalog_dir(env) == tmp_path / "home" / ".local" / "share" / "mbridge-launch" / "catalogs"
    env["XDG_DATA_HOME"] = "relative/path"  # invalid by the XDG spec: ignored
    assert user_catalog_dir(env) == tmp_path / "home" / ".local" / "share" / "mbridge-launch" / "catalogs"
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    assert sync_target_dir(env) == tmp_path / "xdg" / "mbridge-launch" / "catalogs"
    env[CATALOGS_ENV] = str(tmp_path / "site")
    assert sync_target_dir(env) == tmp_path / "site"
    assert [(f.origin, f.path) for f in catalog_folders(env)] == [
        ("site", tmp_path / "site"), ("user", tmp_path / "xdg" / "mbridge-launch" / "catalogs"),
        ("package", catalog_dir())]


def test_first_folder_wins_and_shadows_the_rest(data_home, tmp_path, monkeypatch):
    user = data_home / "mbridge-launch" / "catalogs"
    assert find_catalog("0.6.2").origin == "package"  # nothing synced yet: the shipped one
    user_copy = _with_version("0.6.2", user)
    _with_version("0.6.3", user)
    entry = find_catalog("0.6.2")
    assert (entry.origin, entry.path, entry.shadowed) == ("user", user_copy, (catalog_dir() / SHIPPED.name,))
    assert available_versions() == ["0.6.2", "0.6.3"]
    assert load_catalog().version == "0.6.3"  # the newest of all folders is the default
    assert load_catalog().origin == "user"
    site = tmp_path / "site"
    monkeypatch.setenv(CATALOGS_ENV, str(site))
    site_copy = _with_version("0.6.2", site)
    entry = find_catalog("0.6.2")
    assert (entry.origin, entry.path) == ("site", site_copy)
    assert entry.shadowed == (user_copy, catalog_dir() / SHIPPED.name)
    assert load_catalog("0.6.2").origin == "site"


# --- sync writes to the user, never to the package -------------------------------------------------
def test_sync_writes_to_the_data_folder_and_list_reads_it_back(data_home, tmp_path, capsys):
    tree = mini.write_tree(tmp_path / "tree")
    before = _package_state()
    assert main(["catalog", "sync", "--from", str(tree), "--format", "json"]) == 0
    written = Path(json.loads(capsys.readouterr().out)["path"])
    assert written == data_home / "mbridge-launch" / "catalogs" / f"megatron-bridge-{mini.VERSION}.json"
    assert written.is_file()
    assert _package_state() == before  # nothing added to or changed in the package's folder
    assert main(["catalog", "list", "--catalog-version", mini.VERSION, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["catalog"] == {"source": written.name, "version": mini.VERSION, "origin": "user", "path": str(written)}
    assert {r["name"] for r in listed["recipes"] if r["kind"] == "library"} >= {"toy_7b_pretrain_8gpu_h100_bf16_config"}
    assert main(["catalog", "list", "--catalog-version", mini.VERSION]) == 0
    text = capsys.readouterr().out
    assert f"from the user data folder: {written}" in text
    assert main(["catalog", "show", "toy_7b_pretrain_config", "--catalog-version", mini.VERSION, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "toy_7b_pretrain_8gpu_h100_bf16_config"


def test_sync_writes_to_the_site_folder_when_it_is_set(data_home, tmp_path, monkeypatch, capsys):
    tree = mini.write_tree(tmp_path / "tree")
    monkeypatch.setenv(CATALOGS_ENV, str(tmp_path / "shared" / "catalogs"))
    assert main(["catalog", "sync", "--from", str(tree)]) == 0
    assert (tmp_path / "shared" / "catalogs" / f"megatron-bridge-{mini.VERSION}.json").is_file()
    assert not (data_home / "mbridge-launch").exists()
    assert find_catalog(mini.VERSION).origin == "site"


def test_catalog_file_option_reads_one_file(data_home, tmp_path, capsys):
    tree = mini.write_tree(tmp_path / "tree")
    assert main(["catalog", "sync", "--from", str(tree), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    path = tmp_path / "out" / f"megatron-bridge-{mini.VERSION}.json"
    assert mini.VERSION not in available_versions()  # --out is not a searched folder
    assert main(["catalog", "list", "--catalog", str(path), "--kind", "library", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["catalog"]["origin"], listed["catalog"]["version"], len(listed["recipes"])) == ("file", mini.VERSION, 7)
    with pytest.raises(SystemExit):  # one or the other
        main(["catalog", "list", "--catalog", str(path), "--catalog-version", "0.6.2"])


def test_sync_from_an_installed_megatron_bridge(data_home, tmp_path, monkeypatch, capsys):
    """--python PY: that Python is asked where megatron.bridge lies (never importing it); here the
    miniature tree on PYTHONPATH plays the installed package."""
    tree = mini.write_tree(tmp_path / "site-packages")
    (tree / "megatron" / "bridge" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(tree))
    assert main(["catalog", "sync", "--python", sys.executable, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["version"], result["library"]) == (mini.VERSION, 7)
    assert Path(result["path"]).parent == data_home / "mbridge-launch" / "catalogs"


# --- one line for each bad input -------------------------------------------------------------------
def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_not_a_megatron_bridge_tree(data_home, tmp_path, capsys):
    (tmp_path / "some-repo" / "src").mkdir(parents=True)
    err = _one_line_error(capsys, ["catalog", "sync", "--from", str(tmp_path / "some-repo")])
    assert "is neither a Megatron Bridge wheel nor a folder holding megatron/bridge" in err


def test_python_without_megatron_bridge(data_home, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    err = _one_line_error(capsys, ["catalog", "sync", "--python", sys.executable])
    assert "Megatron Bridge is not installed in" in err
    err = _one_line_error(capsys, ["catalog", "sync", "--python", str(tmp_path / "no-python")])
    assert "cannot run" in err


def test_unwritable_target(data_home, tmp_path, capsys):
    tree = mini.write_tree(tmp_path / "tree")
    (tmp_path / "a-file").write_text("x")
    err = _one_line_error(capsys, ["catalog", "sync", "--from", str(tree), "--out", str(tmp_path / "a-file" / "sub")])
    assert "cannot write the catalog into" in err and "a-file" in err


def test_unreadable_data_folder(data_home, tmp_path, monkeypatch, capsys):
    """A file where the site folder should be (also what a folder without read permission gives;
    the suite may run as root, which reads any folder)."""
    (tmp_path / "not-a-folder").write_text("x")
    monkeypatch.setenv(CATALOGS_ENV, str(tmp_path / "not-a-folder"))
    err = _one_line_error(capsys, ["catalog", "list"])
    assert f"cannot read the catalog folder {tmp_path / 'not-a-folder'}: not a folder" in err
    # versions and doctor report it and still list the other folders' catalogs
    assert main(["versions", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "0.6.2" in info["megatron_bridge_catalogs"]
    assert any("not-a-folder" in e for e in info["catalogs"]["errors"])
    if os.geteuid() != 0:
        (tmp_path / "locked").mkdir(mode=0o000)
        monkeypatch.setenv(CATALOGS_ENV, str(tmp_path / "locked"))
        with pytest.raises(UserError) as info_err:
            catalog_entries()
        assert info_err.value.key == "catalog.folder_unreadable"


@pytest.mark.parametrize("content, reason", [
    ('{"recipes": [', "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"recipes": []}', "megatron_bridge_version"),
    (b"\xff\xfe", "not UTF-8 text (byte 0xff at offset 0)"),
])
def test_corrupt_catalog_file(data_home, capsys, content, reason):
    folder = data_home / "mbridge-launch" / "catalogs"
    folder.mkdir(parents=True)
    path = folder / "megatron-bridge-0.6.9.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    err = _one_line_error(capsys, ["catalog", "list", "--catalog-version", "0.6.9"])
    assert str(path) in err and reason in err


def test_a_renamed_catalog_is_refused(data_home, capsys):
    """A file named for one version holding another: a Plan would record one and plan with the other."""
    folder = data_home / "mbridge-launch" / "catalogs"
    path = _with_version("0.6.2", folder).rename(folder / "megatron-bridge-0.7.9.json")
    err = _one_line_error(capsys, ["catalog", "list", "--catalog-version", "0.7.9"])
    assert str(path) in err and "megatron_bridge_version is 0.6.2, the file name says 0.7.9" in err


# --- versions, doctor and a Plan ---------------------------------------------------------------------
def test_versions_say_where_each_catalog_comes_from(data_home, capsys):
    user_copy = _with_version("0.6.2", data_home / "mbridge-launch" / "catalogs")
    assert main(["versions", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)["catalogs"]
    assert report["catalogs"] == [{"version": "0.6.2", "origin": "user", "path": str(user_copy),
                                   "shadows": [str(catalog_dir() / SHIPPED.name)]}]
    assert report["sync_writes_to"] == str(data_home / "mbridge-launch" / "catalogs")
    assert main(["versions"]) == 0
    text = capsys.readouterr().out
    assert f"0.6.2: user data folder, {user_copy}" in text and f"shadows {catalog_dir() / SHIPPED.name}" in text
    assert main(["versions", "--lang", "zh"]) == 0
    assert f"0.6.2：用户数据文件夹，{user_copy}" in capsys.readouterr().out


def test_a_plan_finds_its_catalog_in_the_data_folder(data_home, tmp_path, capsys):
    """recommend --catalog-version V records V in the Plan; the Plan's later readers (submit's
    trainer line, preflight) find V in the user's folder; without it preflight names the versions."""
    _with_version("0.6.3", data_home / "mbridge-launch" / "catalogs")
    plan = tmp_path / "plan.yaml"
    assert main(["recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100",
                 "--catalog-version", "0.6.3", "-o", str(plan)]) == 0
    capsys.readouterr()
    from mbridge_launch.plan.model import load_plan

    loaded = load_plan(plan)
    assert (loaded.catalog.version, loaded.catalog.source) == ("0.6.3", "megatron-bridge-0.6.3.json")
    assert load_catalog(loaded.catalog.version).origin == "user"  # the lookup trainer_args and preflight make
    assert main(["preflight", str(plan), "--no-cluster", "--format", "json"]) in (0, 1)
    checks = json.dumps(json.loads(capsys.readouterr().out))
    assert "plan.catalog_skipped" not in checks and "group_crashed" not in checks
    os.rename(data_home, data_home.with_name("moved"))
    assert main(["preflight", str(plan), "--no-cluster", "--format", "json"]) in (0, 1)
    checks = json.dumps(json.loads(capsys.readouterr().out))
    assert "plan.catalog_skipped" in checks and "no catalog for Megatron Bridge 0.6.3; available: 0.6.2" in checks


def test_doctor_says_where_each_catalog_comes_from(data_home, tmp_path, monkeypatch, capsys):
    user_copy = _with_version("0.6.3", data_home / "mbridge-launch" / "catalogs")
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no Slurm: doctor still reports the rest
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert main(["doctor", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["megatron_bridge_catalogs"] == ["0.6.2", "0.6.3"]
    assert [(c["version"], c["origin"], c["path"]) for c in report["catalogs"]["catalogs"]] == [
        ("0.6.2", "package", str(catalog_dir() / SHIPPED.name)), ("0.6.3", "user", str(user_copy))]
    main(["doctor"])
    assert f"0.6.3: user data folder, {user_copy}" in capsys.readouterr().out


def test_a_resubmission_sees_the_same_catalog_folders(data_home, tmp_path, monkeypatch):
    """The watcher job resubmits on a compute node through preflight and the entry command, which
    load the Plan's catalog: its export list carries the variables that locate a synced one."""
    from mbridge_launch.gate.watcher_job import watcher_export_names
    from plan_fixtures import single_node_h100, with_changes

    monkeypatch.setenv(CATALOGS_ENV, str(tmp_path / "site"))
    plan = with_changes(single_node_h100(), auto_rollback={"enabled": True, "max_rollbacks": 0})
    names = watcher_export_names(plan)
    assert "XDG_DATA_HOME" in names and CATALOGS_ENV in names


def test_files_beside_a_synced_catalog_are_found_there(data_home):
    """catalog verify's reviewed differences and the override keys' field tree of a synced release
    sit beside its catalog in the user's folder; a shipped release's stay in the package."""
    from mbridge_launch.catalog_sync.conformance import reviewed_file
    from mbridge_launch.knowledge.config_fields import fields_file

    folder = data_home / "mbridge-launch" / "catalogs"
    folder.mkdir(parents=True)
    (folder / "reviewed-differences-0.7.0.yaml").write_text("differences: []\n")
    (folder / "config-fields-0.7.0.json").write_text("{}")
    assert reviewed_file("0.7.0") == folder / "reviewed-differences-0.7.0.yaml"
    assert fields_file("0.7.0") == folder / "config-fields-0.7.0.json"
    assert reviewed_file("0.6.2") == catalog_dir() / "reviewed-differences-0.6.2.yaml"
    assert fields_file("0.6.2") == catalog_dir() / "config-fields-0.6.2.json"


def test_verify_refuses_a_corrupt_catalog_in_one_line(data_home, capsys):
    folder = data_home / "mbridge-launch" / "catalogs"
    folder.mkdir(parents=True)
    (folder / "megatron-bridge-0.6.9.json").write_text('{"recipes": [')
    err = _one_line_error(capsys, ["catalog", "verify", "--catalog-version", "0.6.9"])
    assert "megatron-bridge-0.6.9.json is invalid: not valid JSON" in err
