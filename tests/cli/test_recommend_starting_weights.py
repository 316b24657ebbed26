"""Issue 33 items 4 and 5 through `recommend`: --pretrained-checkpoint and --from-scratch land in the
Plan as real keys, a fine-tuning request without either says so in one line (and still writes the
Plan), contradictions are one-line refusals, the batch weak-scales at another GPU count, and a step
beyond --time is said with the numbers that fix it."""

from __future__ import annotations

import pytest

from cli_helpers import one_line_error, recommend_answer, run_cli
from mbridge_launch.cli.main import main
from mbridge_launch.plan.model import load_plan

pytestmark = pytest.mark.usefixtures("english")


def warning_codes(answer):
    return {w["code"]: w["message"] for w in answer["warnings"]}


def test_pretrained_checkpoint_is_written_as_the_real_key(tmp_path, capsys):
    out = tmp_path / "plan.yaml"
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--goal", "lora",
                              "--pretrained-checkpoint", "/lustre/models/llama3-8b", "-o", str(out))
    assert "checkpoint.pretrained_checkpoint=/lustre/models/llama3-8b" in answer["command"]
    assert "PRETRAINED_CHECKPOINT_MISSING" not in warning_codes(answer)
    plan = load_plan(out)
    assert plan.checkpoint.pretrained_checkpoint == "/lustre/models/llama3-8b"
    assert plan.checkpoint.from_scratch is None


@pytest.mark.parametrize("goal", ["sft", "lora", "dora"])
def test_finetuning_without_weights_says_what_is_missing_and_still_writes(tmp_path, capsys, goal):
    out = tmp_path / "plan.yaml"
    answer = recommend_answer(capsys, "--model", "qwen3_8b", "--gpus", "8", "--goal", goal, "-o", str(out))
    message = warning_codes(answer)["PRETRAINED_CHECKPOINT_MISSING"]
    assert "--pretrained-checkpoint DIR" in message and "\n" not in message
    assert load_plan(out).checkpoint.pretrained_checkpoint is None


def test_pretraining_is_not_asked_for_weights(capsys):
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "8")
    assert "PRETRAINED_CHECKPOINT_MISSING" not in warning_codes(answer)


def test_from_scratch_is_written_with_its_reason_and_preflight_accepts_it(tmp_path, capsys):
    out = tmp_path / "plan.yaml"
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--goal", "sft", "--from-scratch",
                              "-o", str(out))
    assert "PRETRAINED_CHECKPOINT_MISSING" not in warning_codes(answer)
    plan = load_plan(out)
    assert "random weights" in plan.checkpoint.from_scratch.render("en")
    assert main(["preflight", str(out), "--no-cluster", "--format", "json"]) in (0, 1)
    report = capsys.readouterr().out
    assert "plan.from_scratch" in report and "plan.pretrained_required" not in report


@pytest.mark.parametrize("args", [
    ("--goal", "lora", "--from-scratch"),
    ("--goal", "sft", "--from-scratch", "--pretrained-checkpoint", "/x"),
    ("--goal", "sft", "--pretrained-checkpoint", "/x", "checkpoint.pretrained_checkpoint=/y"),
    ("--goal", "sft", "--pretrained-checkpoint", ""),
])
def test_contradictory_or_empty_weights_are_one_line_refusals(args):
    line = one_line_error(run_cli("recommend", "--model", "llama3_8b", *args))
    assert line.startswith("error:") and ("--from-scratch" in line or "--pretrained-checkpoint" in line)


def test_another_gpu_count_weak_scales_the_global_batch(capsys):
    # llama3_8b's LoRA recipe: 1 GPU, GBS 8; on 8 GPUs run_recipe.py keeps 8 samples per GPU
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--goal", "lora",
                              "--pretrained-checkpoint", "/lustre/m")
    change = next(c for c in answer["changes"] if c["field"] == "train.global_batch_size")
    assert (change["from"], change["to"], change["class"]) == (8, 64, "convergence")
    assert "weak-scaling" in change["reason"] and "samples per GPU" in change["reason"]
    assert answer["parallelism"]["gbs"] == 64


def test_a_user_batch_is_not_weak_scaled(capsys):
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "8", "--goal", "lora",
                              "--pretrained-checkpoint", "/lustre/m", "train.global_batch_size=16")
    assert answer["parallelism"]["gbs"] == 16
    assert not any("weak-scaling" in c["reason"] for c in answer["changes"])


def test_a_million_token_step_beyond_the_time_limit_is_said(tmp_path, capsys):
    out = tmp_path / "plan.yaml"
    answer = recommend_answer(capsys, "--model", "llama3_8b", "--gpus", "64", "--seq-length", "1000000",
                              "--time", "04:00:00", "-o", str(out))
    message = warning_codes(answer)["STEP_OVER_TIME_LIMIT"]
    assert "--time" in message and "train.global_batch_size" in message
    # preflight judges the written Plan afresh: an error, reported once
    main(["preflight", str(out), "--no-cluster", "--format", "json"])
    report = capsys.readouterr().out
    assert report.count("step_over_time_limit") == 1 and '"plan.step_over_time_limit"' in report
