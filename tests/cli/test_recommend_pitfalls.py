"""recommend's pitfalls (issue 2's list): each one is triggered by a real request, and stays quiet
where the setting is NVIDIA's own tuned choice or the user already fixed it."""

from __future__ import annotations

import pytest

from cli_helpers import recommend_answer as answer
from mbridge_launch.base import i18n
from mbridge_launch.cli.main import main

pytestmark = pytest.mark.usefixtures("english")

def codes(data: dict) -> set[str]:
    return {w["code"] for w in data["warnings"]}


def test_tp_not_dividing_kv_heads_is_refused_naming_the_rule(capsys):
    rc = main(["recommend", "--model", "llama3_8b", "--gpus", "8", "model.tensor_model_parallel_size=3"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "TP=3 neither divides nor is a multiple of num_query_groups=8" in err and "valid TP: 1, 2, 4, 8" in err
    assert "model.tensor_model_parallel_size=3" in err


def test_resized_tp_always_divides_kv_heads(capsys):
    # Qwen3 235B-A22B has 4 KV heads: the resize to 16 GPUs must keep TP a divisor of 4
    data = answer(capsys, "--model", "qwen3_235b_a22b", "--goal", "lora", "--gpus", "16")
    assert 4 % data["parallelism"]["tp"] == 0


def test_pp_without_vp(capsys):
    args = ["--model", "llama3_8b", "--gpus", "8", "model.pipeline_model_parallel_size=4",
            "model.context_parallel_size=1", "train.global_batch_size=16"]
    data = answer(capsys, *args)
    assert data["parallelism"]["pp"] == 4 and data["parallelism"]["vp"] is None
    # whatever the planner picked for 8 GPUs (Megatron-FSDP, at times) yields to the user's PP
    assert data["parallelism"]["fsdp"] is False
    assert "PP_WITHOUT_VP" in codes(data)
    fixed = answer(capsys, *args, "model.virtual_pipeline_model_parallel_size=2")
    assert fixed["parallelism"]["vp"] == 2 and "PP_WITHOUT_VP" not in codes(fixed)


def test_ep_too_low_for_moe(capsys):
    low = answer(capsys, "--model", "qwen3_30b_a3b", "--goal", "sft", "--gpus", "16", "model.expert_model_parallel_size=2")
    warning = next(w for w in low["warnings"] if w["code"] == "EP_LOW")
    assert "128 experts at EP=2" in warning["message"] and "64 experts per GPU" in warning["message"]
    default = answer(capsys, "--model", "qwen3_30b_a3b", "--goal", "sft", "--gpus", "16")
    assert default["parallelism"]["ep"] == 16 and "EP_LOW" not in codes(default)


def test_cuda_graphs_with_packing(capsys):
    # the Qwen3 30B-A3B SFT recipe packs SQuAD; turning CUDA graphs on is the user's doing
    data = answer(capsys, "--model", "qwen3_30b_a3b", "--goal", "sft", "--gpus", "16",
                  "model.cuda_graph_impl=transformer_engine", "model.use_te_rng_tracker=true")
    assert "CUDA_GRAPH_PACKING" in codes(data) and "CUDA_GRAPH_RNG" not in codes(data)
    # NVIDIA's H100 FP8 SFT benchmark ships CUDA graphs with packing and the padding they need
    bench = answer(capsys, "--model", "llama3_70b", "--goal", "sft", "--benchmark", "--precision", "fp8cs", "--gpus", "32")
    assert bench["recipe"] == "llama3_70b_sft_32gpu_h100_fp8cs_config"
    assert "CUDA_GRAPH_PACKING" not in codes(bench)
    unpadded = answer(capsys, "--model", "llama3_70b", "--goal", "sft", "--benchmark", "--precision", "fp8cs",
                      "--gpus", "32", "dataset.pad_to_max_length=false")
    assert "CUDA_GRAPH_PACKING" in codes(unpadded)


def test_cuda_graphs_with_full_recompute(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "model.cuda_graph_impl=transformer_engine",
                  "rng.te_rng_tracker=true", "model.recompute_granularity=full")
    assert data["parallelism"]["recompute"] == "full"
    assert "CUDA_GRAPH_FULL_RECOMPUTE" in codes(data)
    selective = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "model.cuda_graph_impl=transformer_engine",
                       "rng.te_rng_tracker=true", "model.recompute_granularity=selective")
    assert "CUDA_GRAPH_FULL_RECOMPUTE" not in codes(selective)


def test_cuda_graphs_need_the_te_rng_tracker(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "model.cuda_graph_impl=transformer_engine")
    assert "CUDA_GRAPH_RNG" in codes(data)
    # either field turns the tracker on (Bridge keeps them in sync)
    for switch in ("rng.te_rng_tracker=true", "model.use_te_rng_tracker=true"):
        fixed = answer(capsys, "--model", "llama3_8b", "--gpus", "8", "model.cuda_graph_impl=transformer_engine", switch)
        assert "CUDA_GRAPH_RNG" not in codes(fixed), switch


def test_fsdp_with_tp_on_h100(capsys):
    args = ["--model", "llama3_8b", "--gpus", "16", "ddp.use_megatron_fsdp=true", "model.tensor_model_parallel_size=2",
            "model.pipeline_model_parallel_size=1", "model.sequence_parallel=true"]
    data = answer(capsys, *args)
    assert data["parallelism"]["fsdp"] is True and "FSDP_TP_H100" in codes(data)
    blackwell = answer(capsys, *args, "--gpu-type", "b200")
    assert "FSDP_TP_H100" not in codes(blackwell)


def test_long_context_without_cp(capsys):
    data = answer(capsys, "--model", "llama3_8b", "--gpus", "16", "--seq-length", "65536", "model.context_parallel_size=1")
    assert "LONG_CONTEXT_NO_CP" in codes(data)
    default = answer(capsys, "--model", "llama3_8b", "--seq-length", "131072")
    assert default["parallelism"]["cp"] > 1 and "LONG_CONTEXT_NO_CP" not in codes(default)


def test_moe_overlap_grad_reduce_on_hopper(capsys):
    # gpt-oss 20B's H100 SFT recipe turns overlap_grad_reduce off; turning it back on is the pitfall
    data = answer(capsys, "--model", "gpt_oss_20b", "--goal", "sft", "--gpus", "8", "ddp.overlap_grad_reduce=true")
    assert "MOE_OVERLAP_GRAD_REDUCE_H100" in codes(data)
    assert "MOE_OVERLAP_GRAD_REDUCE_H100" not in codes(answer(capsys, "--model", "gpt_oss_20b", "--goal", "sft", "--gpus", "8"))
    blackwell = answer(capsys, "--model", "gpt_oss_20b", "--goal", "sft", "--gpus", "8", "--gpu-type", "b200",
                       "ddp.overlap_grad_reduce=true")
    assert "MOE_OVERLAP_GRAD_REDUCE_H100" not in codes(blackwell)
    # restating an H100 recipe's own setting is no pitfall
    same = answer(capsys, "--model", "qwen3_30b_a3b", "--gpus", "16", "ddp.overlap_grad_reduce=true")
    assert "MOE_OVERLAP_GRAD_REDUCE_H100" not in codes(same)


def test_vlm_without_image_data(capsys):
    text = answer(capsys, "--model", "qwen3_vl_30b_a3b", "--goal", "sft", "--gpus", "8", "--dataset", "squad")
    warning = next(w for w in text["warnings"] if w["code"] == "VLM_TEXT_DATA")
    assert "cord-v2" in warning["message"] and "squad" not in warning["message"].split("(")[-1]
    default = answer(capsys, "--model", "qwen3_vl_30b_a3b", "--goal", "sft", "--gpus", "8")
    assert default["dataset"] == "cord-v2" and "VLM_TEXT_DATA" not in codes(default)
    # pretraining: only selectors that allow pretraining are suggested (energon), never cord-v2
    pretrain = answer(capsys, "--model", "qwen3_vl_30b_a3b", "--gpus", "8", "--dataset", "megatron-indexed",
                      "dataset.data_path=/data/x")
    message = next(w["message"] for w in pretrain["warnings"] if w["code"] == "VLM_TEXT_DATA")
    assert "energon" in message and "cord-v2" not in message


def test_recipe_only_validated_on_blackwell(capsys):
    data = answer(capsys, "--model", "qwen35_text_9b", "--gpus", "8", "--gpu-type", "h100")
    assert data["recipe"].endswith("_gb200_bf16_config")
    assert "BLACKWELL_ONLY" in codes(data) and "HARDWARE_SUBSTITUTE" not in codes(data)
    assert "BLACKWELL_ONLY" not in codes(answer(capsys, "--model", "qwen35_text_9b", "--gpus", "8", "--gpu-type", "gb200"))


def test_stale_recipe_findings_are_not_repeated(capsys):
    # the recipe ships TP=8 with SP off (a catalog finding); the resize turns SP on, so the card
    # must not still tell the user to turn SP on, and rule messages follow the GPU actually used
    data = answer(capsys, "--model", "llama3_70b", "--goal", "dora", "--gpus", "8", "--gpu-type", "b200")
    assert data["parallelism"]["sp"] is True
    assert not any(w["code"] in ("RECIPE_RULE_SP_TP", "RULE_SP_TP") for w in data["warnings"])
    # the H100 recipe on B200 with the user's EP=16 over 2 nodes (the planner's first keeps EP
    # within a node; the user's layout is kept, LAYOUT_NOT_PLANNER_FIRST): the rule names B200
    moe = answer(capsys, "--model", "qwen3_30b_a3b", "--goal", "sft", "--gpus", "16", "--gpu-type", "b200",
                 "model.expert_model_parallel_size=16", "model.pipeline_model_parallel_size=1",
                 "model.virtual_pipeline_model_parallel_size=1")
    assert moe["recipe"].endswith("_h100_bf16_config") and moe["parallelism"]["ep"] == 16
    ep = next(w["message"] for w in moe["warnings"] if w["code"] == "RULE_EP_NVLINK")
    assert "B200" in ep and "H100" not in ep


def test_warnings_follow_the_language(capsys):
    i18n.set_lang("zh")
    data = answer(capsys, "--model", "qwen3_30b_a3b", "--goal", "sft", "--gpus", "16", "--lang", "zh")
    message = next(w["message"] for w in data["warnings"] if w["code"] == "RULE_EP_NVLINK")
    assert "spans" not in message and "NVLink" in message
