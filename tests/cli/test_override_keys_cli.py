"""Override keys on the command line and in a Plan, against the release's real configuration:
recommend refuses an unknown key (exit 2, one line, did you mean), preflight and a submit's
preflight refuse a Plan that holds one (an error naming the key), and Hydra's `+key=value` adds a
key on purpose: recorded as an added key and passed to run_recipe.py with its `+`."""

from __future__ import annotations

import json
import shlex

import pytest

from cli_helpers import one_line_error

REQUEST = ("recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100")


@pytest.mark.parametrize(("lang", "line"), [
    ("en", "error: unknown setting train.trian_iters; did you mean train.train_iters?"),
    ("zh", "错误：未知设置 train.trian_iters；您是否想写 train.train_iters？"),
])
def test_recommend_refuses_an_unknown_key_with_did_you_mean(mbl, tmp_path, lang, line):
    result = mbl.run(*REQUEST, "train.trian_iters=100", "-o", tmp_path / "plan.yaml", cwd=tmp_path, lang=lang)
    assert one_line_error(result) == line
    assert not (tmp_path / "plan.yaml").exists()  # nothing written for a refused request


def test_recommend_checks_model_keys_against_the_recipes_provider(mbl, tmp_path):
    result = mbl.run(*REQUEST, "model.seq_lenght=8192", cwd=tmp_path)
    assert one_line_error(result) == ("error: unknown setting model.seq_lenght (model provider GPTModelProvider); "
                                      "did you mean model.seq_length?")


def _plan_with_added_key(mbl, tmp_path):
    plan = tmp_path / "plan.yaml"
    result = mbl.run(*REQUEST, "+my_extension.enabled=true", "-o", plan, "--format", "json", cwd=tmp_path)
    assert result.rc == 0, result.stderr
    return plan, result.json()


def test_a_plus_key_is_accepted_recorded_as_added_and_rendered_with_its_plus(mbl, tmp_path):
    plan, answer = _plan_with_added_key(mbl, tmp_path)
    from mbridge_launch.plan.model import load_plan

    loaded = load_plan(plan)
    added = [o for o in loaded.overrides if o.key == "+my_extension.enabled"]
    assert len(added) == 1 and added[0].value == "true" and added[0].change_class == "convergence"
    assert added[0].reason.key == "change.reason.added_key"
    dry = mbl.run("submit", plan, "--dry-run", cwd=tmp_path)
    srun = [line for line in dry.stdout.splitlines() if "run_recipe.py" in line and line.startswith("srun")]
    assert len(srun) == 1, dry.stdout
    assert "+my_extension.enabled=true" in shlex.split(srun[0])
    assert "plan.unknown_setting" not in dry.stdout + dry.stderr


def _preflight(mbl, plan, tmp_path, lang="en"):
    result = mbl.run("preflight", plan, "--no-cluster", "--format", "json", cwd=tmp_path, lang=lang)
    return result, json.loads(result.stdout)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_preflight_refuses_a_plan_with_an_unknown_key(mbl, tmp_path, lang):
    plan, _ = _plan_with_added_key(mbl, tmp_path)
    # a hand edit: the user wrote the key without the +, then a typo of a real key
    text = plan.read_text().replace("key: +my_extension.enabled", "key: train.trian_iters")
    assert "key: train.trian_iters" in text
    plan.write_text(text)
    result, report = _preflight(mbl, plan, tmp_path, lang)
    assert result.rc == 1, result.stderr
    found = [c for c in report["checks"] if c["code"] == "plan.unknown_setting"]
    assert len(found) == 1 and found[0]["severity"] == "error"
    expected = {"en": "override: unknown setting train.trian_iters; did you mean train.train_iters?",
                "zh": "覆盖项：未知设置 train.trian_iters；您是否想写 train.train_iters？"}[lang]
    assert found[0]["message"] == expected
    dry = mbl.run("submit", plan, "--dry-run", cwd=tmp_path)
    assert dry.rc != 0 and "plan.unknown_setting" in dry.stdout + dry.stderr


def test_preflight_accepts_the_plan_recommend_wrote(mbl, tmp_path):
    plan, _ = _plan_with_added_key(mbl, tmp_path)
    _, report = _preflight(mbl, plan, tmp_path)
    assert not [c for c in report["checks"] if c["code"] == "plan.unknown_setting"]


def test_preflight_checks_the_plans_dataset_fields_too(mbl, tmp_path):
    # dataset.fields reach run_recipe.py as dataset.NAME=VALUE: a typo there is an unknown setting too
    plan, _ = _plan_with_added_key(mbl, tmp_path)
    text = plan.read_text().replace("  fields: {}\n", "  fields:\n    num_workres: '2'\n", 1)
    assert "num_workres" in text
    plan.write_text(text)
    result, report = _preflight(mbl, plan, tmp_path)
    found = [c for c in report["checks"] if c["code"] == "plan.unknown_setting"]
    assert result.rc == 1 and len(found) == 1, report
    assert found[0]["message"] == "override: unknown setting dataset.num_workres; did you mean dataset.num_workers?"


def test_a_catalog_without_a_field_tree_says_the_keys_were_not_checked(tmp_path, monkeypatch, capsys):
    from mbridge_launch.cli.main import main
    from mbridge_launch.knowledge import config_fields

    plan = tmp_path / "plan.yaml"
    assert main([*REQUEST, "train.train_iters=100", "-o", str(plan), "--format", "json"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(config_fields, "load_field_tree", lambda version, directory=None: None)
    main(["--lang", "en", "preflight", str(plan), "--no-cluster", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    found = [c for c in report["checks"] if c["code"] == "plan.override_keys_unchecked"]
    assert len(found) == 1 and found[0]["severity"] == "info"
    assert "config-fields-0.6.2.json" in found[0]["message"]
