"""`estimate --recipe NAME` and the recipe that ships a layout: the recipe's memory settings are used
and said, one line each; each setting is also a flag, which wins over the recipe (in process)."""

from __future__ import annotations

import json

from mbridge_launch.cli.main import main

# NVIDIA's Llama 3 70B Megatron-FSDP TP1 MBS2 layout on 64 GB200 (the 0.6.2 benchmark recipe
# offloads the activations of 40 of its 80 layers to the CPU)
FSDP_70B = ("--model", "llama3_70b", "--gpus", "64", "--gpu-type", "gb200", "--precision", "fp8cs", "--tp", "1",
            "--mbs", "2", "--gbs", "256", "--seq-length", "8192", "--fsdp")
RECIPE_70B = "llama3_70b_pretrain_64gpu_gb200_fp8cs_config"
SMALL = ("--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--seq-length", "8192", "--gbs", "128")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["estimate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys, *argv: str) -> tuple[int, dict]:
    code, out, _ = run(capsys, *argv, "--format", "json")
    return code, json.loads(out) if out.strip() else {}


def test_the_shipped_fsdp_layout_fits_with_its_recipes_cpu_offloading(capsys):
    code, out, _ = run(capsys, *FSDP_70B, "--lang", "en")
    assert code == 0, out
    assert f"setting of {RECIPE_70B}: model.cpu_offloading_num_layers = 40" in out
    # without the offloading (0 layers is not a setting Megatron accepts; a library recipe of the
    # same model that does not offload): the same layout is refused as before
    code, data = as_json(capsys, *FSDP_70B, "--recipe", "llama3_70b_pretrain_32gpu_h100_bf16_config")
    assert code == 3 and data["verdict"]
    assert "model.cpu_offloading_num_layers" not in data["recipe_settings"]["settings"]


def test_recipe_lines_in_chinese(capsys):
    code, out, _ = run(capsys, *FSDP_70B, "--lang", "zh")
    assert code == 0 and f"{RECIPE_70B} 的设置：model.cpu_offloading_num_layers = 40" in out


def test_named_recipe_settings_and_flags_win(capsys):
    _, plain = as_json(capsys, *SMALL)
    assert plain["recipe_settings"]["recipe"] is None and plain["recipe_settings"]["settings"] == {}
    _, named = as_json(capsys, *SMALL, "--recipe", "llama3_8b_pretrain_8gpu_h100_fp8cs_config")
    settings = named["recipe_settings"]["settings"]
    assert settings["ddp.grad_reduce_in_fp32"] == "false" and settings["model.cross_entropy_loss_fusion"] == "true"
    # bf16 gradients (2 bytes instead of 4) and bf16 logits only: less memory than the defaults
    assert named["memory_gb"]["gradients"] < plain["memory_gb"]["gradients"]
    assert named["memory_gb"]["logits"] < plain["memory_gb"]["logits"]
    _, flagged = as_json(capsys, *SMALL, "--recipe", "llama3_8b_pretrain_8gpu_h100_fp8cs_config",
                         "--no-cross-entropy-fusion")
    assert flagged["recipe_settings"]["settings"]["model.cross_entropy_loss_fusion"] == "false"
    assert "model.cross_entropy_loss_fusion" not in flagged["recipe_settings"]["from_recipe"]
    assert flagged["memory_gb"]["logits"] == plain["memory_gb"]["logits"]


def test_each_setting_flag_changes_the_estimate(capsys):
    _, plain = as_json(capsys, *SMALL)
    base = plain["memory_gb"]
    checks = [(("--cpu-offloading-num-layers", "16"), "activations"), (("--offload-modules", "core_attn"), "activations"),
              (("--precision-aware-optimizer",), "optimizer"), (("--optimizer-offload-fraction", "0.5"), "optimizer"),
              (("--cross-entropy-fusion",), "logits"), (("--bf16-grads",), "gradients")]
    for flags, component in checks:
        _, data = as_json(capsys, *SMALL, *flags)
        assert data["memory_gb"][component] < base[component], flags
    _, graphed = as_json(capsys, *SMALL, "--cuda-graph-scope", "attn")
    assert graphed["memory_gb"]["activations"] > base["activations"]


def test_bad_settings_are_one_line_errors(capsys):
    cases = [(("--recipe", "no_such_recipe"), "unknown recipe 'no_such_recipe'"),
             (("--offload-modules", "core_attn,nope"), "valid choices: attn_norm"),
             (("--cuda-graph-scope", "nope"), "valid choices: attn"),
             (("--optimizer-offload-fraction", "1.5"), "from 0 to 1"),
             (("--pp", "2", "--cpu-offloading-num-layers", "4"), "only with PP=1")]
    for flags, text in cases:
        code, _, err = run(capsys, *SMALL, *flags, "--lang", "en")
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and text in err and len(lines) == 1 and "Traceback" not in err, (flags, err)


def test_another_models_recipe_is_refused(capsys):
    code, out, err = run(capsys, *FSDP_70B, "--recipe", "llama3_8b_pretrain_8gpu_h100_fp8cs_config")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "trains llama3_8b, not llama3_70b" in err, err
