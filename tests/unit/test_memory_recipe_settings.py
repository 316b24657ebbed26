"""The recipe settings the memory model charges (planner.recipe_settings -> Layout fields ->
planner.memory), each checked against its formula, and NVIDIA's published rows estimated with their
benchmark recipe's settings (benchmarks/published_row_memory.py): every one fits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.memory import GIB, estimate_memory, static_memory
from mbridge_launch.planner.recipe_settings import applied, memory_settings, optimizer_bytes
from mbridge_launch.planner.rules import Layout, evolve

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from published_row_memory import estimate_rows, fits_without_settings, release_rows  # noqa: E402

LLAMA8 = load_arch("llama3_8b")
PARAMS_8B = 8_030_261_248
BASE = Layout(mbs=1, gbs=128, seq_length=8192, world=8)


def test_every_published_row_fits_with_its_benchmark_recipes_settings():
    results = estimate_rows()
    assert len(results) >= 129
    over = [f"{e.row.label}: {e.memory.total:.1f} GiB" for e in results if not e.fits]
    assert over == []
    # most rows are estimated with ALL the settings of the recipe that runs their grid on their system
    assert sum(1 for e in results if e.same_grid) >= 90


def test_every_row_of_releases_26_04_to_26_08_fits_with_its_recipes_settings():
    """Rows the memory model was never fitted on (extracted for the external throughput set): each fits
    with its benchmark recipe's settings, and the settings are what makes several of them fit."""
    rows, goals, _ = release_rows()
    assert len(rows) >= 150 and {"sft", "lora"} <= set(goals.values())
    results = estimate_rows(rows, goals)
    assert [e.row.label for e in results if not e.fits] == []
    assert sum(1 for e in results if not fits_without_settings(e, goals[e.row.index])) >= 5


def test_llama3_70b_fsdp_row_is_estimated_with_the_recipes_cpu_offloading():
    """The row that said 'does not fit' (TP1 MBS2 Megatron-FSDP on 64 GB200): the recipe offloads the
    activations of 40 of its 80 layers; without that the same layout is far above HBM."""
    row = next(e for e in estimate_rows() if e.row.release == "26.02" and e.row.model == "llama3_70b"
               and e.row.system == "gb200" and e.row.precision == "fp8cs")
    assert row.same_grid and row.layout.cpu_offload_layers == 40 and row.fits
    without = estimate_memory(row.row.arch, evolve(row.layout, cpu_offload_layers=None), row.row.hw.hbm_gb,
                              precision="fp8cs")
    assert not without.fits and without.activations > 1.9 * row.memory.activations


def test_cpu_offloading_keeps_the_other_layers_activations():
    full = estimate_memory(LLAMA8, BASE, 80)
    half = estimate_memory(LLAMA8, evolve(BASE, cpu_offload_layers=16), 80)
    embedding_output = 2 * 4096 * 8192 / GIB
    assert half.activations - embedding_output == pytest.approx((full.activations - embedding_output) * 16 / 32)


def test_fine_grained_offload_of_core_attention_drops_its_inputs():
    full = estimate_memory(LLAMA8, BASE, 80)
    off = estimate_memory(LLAMA8, evolve(BASE, offload_modules=("core_attn", "attn_proj")), 80)
    per_layer_full = 139_264 * 8192  # 34 x h bytes per token (test_memory.py)
    saved = 2 * (4096 + 2 * 1024) * 8192 + 2 * 4096 * 8192  # Q, K, V and the attention output
    # 32 layers lose `saved`; one layer in flight keeps its whole working set
    expected = full.activations - (32 * saved - (per_layer_full - saved)) / GIB
    assert off.activations == pytest.approx(expected)


def test_precision_aware_optimizer_bytes_follow_megatron():
    bf16_moments = {"use_precision_aware_optimizer": True, "exp_avg_dtype": "torch.bfloat16",
                    "exp_avg_sq_dtype": "torch.bfloat16", "main_params_dtype": "torch.float32"}
    # Bridge copies its fp8_recipe ("tensorwise" by default, bf16 runs too) onto the optimizer
    # config: Megatron keeps the fp32 master itself, beside bf16 moments
    assert optimizer_bytes(bf16_moments, "bf16") == 4 + 2 + 2
    assert optimizer_bytes({**bf16_moments, "fp8_recipe": "tensorwise"}, "fp8cs") == 4 + 2 + 2
    # delayed scaling: TE's master, an fp32 one kept as its 16-bit remainder (store_param_remainders)
    assert optimizer_bytes({**bf16_moments, "fp8_recipe": "delayed"}, "fp8ds") == 2 + 2 + 2
    # a 16-bit master dtype: TE's master in that dtype
    assert optimizer_bytes({**bf16_moments, "main_params_dtype": "torch.float16"}, "bf16") == 2 + 2 + 2
    assert optimizer_bytes({"use_precision_aware_optimizer": False}, "bf16") is None
    m = estimate_memory(LLAMA8, evolve(BASE, optimizer_bytes=6.0), 80)
    assert m.optimizer == pytest.approx(6 * PARAMS_8B / 8 / GIB)


def test_gradient_dtype_and_optimizer_offload_from_the_layout():
    m = estimate_memory(LLAMA8, evolve(BASE, grad_bytes=2.0, optimizer_offload_fraction=1.0), 80)
    assert m.gradients == pytest.approx(2 * PARAMS_8B / GIB) and m.optimizer == 0.0
    half = estimate_memory(LLAMA8, evolve(BASE, optimizer_offload_fraction=0.5), 80)
    assert half.optimizer == pytest.approx(12 * PARAMS_8B / 8 / GIB / 2)


def test_fused_cross_entropy_keeps_only_the_bf16_logits():
    m = estimate_memory(LLAMA8, evolve(BASE, ce_fusion=True), 80)
    assert m.logits == pytest.approx(8192 * 128256 * 2 / GIB)


def test_per_layer_cuda_graphs_add_static_buffers():
    plain = estimate_memory(LLAMA8, BASE, 80)
    graphed = estimate_memory(LLAMA8, evolve(BASE, cuda_graph_scope=("attn",)), 80)
    # 4 hidden-sized static tensors (fwd in/out, bwd in/out) per graphed layer and micro-batch in flight
    assert graphed.activations - plain.activations == pytest.approx(4 * 2 * 4096 * 8192 * 32 / GIB)


def test_recipe_features_become_layout_fields():
    features = {"cpu_offloading": True, "cpu_offloading_num_layers": 20, "grad_reduce_in_fp32": False,
                "cross_entropy_loss_fusion": True, "cuda_graph_impl": "transformer_engine",
                "cuda_graph_scope": ["attn", "moe_router"], "fine_grained_activation_offloading": False,
                "offload_modules": ["core_attn"], "use_precision_aware_optimizer": True,
                "exp_avg_dtype": "torch.bfloat16", "exp_avg_sq_dtype": "torch.bfloat16"}
    got = memory_settings(features, "bf16")
    assert got == {"cpu_offload_layers": 20, "optimizer_bytes": 8.0, "grad_bytes": 2.0,
                   "cuda_graph_scope": ("attn", "moe_router"), "ce_fusion": True}
    assert ("cpu_offload_layers", "20") in applied(got) and ("cuda_graph_scope", "attn,moe_router") in applied(got)
    # full-iteration graphs and CUDA graphs off add nothing
    assert "cuda_graph_scope" not in memory_settings({"cuda_graph_impl": "local", "cuda_graph_scope": ["full_iteration"]},
                                                     "bf16")
    assert memory_settings({}, "bf16") == {}


def test_static_memory_stays_a_lower_bound_with_cpu_offloading():
    """Offloading 31 of 32 layers keeps one layer's activations, less than full recompute's 32 layer
    inputs plus a working layer: the grid's bound must not exceed the offloaded layout's estimate."""
    layout = evolve(BASE, cpu_offload_layers=31)
    assert static_memory(LLAMA8, layout) <= estimate_memory(LLAMA8, layout).total


def test_the_runs_mtp_depth_replaces_the_models():
    """DeepSeek-V3 carries one MTP layer; a run with model.mtp_num_layers=0 (the published "w/o MTP"
    rows) has no MTP layer or extra logits on the last stage."""
    arch = load_arch("deepseek_v3")
    assert arch.mtp_num_layers == 1
    layout = Layout(ep=64, mbs=1, gbs=2048, seq_length=4096, world=256)  # one stage: it holds the MTP layer
    with_mtp = estimate_memory(arch, evolve(layout, mtp_layers=None), 192)
    without = estimate_memory(arch, evolve(layout, mtp_layers=0), 192)
    assert without.logits == pytest.approx(with_mtp.logits / 2)
    assert without.weights < with_mtp.weights
    assert memory_settings({"mtp_num_layers": 0}, "bf16") == {"mtp_layers": 0}


def test_a_frozen_language_model_has_no_gradients_or_optimizer_state():
    m = estimate_memory(LLAMA8, evolve(BASE, frozen_language=True), 80)
    plain = estimate_memory(LLAMA8, BASE, 80)
    assert m.gradients == 0.0 and m.optimizer == 0.0
    assert m.weights == plain.weights and m.activations == plain.activations
    assert memory_settings({"freeze_language_model": True}, "bf16") == {"frozen_language": True}


def test_a_plans_overrides_replace_the_recipes_memory_settings():
    """preflight and tune read a Plan through plan.layout.layout_of: the recipe's stored settings,
    each replaced by the Plan's override of it."""
    from mbridge_launch.plan.layout import layout_of
    from plan_fixtures import moe_ep, override

    features = {"cpu_offloading": True, "cpu_offloading_num_layers": 20, "grad_reduce_in_fp32": True,
                "cross_entropy_loss_fusion": True}
    plan = moe_ep()
    got = layout_of(plan, recipe_features=features)
    assert (got.cpu_offload_layers, got.grad_bytes, got.ce_fusion) == (20, 4.0, True)
    plan.overrides = [*plan.overrides, override("model.cpu_offloading_num_layers", "8"),
                      override("ddp.grad_reduce_in_fp32", "false"), override("model.offload_modules", "[core_attn]"),
                      override("model.fine_grained_activation_offloading", "true")]
    got = layout_of(plan, recipe_features=features)
    assert (got.cpu_offload_layers, got.grad_bytes, got.offload_modules) == (8, 2.0, ("core_attn",))


def test_a_plan_takes_mtp_depth_and_cuda_graphs_from_its_recipe_under_its_overrides():
    """The search charges a recipe's MTP depth and CUDA graphs (planner.entry: every layout with
    the recipe's settings), so a Plan is judged by them too, unless its overrides switch them off
    (recipe_settings.SWITCH_OFF: the graphs beside full recompute)."""
    from mbridge_launch.plan.layout import layout_of
    from plan_fixtures import moe_ep, override

    features = {"mtp_num_layers": 1, "cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["attn"]}
    plan = moe_ep()
    got = layout_of(plan, recipe_features=features)
    assert (got.mtp_layers, got.cuda_graph_scope) == (1, ("attn",))
    plan.overrides = [*plan.overrides, override("model.mtp_num_layers", "0"), override("model.cuda_graph_impl", "none")]
    got = layout_of(plan, recipe_features=features)
    assert (got.mtp_layers, got.cuda_graph_scope) == (0, None)

def test_a_cuda_graph_scope_given_as_one_string():
    """Megatron Core takes a plain string: three shipped recipes set "full_iteration" that way (a
    whole-step graph, not per-layer graphs), and a Plan override may write `=attn`."""
    from mbridge_launch.planner.recipe_settings import memory_settings

    graphs = {"cuda_graph_impl": "transformer_engine"}
    assert "cuda_graph_scope" not in memory_settings({**graphs, "cuda_graph_scope": "full_iteration"}, "bf16")
    assert memory_settings({**graphs, "cuda_graph_scope": "attn"}, "bf16")["cuda_graph_scope"] == ("attn",)
    assert memory_settings({**graphs, "cuda_graph_scope": ["attn", "moe_router"]}, "bf16")["cuda_graph_scope"] == (
        "attn", "moe_router")


def test_offload_modules_written_without_brackets():
    """A Plan override `model.offload_modules=core_attn` (no brackets) was dropped from the estimate."""
    from mbridge_launch.planner.recipe_settings import memory_settings

    on = {"fine_grained_activation_offloading": True}
    assert memory_settings({**on, "offload_modules": "core_attn"}, "bf16")["offload_modules"] == ("core_attn",)
    assert memory_settings({**on, "offload_modules": "[core_attn, mlp]"}, "bf16")["offload_modules"] == ("core_attn", "mlp")
    assert "offload_modules" not in memory_settings({**on, "offload_modules": []}, "bf16")
