"""recommend's list of changes: every KEY=VALUE the command sets is listed with its class and why,
and the Plan carries the same settings. Also: flag choices (--precision, --goal dora, --dataset),
the launcher's explicit checkpoint paths, and messages in Chinese."""

from __future__ import annotations

import json
import shlex

import pytest

from cli_helpers import recommend_answer as answer
from mbridge_launch.cli.main import main
from mbridge_launch.plan.model import load_plan
from mbridge_launch.plan.trainer_args import trainer_args

pytestmark = pytest.mark.usefixtures("english")

CLASSES = {"convergence", "execution", "benchmark_only"}


def command_settings(command: str) -> dict[str, str]:
    """KEY=VALUE words of the command (the trailing ConfigContainer overrides)."""
    found = {}
    for word in shlex.split(command):
        if "=" in word and not word.startswith("-"):
            key, _, value = word.partition("=")
            found[key] = value
    return found


def as_text(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


REQUESTS = [
    ["--smoke-test"],
    ["--model", "Qwen/Qwen3-235B-A22B", "--goal", "peft", "--gpus", "16"],
    ["--model", "llama3-8b", "--seq-length", "32768", "--gpus", "8"],
    ["--model", "deepseek_v3", "--gpus", "256", "--gpu-type", "gb200"],
    ["--model", "llama3_70b", "--gpus", "24", "--gpu-type", "gb200", "--benchmark"],
    ["--model", "llama3_70b", "--gpus", "64", "--gpu-type", "b300", "--precision", "fp8mx"],
    ["--model", "llama3_8b", "--gpus", "16", "--dataset", "megatron-indexed", "--data-path", "0.7:/d/web",
     "--data-path", "0.3:/d/code", "--save-dir", "/shared/ckpt", "train.train_iters=100", "model.seq_length=4096"],
    ["--model", "llama3_70b", "--goal", "dora", "--gpus", "8"],
]


@pytest.mark.parametrize("args", REQUESTS, ids=lambda a: " ".join(a)[:60])
def test_every_setting_of_the_command_is_a_listed_change(capsys, args):
    data = answer(capsys, *args)
    changes = {c["field"]: c for c in data["changes"]}
    for change in data["changes"]:
        assert change["class"] in CLASSES and change["reason"], change
    settings = command_settings(data["command"])
    assert settings, data["command"]
    for key, value in settings.items():
        assert key in changes, f"{key}={value} is in the command but not in the changes"
        assert as_text(changes[key]["to"]) == value, (key, changes[key], value)
    assert "=None" not in data["command"]


def test_plan_overrides_are_the_listed_override_changes(capsys, tmp_path):
    out = tmp_path / "plan.yaml"
    rc = main(["recommend", "--model", "Qwen/Qwen3-235B-A22B", "--goal", "peft", "--gpus", "16", "--format", "json",
               "-o", str(out), "train.train_iters=50"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    plan = load_plan(out)
    from_plan = command_settings(" ".join(shlex.quote(a) for a in trainer_args(plan)))
    assert from_plan == command_settings(data["command"])
    listed = {c["field"] for c in data["changes"]}
    assert {o.key for o in plan.overrides} <= listed
    for o in plan.overrides:
        assert o.change_class in CLASSES and o.reason and o.source in ("user", "resize", "launcher", "dataset")


def test_launcher_checkpoint_paths_are_changes(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--name", "run1", "--save-dir", "/shared/ckpt")
    changes = {c["field"]: c for c in data["changes"]}
    for key in ("checkpoint.save", "checkpoint.load"):
        assert changes[key]["from"] == "nemo_experiments/default/checkpoints"
        assert changes[key]["to"] == "/shared/ckpt/run1"
        assert changes[key]["class"] == "execution" and changes[key]["source"] == "launcher"


def test_resize_keeps_the_recipe_etp_and_packing_mbs(capsys):
    data = answer(capsys, "--model", "Qwen/Qwen3-235B-A22B", "--goal", "peft", "--gpus", "16")
    fields = {c["field"] for c in data["changes"]}
    assert "model.expert_tensor_parallel_size" not in fields  # ETP 1 stays 1, never "-> None"
    assert data["parallelism"]["etp"] == 1
    # the recipe packs SQuAD offline: Bridge needs micro batch 1 with packing
    assert data["parallelism"]["mbs"] == 1


def test_recompute_chosen_by_the_resize_reaches_the_command(capsys):
    data = answer(capsys, "--smoke-test")
    if data["parallelism"]["recompute"] != "none":
        assert f"model.recompute_granularity={data['parallelism']['recompute']}" in data["command"]
    full = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "model.recompute_granularity=full")
    assert full["parallelism"]["recompute"] == "full"


def test_precision_flag_switches_the_mixed_precision_recipe(capsys):
    data = answer(capsys, "--model", "llama3_70b", "--gpus", "64", "--gpu-type", "b300", "--precision", "fp8mx")
    change = next(c for c in data["changes"] if c["field"] == "mixed_precision")
    assert (change["from"], change["to"], change["class"]) == ("bf16_mixed", "bf16_with_mxfp8_mixed", "convergence")
    assert "mixed_precision=bf16_with_mxfp8_mixed" in data["command"]
    # a recipe already in the requested precision needs no switch
    same = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--precision", "bf16")
    assert not any(c["field"] == "mixed_precision" for c in same["changes"])


def test_precision_the_gpu_cannot_run_exits_2(capsys):
    rc = main(["recommend", "--model", "llama3_70b", "--gpus", "64", "--gpu-type", "h100", "--precision", "fp8mx"])
    err = capsys.readouterr().err
    assert rc == 2 and "fp8mx" in err and "fp8cs" in err


def test_dora_and_dataset_choices_are_listed(capsys):
    data = answer(capsys, "--model", "llama3_70b", "--goal", "dora", "--gpus", "8", "--dataset", "tulu3")
    changes = {c["field"]: c for c in data["changes"]}
    assert (changes["peft"]["from"], changes["peft"]["to"], changes["peft"]["class"]) == ("lora", "dora", "convergence")
    assert (changes["dataset"]["from"], changes["dataset"]["to"]) == ("squad", "tulu3")
    assert "--mode dora --dataset tulu3" in data["command"]


def test_megatron_indexed_without_a_path_is_flagged(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--dataset", "megatron-indexed")
    assert any(w["code"] == "DATASET_FIELDS_MISSING" and "dataset.data_path" in w["message"] for w in data["warnings"])
    given = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--dataset", "megatron-indexed", "--data-path", "/d/x")
    assert not any(w["code"] == "DATASET_FIELDS_MISSING" for w in given["warnings"])


@pytest.mark.parametrize("value", ["0", "UNLIMITED", "forever"])
def test_time_must_be_a_finite_slurm_time(capsys, value):
    rc = main(["recommend", "--model", "llama3_8b", "--gpus", "8", "--time", value])
    assert rc == 2 and "--time" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["--mount", ":x"], ["--env", "A B"], ["--data-path", "/x"], ["--time", "forever"],
                                   ["--dataset", "megatron-indexed", "--data-path", "0.3:/a", "--data-path", "/b"]])
def test_flag_errors_are_translated(capsys, extra):
    rc = main(["recommend", "--model", "llama3_8b", "--gpus", "8", "--lang", "zh", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("错误")
    reason = err.split("：", 2)[-1]
    assert not any(word in reason for word in ("is not", "give a", "only for", "Slurm time")), err


def test_chinese_card_has_no_english_labels(capsys):
    assert main(["recommend", "--model", "qwen3_30b_a3b", "--goal", "sft", "--gpus", "16", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "SP 关" in out and "SP off" not in out and "VP 关" in out
    assert "spans more than one" not in out  # rule warnings in Chinese too


# ---------------------------------------------------------------------- every change states its true cause
def test_change_reason_names_the_sequence_length_not_a_resize_to_the_same_count(capsys):
    """At the recipe's own GPU count, a layout moved for a longer sequence says so; it never reads
    'resized from the recipe's 4 GPUs to 4 GPUs'."""
    from cli_helpers import recommend_answer

    answer = recommend_answer(capsys, "--model", "qwen3_8b", "--gpus", "4", "--seq-length", "16384")
    resized = [c for c in answer["changes"] if c["source"] == "resize"]
    assert resized, answer["changes"]
    for change in resized:
        assert "sequence length 16384" in change["reason"] and "resized from" not in change["reason"], change


def test_change_reason_names_the_gpu_count_when_it_differs(capsys):
    from cli_helpers import recommend_answer

    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "8")
    resized = [c for c in answer["changes"] if c["source"] == "resize"]
    assert resized and all("2 GPUs to 8 GPUs" in c["reason"] for c in resized), resized


def test_plan_output_writes_no_no_op_overrides(capsys, tmp_path):
    """`plan -o` passes the whole layout to the recommender; settings equal to the recipe's own
    (train.global_batch_size=512 on a GBS-512 recipe) are not written as overrides."""
    import yaml

    from mbridge_launch.cli.main import main
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.plan.settings import override_text, recipe_default

    path = tmp_path / "p.yaml"
    assert main(["plan", "--model", "llama3_70b", "--gpus", "64", "-o", str(path)]) == 0
    capsys.readouterr()
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe = load_catalog().get(data["recipe"]["name"])
    for o in data["overrides"]:
        default = recipe_default(recipe, o["key"])
        assert default is None or override_text(default) != o["value"], o
    keys = [o["key"] for o in data["overrides"]]
    assert "train.global_batch_size" not in keys and "model.tensor_model_parallel_size" not in keys
