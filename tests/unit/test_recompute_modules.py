"""Selective recompute as the Plan runs it (issue 17): for each recompute mode, the Plan that
`plan -o` / `recommend` writes carries settings whose memory, recomputed by preflight from the
WRITTEN Plan alone, equals the estimate the planner made; every written module list is one
Megatron Core 0.19 accepts for the model and precision."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.plan.model import load_plan
from mbridge_launch.planner import inputs
from mbridge_launch.planner.entry import PlanRequest, plan_request, shipped_calibration
from mbridge_launch.planner.memory import HEADROOM, estimate_memory
from mbridge_launch.planner.recompute import (
    ALLOWED,
    MEGATRON_CORE_019,
    MEGATRON_DEFAULT,
    NEWER_CORE,
    OVERRIDE_KEY,
    dropped,
    effective_modules,
    invalid_modules,
    parse_modules,
    planner_modules,
)
from mbridge_launch.planner.rules import Layout, evolve
from mbridge_launch.planner.search import Options, search
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.plan_checks import _memory_model_fit, plan_layout, plan_precision
from mbridge_launch.recommend.build import recommend
from mbridge_launch.recommend.plan_file import plan_recipe, write_plan
from mbridge_launch.recommend.request import Request
from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan

MCORE_CONFIG = Path("/root/.cache/mbridge-launch/bridge-env-7d89b1e956eea5cf/lib/python3.12/site-packages/"
                    "megatron/core/transformer/transformer_config.py")


def _written_modules(plan) -> tuple[str, ...] | None:
    found = [o.value for o in plan.overrides if o.key.lstrip("+") == OVERRIDE_KEY]
    return parse_modules(found[-1]) if found else None


def _preflight(plan) -> tuple[float, Layout, str]:
    """Preflight's memory figure, layout and precision for the Plan, read from the Plan alone."""
    ctx = PreflightContext(plan=plan)
    return _memory_model_fit(ctx)[0], plan_layout(ctx), plan_precision(ctx)


def _assert_estimate_matches(plan, total: float, planner_total: float) -> None:
    """Preflight's figure from the written Plan equals the estimate the Plan records (the
    planner's, with the recipe's run settings), which is at most the search's own figure."""
    assert plan.estimates.memory_gb_per_gpu == pytest.approx(total, abs=0.006)
    assert total <= planner_total + 0.006  # the recipe's dispatcher needs at most what the search counted


def _assert_valid(plan, arch) -> None:
    ctx = PreflightContext(plan=plan)
    layout, precision = plan_layout(ctx), plan_precision(ctx)
    if layout.recompute != "selective":
        assert _written_modules(plan) is None  # no modules without selective recompute
        return
    modules = layout.recompute_modules
    assert modules is not None  # a Plan always resolves to a list (Megatron's default when it writes none)
    assert set(modules) <= ALLOWED
    assert invalid_modules(modules, arch, precision) == []


def _plan_first(tmp_path, model, gpus, *, gpu_type="h100", seq=4096, precision="bf16", gbs=None, **options):
    """`plan -o`: the planner's first candidate (its one entry point, with the recipe the Plan
    runs, as the plan command asks) written into a Plan, and the Plan read back."""
    got = inputs.resolve(model, gpu_type, precision, "pretrain")
    fixed = {k: options.pop(k) for k in ("tp", "cp") if k in options}
    request = PlanRequest(got.model, got.arch, got.hardware, gpus, gbs or 8 * gpus, seq, got.precision, got.goal,
                          top=1, recipe=plan_recipe(got, gpus, seq), **options)
    if fixed:  # a grid the plan command cannot fix: the search itself, with the same recipe settings
        found = search(got.arch, got.hardware, gpus, gbs=request.gbs, seq_length=seq, precision=got.precision,
                       goal=got.goal, options=Options(**options, **fixed, settings=tuple(request.settings.items())),
                       top=1)
    else:
        found = plan_request(request, shipped_calibration(), nvidia=False)
    assert found.candidates, found.rejected
    cand = found.candidates[0]
    path, _ = write_plan(cand, got, gpus, str(tmp_path / f"{model}.yaml"))
    return cand, load_plan(path), got.arch


# ------------------------------------------------------------------ the mapping itself
def test_allowed_names_are_megatron_core_019s():
    if not MCORE_CONFIG.exists():
        pytest.skip("megatron-core 0.19 sources not installed here")
    text = MCORE_CONFIG.read_text()
    block = re.search(r"allowed_modules = \{(.*?)\}", text, re.S)
    assert block is not None
    assert set(re.findall(r'"(\w+)"', block.group(1))) == MEGATRON_CORE_019
    assert ALLOWED - MEGATRON_CORE_019 == NEWER_CORE  # what 0.6.2's DeepSeek-V4 recipes add
    assert 'self.recompute_modules = ["core_attn"]' in text  # the default MEGATRON_DEFAULT mirrors
    assert MEGATRON_DEFAULT == ("core_attn",)


@pytest.mark.parametrize("model", ["llama3_8b", "qwen3_30b_a3b", "deepseek_v3", "moonlight_16b", "nemotronh_8b"])
@pytest.mark.parametrize("precision", ["bf16", "fp8cs", "fp8ds", "fp8mx"])
def test_planner_modules_are_valid_for_the_model_and_precision(model, precision):
    arch = load_arch(model)
    modules = planner_modules(arch, precision)
    assert invalid_modules(modules, arch, precision) == []
    if precision == "fp8ds":
        assert "moe_act" not in modules and "layernorm" not in modules  # delayed scaling refuses both
    if arch.mla is None:
        assert "mla_up_proj" not in modules
    if not arch.num_moe_experts:
        assert "moe_act" not in modules


def test_invalid_modules_follow_megatron_constraints():
    dense, moe, mla = load_arch("llama3_8b"), load_arch("qwen3_30b_a3b"), load_arch("deepseek_v3")
    assert invalid_modules(["moe_act"], dense) == ["moe_act"]
    assert invalid_modules(["moe_act"], moe, grouped_gemm=False) == ["moe_act"]
    assert invalid_modules(["mla_up_proj"], moe) == ["mla_up_proj"]
    assert invalid_modules(["layernorm", "moe_act"], moe, "fp8ds") == ["layernorm", "moe_act"]
    assert invalid_modules(["shared_experts"], mla, shared_expert_overlap=True) == ["shared_experts"]
    assert invalid_modules(["attn"], dense) == ["attn"]
    assert invalid_modules(["layernorm", "moe_act", "mla_up_proj"], mla, "fp8cs") == []


def test_each_module_drops_what_it_recomputes():
    """The inverse mapping: every module (or none) changes the activations by its own part."""
    arch = load_arch("deepseek_v3")
    base = Layout(tp=2, pp=1, ep=8, sp=True, mbs=1, gbs=64, seq_length=4096, world=64, recompute="selective")
    core = estimate_memory(arch, evolve(base, recompute_modules=("core_attn",))).activations
    assert core == pytest.approx(estimate_memory(arch, evolve(base, recompute="none")).activations)
    for module in ("layernorm", "moe_act", "mla_up_proj", "moe", "shared_experts", "mlp"):
        less = estimate_memory(arch, evolve(base, recompute_modules=(module,))).activations
        assert less < core, module
    whole = estimate_memory(arch, evolve(base, recompute_modules=("moe",))).activations
    act = estimate_memory(arch, evolve(base, recompute_modules=("moe_act",))).activations
    assert whole < act  # the whole MoE block drops its activation outputs and more
    assert dropped(("layernorm",), load_arch("llama3_8b")).attn_norm_out is False  # fused into LayerNormLinear
    assert effective_modules(evolve(base, recompute_modules=None), arch) == frozenset(planner_modules(arch))
    assert effective_modules(evolve(base, recompute="none"), arch) == frozenset()


def test_fp8_weight_copies_without_fp8_param_gather():
    arch = load_arch("llama3_8b")
    layout = Layout(tp=1, mbs=1, gbs=8, seq_length=4096, world=8)
    gathered = estimate_memory(arch, evolve(layout, fp8_param_gather=True), precision="fp8cs")
    bf16_primary = estimate_memory(arch, evolve(layout, fp8_param_gather=False), precision="fp8cs")
    assert gathered.fp8_copies == 0.0
    # 2 bytes (row-wise + column-wise fp8) per linear weight: every layer, not the embeddings
    linear_gib = arch.num_layers * (arch.attention_params() + arch.mlp_params()) / 2**30
    assert bf16_primary.fp8_copies == pytest.approx(2.0 * linear_gib, rel=0.02)
    assert bf16_primary.total - gathered.total == pytest.approx(bf16_primary.fp8_copies * 1.05, rel=0.01)
    # the precision's Bridge recipe default: subchannel keeps bf16 weights, current scaling gathers fp8
    assert estimate_memory(arch, layout, precision="fp8sc").fp8_copies > 0.0
    assert estimate_memory(arch, layout, precision="fp8cs").fp8_copies == 0.0
    assert estimate_memory(arch, layout).fp8_copies == 0.0  # bf16
    assert estimate_memory(arch, evolve(layout, fp8_param_gather=False)).fp8_copies == 0.0  # bf16: no fp8 at all
    assert estimate_memory(arch, evolve(layout, fp8_param_gather=False), precision="nvfp4").fp8_copies == 0.0


def test_moe_dispatcher_buffers_are_counted():
    arch = load_arch("qwen3_30b_a3b")
    layout = Layout(tp=1, ep=8, mbs=1, gbs=64, seq_length=4096, world=8, gpus_per_node=8)
    a2a = estimate_memory(arch, evolve(layout, moe_dispatcher="alltoall"))
    deepep = estimate_memory(arch, evolve(layout, moe_dispatcher="deepep"))
    hybrid = estimate_memory(arch, evolve(layout, moe_dispatcher="hybridep"))
    assert 0.0 < a2a.dispatcher < hybrid.dispatcher
    assert 0.0 < deepep.dispatcher < 2.0  # DeepEP's buffers: a few hundred MB at hidden 2048
    unknown = estimate_memory(arch, layout)  # the search's: the largest of the three
    assert unknown.dispatcher == pytest.approx(max(a2a.dispatcher, deepep.dispatcher, hybrid.dispatcher))
    assert "dispatcher" in a2a.as_dict() and "fp8_copies" in a2a.as_dict()
    assert estimate_memory(load_arch("llama3_8b"), Layout(world=8, gbs=8)).dispatcher == 0.0  # dense: none


# ------------------------------------------------------------------ the written Plan, per mode
@pytest.mark.parametrize("model, gpus, seq, precision, options, expect", [
    # none: what fits without recompute
    ("qwen3_8b", 8, 4096, "bf16", {"recompute": "none"}, "none"),
    # selective chosen by the planner: dense (Megatron's default: nothing to drop), MoE, MLA, fp8 delayed
    ("qwen3_8b", 8, 32768, "bf16", {"recompute": "selective"}, ("core_attn",)),
    ("qwen3_30b_a3b", 8, 4096, "bf16", {"recompute": "selective"}, ("layernorm", "moe_act")),
    ("moonlight_16b", 8, 4096, "bf16", {"recompute": "selective"}, ("layernorm", "moe_act", "mla_up_proj")),
    ("moonlight_16b", 8, 4096, "fp8ds", {"recompute": "selective"}, ("mla_up_proj",)),
    # full recompute of every layer
    ("llama3_8b", 8, 8192, "bf16", {"recompute": "full"}, "full"),
])
def test_plan_output_memory_matches_the_planners_estimate(tmp_path, model, gpus, seq, precision, options, expect):
    cand, plan, arch = _plan_first(tmp_path, model, gpus, seq=seq, precision=precision, **options)
    total, layout, plan_prec = _preflight(plan)
    assert plan_prec == precision
    _assert_estimate_matches(plan, total, cand.memory.total)
    _assert_valid(plan, arch)
    if isinstance(expect, tuple):
        assert layout.recompute == "selective"
        assert _written_modules(plan) == expect == planner_modules(arch, precision)
        written = next(o for o in plan.overrides if o.key == OVERRIDE_KEY)
        assert written.change_class == "execution" and written.source == "planner"  # `plan` chose it
    else:
        assert layout.recompute == expect


def test_issue_examples_no_longer_fit_with_selective_alone():
    """The issue's two first choices: with Megatron's default modules they exceed HBM (83.0 and
    82.9 GiB, not the 71.2 and 65.9 the old model charged), so the planner no longer picks them."""
    from mbridge_launch.knowledge.hardware import get_hardware

    hbm = get_hardware("h100").hbm_gb
    qwen = Layout(tp=4, sp=True, mbs=1, gbs=32, seq_length=32768, world=4, recompute="selective", gpus_per_node=8)
    llama = Layout(tp=4, pp=8, vp=5, sp=True, mbs=1, gbs=128, seq_length=8192, world=64, recompute="selective",
                   gpus_per_node=8)
    for model, layout in (("qwen3_8b", qwen), ("llama3_70b", llama)):
        m = estimate_memory(load_arch(model), layout, hbm)
        assert not m.fits and m.total > 80.0
        assert m.total == pytest.approx(estimate_memory(load_arch(model), evolve(layout, recompute="none"), hbm).total)


def test_partial_recompute_plan_matches(tmp_path):
    """Full recompute of some layers (block method), as test_partial_recompute's search picks."""
    cand, plan, arch = _plan_first(tmp_path, "llama3_70b", 64, gpu_type="gb300", seq=8192, precision="fp8cs",
                                   gbs=256, mbs=2, fsdp=True, tp=1, cp=1)
    assert cand.layout.recompute == "full" and cand.layout.recompute_layers is not None
    total, layout, _ = _preflight(plan)
    assert layout.recompute_layers == cand.layout.recompute_layers
    _assert_estimate_matches(plan, total, cand.memory.total)
    _assert_valid(plan, arch)


def _recommended(**request):
    rec = recommend(Request(**request))
    return rec, build_plan(rec, ClusterFlags())


def test_recommend_writes_the_modules_it_chose_as_an_execution_change():
    # 64 GPUs: 32 B200 cannot hold DeepSeek-V3's 671B parameters with their gradients and sharded
    # Adam state (its middle pipeline ranks, which the memory model now estimates, are far above HBM)
    rec, plan = _recommended(model="deepseek_v3", gpus=64, gpu_type="b200", seq_length=4096)
    assert rec.layout.recompute == "selective" and rec.layout.recompute_modules is None  # the planner's choice
    assert _written_modules(plan) == planner_modules(rec.arch, "bf16") == ("layernorm", "moe_act", "mla_up_proj")
    change = next(c for c in rec.changes if c.field == OVERRIDE_KEY)
    assert change.change_class == "execution" and change.source == "resize"
    assert "core_attn" in str(change.reason)  # why: Megatron's default saves almost nothing
    written = next(o for o in plan.overrides if o.key == OVERRIDE_KEY)
    assert written.value == "[layernorm,moe_act,mla_up_proj]" and written.change_class == "execution"
    total, _, _ = _preflight(plan)
    assert total == pytest.approx(rec.estimate.memory.total, abs=0.01)
    _assert_valid(plan, rec.arch)


def test_selective_without_modules_is_charged_as_megatrons_default():
    from mbridge_launch.plan.overrides import parse_overrides

    rec, plan = _recommended(model="qwen3_8b", gpus=8, gpu_type="h100", seq_length=4096,
                             overrides=parse_overrides(["model.recompute_granularity=selective"]))
    assert _written_modules(plan) is None  # the user's choice: nothing added
    total, layout, _ = _preflight(plan)
    assert layout.recompute == "selective" and layout.recompute_modules == MEGATRON_DEFAULT
    assert total == pytest.approx(rec.estimate.memory.total, abs=0.01)
    none = estimate_memory(rec.arch, evolve(layout, recompute="none"), rec.hardware.hbm_gb)
    assert total == pytest.approx(none.total, abs=0.01)  # core_attn drops nothing with flash attention


def test_recipe_kept_at_its_own_size_keeps_its_modules():
    """A benchmark recipe asked for at its own size runs as NVIDIA ships it: its own modules,
    charged as they are, and no recompute_modules override."""
    from mbridge_launch.knowledge.catalog import load_catalog

    recipe = next(r for r in load_catalog().recipes
                  if r.kind == "benchmark" and r.model == "deepseek_v3" and r.hardware == "h100"
                  and (r.features or {}).get("recompute_modules"))
    rec, plan = _recommended(model="deepseek_v3", gpus=recipe.gpus, gpu_type="h100", benchmark=True,
                             precision=recipe.precision)
    if rec.recipe.name != recipe.name:
        pytest.skip(f"recommend picked {rec.recipe.name}")
    assert _written_modules(plan) is None
    assert rec.layout.recompute_modules == tuple(recipe.features["recompute_modules"])
    ctx = PreflightContext(plan=plan)
    assert plan_layout(ctx).recompute_modules == tuple(recipe.features["recompute_modules"])


# ------------------------------------------------------------------ a sweep of first choices
SWEEP = [(m, t, g, s) for m in ("qwen3_8b", "llama3_8b", "llama3_70b", "qwen3_32b", "qwen3_30b_a3b",
                                "moonlight_16b", "deepseek_v3", "gpt_oss_120b")
         for t in ("h100", "b200") for g in (8, 64, 256) for s in (4096, 32768)]


@pytest.mark.parametrize("model, gpu_type, gpus, seq", SWEEP)
def test_no_first_choice_exceeds_hbm_as_written(tmp_path, model, gpu_type, gpus, seq):
    """96 first choices of `plan -o` (8 models, 2 systems, 3 sizes, 2 lengths): none whose
    written settings exceed HBM by the memory model preflight runs on the Plan."""
    try:
        cand, plan, arch = _plan_first(tmp_path, model, gpus, gpu_type=gpu_type, seq=seq)
    except AssertionError:
        pytest.skip("no layout fits")
    except UserError as error:  # `plan -o` refusing its own first choice: not this test's subject
        pytest.skip(f"plan -o refused: {error}")
    total, _, _ = _preflight(plan)
    hbm = inputs.resolve(model, gpu_type, "bf16", "pretrain").hardware.hbm_gb
    assert total <= HEADROOM * hbm + 0.01
    _assert_estimate_matches(plan, total, cand.memory.total)
    _assert_valid(plan, arch)
