"""recommend: the acceptance answers of issue 2, bad inputs, and import hygiene."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_helpers import run_cli
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.rules import Layout, check_layout


def recommend_json(*args: str) -> dict:
    """`recommend ARGS --format json` in a fresh process, as a user runs it; the parsed answer."""
    proc = run_cli("recommend", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _split(answer: dict):
    """The run's pipeline split: the recipe's own with the answer's split overrides on top."""
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.planner.pipeline_split import PipelineSplit

    recipe = load_catalog().get(answer["recipe"])
    changed = {c["field"]: str(c["to"]) for c in answer["changes"]}
    return PipelineSplit.from_overrides(PipelineSplit.from_settings(recipe.features), changed.get)


def assert_rule_valid(answer: dict) -> None:
    p = answer["parallelism"]
    layout = Layout(tp=p["tp"], pp=p["pp"], vp=p["vp"], cp=p["cp"], ep=p["ep"], etp=p["etp"], sp=p["sp"],
                    mbs=p["mbs"], gbs=p["gbs"], seq_length=p["seq_length"], world=p["nodes"] * p["gpus_per_node"],
                    recompute=p["recompute"], fsdp=p["fsdp"], split=_split(answer))
    arch = load_arch(answer["model"])
    errors = [v for v in check_layout(layout, arch, get_hardware(answer["gpu_type"])) if v.severity == "error"]
    assert not errors, [v.message("en") for v in errors]
    assert p["dp"] * p["tp"] * p["pp"] * p["cp"] == p["nodes"] * p["gpus_per_node"]
    assert p["gbs"] % (p["mbs"] * p["dp"]) == 0


def test_json_contract_keys():
    answer = recommend_json("--model", "llama3_8b", "--gpus", "8")
    for key in ("recipe", "alias", "kind", "mode", "dataset", "command", "parallelism", "changes", "warnings", "catalog"):
        assert key in answer
    for key in ("tp", "pp", "vp", "cp", "ep", "etp", "sp", "dp", "mbs", "gbs", "seq_length", "nodes", "gpus_per_node"):
        assert key in answer["parallelism"]
    assert answer["catalog"]["version"] == "0.6.2"
    assert_rule_valid(answer)


def test_qwen3_30b_a3b_sft_on_16_h100():
    answer = recommend_json("--model", "Qwen3 30B-A3B", "--goal", "sft", "--gpus", "16", "--gpu-type", "h100")
    assert answer["recipe"].startswith("qwen3_30b_a3b_sft_")
    assert answer["kind"] == "library"
    assert answer["mode"] == "sft"
    assert answer["dataset"] in ("squad", "tulu3", "openmathinstruct2", "gsm8k")
    assert answer["parallelism"]["nodes"] == 2 and answer["parallelism"]["gpus_per_node"] == 8
    assert_rule_valid(answer)


def test_qwen3_235b_peft_on_16_h100():
    answer = recommend_json("--model", "Qwen/Qwen3-235B-A22B", "--goal", "peft", "--gpus", "16")
    assert answer["recipe"].startswith("qwen3_235b_a22b_peft_")
    assert answer["kind"] == "library"
    assert answer["mode"] == "lora"  # --goal peft means lora
    assert answer["dataset"] != "mock"
    assert_rule_valid(answer)


def test_llama3_8b_128k_pretrain():
    answer = recommend_json("--model", "llama3-8b", "--seq-length", "131072")
    assert answer["recipe"] == "llama3_8b_pretrain_64gpu_h100_bf16_128k_config"
    assert answer["alias"] == "llama3_8b_128k_pretrain_config"
    assert answer["dataset"] == "mock"
    assert answer["parallelism"]["seq_length"] == 131072
    assert answer["parallelism"]["cp"] > 1
    assert_rule_valid(answer)


def test_smoke_test_is_llama32_1b_pretrain_mock_on_one_gpu():
    answer = recommend_json("--smoke-test")
    assert answer["recipe"].startswith("llama32_1b_pretrain_1gpu_")
    assert (answer["parallelism"]["nodes"], answer["parallelism"]["gpus_per_node"]) == (1, 1)
    assert answer["kind"] == "library" and answer["dataset"] == "mock" and answer["mode"] == "pretrain"
    assert any("megatron-indexed" in note for note in answer["notes"])  # real runs need real data
    assert_rule_valid(answer)


@pytest.mark.parametrize("model", ["llama3_8b", "Llama 3 8B", "llama3-8b", "meta-llama/Meta-Llama-3-8B"])
def test_model_spellings_resolve_to_the_same_recipe(model):
    assert recommend_json("--model", model, "--gpus", "8")["recipe"] == "llama3_8b_pretrain_2gpu_h100_bf16_config"


def test_launch_command_shape_follows_the_node_count():
    """`command` is the script's training line (issue 33: what a submit runs, as the card shows it);
    `manual_command` the same run typed by hand, torchrun on one node and srun across nodes."""
    one = recommend_json("--model", "llama3_8b", "--gpus", "8")
    assert one["manual_command"].startswith("uv run python -m torch.distributed.run --nproc_per_node=8 "
                                            "scripts/training/run_recipe.py ")
    assert one["command"].startswith("srun ") and "--ntasks-per-node=8" in one["command"]
    two = recommend_json("--model", "llama3_8b", "--gpus", "16")
    assert two["manual_command"].startswith("srun --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 python "
                                            "scripts/training/run_recipe.py ")
    assert "--nodes=2" in two["command"] and "scripts/training/run_recipe.py" in two["command"]


def test_benchmark_only_when_asked_and_weak_scaled():
    library = recommend_json("--model", "llama3_70b", "--gpus", "64", "--gpu-type", "gb200")
    assert library["kind"] == "library"
    bench = recommend_json("--model", "llama3_70b", "--gpus", "128", "--gpu-type", "gb200", "--benchmark", "--precision", "fp8mx")
    assert bench["kind"] == "benchmark"
    recipe = load_catalog().get(bench["recipe"])
    assert recipe.hardware == "gb200" and recipe.precision == "fp8mx"
    if recipe.gpus != 128:
        scaled = [c for c in bench["changes"] if c["field"] == "train.global_batch_size"]
        assert scaled and scaled[0]["class"] == "benchmark_only"
        assert scaled[0]["to"] * recipe.gpus == scaled[0]["from"] * 128
    assert any(w["code"] == "BENCHMARK_NOT_TRAINING" for w in bench["warnings"])


def test_user_override_is_classified_and_in_command():
    answer = recommend_json("--model", "llama3_8b", "--gpus", "8", "train.train_iters=2000", "model.recompute_granularity=selective")
    changes = {c["field"]: c for c in answer["changes"]}
    assert changes["train.train_iters"]["class"] == "convergence"
    assert changes["model.recompute_granularity"]["class"] == "execution"
    assert "train.train_iters=2000" in answer["command"]


@pytest.mark.parametrize("args, code, needle", [
    (["--model", "llama9_999b"], 2, "closest"),
    (["--model", "llama3_8b", "--gpus", "0"], 2, "--gpus"),
    (["--model", "llama3_8b", "--gpus", "-8"], 2, "--gpus"),
    (["--model", "llama3_8b", "--gpu-type", "a100"], 2, "h100"),
    (["--model", "llama3_8b", "--goal", "sft", "--dataset", "mock"], 2, "mock"),
    (["--model", "llama3_8b", "--goal", "banana"], 2, "pretrain"),
    (["--model", "llama3_8b", "--gpus", "8", "--seq-length", "4194304"], 3, "4194304"),
    (["--model", "llama3_8b", "--gpus", "12"], 2, "multiple of 8"),
    (["--model", "llama3_8b", "--gpus", "8", "model.tensor_model_parallel_size=3"], 2, "TP=3"),
    (["--model", "llama3_8b", "notanoverride"], 2, "KEY=VALUE"),
])
def test_bad_input_is_one_clear_line(args, code, needle, mbl):
    proc = mbl.run("recommend", *args)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0], lines[0]


def test_chinese_card(mbl):
    proc = mbl.run("recommend", "--smoke-test", "--lang", "zh")
    assert proc.returncode == 0, proc.stderr
    assert "配方" in proc.stdout and "库配方" in proc.stdout
    # no --lang, no MBRIDGE_LAUNCH_LANG: the language comes from the locale
    proc = mbl.run("recommend", "--model", "llama3_8b", "--gpus", "0", lang=None, env={"LANG": "zh_CN.UTF-8"})
    assert proc.returncode == 2 and "错误" in proc.stderr


def test_recommend_never_imports_nemo_run_or_submitit():
    code = (
        "import sys; from mbridge_launch.cli.main import main; "
        "rc = main(['recommend', '--smoke-test', '--format', 'json']); "
        "bad = [m for m in ('nemo_run', 'submitit', 'torch') if m in sys.modules]; "
        "print('IMPORTED', bad, file=sys.stderr); sys.exit(10 if bad else rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_plan_file_roundtrip_and_unknown_field(tmp_path, mbl):
    from mbridge_launch.plan.model import load_plan

    out = tmp_path / "plan.yaml"
    proc = mbl.run("recommend", "--model", "llama3_8b", "--gpus", "16", "--name", "l3run", "--account", "acct",
                   "--partition", "h100", "--time", "01:00:00", "--env", "HF_TOKEN", "--env", "WANDB_PROJECT",
                   "--save-dir", "/shared/ckpt", "--mount", "/data:/data", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    plan = load_plan(out)
    assert plan.name == "l3run" and plan.cluster.nodes == 2 and plan.cluster.gpus_per_node == 8
    assert plan.cluster.secrets == ["HF_TOKEN"] and plan.cluster.env == ["WANDB_PROJECT"]
    assert plan.checkpoint.save == "/shared/ckpt/l3run"
    text = out.read_text().replace("  gpus_per_node: 8", "  gpus_per_nod: 8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    proc = mbl.run("submit", str(bad), "--executor", "sbatch", "--dry-run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "gpus_per_nod" in errors[0] and "gpus_per_node" in errors[0], proc.stderr
    from mbridge_launch.base.errors import UserError

    with pytest.raises(UserError) as err:
        load_plan(bad)
    message = err.value.render("en")
    assert "gpus_per_nod" in message and "gpus_per_node" in message


def test_longer_sequence_takes_the_smallest_cp_that_fits():
    # the recipe: Qwen3 8B LoRA at 2048 tokens, CP=1; at 16384 tokens CP may grow up to 8 (the
    # recipe's tokens per GPU) but an 8B LoRA fits with far less, leaving GPUs to data parallelism
    answer = recommend_json("--model", "qwen3_8b", "--goal", "dora", "--gpus", "8", "--seq-length", "16384")
    p = answer["parallelism"]
    assert 1 <= p["cp"] < 8 and p["dp"] > 1 and p["seq_length"] == 16384
    assert answer["estimate"]["memory_gb_per_gpu"] <= answer["estimate"]["hbm_gb"]
    assert_rule_valid(answer)


def test_building_the_command_line_imports_nothing_heavy():
    """Every command's parser is built at start: none may import pydantic or the planner there
    (a command pays for its own imports when it runs)."""
    import subprocess
    import sys

    code = ("import sys; from mbridge_launch.cli.main import build_parser; build_parser(); "
            "heavy = [m for m in ('pydantic', 'mbridge_launch.planner.search', 'mbridge_launch.plan.model') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
