"""Secrets travel by name: missing secrets, secret values anywhere in the Plan or the script,
token-shaped values in overrides. Messages must name the secret, never print its value."""

from __future__ import annotations

import os

import pytest

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.env_checks import run_env_checks, secret_named, token_kind
from preflight_fixtures import codes, edit, override, preflight_json, valid_plan, write

HF_VALUE = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"  # the shape of a Hugging Face token (not a real one)
WANDB_VALUE = "0123456789abcdef0123456789abcdef01234567"


def env_codes(plan, env):
    return [c.code for c in run_env_checks(PreflightContext(plan=plan, env=env))]


@pytest.fixture
def plan(shared_dir):
    return edit(valid_plan(shared_dir), **{"cluster.secrets": ["HF_TOKEN"]})


def test_named_secret_present_passes(plan):
    assert env_codes(plan, {"HF_TOKEN": HF_VALUE}) == []


def test_named_secret_missing(plan, tmp_path):
    rc, report = preflight_json(write(plan, tmp_path), "--no-cluster", env={"HF_TOKEN": None})  # unset
    assert rc == 1 and "env.secret_missing" in codes(report, "error")


def test_secret_value_in_an_override(plan, tmp_path):
    """The real secret value, copied into an override by mistake, is found and refused; the
    report names HF_TOKEN but never prints the value."""
    leaked = edit(plan, overrides=[override("logger.wandb_exp_name", f"run-{HF_VALUE}", "execution").model_dump(by_alias=True)])
    env = dict(os.environ, HF_TOKEN=HF_VALUE)
    result_rc, report = preflight_json(write(leaked, tmp_path), "--no-cluster", env=env)
    assert result_rc == 1
    found = [c for c in report["checks"] if c["code"] == "env.secret_leaked"]
    assert found and found[0]["severity"] == "error" and "HF_TOKEN" in found[0]["message"]
    assert "override logger.wandb_exp_name" in found[0]["message"]
    assert HF_VALUE not in str(report)


def test_secret_value_without_token_shape(plan):
    """A secret whose value has no known shape is still found by value."""
    secret = "correct-horse-battery-staple"
    leaked = edit(plan, **{"cluster.secrets": ["DB_PASSPHRASE"]}, env_vars={"NOTE": f"x{secret}x"})
    assert env_codes(leaked, {"DB_PASSPHRASE": secret}) == ["env.secret_leaked"]


def test_secret_value_in_the_rendered_script(plan):
    ctx = PreflightContext(plan=plan, env={"HF_TOKEN": HF_VALUE})
    script = f"#!/bin/bash\nexport HF_TOKEN={HF_VALUE}\n"  # what a careless template would write
    ctx.lookup("rendered_script", lambda: script)
    found = [c for c in run_env_checks(ctx) if c.code == "env.secret_leaked"]
    assert found and found[0].params["where"] == "rendered script"


def test_token_shaped_override_values_are_refused(plan):
    for value in (HF_VALUE, "ghp_" + "a" * 36, "AKIAIOSFODNN7EXAMPLE", "nvapi-" + "x" * 40):
        bad = edit(plan, overrides=[override("model.some_setting", value).model_dump(by_alias=True)])
        assert env_codes(bad, {"HF_TOKEN": "unrelated-value"}) == ["env.token_in_override"], value


def test_wandb_key_shape_counts_only_under_a_key_name(plan):
    key = edit(plan, overrides=[override("logger.wandb_api_key", WANDB_VALUE).model_dump(by_alias=True)])
    assert env_codes(key, {"HF_TOKEN": "x" * 10}) == ["env.token_in_override"]
    commit = edit(plan, overrides=[override("logger.git_commit", WANDB_VALUE).model_dump(by_alias=True)])
    assert env_codes(commit, {"HF_TOKEN": "x" * 10}) == []


def test_secret_named_settings():
    assert secret_named("HF_TOKEN") and secret_named("WANDB_API_KEY") and secret_named("logger.wandb_api_key")
    assert not secret_named("tokenizer.tokenizer_model") and not secret_named("train.max_tokens")
    assert token_kind("meta-llama/Meta-Llama-3-8B") is None


def test_secret_in_env_vars_and_invalid_names(plan):
    """An invalid name (BAD-NAME) is refused by the Plan itself (test_plan_validation)."""
    bad = edit(plan, env_vars={"HF_TOKEN": "whatever"}, **{"cluster.env": ["OK_NAME"]})
    found = env_codes(bad, {"HF_TOKEN": HF_VALUE, "OK_NAME": "1"})
    assert "env.secret_in_env_vars" in found


def test_token_in_free_text_of_the_plan(plan):
    bad = edit(plan, **{"launch.setup": [f"huggingface-cli login --token {HF_VALUE}"]})
    assert env_codes(bad, {"HF_TOKEN": "other-value-123"}) == ["env.token_in_plan"]
