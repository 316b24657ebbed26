"""`mbridge-launch plan` and `mbridge-launch estimate` end to end (in process)."""

from __future__ import annotations

import json
import re

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.rules import Layout, check_layout
from mbridge_launch.planner.search import utility

CANDIDATE_KEYS = {"tp", "pp", "vp", "cp", "ep", "etp", "mbs", "gbs", "fsdp", "recompute", "memory_gb",
                  "tokens_per_sec_per_gpu", "model_tflops_per_gpu", "mfu", "step_time_s"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_json(capsys):
    code, out, _ = run(capsys, "plan", "--model", "Llama 3 70B", "--gpus", "64", "--gpu-type", "H100-SXM",
                       "--precision", "fp8cs", "--gbs", "256", "--seq-length", "8192", "--top", "3",
                       "--tokens", "1e12", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["model"] == "llama3_70b" and data["gpu_type"] == "h100" and len(data["candidates"]) == 3
    arch, hw = load_arch("llama3_70b"), get_hardware("h100")
    speeds = []
    for cand in data["candidates"]:
        assert CANDIDATE_KEYS <= set(cand)
        assert {"weights", "gradients", "optimizer", "activations", "total"} <= set(cand["memory_gb"])
        assert cand["memory_gb"]["total"] <= 0.95 * 80 and cand["gbs"] == 256
        assert cand["budget"]["gpu_hours"] == pytest.approx(cand["budget"]["hours"] * 64, rel=1e-3)
        layout = Layout(tp=cand["tp"], pp=cand["pp"], vp=cand["vp"], cp=cand["cp"], ep=cand["ep"], etp=cand["etp"],
                        sp=cand["sp"], mbs=cand["mbs"], gbs=cand["gbs"], seq_length=8192, world=64,
                        fsdp=cand["fsdp"], recompute=cand["recompute"], cp_comm_type=cand["cp_comm_type"],
                        uneven_pp=cand["uneven_pp"])
        assert not [v for v in check_layout(layout, arch, hw) if v.severity == "error"]
        if cand["measured"] is None:
            speeds.append(utility(cand["tokens_per_sec_per_gpu"], cand["memory_gb"]["total"] / 80, layout))
        assert cand["corrected_by"] is not None  # NVIDIA published this configuration (planner.measured)
    # the layout NVIDIA published for this configuration first, then the best utility
    first = data["candidates"][0]
    assert first["measured"] is not None and (first["tp"], first["pp"]) == (4, 8)
    assert speeds == sorted(speeds, reverse=True)
    assert data["rejected"] and all({"code", "count", "example", "message"} <= set(r) for r in data["rejected"])


def test_plan_text_has_memory_chart(capsys):
    code, out, _ = run(capsys, "plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "b200",
                       "--gbs", "128", "--seq-length", "8192", "--top", "1", "--lang", "en")
    assert code == 0
    assert "tokens/s/GPU" in out and "MFU" in out and "█" in out and "|" in out and "GiB" in out
    assert "weights" in out and "activations" in out


def test_plan_in_chinese(capsys):
    code, out, _ = run(capsys, "plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "b200",
                       "--gbs", "128", "--seq-length", "8192", "--top", "1", "--lang", "zh")
    assert code == 0 and "模型算力利用率" in out and "显存" in out


@pytest.mark.parametrize("argv,key", [
    (["--model", "llama3_9b", "--gpus", "8"], "unknown model"),
    (["--model", "llama3_8b", "--gpus", "0"], "--gpus"),
    (["--model", "llama3_8b", "--gpus", "8", "--gpu-type", "a100"], "unknown GPU type"),
    (["--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--precision", "nvfp4"], "does not run precision"),
    (["--model", "nemotron_3_ultra", "--gpus", "8"], "is not in catalog/models.yaml"),  # no published sizes
    (["--model", "flux_12b", "--gpus", "8"], "diffusion model"),
    (["--model", "llama3_8b", "--gpus", "8", "--tokens", "-5"], "--tokens must be a positive number of tokens"),
    (["--model", "llama3_8b", "--gpus", "8", "--tokens", "lots"], "suffixes K, M, B, T"),
    (["--model", "llama3_8b", "--gpus", "8", "--tokens", "inf"], "--tokens"),
])
def test_plan_bad_input_exits_2(capsys, argv, key):
    code, out, err = run(capsys, "plan", *argv, "--lang", "en")
    assert code == 2 and key in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_plan_no_layout_exits_3(capsys):
    code, _, err = run(capsys, "plan", "--model", "llama31_405b", "--gpus", "8", "--gpu-type", "h100",
                       "--gbs", "8", "--seq-length", "8192", "--lang", "en")
    assert code == 3 and "RULE_MEMORY" in err


def test_no_fit_says_how_many_gpus_would(capsys):
    argv = ["plan", "--model", "llama3_8b", "--gpu-type", "h100", "--gbs", "64", "--seq-length", "8192", "--lang", "en"]
    code, _, err = run(capsys, *argv, "--gpus", "1")
    assert code == 3
    found = re.search(r"doubling the GPU count, the first that fits is (\d+) x H100 SXM \(plan --gpus (\d+)\)", err)
    assert found and found.group(1) == found.group(2), err
    fits = int(found.group(1))
    assert run(capsys, *argv, "--gpus", str(fits))[0] == 0
    assert fits == 2 or run(capsys, *argv, "--gpus", str(fits // 2))[0] == 3
    # a sequence no memory holds: it says so instead of sending the user up a GPU ladder
    code, _, err = run(capsys, "plan", "--model", "llama31_405b", "--gpu-type", "h100", "--gpus", "8", "--gbs", "8",
                       "--seq-length", "1000000", "--lang", "en")
    assert code == 3 and "no count up to 512 x H100 SXM fits either" in err


def test_estimate_json(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama3_70b", "--gpu-type", "h100", "--gpus", "64", "--tp", "4",
                       "--pp", "8", "--vp", "5", "--mbs", "1", "--gbs", "256", "--seq-length", "8192",
                       "--precision", "fp8cs", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert {"tokens_per_sec_per_gpu", "model_tflops_per_gpu", "mfu", "step_time_s", "memory_gb"} <= set(data)
    # published: 1,619-1,639 tokens/s/GPU on 64 H100 for this layout (25.09-26.02.01)
    assert 1300 < data["tokens_per_sec_per_gpu"] < 2000 and data["fits"] and data["warnings"] == []
    assert data["mfu"] == pytest.approx(data["model_tflops_per_gpu"] / 1979, rel=1e-3)


def test_estimate_broken_rule_exits_2(capsys):
    code, _, err = run(capsys, "estimate", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--tp", "3",
                       "--mbs", "1", "--gbs", "8", "--lang", "en")
    assert code == 2 and "RULE_TP_KV_HEADS" in err and "valid TP: 1, 2, 4, 8" in err
    code, _, err = run(capsys, "estimate", "--model", "deepseek_v3", "--gpu-type", "gb200", "--gpus", "256",
                       "--pp", "8", "--vp", "2", "--ep", "64", "--gbs", "2048", "--precision", "fp8mx", "--uneven-pp",
                       "--lang", "en")
    assert code == 2 and "RULE_EXPERT_GRID" in err


def test_estimate_lora_and_oom_verdict(capsys):
    base = ["estimate", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--mbs", "1", "--gbs", "8",
            "--seq-length", "8192", "--format", "json"]
    code, out, _ = run(capsys, *base)
    pretrain = json.loads(out)  # not fitting is the verdict (exit 3), not a warning
    assert code == 3 and not pretrain["fits"] and pretrain["verdict"].startswith("does not fit: needs")
    code, out, _ = run(capsys, *base, "--goal", "lora")
    lora = json.loads(out)
    assert code == 0 and lora["fits"] and lora["model_tflops_per_gpu"] / lora["tokens_per_sec_per_gpu"] < \
        pretrain["model_tflops_per_gpu"] / pretrain["tokens_per_sec_per_gpu"]


def test_plan_writes_a_plan_file(capsys, tmp_path):
    pytest.importorskip("mbridge_launch.recommend.build")
    from mbridge_launch.plan.model import load_plan

    target = tmp_path / "plan.yaml"
    code, out, err = run(capsys, "plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100",
                         "--precision", "bf16", "--top", "2", "--format", "json", "-o", str(target))
    assert code == 0, err
    best = json.loads(out)["candidates"][0]
    plan = load_plan(target)
    p = plan.parallelism
    assert (p.tp, p.pp, p.cp, p.mbs, p.gbs, p.recompute, p.fsdp) == (
        best["tp"], best["pp"], best["cp"], best["mbs"], best["gbs"], best["recompute"], best["fsdp"])
    assert plan.recipe.model == "llama3_8b" and plan.recipe.kind == "library" and plan.mode == "pretrain"
    assert plan.estimates.tokens_per_sec_per_gpu == pytest.approx(best["tokens_per_sec_per_gpu"], rel=1e-3)


def _tiny_hf_checkpoint(folder):
    (folder / "config.json").write_text(json.dumps({
        "model_type": "new_arch", "_name_or_path": "acme/Tiny-1B", "num_hidden_layers": 16, "hidden_size": 2048,
        "intermediate_size": 8192, "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 64000}))


def test_plan_with_a_local_hf_config(capsys, tmp_path):
    _tiny_hf_checkpoint(tmp_path)
    code, out, err = run(capsys, "plan", "--hf-config", str(tmp_path), "--gpus", "8", "--gpu-type", "h100",
                         "--gbs", "64", "--seq-length", "4096", "--top", "1", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == "hf:Tiny-1B" and data["candidates"][0]["tp"] in (1, 2, 4)


def test_plan_takes_a_checkpoint_directory_as_the_model(capsys, tmp_path):
    _tiny_hf_checkpoint(tmp_path)
    code, out, err = run(capsys, "plan", "--model", str(tmp_path), "--gpus", "8", "--gpu-type", "h100",
                         "--gbs", "64", "--seq-length", "4096", "--top", "1", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["model"] == "hf:Tiny-1B"


def test_lang_is_accepted_before_the_command_and_covers_argument_errors(capsys):
    code, out, err = run(capsys, "--lang", "zh", "plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100",
                         "--top", "1")
    assert code == 0 and "个 H100" in out, err
    with pytest.raises(SystemExit) as stopped:  # argparse's own error, still in the asked language
        main(["plan", "--lang", "zh", "--model", "llama3_8b", "--gpus", "8", "--gpu-tipe", "h100"])
    _, err = capsys.readouterr()
    assert stopped.value.code == 2 and err.startswith("错误：")


def test_plan_says_which_layouts_the_model_cannot_tell_apart(capsys):
    # NVIDIA published no row at 128 GPUs: the model's own tolerance (the configuration with rows:
    # tests/cli/test_estimate_domain_cli.py)
    argv = ["plan", "--model", "qwen3_235b_a22b", "--gpus", "128", "--gpu-type", "gb200", "--precision", "fp8mx",
            "--gbs", "4096", "--top", "5"]
    code, out, _ = run(capsys, *argv, "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["candidates"][0]["corrected_by"] is None and data["error_band"]["held_out"] != "measured"
    best = data["candidates"][0]["tokens_per_sec_per_gpu"]
    # the near-tie tolerance (the published layouts' held-out shortfall), not the in-sample error
    within = data["near_tie_set"]["within"]
    assert 0 < within <= data["error_band"]["p90"] or within == data["error_band"]["median"]
    # every listed candidate predicted within the band of the first, either way (the near-tie set)
    expected = [i + 1 for i, c in enumerate(data["candidates"])
                if (1 - within) * best - 0.1 <= c["tokens_per_sec_per_gpu"] <= (1 + within) * best + 0.1]
    assert data["near_tie"] == len(expected) >= 1
    assert [x["rank"] for x in data["near_tie_set"]["layouts"]] == expected
    code, text, _ = run(capsys, *argv, "--lang", "en")
    assert code == 0
    quoted = f"Layouts {', '.join(map(str, expected))} are predicted within {within:.0%} of the first"
    assert (quoted in text) == (len(expected) > 1)


@pytest.mark.parametrize("argv", [
    ["estimate", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--recompute-layers", "x"],
    ["plan", "--model", "llama3_8b", "--gpu-type", "h100"],  # --gpus missing
    ["nonsense"],
])
def test_bad_arguments_are_one_line_with_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as stopped:  # argparse exits from inside main()
        main([*argv, *(["--lang", "en"] if argv[0] != "nonsense" else [])])
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: mbridge-launch") and "--help'" in lines[0], err


@pytest.mark.parametrize("text,tokens", [("15T", 15e12), ("1e12", 1e12), ("2.5B", 2.5e9), ("300m", 3e8), ("4096", 4096.0)])
def test_token_budgets_take_suffixes(capsys, text, tokens):
    code, out, _ = run(capsys, "plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--top", "1",
                       "--tokens", text, "--format", "json")
    assert code == 0
    cand = json.loads(out)["candidates"][0]
    assert cand["budget"]["tokens"] == pytest.approx(tokens)
    assert cand["budget"]["hours"] == pytest.approx(tokens / (cand["tokens_per_sec_per_gpu"] * 8) / 3600, rel=1e-2)


@pytest.mark.parametrize("argv,flag,limit", [
    (["plan", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "99999999999999999999"], "--gpus", "1,048,576"),
    (["estimate", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--tp", str(10**20), "--pp", "1",
      "--mbs", "1", "--gbs", "8", "--seq-length", "8192"], "--tp", "1,048,576"),
    (["recommend", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", str(10**20)], "--gpus", "1,048,576"),
    (["recommend", "--model", "llama3_8b", "--gpu-type", "h100", "--gpus", "8", "--seq-length", str(10**20)],
     "--seq-length", "67,108,864"),
])
def test_absurd_sizes_are_refused_at_once(capsys, argv, flag, limit):
    code, _, err = run(capsys, *argv, "--lang", "en")
    assert code == 2 and f"{flag}=" in err and f"at most {limit}" in err and len(err.strip().splitlines()) == 1


def test_a_published_configuration_ranks_its_measured_layout_first_and_estimate_agrees(capsys):
    """planner.measured: plan puts the layout NVIDIA published for this very configuration first,
    says so in both languages, and `estimate` of that layout gives the same corrected figure."""
    argv = ["plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--precision", "fp8cs",
            "--gbs", "128", "--seq-length", "8192", "--top", "3"]
    code, out, _ = run(capsys, *argv, "--format", "json")
    assert code == 0
    first = json.loads(out)["candidates"][0]
    assert first["measured"]["release"] and first["measured"]["tokens_per_sec_per_gpu"] > 0
    assert first["measured_ratio"] != 1.0
    for lang, marker in (("en", "measured: NVIDIA published"), ("zh", "实测：NVIDIA")):
        code, text, _ = run(capsys, *argv, "--lang", lang)
        assert code == 0 and marker in text
    code, out, _ = run(capsys, "estimate", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100",
                       "--precision", "fp8cs", "--gbs", "128", "--seq-length", "8192", "--tp", str(first["tp"]),
                       "--pp", str(first["pp"]), "--cp", str(first["cp"]), "--mbs", str(first["mbs"]),
                       *(["--fsdp"] if first["fsdp"] else []), "--recompute", first["recompute"], "--format", "json")
    assert code == 0
    again = json.loads(out)
    assert again["tokens_per_sec_per_gpu"] == pytest.approx(first["tokens_per_sec_per_gpu"], rel=1e-3)
    assert again["measured"] is not None
