"""recommend and plan give one answer (issue 33, item 2): for requests that resize a recipe or
change its system, recommend's layout is `plan`'s first for the same request, or recommend's JSON
says why not (layout_choice.reason) and carries the planner's first with both predicted speeds.

Before the planner's one entry point, recommend kept a smaller recipe's layout and scaled its DP
(Qwen3-30B-A3B LoRA on 8 H200: TP4 EP4 at 2,853 tokens/s/GPU, "the planner's step model ... still
predicts this layout fastest") while `plan` put TP1 EP8 first at 10,676.
"""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import recommend_answer

# model, goal, GPUs, system: dense, MoE and hybrid models; pretrain, SFT, LoRA; 2 to 128 GPUs;
# H200 above all, and the issue's four requests
REQUESTS = [
    ("qwen3_30b_a3b", "lora", 8, "h200"),     # the issue's first request
    ("llama3_70b", "sft", 32, "h200"),        # the issue's (its recipe is for 32 H100: kept as shipped)
    ("gpt_oss_120b", "sft", 16, "h200"),      # the issue's
    ("qwen3_235b_a22b", "pretrain", 128, "h200"),  # the issue's
    ("llama3_8b", "pretrain", 8, "h200"),
    ("llama3_8b", "sft", 16, "h200"),
    ("llama3_8b", "lora", 2, "h200"),
    ("qwen3_8b", "pretrain", 8, "h200"),
    ("qwen3_14b", "sft", 16, "h200"),
    ("qwen25_32b", "lora", 16, "h200"),
    ("llama31_70b", "pretrain", 64, "h200"),
    ("llama31_70b", "lora", 16, "h200"),
    ("qwen3_30b_a3b", "pretrain", 32, "h200"),
    ("qwen3_30b_a3b", "sft", 32, "h200"),
    ("olmoe_7b", "pretrain", 16, "h200"),
    ("moonlight_16b", "sft", 16, "h200"),
    ("gpt_oss_20b", "pretrain", 32, "h200"),
    ("nemotron_3_nano", "pretrain", 16, "h200"),  # hybrid Mamba MoE
    ("qwen25_72b", "sft", 64, "b200"),
    ("qwen25_7b", "pretrain", 16, "h100"),
]

_KEYS = ("tp", "pp", "vp", "cp", "ep", "etp", "mbs", "fsdp", "recompute")


def _plan_first(capsys, answer: dict, gpus: int, gpu_type: str, goal: str) -> dict:
    """`plan --format json` for recommend's request (its recipe's global batch, sequence length and
    precision): the first candidate."""
    from mbridge_launch.cli.main import main

    p = answer["parallelism"]
    args = ["plan", "--model", answer["model"], "--gpus", str(gpus), "--gpu-type", gpu_type, "--goal", goal,
            "--gbs", str(p["gbs"]), "--seq-length", str(p["seq_length"]), "--top", "1", "--format", "json",
            "--precision", _recipe_precision(answer["recipe"]) or "bf16"]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)["candidates"][0]


def _recipe_precision(name: str) -> str | None:
    from mbridge_launch.knowledge.catalog import load_catalog

    recipe = next((r for r in load_catalog().recipes if r.name == name), None)
    return recipe.precision if recipe is not None else None


def _key(layout: dict) -> tuple:
    """The layout as both commands print it (VP 1 and none alike, ETP 1 and none alike)."""
    return (layout["tp"], layout["pp"], layout.get("vp") or 1, layout["cp"], layout["ep"], layout.get("etp") or 1,
            layout["mbs"], bool(layout["fsdp"]), layout.get("recompute") or "none")


def test_the_requests_mostly_take_plans_first(capsys):
    """Most of the requests get plan's first itself (not an explained exception): the test above
    compares layouts, not only reasons."""
    sources = [recommend_answer(capsys, "--model", m, "--goal", g, "--gpus", str(n), "--gpu-type", s)["layout_choice"]
               for m, g, n, s in REQUESTS]
    assert sum(c["source"] == "planner" for c in sources) >= 10, sources


@pytest.mark.parametrize("model,goal,gpus,gpu_type", REQUESTS, ids=["-".join(map(str, r)) for r in REQUESTS])
def test_recommend_takes_plans_first_or_says_why(capsys, model, goal, gpus, gpu_type):
    answer = recommend_answer(capsys, "--model", model, "--goal", goal, "--gpus", str(gpus), "--gpu-type", gpu_type)
    choice = answer["layout_choice"]
    assert choice is not None, answer
    mine = _key(answer["parallelism"])
    if choice["source"] == "rules":
        # an architecture the planner cannot estimate: said, and no planner's first to show
        assert choice["reason"] == "no_estimate" and choice["planner_first"] is None, choice
        return
    if choice["source"] == "recipe" and choice["reason"] == "recipe_own":
        # the recipe asked for at its own count and system: kept as NVIDIA ships it
        assert not any(c["source"] == "resize" for c in answer["changes"]), answer["changes"]
        return
    first = _plan_first(capsys, answer, gpus, gpu_type, goal)
    if choice["source"] == "planner":
        assert mine == _key(first), (answer["parallelism"], first)
        assert choice["reason"] is None
        # the figure recommend shows for the planner's first is plan's
        assert choice["planner_first"]["tokens_per_sec_per_gpu"] == pytest.approx(first["tokens_per_sec_per_gpu"], abs=0.1)
        # and no warning claims a ranking for another layout
        assert not any(w["code"] == "LAYOUT_NOT_PLANNER_FIRST" for w in answer["warnings"])
        return
    # another layout: the reason, the planner's first (plan's) and both predicted speeds
    assert choice["reason"] and choice["reason_text"], choice
    assert _key(choice["planner_first"]) == _key(first), (choice, first)
    assert choice["planner_first"]["tokens_per_sec_per_gpu"] == pytest.approx(first["tokens_per_sec_per_gpu"], abs=0.1)
    assert choice["tokens_per_sec_per_gpu"] is not None
    warning = next(w["message"] for w in answer["warnings"] if w["code"] == "LAYOUT_NOT_PLANNER_FIRST")
    assert f"{first['tokens_per_sec_per_gpu']:,.0f}" in warning


def test_the_issues_request_no_longer_keeps_the_4_gpu_recipes_tp4_ep4(capsys):
    answer = recommend_answer(capsys, "--model", "qwen3_30b_a3b", "--goal", "lora", "--gpus", "8", "--gpu-type", "h200")
    p = answer["parallelism"]
    assert (p["tp"], p["ep"]) != (4, 4)
    first = _plan_first(capsys, answer, 8, "h200", "lora")
    grid = ("tp", "pp", "cp", "ep")
    choice = answer["layout_choice"]
    if choice["reason"] == "packing":
        # the recipe packs sequences (MBS 1), which `plan` does not model: recommend names plan's
        # first beside its own, and its own is the planner's first at MBS 1
        assert p["mbs"] == 1 and [choice["planner_first"][k] for k in grid] == [first[k] for k in grid]
    else:
        assert [p[k] for k in grid] == [first[k] for k in grid]
    # no pitfall warning claims the planner predicts this layout fastest unless it is the planner's pick
    for w in answer["warnings"]:
        assert "still predicts this layout fastest" not in w["message"] or answer["layout_choice"]["source"] == "planner"
