"""One answer per layout and recipe (issue 34, item 2 behind the one planner entry point): the
memory recommend writes into a Plan (the planner's estimate with the recipe's settings), the
memory preflight recomputes from that Plan alone, and `estimate --recipe <the Plan's recipe>` of
the same layout are the same figure, for dense, MoE, SFT and LoRA requests on several systems."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.plan.layout import plan_override
from mbridge_launch.planner.recipe_settings import SWITCH_OFF, memory_settings, switched_off
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.plan_checks import _memory_model_fit, plan_layout, plan_precision
from mbridge_launch.recommend.build import recommend
from mbridge_launch.recommend.request import Request
from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan

REQUESTS = [
    # dense pretraining
    ("llama3_8b", 8, "h100", "pretrain", None),
    ("llama3_8b", 64, "b200", "pretrain", 8192),
    ("qwen3_8b", 16, "h100", "pretrain", None),
    ("llama3_70b", 64, "h100", "pretrain", None),
    ("qwen3_32b", 32, "gb200", "pretrain", None),
    # MoE pretraining
    ("qwen3_30b_a3b", 8, "h100", "pretrain", None),
    ("moonlight_16b", 16, "h100", "pretrain", None),
    ("gpt_oss_120b", 64, "h100", "pretrain", None),
    ("deepseek_v3", 64, "b200", "pretrain", 4096),
    ("qwen3_235b_a22b", 64, "b200", "pretrain", None),
    # fine-tuning
    ("llama3_8b", 8, "h100", "sft", None),
    ("qwen3_8b", 16, "b200", "sft", None),
    ("llama3_8b", 8, "h100", "lora", None),
    ("llama3_70b", 16, "h100", "lora", None),
    ("qwen3_30b_a3b", 8, "b200", "lora", None),
]


def _estimate_args(ctx: PreflightContext) -> list[str]:
    """`estimate` flags for the layout preflight reads from the Plan, with the Plan's recipe."""
    plan, L = ctx.plan, plan_layout(ctx)
    args = ["--model", plan.recipe.model, "--gpus", str(plan.cluster.total_gpus), "--gpu-type", plan.cluster.gpu_type,
            "--precision", plan_precision(ctx), "--goal", plan.recipe.goal if hasattr(plan.recipe, "goal") else "pretrain",
            "--tp", str(L.tp), "--pp", str(L.pp), "--cp", str(L.cp), "--ep", str(L.ep), "--mbs", str(L.mbs),
            "--gbs", str(L.gbs), "--seq-length", str(L.seq_length), "--recompute", L.recompute,
            "--recipe", plan.recipe.name, "--format", "json"]
    if L.vp:
        args += ["--vp", str(L.vp)]
    if L.etp:
        args += ["--etp", str(L.etp)]
    if L.fsdp:
        args.append("--fsdp")
    if not L.distributed_optimizer:
        args.append("--no-distributed-optimizer")
    if L.tp > 1 and not L.sp:
        args.append("--no-sp")
    if L.recompute_layers:
        args += ["--recompute-layers", str(L.recompute_layers)]
    if L.recompute == "selective" and L.recompute_modules:
        args += ["--recompute-modules", ",".join(L.recompute_modules)]
    if L.cp > 1 and L.cp_comm_type:
        args += ["--cp-comm-type", L.cp_comm_type]
    if L.fp8_param_gather is not None:
        args.append("--fp8-param-gather" if L.fp8_param_gather else "--no-fp8-param-gather")
    if L.moe_dispatcher:
        args += ["--moe-dispatcher", L.moe_dispatcher]
    if L.split is not None and L.uneven_pp:
        split = L.split.settings()
        if split["pipeline_model_parallel_layout"] is not None:
            args += ["--pp-layout", split["pipeline_model_parallel_layout"]]
        for key, flag in (("num_layers_in_first_pipeline_stage", "--first-stage-layers"),
                          ("num_layers_in_last_pipeline_stage", "--last-stage-layers")):
            if split[key] is not None:
                args += [flag, str(split[key])]
    return args


@pytest.mark.parametrize("model, gpus, gpu_type, goal, seq", REQUESTS)
def test_plan_preflight_and_estimate_agree(capsys, model, gpus, gpu_type, goal, seq):
    rec = recommend(Request(model=model, gpus=gpus, gpu_type=gpu_type, goal=goal, seq_length=seq))
    plan = build_plan(rec, ClusterFlags())
    ctx = PreflightContext(plan=plan)
    preflight = _memory_model_fit(ctx)[0]
    assert plan.estimates.memory_gb_per_gpu == pytest.approx(preflight, abs=0.006)
    args = _estimate_args(ctx)
    args[args.index("--goal") + 1] = goal
    code = main(["estimate", *args])
    data = json.loads(capsys.readouterr().out)
    assert code in (0, 3), data
    assert data["recipe_settings"]["recipe"] == plan.recipe.name
    assert data["memory_gb"]["total"] == pytest.approx(preflight, abs=0.011)


def test_settings_megatron_rejects_beside_a_layout():
    """Megatron Core 0.19 (transformer_config.py): CPU offloading not with PP > 1 nor any recompute;
    per-layer CUDA graphs not with full recompute. Those are switched off, the rest kept."""
    from mbridge_launch.planner.recipe_settings import run_layout
    from mbridge_launch.planner.rules import Layout

    settings = {"cpu_offload_layers": 20, "cuda_graph_scope": ("attn",), "grad_bytes": 2.0}
    kept = run_layout(Layout(pp=1, recompute="none"), settings)
    assert switched_off(settings, kept) == ()
    assert (kept.cpu_offload_layers, kept.cuda_graph_scope, kept.grad_bytes) == (20, ("attn",), 2.0)
    for layout in (Layout(pp=2), Layout(recompute="selective")):
        assert switched_off(settings, layout) == (SWITCH_OFF["cpu_offload_layers"],)
        ran = run_layout(layout, settings)
        assert ran.cpu_offload_layers is None and ran.cuda_graph_scope == ("attn",) and ran.grad_bytes == 2.0
    full = run_layout(Layout(recompute="full"), settings)
    assert switched_off(settings, full) == (SWITCH_OFF["cpu_offload_layers"], SWITCH_OFF["cuda_graph_scope"])
    assert full.cpu_offload_layers is None and full.cuda_graph_scope is None and full.grad_bytes == 2.0


def test_cuda_graphs_beside_full_recompute_are_switched_off_in_the_plan():
    """A library recipe with per-layer CUDA graphs, run with full recompute: the Plan writes
    model.cuda_graph_impl=none, and recommend's, preflight's and estimate's figures go without them."""
    from mbridge_launch.knowledge.catalog import load_catalog

    recipe = next(r for r in load_catalog().recipes if r.kind == "library" and r.gpus and r.hardware
                  and r.mode == "pretrain" and (r.pp or 1) == 1
                  and memory_settings(r.features, r.precision or "bf16").get("cuda_graph_scope"))
    rec = recommend(Request(model=recipe.model, gpus=recipe.gpus, gpu_type=recipe.hardware,
                            overrides=_overrides("model.recompute_granularity=full")))
    assert rec.recipe.name == recipe.name
    plan = build_plan(rec, ClusterFlags())
    assert plan_override(plan, "model.cuda_graph_impl") == "none"
    change = next(c for c in rec.changes if c.field == "model.cuda_graph_impl")
    assert change.change_class == "execution" and change.source == "resize"
    assert rec.estimate.layout.cuda_graph_scope is None
    ctx = PreflightContext(plan=plan)
    assert plan_layout(ctx).cuda_graph_scope is None
    assert plan.estimates.memory_gb_per_gpu == pytest.approx(_memory_model_fit(ctx)[0], abs=0.006)
    # with the graphs (what a Plan without the override would run, and Megatron would refuse): more memory
    from dataclasses import replace

    from mbridge_launch.planner.memory import estimate_memory

    graphed = replace(rec.estimate.layout, cuda_graph_scope=memory_settings(recipe.features, "bf16")["cuda_graph_scope"])
    assert estimate_memory(rec.arch, graphed, rec.hardware.hbm_gb).total > rec.estimate.memory.total


def _overrides(*items: str):
    from mbridge_launch.plan.overrides import parse_overrides

    return parse_overrides(list(items))
