"""DeepSeek sparse attention (planner.dsa) and the MTP stage's embedding in the memory model
(planner.memory), each term against its source in Megatron Core 0.19 (Megatron Bridge 0.6.2)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner import dsa
from mbridge_launch.planner.memory import GIB, _layer_params, _model, _stage_layers, estimate_memory
from mbridge_launch.planner.pipeline_split import parse_layout
from mbridge_launch.planner.rules import Layout, evolve

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from recipe_memory import recipe_layout  # noqa: E402

GLM51 = load_arch("glm51")
GLM52 = load_arch("glm52")
NO_DSA = dataclasses.replace(GLM51, dsa_indexer_n_heads=None, dsa_indexer_head_dim=None, dsa_indexer_topk=None)


def _glm52_recipe_layouts() -> list[tuple[str, str]]:
    return [(r.name, r.features["pipeline_model_parallel_layout"]) for r in load_catalog().recipes
            if r.model == "glm52" and (r.features or {}).get("pipeline_model_parallel_layout")]


def test_glm_models_carry_the_dsa_indexer():
    for arch in (GLM51, GLM52):
        assert dsa.uses_dsa(arch) and arch.dsa_indexer_topk and arch.dsa_indexer_topk < arch.max_position_embeddings
    assert not dsa.uses_dsa(load_arch("deepseek_v3")) and not dsa.uses_dsa(load_arch("llama3_8b"))


@pytest.mark.parametrize(("name", "layout"), _glm52_recipe_layouts())
def test_glm52_index_sharing_starts_every_shipped_pipeline_chunk(name, layout):
    """Megatron Core rejects a pipeline chunk that starts on a layer reusing another chunk's top-k
    (experimental_attention_variant_module_specs._validate_dsa_index_share_pipeline_split): every
    non-empty chunk of NVIDIA's GLM-5.2 layouts must start on a layer that runs its indexer."""
    assert GLM52.dsa_indexer_topk_freq > 1
    layer = 0
    starts = []
    for chunk in parse_layout(layout):
        decoders = chunk.count("t")
        if decoders:
            starts.append(layer + 1)
        layer += decoders
    assert layer == GLM52.num_layers
    assert [n for n in starts if not dsa.runs_indexer(GLM52, n)] == []
    # and sharing really happens: most layers reuse a top-k
    running = sum(dsa.runs_indexer(GLM52, n) for n in range(1, GLM52.num_layers + 1))
    assert running < GLM52.num_layers / 2


def test_indexer_weights_are_charged_on_the_layers_that_run_one():
    layout = Layout(tp=1, pp=1, ep=8, mbs=1, gbs=64, seq_length=4096, world=64, recompute="full")
    with_dsa = estimate_memory(GLM51, layout, None, goal="pretrain")
    without = estimate_memory(NO_DSA, layout, None, goal="pretrain")
    n, d, h, q = 32, 128, GLM51.hidden_size, GLM51.mla.q_lora_rank
    per_layer = q * n * d + h * d + 2 * d + h * n  # linear_wq_b, linear_wk, k_norm, linear_weights_proj
    indexers = GLM51.num_layers + GLM51.mtp_num_layers  # every layer of GLM-5.1 runs one
    assert with_dsa.weights - without.weights == pytest.approx(indexers * per_layer * 2 / GIB)


def test_top_k_and_indexer_loss_tensors_are_saved_per_indexer_layer():
    """Without recompute each layer that runs the indexer keeps its int32 top-k indices and the
    gradients the fused top-k + loss kernel precomputed (bf16 q, fp32 k, bf16 weights) and k_norm's
    input; the layer at work adds the bounded scoring scratch."""
    layout = Layout(tp=1, pp=1, ep=64, mbs=1, gbs=64, seq_length=4096, world=64, recompute="none")
    with_dsa = estimate_memory(GLM51, layout, None)
    without = estimate_memory(NO_DSA, layout, None)
    tokens = 4096
    saved = 4 * 2048 + (2 * 32 * 128 + 4 * 128 + 2 * 32) + 2 * 128
    scratch = tokens * tokens * 4 + tokens * tokens * 8 + tokens * 2048 * 8
    expected = tokens * saved * (GLM51.num_layers + 1) + scratch
    assert (with_dsa.activations - without.activations) * GIB == pytest.approx(expected)


def test_core_attention_recompute_keeps_no_dsa_tensors():
    layout = Layout(tp=1, pp=1, ep=64, mbs=1, gbs=64, seq_length=4096, world=64, recompute="selective",
                    recompute_modules=("core_attn",))
    assert dsa.saved_bytes_per_token(GLM51, recomputes_core_attention=True) == 0.0
    with_dsa = estimate_memory(GLM51, layout, None)
    without = estimate_memory(NO_DSA, layout, None)
    assert (with_dsa.activations - without.activations) * GIB == pytest.approx(
        dsa.transient_bytes(GLM51, 1, 4096, 1))


def test_scoring_scratch_is_bounded_by_the_cudnn_row_chunks():
    """At 200k tokens over CP 32 the fp32 scores of one rank's queries would be 5 GB: the kernels
    score and select in row chunks of at most 1 GiB of scores and 2 GiB of top-k scratch."""
    rows, topk = 200_000 / 32, 2048
    bounded = dsa.transient_bytes(GLM52, 1, 200_000, 32)
    assert bounded == pytest.approx(2**30 + 2 * 2**30 + rows * topk * 8)
    assert rows * 200_000 * 4 > 2**30


def test_last_stage_with_mtp_holds_its_own_word_embedding():
    """A last pipeline stage running MTP builds the embedding too (GPTModel: pre_process or
    mtp_process): with MTP its weights grow by the MTP layer, its 2h x h projection AND a vocab x h
    embedding; without MTP by neither."""
    arch = load_arch("deepseek_v3")
    base = Layout(tp=2, pp=8, ep=32, mbs=1, gbs=4096, seq_length=4096, world=256, recompute="full")
    model = _model(arch, "bf16", "pretrain")
    with_mtp = model.stage(evolve(base, mtp_layers=1), False, None)
    without = model.stage(evolve(base, mtp_layers=0), False, None)
    d, e = _layer_params(arch, arch.layer_kinds()[-1], base)
    mtp_layer = d + e + 2 * arch.hidden_size * arch.hidden_size / base.tp
    embedding = arch.embedding_params(base.tp) / base.tp
    assert (with_mtp.weights - without.weights) * GIB == pytest.approx(2 * (mtp_layer + embedding))
    # the first stage already holds the embedding: no second copy when it is also the MTP stage
    single = Layout(tp=1, pp=1, ep=8, mbs=1, gbs=64, seq_length=4096, world=64, recompute="full")
    one = model.stage(evolve(single, mtp_layers=1), True, None)
    none = model.stage(evolve(single, mtp_layers=0), True, None)
    d1, e1 = _layer_params(arch, arch.layer_kinds()[-1], single)
    assert (one.weights - none.weights) * GIB == pytest.approx(2 * (d1 + e1 + 2 * arch.hidden_size ** 2))


def test_a_middle_rank_holding_more_layers_than_the_ends_is_estimated():
    """GLM-5.2's shipped PP13 VP2 layout gives ranks 3-11 two four-layer chunks (8 MoE layers)
    while the first rank has five and the last four: the estimate is the heaviest middle rank's."""
    recipe = next(r for r in load_catalog().recipes if r.name == "glm52_pretrain_416gpu_h100_bf16_config")
    layout = recipe_layout(recipe)
    held = [len(_stage_layers(GLM52, layout, True, rank)) for rank in range(layout.pp)]
    assert held[0] == 5 and held[-1] == 4 and max(held) == 8 and sum(held) == GLM52.num_layers
    memory = estimate_memory(GLM52, layout, 80.0, grad_bytes=2.0)
    model = _model(GLM52, "bf16", "pretrain", 2.0)
    ends = max(model.stage(layout, True, 80.0).total, model.stage(layout, False, 80.0).total)
    assert memory.stage == "middle" and memory.total > ends
    middles = [model.stage(layout, True, 80.0, rank=rank).total for rank in range(1, layout.pp - 1)]
    assert memory.total == pytest.approx(max(middles))
    # NVIDIA ships it on 80 GB H100s: still within usable HBM
    assert memory.fits


def test_middle_ranks_of_a_layout_string_are_estimated_whatever_they_hold():
    """DeepSeek-V3's "Et*4|t*4|...|tmL": the first rank's four layers are three dense and one MoE,
    the middle ranks' four all MoE. With EP 4 on 64 H100 a middle rank holds ~11B expert parameters
    (weights, fp32 gradients and unsharded Adam state far above 80 GB) although its layer count is
    no higher than an end's: the estimate is that rank's, not the ends'."""
    arch = load_arch("deepseek_v3")
    split = dataclasses.replace(recipe_layout(next(
        r for r in load_catalog().recipes if r.name == "glm52_pretrain_416gpu_h100_bf16_config")).split,
        stages=tuple(["Etttt"] + ["tttt"] * 14 + ["tmL"]))
    layout = Layout(tp=4, pp=16, ep=4, mbs=2, gbs=4096, seq_length=4096, world=64, sp=True,
                    recompute="selective", split=split)
    model = _model(arch, "bf16", "pretrain")
    ends = max(model.stage(layout, True, 80.0).total, model.stage(layout, False, 80.0).total)
    memory = estimate_memory(arch, layout, 80.0)
    assert memory.stage == "middle" and memory.total > ends and not memory.fits
    assert memory.total == pytest.approx(model.stage(layout, True, 80.0, rank=1).total)
