"""Rules explain themselves where they are printed, `estimate` exits 3 when the layout does not fit,
--hf-config says what it changes, and a missing estimate says why (in process)."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.cli.main import main
from tests.cli_helpers import recommend_answer

# 64 attention heads, 64 KV heads: TP 16 and more divide the heads, and span more than a node
MHA_CONFIG = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 8192, "num_attention_heads": 64,
              "num_key_value_heads": 64, "intermediate_size": 28672, "vocab_size": 32000,
              "max_position_embeddings": 8192}
# a llama-like 14B that is no recipe's model
NEW_14B = {"model_type": "llama", "num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40,
           "num_key_value_heads": 8, "intermediate_size": 13824, "vocab_size": 128256, "max_position_embeddings": 8192}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _config(tmp_path, values):
    (tmp_path / "config.json").write_text(json.dumps(values), encoding="utf-8")
    return str(tmp_path)


def test_a_rejection_line_prints_the_rules_message_not_only_its_code(capsys, tmp_path):
    code, out, _ = run(capsys, "plan", "--hf-config", _config(tmp_path, MHA_CONFIG), "--gpus", "128", "--top", "1")
    assert code == 0
    line = next(line for line in out.splitlines() if line.strip().startswith("RULE_TP_NVLINK:"))
    assert "spans more than one NVLink domain" in line and "valid TP: 1, 2, 4, 8" in line
    assert not line.rstrip().endswith("RULE_TP_NVLINK")


def test_rejections_in_json_carry_the_message_in_every_entry(capsys, tmp_path):
    code, out, _ = run(capsys, "plan", "--hf-config", _config(tmp_path, MHA_CONFIG), "--gpus", "128", "--top", "1",
                       "--format", "json")
    assert code == 0
    rejected = json.loads(out)["rejected"]
    assert rejected and all(r["message"] and r["message"] != r["code"] for r in rejected)


def test_the_no_layout_error_of_recommend_names_each_reason_with_its_message(capsys):
    code, _, err = run(capsys, "recommend", "--model", "llama3_70b", "--gpus", "8", "--seq-length", "131072")
    assert code == 3
    assert "RULE_MEMORY x" in err and "does not fit in GPU memory even with full recompute" in err


def test_estimate_of_a_layout_that_does_not_fit_exits_3_with_one_verdict_line(capsys):
    code, out, err = run(capsys, "estimate", "--model", "llama3_70b", "--gpus", "8", "--tp", "8", "--gbs", "128")
    assert code == 3
    assert "memory per GPU" in out  # the card is still there: it shows what overflowed
    verdicts = [line for line in err.splitlines() if "does not fit" in line]
    assert len(verdicts) == 1
    assert verdicts[0].startswith("error: does not fit: needs ") and "GiB of usable 76.0 GiB" in verdicts[0]
    assert "RULE_MEMORY" not in err and ": warning:" not in err  # no doubled prefix


def test_estimate_json_gives_the_verdict_and_each_warning_with_its_severity(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama3_70b", "--gpus", "8", "--tp", "8", "--gbs", "128",
                       "--seq-length", "32768", "--format", "json")
    assert code == 3
    data = json.loads(out)
    assert data["fits"] is False and data["verdict"].startswith("does not fit: needs")
    severities = {w["code"]: w["severity"] for w in data["warnings"]}
    assert severities.get("LONG_CONTEXT_NO_CP") == "pitfall"
    assert all(w["code"] != "RULE_MEMORY" for w in data["warnings"])


def test_estimate_that_fits_exits_0_without_a_verdict(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama3_8b", "--gpus", "8", "--tp", "2", "--format", "json")
    assert code == 0 and json.loads(out)["verdict"] is None


def test_recommend_does_not_pick_megatron_fsdp_with_tp_on_h100_it_would_warn_against(capsys):
    for gpus in ("32", "64"):
        answer = recommend_answer(capsys, "--model", "llama3_70b", "--gpus", gpus)
        codes = {w["code"] for w in answer["warnings"]}
        assert "FSDP_TP_H100" not in codes and "PP_WITHOUT_VP" not in codes


def test_an_unknown_model_with_a_config_names_the_nearest_recipe_models(capsys, tmp_path):
    path = _config(tmp_path, NEW_14B)
    code, _, err = run(capsys, "recommend", "--model", "mynew_8b", "--hf-config", path, "--gpus", "8")
    assert code == 2
    assert "no recipe trains 'mynew_8b'" in err and "llama3" in err
    assert f"--hf-config {path}" in err and "recommend --model llama" in err
    assert "use --hf-config PATH" not in err and "with --hf-config PATH" not in err


def test_a_config_that_is_not_the_recipes_model_is_a_recorded_warning(capsys, tmp_path):
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--hf-config", _config(tmp_path, NEW_14B), "--gpus", "8")
    warning = next(w for w in answer["warnings"] if w["code"] == "HF_CONFIG_NOT_RECIPE_MODEL")
    assert "trains llama3_8b" in warning["message"] and "model.num_layers=48" in warning["message"]


@pytest.mark.parametrize("args,code", [
    (("--model", "llama3_8b", "--benchmark"), "ESTIMATE_BENCHMARK"),
    # every catalog model is complete since issue 34; Nemotron 3 Ultra has no published sizes at all
    (("--model", "nemotron_3_ultra"), "ARCH_UNKNOWN"),
])
def test_a_missing_estimate_says_why_in_json_card_and_warnings(capsys, args, code):
    answer = recommend_answer(capsys, *args)
    assert answer["estimate"] is None
    assert answer["estimate_missing"]["code"] == code and answer["estimate_missing"]["message"]
    assert code in {w["code"] for w in answer["warnings"]}
    rc, out, _ = run(capsys, "recommend", *args)
    assert rc == 0 and f"Estimate: none ({code}): " in out
