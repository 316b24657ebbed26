"""The permission policy (mbridge_launch/policy): parsing, every bad value named by file and key,
strictest-wins merging per key, which files HOME / XDG_CONFIG_HOME / the working directory select,
the conservative defaults without any policy, the preflight checks and the ledger's daily usage."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.policy import files as F
from mbridge_launch.policy.cost import gpu_hours
from mbridge_launch.policy.files import Policy, load_policy, policy_paths


@pytest.fixture(autouse=True)
def _no_real_site_policy(monkeypatch, tmp_path):
    """/etc/mbridge-launch/policy.yaml of the machine running the tests stays out of them."""
    monkeypatch.setattr(F, "SITE_POLICY", str(tmp_path / "etc-policy-absent.yaml"))


def _layout(tmp_path: Path, site: str | None = None, user: str | None = None, project: str | None = None,
            xdg: bool = False) -> tuple[Path, dict[str, str]]:
    """Files in tmp dirs: (the working directory, the environment that selects them)."""
    home, proj, xdg_dir = tmp_path / "home", tmp_path / "proj", tmp_path / "xdg"
    proj.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "MBRIDGE_LAUNCH_SITE_POLICY": str(tmp_path / "site.yaml")}
    if xdg:
        env["XDG_CONFIG_HOME"] = str(xdg_dir)
    if site is not None:
        (tmp_path / "site.yaml").write_text(site)
    if user is not None:
        where = (xdg_dir if xdg else home / ".config") / "mbridge-launch" / "policy.yaml"
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(user)
    if project is not None:
        (proj / ".mbridge-launch.yaml").write_text(project)
    return proj, env


def _error(tmp_path: Path, text: str) -> UserError:
    proj, env = _layout(tmp_path, project=text)
    with pytest.raises(UserError) as info:
        load_policy(proj, env)
    return info.value


# ---------------------------------------------------------------------- parsing
def test_every_key_is_read_and_normalised(tmp_path):
    proj, env = _layout(tmp_path, project="""
max_gpus: 8
max_nodes: 2
max_time: "1-00:00:00"
max_gpu_hours: 64.5
max_gpu_hours_per_day: 200
accounts: [a1, a2]
partitions: [gpu]
allow_benchmark_recipes: false
auto_rollback: {allow: true, max_per_run: 2}
rollback_dirs: [/scratch/me/]
typed_confirmation_above_gpu_hours: 10
""")
    policy = load_policy(proj, env)
    values = {k: lim.value for k, lim in policy.limits.items()}
    assert values == {"max_gpus": 8, "max_nodes": 2, "max_time": 86400, "max_gpu_hours": 64.5,
                      "max_gpu_hours_per_day": 200.0, "accounts": ("a1", "a2"), "partitions": ("gpu",),
                      "allow_benchmark_recipes": False, "auto_rollback.allow": True, "auto_rollback.max_per_run": 2,
                      "rollback_dirs": ("/scratch/me",), "typed_confirmation_above_gpu_hours": 10.0}
    project = str(proj / ".mbridge-launch.yaml")
    assert policy.files == [project] and {lim.source for lim in policy.limits.values()} == {project}
    assert "max_time 1-00:00:00 (from " + project + ")" in "\n".join(policy.summary_lines("en"))


def test_an_empty_file_is_read_and_sets_nothing(tmp_path):
    proj, env = _layout(tmp_path, project="# nothing yet\n")
    policy = load_policy(proj, env)
    assert policy.files == [str(proj / ".mbridge-launch.yaml")] and policy.limits == {}


@pytest.mark.parametrize("text, key", [
    ("max_gpus: -1", "max_gpus"),
    ("max_gpus: 2.5", "max_gpus"),
    ("max_gpus: true", "max_gpus"),
    ("max_nodes: '4'", "max_nodes"),
    ("max_time: 4:00:00", "max_time"),  # YAML 1.1: an unquoted base-60 integer
    ("max_time: '99:99:99'", "max_time"),
    ("max_time: UNLIMITED", "max_time"),
    ("max_time: [1]", "max_time"),
    ("max_gpu_hours: .nan", "max_gpu_hours"),
    ("max_gpu_hours: -3", "max_gpu_hours"),
    ("max_gpu_hours_per_day: .inf", "max_gpu_hours_per_day"),
    ("typed_confirmation_above_gpu_hours: ten", "typed_confirmation_above_gpu_hours"),
    ("accounts: a1", "accounts"),
    ("partitions: [gpu, 3]", "partitions"),
    ("partitions: ['']", "partitions"),
    ("allow_benchmark_recipes: 1", "allow_benchmark_recipes"),
    ("allow_benchmark_recipes: 'no'", "allow_benchmark_recipes"),
    ("auto_rollback: true", "auto_rollback"),
    ("auto_rollback: {allow: 'yes'}", "auto_rollback.allow"),
    ("auto_rollback: {max_per_run: -1}", "auto_rollback.max_per_run"),
    ("auto_rollback: {max: 2}", "auto_rollback.max"),
    ("rollback_dirs: [relative/dir]", "rollback_dirs"),
    ("rollback_dirs: /abs", "rollback_dirs"),
    ("max_gpu: 8", "max_gpu"),  # a typo of a key
])
def test_every_bad_value_names_the_file_the_key_and_what_is_valid(tmp_path, text, key):
    error = _error(tmp_path, text + "\n")
    assert error.key == "policy.invalid" and error.exit_code == 2
    assert error.params["path"] == str(tmp_path / "proj" / ".mbridge-launch.yaml")
    assert error.params["name"] == key and error.params["valid"]
    line = error.render("en")
    assert str(tmp_path / "proj" / ".mbridge-launch.yaml") in line and key in line and "\n" not in line


def test_an_unknown_key_lists_the_valid_keys(tmp_path):
    error = _error(tmp_path, "max_gpu: 8\n")
    assert error.params["valid"] == ", ".join(F.KEYS)
    sub = _error(tmp_path, "auto_rollback: {max: 2}\n")
    assert sub.params["valid"] == "allow, max_per_run"


@pytest.mark.parametrize("text, key", [
    ("[max_gpus, 8]\n", "policy.not_mapping"),
    ("just text\n", "policy.not_mapping"),
    ("max_gpus: [\n", "yaml.invalid"),
    ("max_gpus: 1\nmax_gpus: 2\n", "yaml.duplicate_key"),
])
def test_a_file_that_is_not_a_mapping_of_limits_is_refused_by_name(tmp_path, text, key):
    error = _error(tmp_path, text)
    assert error.key == key and error.exit_code == 2
    assert str(tmp_path / "proj" / ".mbridge-launch.yaml") in error.render("en")


def test_too_large_and_not_regular_files_are_refused_not_skipped(tmp_path):
    error = _error(tmp_path, "# x\n" * (F.MAX_BYTES // 4 + 1))
    assert error.key == "file.too_large"
    proj, env = _layout(tmp_path)
    (proj / ".mbridge-launch.yaml").unlink()
    (proj / ".mbridge-launch.yaml").mkdir()  # a directory where the file should be
    with pytest.raises(UserError) as info:
        load_policy(proj, env)
    assert info.value.key == "file.not_regular" and str(proj / ".mbridge-launch.yaml") in info.value.render("en")
    (proj / ".mbridge-launch.yaml").rmdir()
    os.symlink(tmp_path / "nowhere.yaml", proj / ".mbridge-launch.yaml")  # dangling: refused, not missing
    with pytest.raises(UserError):
        load_policy(proj, env)


# ---------------------------------------------------------------------- merging
def test_strictest_file_wins_per_key(tmp_path):
    proj, env = _layout(
        tmp_path,
        site='max_gpus: 16\nmax_time: "04:00:00"\naccounts: [a1, a2, a3]\nallow_benchmark_recipes: true\n'
             "auto_rollback: {allow: true, max_per_run: 5}\ntyped_confirmation_above_gpu_hours: 50\n",
        user="max_gpus: 8\nmax_nodes: 4\naccounts: [a2, a3]\nauto_rollback: {max_per_run: 2}\n",
        project='max_gpus: 32\nmax_time: "02:00:00"\naccounts: [a3, a1]\nallow_benchmark_recipes: false\n'
                "typed_confirmation_above_gpu_hours: 80\n")
    site, user, project = (str(tmp_path / "site.yaml"), str(tmp_path / "home/.config/mbridge-launch/policy.yaml"),
                           str(proj / ".mbridge-launch.yaml"))
    policy = load_policy(proj, env)
    assert policy.files == [site, user, project]
    got = {k: (lim.value, lim.source) for k, lim in policy.limits.items()}
    assert got["max_gpus"] == (8, user)  # the minimum, from the file that set it
    assert got["max_nodes"] == (4, user)  # set by one file only
    assert got["max_time"] == (7200, project)
    assert got["accounts"][0] == ("a3",)  # the intersection of the lists that are set
    assert policy.refusing_source("accounts", "a1") == user and policy.refusing_source("accounts", "a2") == project
    assert got["allow_benchmark_recipes"] == (False, project)  # AND: the file that forbids
    assert got["auto_rollback.allow"] == (True, site)
    assert got["auto_rollback.max_per_run"] == (2, user)
    assert got["typed_confirmation_above_gpu_hours"] == (50.0, site)
    assert policy.max_auto_rollbacks(3) == (2, user) and policy.max_auto_rollbacks(1) == (1, None)


def test_equal_limits_keep_the_site_file_as_their_source(tmp_path):
    proj, env = _layout(tmp_path, site="max_gpus: 8\n", project="max_gpus: 8\n")
    assert load_policy(proj, env).get("max_gpus").source == str(tmp_path / "site.yaml")


def test_rollback_dirs_allow_a_directory_only_if_every_file_does(tmp_path):
    (tmp_path / "scratch/team/me").mkdir(parents=True)
    (tmp_path / "scratch/other").mkdir(parents=True)
    proj, env = _layout(tmp_path, site=f"rollback_dirs: [{tmp_path}/scratch]\n",
                        project=f"rollback_dirs: [{tmp_path}/scratch/team]\n")
    policy = load_policy(proj, env)
    save = tmp_path / "scratch/team/me"
    assert policy.rollback_dir_allowed(save, None) == (True, None)
    assert policy.rollback_dir_allowed(tmp_path / "scratch/other", None) == (False, str(proj / ".mbridge-launch.yaml"))
    assert policy.rollback_dir_allowed(tmp_path / "elsewhere", tmp_path / "elsewhere") == (False, str(tmp_path / "site.yaml"))
    os.symlink(tmp_path / "scratch/other", tmp_path / "scratch/team/link")  # resolved: no escape through a link
    assert policy.rollback_dir_allowed(tmp_path / "scratch/team/link", None)[0] is False
    lines = policy.summary_lines("en")
    assert any(f"{tmp_path}/scratch (from {tmp_path / 'site.yaml'})" in line for line in lines)


def test_auto_rollback_forbidden_by_any_file(tmp_path):
    proj, env = _layout(tmp_path, site="auto_rollback: {allow: true}\n", user="auto_rollback: {allow: false}\n")
    policy = load_policy(proj, env)
    user = str(tmp_path / "home/.config/mbridge-launch/policy.yaml")
    assert policy.auto_rollback_allowed(True) == (False, user)
    assert policy.auto_rollback_allowed(False) == (False, None)


# ---------------------------------------------------------------------- which files
def test_home_xdg_config_home_and_cwd_decide_the_files(tmp_path):
    proj, env = _layout(tmp_path, user="max_gpus: 4\n", xdg=True)
    assert policy_paths(proj, env) == [Path(F.SITE_POLICY), tmp_path / "site.yaml",
                                       tmp_path / "xdg/mbridge-launch/policy.yaml", proj / ".mbridge-launch.yaml"]
    assert load_policy(proj, env).get("max_gpus").value == 4
    # XDG_CONFIG_HOME empty: $HOME/.config, where there is no file
    assert load_policy(proj, {**env, "XDG_CONFIG_HOME": ""}).files == []
    assert policy_paths(proj, {**env, "XDG_CONFIG_HOME": ""})[2] == tmp_path / "home/.config/mbridge-launch/policy.yaml"
    # another working directory: another project file
    other = tmp_path / "other"
    other.mkdir()
    (other / ".mbridge-launch.yaml").write_text("max_nodes: 1\n")
    assert set(load_policy(other, env).limits) == {"max_gpus", "max_nodes"}
    assert set(load_policy(proj, env).limits) == {"max_gpus"}
    # no HOME and no XDG_CONFIG_HOME: no user file at all
    assert len(policy_paths(proj, {"MBRIDGE_LAUNCH_SITE_POLICY": ""})) == 2


def test_the_site_variable_adds_a_file_and_cannot_hide_the_etc_one(tmp_path, monkeypatch):
    etc = tmp_path / "etc.yaml"
    etc.write_text("max_gpus: 2\n")
    monkeypatch.setattr(F, "SITE_POLICY", str(etc))
    proj, env = _layout(tmp_path, site="max_gpus: 64\n")
    policy = load_policy(proj, env)
    assert policy.get("max_gpus").value == 2 and policy.files[0] == str(etc)
    assert load_policy(proj, {**env, "MBRIDGE_LAUNCH_SITE_POLICY": str(tmp_path / "none.yaml")}).get("max_gpus").value == 2


# ---------------------------------------------------------------------- defaults
def test_no_policy_means_the_conservative_defaults(tmp_path):
    proj, env = _layout(tmp_path)
    policy = load_policy(proj, env)
    assert policy.files == [] and policy.limits == {} and policy.summary_lines("en") == []
    assert policy.auto_rollback_allowed(False) == (False, None)  # nothing automatic unless the Plan enables it
    assert policy.auto_rollback_allowed(True) == (True, None)
    assert policy.max_auto_rollbacks(10) == (F.DEFAULT_MAX_AUTO_ROLLBACKS, None) == (3, None)
    own = tmp_path / "ckpt"
    assert policy.rollback_dir_allowed(own, own) == (True, None)
    assert policy.rollback_dir_allowed(tmp_path / "someone-else", own) == (False, None)


def test_gpu_hours_is_gpus_times_the_time_limit():
    assert gpu_hours(16, "02:30:00") == 40.0
    assert gpu_hours(8, "1-00:00:00") == 192.0
    assert math.isinf(gpu_hours(8, "UNLIMITED"))


# ---------------------------------------------------------------------- preflight and the card
def _plan(tmp_path, **changes):
    from plan_fixtures import edit, single_node_h100

    return edit(single_node_h100(), **changes)


def _policy_checks(plan, policy, used=None):
    from mbridge_launch.preflight.context import PreflightContext
    from mbridge_launch.preflight.policy_checks import run_policy_checks

    return run_policy_checks(PreflightContext(plan=plan, policy=policy, gpu_hours_used=used))


def test_preflight_checks_name_limit_value_and_file(tmp_path):
    proj, env = _layout(tmp_path, site="max_gpus: 4\nmax_gpu_hours_per_day: 40\naccounts: [other]\n")
    policy = load_policy(proj, env)
    plan = _plan(tmp_path, **{"cluster.nodes": 1, "cluster.gpus_per_node": 8, "cluster.time": "04:00:00"})
    checks = {c.code: c for c in _policy_checks(plan, policy, used=lambda: 10.0)}
    assert checks["policy.applied"].severity == "info"
    gpus = checks["policy.max_gpus"]
    assert gpus.severity == "error" and gpus.params["value"] == 8 and gpus.params["allowed"] == "4"
    assert gpus.params["path"] == str(tmp_path / "site.yaml") and "max_gpus" in gpus.message("en")
    day = checks["policy.max_gpu_hours_per_day"]
    assert (day.params["used"], day.params["value"], day.params["total"]) == (10.0, 32.0, 42.0)
    assert "policy.account" in checks
    # usage below the limit: no error
    assert "policy.max_gpu_hours_per_day" not in {c.code for c in _policy_checks(plan, policy, used=lambda: 8.0)}


def test_no_policy_file_adds_no_check_and_no_card_lines(tmp_path):
    from mbridge_launch.gate.card import render_card

    plan = _plan(tmp_path)
    assert _policy_checks(plan, Policy()) == []
    assert render_card(plan, executor="sbatch", script_path="x") == render_card(plan, executor="sbatch",
                                                                                script_path="x", policy=Policy())
    proj, env = _layout(tmp_path, project="max_nodes: 9\n")
    card = render_card(plan, executor="sbatch", script_path="x", policy=load_policy(proj, env))
    assert f"max_nodes 9 (from {proj / '.mbridge-launch.yaml'})" in card


def test_the_typed_confirmation_level_is_the_lower_of_option_and_policy(tmp_path, monkeypatch):
    from mbridge_launch.gate.submit import effective_threshold

    monkeypatch.delenv("MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS", raising=False)
    proj, env = _layout(tmp_path, project="typed_confirmation_above_gpu_hours: 5\n")
    policy = load_policy(proj, env)
    assert effective_threshold(None, policy) == 5.0
    assert effective_threshold(2.0, policy) == 2.0
    assert effective_threshold(None, Policy()) == 100.0


def test_above_the_policys_level_only_the_typed_run_name_confirms(tmp_path, monkeypatch):
    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.gate.submit import GateOptions, confirm_submission

    monkeypatch.delenv("MBRIDGE_LAUNCH_CONFIRM_GPU_HOURS", raising=False)
    plan = _plan(tmp_path, **{"cluster.nodes": 1, "cluster.gpus_per_node": 8, "cluster.time": "01:00:00"})  # 8 GPU-h
    proj, env = _layout(tmp_path, project="typed_confirmation_above_gpu_hours: 1\n")
    policy = load_policy(proj, env)

    def typed(answer):
        return GateOptions(ask=lambda prompt: answer, isatty=lambda: True)

    assert confirm_submission(plan, typed("yes"), Policy()) == "typed-yes"  # under the default 100
    with pytest.raises(CheckFailed):
        confirm_submission(plan, typed("yes"), policy)
    assert confirm_submission(plan, typed(plan.name), policy) == "typed-name"


# ---------------------------------------------------------------------- the ledger's daily usage
def test_daily_usage_counts_this_users_recent_submissions(tmp_path):
    from mbridge_launch.runs.ledger import Ledger
    from mbridge_launch.runs.usage import _user, gpu_hours_last_day

    cluster = {"nodes": 2, "gpus_per_node": 8, "time": "01:30:00"}  # 24 GPU-hours each
    with Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        def run(name, state="running", who=None):
            record = ledger.begin_submission(name=name, plan_hash=name, plan_yaml="x", executor="sbatch",
                                             cluster=cluster)
            ledger.record_confirmation(record.id, "submit", "flag-yes")
            if state == "submit_failed":
                ledger.mark_submit_failed(record.id, "refused")
            else:
                ledger.mark_submitted(record.id, ["1"])
            return record

        run("mine")
        run("refused", state="submit_failed")  # never ran: counts nothing
        other = run("theirs")
        ledger.conn.execute("UPDATE confirmations SET user='someone-else' WHERE run_id=?", (other.id,))
        ledger.conn.commit()
        assert gpu_hours_last_day(ledger) == 24.0
        assert gpu_hours_last_day(ledger, user="someone-else") == 24.0
        assert gpu_hours_last_day(ledger, now=time.time() + 25 * 3600) == 0.0  # older than a day
        assert _user()


def test_the_sample_policy_file_is_valid(tmp_path):
    sample = Path(__file__).resolve().parents[2] / "docs" / "policy.example.yaml"
    proj, env = _layout(tmp_path, project=sample.read_text())
    assert set(load_policy(proj, env).limits) == {*F.KEYS, "auto_rollback.allow", "auto_rollback.max_per_run"} - {"auto_rollback"}


def test_a_removed_working_directory_has_no_project_file(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    _proj, env = _layout(tmp_path, site="max_gpus: 2\n")
    assert load_policy(None, env).files == [str(tmp_path / "site.yaml")]
