"""Parallelism rules: codes, messages that name the values, and the valid choices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.rules import Layout, check_layout, errors, evolve

LLAMA8 = load_arch("llama3_8b")
DSV3 = load_arch("deepseek_v3")
QWEN30 = load_arch("qwen3_30b_a3b")
H100 = get_hardware("h100")


def codes(layout, arch=LLAMA8, hw=H100, severity="error"):
    return [v.code for v in check_layout(layout, arch, hw) if v.severity == severity]


def first(layout, code, arch=LLAMA8, hw=H100):
    return next(v for v in check_layout(layout, arch, hw) if v.code == code)


def test_valid_layout_has_no_errors():
    layout = Layout(tp=2, pp=2, cp=1, sp=True, mbs=1, gbs=128, seq_length=8192, world=16)
    assert codes(layout) == [] and codes(layout, severity="warning") == []
    assert layout.dp == 4 and layout.grad_accum == 32


def test_tp_must_divide_kv_groups_message():
    v = first(Layout(tp=3, sp=True, gbs=3, world=3), "RULE_TP_KV_HEADS")
    assert v.message("en") == "TP=3 neither divides nor is a multiple of num_query_groups=8 of llama3_8b; valid TP: 1, 2, 4, 8"
    assert v.valid == (1, 2, 4, 8) and v.field == "tp" and v.severity == "error"
    assert "num_query_groups=8" in v.message("zh") and "KV 头数" in v.message("zh")


def test_tp_a_multiple_of_the_kv_groups_replicates_them():
    # Megatron Core accepts TP a multiple of num_query_groups (KV heads replicated over TP ranks):
    # llama3_8b's 8 groups at TP 16, as DeepSeek-V4's single KV head at TP 2 (its recipe ships so)
    assert "RULE_TP_KV_HEADS" not in codes(Layout(tp=16, sp=True, gbs=16, world=16))


def test_tp_must_divide_heads():
    # DeepSeek-V3: 128 heads (MLA, no GQA); TP=6 divides neither
    v = first(Layout(tp=6, sp=True, world=6, gbs=6), "RULE_TP_KV_HEADS", DSV3, None)
    assert v.valid == (1, 2, 4, 8, 16, 32, 64, 128)


def test_dense_grid():
    v = first(Layout(tp=2, pp=3, world=16, gbs=16), "RULE_DENSE_GRID")
    assert v.params["mp"] == 6 and "16 GPUs" in v.message("en")


def test_expert_grid_and_the_published_invalid_row():
    # 25.09 GB200 DeepSeek-V3 alternative: EP=64 at PP=8 on 256 GPUs needs 8 x 64 = 512 GPUs
    layout = Layout(tp=1, pp=8, vp=2, ep=64, mbs=1, gbs=2048, seq_length=4096, world=256, uneven_pp=True)
    v = first(layout, "RULE_EXPERT_GRID", DSV3, get_hardware("gb200"))
    assert v.params["eg"] == 512 and v.params["minimum"] == 512
    assert v.valid == (1, 2, 4, 8, 16, 32)
    # the published PP=4 EP=64 layout is fine
    assert codes(evolve(layout, pp=4, vp=4), DSV3, get_hardware("gb200")) == []


def test_ep_rules():
    assert "RULE_EP_DENSE" in codes(Layout(ep=2, world=2, gbs=2))
    v = first(Layout(ep=3, world=3, gbs=3), "RULE_EP_EXPERTS", QWEN30)
    assert v.params["experts"] == 128 and 3 not in v.valid and 8 in v.valid
    # MoE with TP>1 and EP>1 should use sequence parallelism: Megatron Core warns, it does not refuse
    # (ModelParallelConfig.__post_init__), and NVIDIA ships such layouts (GLM-4.5 355B SFT)
    assert "RULE_MOE_SP" in codes(Layout(tp=2, ep=2, world=4, gbs=4), QWEN30, severity="warning")
    assert "RULE_MOE_SP" not in codes(Layout(tp=2, ep=2, world=4, gbs=4), QWEN30)


def test_sequence_parallel_iff_tp():
    assert codes(Layout(tp=2, world=2, gbs=2), severity="warning") == ["RULE_SP_TP"]
    assert codes(Layout(tp=1, sp=True, world=1), severity="warning") == ["RULE_SP_TP"]


def test_context_parallel():
    v = first(Layout(cp=3, seq_length=8192, world=3, gbs=3), "RULE_CP_SEQ")
    assert v.params["twice"] == 6 and 3 not in v.valid and 4 in v.valid
    assert "RULE_CP_COMM" in codes(Layout(cp=2, cp_comm_type="ring", world=2, gbs=2))
    # a2a splits KV heads: 8 groups / TP 2 = 4 per rank cannot be split over CP=8, a2a+p2p can
    bad = Layout(tp=2, sp=True, cp=8, cp_comm_type="a2a", seq_length=16384, world=16, gbs=16)
    assert "RULE_CP_A2A_HEADS" in codes(bad)
    # a2a+p2p: a2a over 4 ranks (4 KV heads each) and p2p over 2; Megatron needs those sizes set
    assert codes(evolve(bad, cp_comm_type="a2a+p2p", hierarchical_cp=(4, 2))) == []


def test_pipeline_split():
    v = first(Layout(pp=3, world=3, gbs=3), "RULE_PP_LAYERS")  # 32 layers
    assert v.valid == (1, 2, 4, 8, 16, 32)
    assert "RULE_VP_LAYERS" in codes(Layout(pp=4, vp=3, world=4, gbs=4))
    assert "RULE_VP_PP" in codes(Layout(pp=1, vp=2, world=1))
    # 61 layers on 16 stages: fine when uneven stages are declared
    assert "RULE_PP_LAYERS" in codes(Layout(pp=16, ep=8, world=256, gbs=256), DSV3, None)
    assert codes(Layout(pp=16, ep=8, world=256, gbs=256, uneven_pp=True), DSV3, None) == []
    # declared first/last stage sizes must add up: 3 + 14 x 4 + 2 = 61
    assert codes(Layout(pp=16, ep=8, world=256, gbs=256, uneven_pp=True, first_stage_layers=3, last_stage_layers=2), DSV3, None) == []
    assert "RULE_PP_UNEVEN" in codes(Layout(pp=16, ep=8, world=256, gbs=256, uneven_pp=True, first_stage_layers=4,
                                            last_stage_layers=4), DSV3, None)


def test_batch_rules():
    v = first(Layout(mbs=2, gbs=100, world=8), "RULE_GBS")
    assert v.params["unit"] == 16 and v.valid[:2] == (16, 32)
    assert "RULE_PACKING_MBS" in codes(Layout(mbs=2, gbs=16, world=8, packing=True))


def test_feature_rules():
    assert "RULE_CPU_OFFLOAD_PP" in codes(Layout(pp=2, cpu_offload=True, world=2, gbs=2))
    assert "RULE_FSDP_PP" in codes(Layout(pp=2, fsdp=True, world=2, gbs=2))
    assert codes(Layout(fsdp=True, world=1), severity="warning") == ["RULE_FSDP_DP"]
    assert "RULE_RECOMPUTE" in codes(Layout(recompute="sometimes", world=1))


def test_hardware_rules():
    assert "RULE_TP_NVLINK" in codes(Layout(tp=16, sp=True, world=16, gbs=16), DSV3, H100, "warning")
    assert "RULE_TP_NVLINK" not in codes(Layout(tp=16, sp=True, world=16, gbs=16), DSV3, get_hardware("gb200"), "warning")
    assert "RULE_EP_NVLINK" in codes(Layout(ep=16, world=16, gbs=16), QWEN30, H100, "warning")
    assert "RULE_PARTIAL_NODE" in codes(Layout(world=12, gbs=12), LLAMA8, H100, "warning")


@pytest.mark.parametrize("field", ["tp", "pp", "cp", "ep", "mbs", "gbs", "seq_length", "world"])
def test_positive_sizes(field):
    layout = evolve(Layout(world=1), **{field: 0})
    assert codes(layout) == ["RULE_POSITIVE"]


def test_errors_helper_and_unknown_architecture():
    layout = Layout(tp=3, world=3, gbs=3)
    assert [v.code for v in errors(check_layout(layout, None))] == []  # model rules need an architecture
    assert errors(check_layout(layout, LLAMA8)) != []
    with pytest.raises(TypeError):
        evolve(layout, nonsense=1)


def test_sequence_parallel_needs_the_sequence_divisible_by_tp_times_cp():
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.planner.rules import Layout, check_layout

    arch = load_arch("llama3_8b")
    # 8190 = 2 x 3^2 x 5 x 7 x 13: TP=4 with SP cannot split it evenly; TP=2 can
    bad = [v for v in check_layout(Layout(tp=4, sp=True, seq_length=8190, world=4, gbs=4), arch) if v.code == "RULE_SP_SEQ"]
    assert bad and bad[0].field == "tp" and 2 in bad[0].valid and 4 not in bad[0].valid
    assert "8190" in bad[0].message("en")
    ok = [v for v in check_layout(Layout(tp=2, sp=True, seq_length=8190, world=2, gbs=2), arch) if v.code == "RULE_SP_SEQ"]
    assert not ok
    # with CP=2 each CP rank holds 4096 of 8192 tokens: TP=8 divides it
    assert not [v for v in check_layout(Layout(tp=8, cp=2, sp=True, seq_length=8192, world=16, gbs=1), arch)
                if v.code == "RULE_SP_SEQ"]


@pytest.mark.parametrize("field,value", [("tp", 10**20), ("ep", 10**20), ("world", 10**20), ("seq_length", 10**20),
                                         ("gbs", 2**31 + 1), ("vp", 2**20 + 1)])
def test_sizes_beyond_any_real_job_are_one_rule_and_answer_at_once(field, value):
    # the other rules list divisors in their messages: for a 20-digit value that would take hours
    from mbridge_launch.planner.rules import size_limit

    layout = replace(Layout(tp=1, pp=2, mbs=1, gbs=8, seq_length=4096, world=8), **{field: value})
    found = check_layout(layout, load_arch("qwen3_30b_a3b"), get_hardware("h100"))
    assert [v.code for v in found] == ["RULE_SIZE_LIMIT"]
    assert found[0].message("en") == f"{field}={value} is beyond any real job; at most {size_limit(field):,}"


def test_a2a_p2p_context_parallel_needs_its_hierarchical_sizes():
    # ConfigContainer.validate refuses cp_comm_type a2a+p2p without hierarchical_context_parallel_sizes
    # (CP would silently not communicate), and sizes whose product is not CP
    # (tests/bridge/rules_conformance.py: cp_hierarchical, cp_hierarchical_ok)
    layout = Layout(cp=4, cp_comm_type="a2a+p2p", seq_length=8192, world=4, gbs=4)
    v = first(layout, "RULE_CP_HIERARCHICAL")
    assert v.field == "cp_comm_type" and v.valid == ("p2p", "a2a") and v.severity == "error"
    assert "CP=4" in v.message("en") and "hierarchical_context_parallel_sizes" in v.message("zh")
    assert "RULE_CP_HIERARCHICAL" in codes(evolve(layout, hierarchical_cp=(2, 1)))  # product 2, not 4
    assert codes(evolve(layout, hierarchical_cp=(2, 2))) == []
    assert codes(evolve(layout, cp_comm_type="p2p")) == []


def test_in_batch_packing_needs_two_sequences_per_micro_batch():
    # ConfigContainer.validate: "micro_batch_size should be greater than 1 when using
    # enable_in_batch_packing=True" (the ministral3 SFT/PEFT recipes of 0.6.2 ship MBS=1 and fail it)
    layout = Layout(mbs=1, gbs=32, world=1, in_batch_packing=True)
    v = first(layout, "RULE_IN_BATCH_PACKING_MBS")
    assert v.field == "mbs" and v.valid == (2, 4, 8) and "MBS=1" in v.message("en") and "MBS=1" in v.message("zh")
    assert codes(evolve(layout, mbs=2)) == []
    assert codes(evolve(layout, in_batch_packing=False)) == []

