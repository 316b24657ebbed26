"""Layout search, estimate_layout, throughput sanity (recommend takes the planner's first: planner.entry)."""

from __future__ import annotations

import pytest

from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import ModelArch, load_arch
from mbridge_launch.planner.rules import Layout, check_layout, evolve
from mbridge_launch.planner.search import (
    FSDP_PRECISIONS,
    MEMORY_COMFORT,
    MEMORY_PRESSURE,
    Options,
    estimate_layout,
    ranking_terms,
    search,
    utility,
)
from mbridge_launch.planner.throughput import estimate_step

H100, GB200, B200 = get_hardware("h100"), get_hardware("gb200"), get_hardware("b200")


def _errors(layout, arch, hw):
    return [v for v in check_layout(layout, arch, hw) if v.severity == "error"]


@pytest.mark.parametrize("model,hw,gpus,gbs,seq,precision", [
    ("llama3_8b", H100, 8, 128, 8192, "fp8cs"),
    ("llama3_70b", H100, 64, 256, 8192, "fp8cs"),
    ("qwen3_30b_a3b", B200, 8, 512, 4096, "fp8mx"),
    ("deepseek_v3", GB200, 256, 4096, 4096, "fp8mx"),
    ("nemotron_3_nano", H100, 16, 1024, 8192, "fp8cs"),
])
def test_every_candidate_passes_the_rules_and_fits(model, hw, gpus, gbs, seq, precision):
    arch = load_arch(model)
    result = search(arch, hw, gpus, gbs=gbs, seq_length=seq, precision=precision, top=8)
    assert result.candidates
    # ranked by utility: predicted speed, minus a small charge above 80% of HBM, plus the
    # conventional-layout preference of the grid
    scores = [utility(c.tokens_per_sec_per_gpu, c.memory_total_gb / hw.hbm_gb, c.layout) for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    grids = [c.grid for c in result.candidates]
    assert len(grids) == len(set(grids))  # one entry per grid, its best micro-batch/VP/recompute
    for c in result.candidates:
        assert _errors(c.layout, arch, hw) == [], c.layout
        assert c.fits and c.layout.world == gpus and c.layout.gbs == gbs
        assert 0 < c.mfu < 1 and c.model_tflops_per_gpu <= hw.peak(precision)


def test_rejections_are_aggregated_by_rule():
    arch = load_arch("llama3_70b")
    result = search(arch, H100, 64, gbs=256, seq_length=8192, precision="fp8cs", top=3)
    assert "RULE_MEMORY" in result.rejected  # e.g. TP=1 PP=1 does not fit 80 GB
    assert "RULE_TP_NVLINK" in result.rejected or "RULE_TP_KV_HEADS" in result.rejected
    mem = result.rejected["RULE_MEMORY"]
    assert mem.count >= 1 and "TP=" in mem.example


def test_branch_and_bound_keeps_the_same_top():
    arch = load_arch("qwen3_30b_a3b")
    full = search(arch, H100, 16, gbs=1024, seq_length=4096, precision="fp8cs")
    top = search(arch, H100, 16, gbs=1024, seq_length=4096, precision="fp8cs", top=3)
    assert [c.layout for c in top.candidates] == [c.layout for c in full.candidates[:3]]
    assert top.evaluated <= full.evaluated


def test_options_restrict_the_search():
    arch = load_arch("llama3_8b")
    result = search(arch, H100, 8, gbs=128, seq_length=8192, precision="fp8cs", options=Options(fsdp=True), top=3)
    assert result.candidates and all(c.layout.fsdp for c in result.candidates)
    result = search(arch, H100, 8, gbs=128, seq_length=8192, options=Options(recompute="full"), top=3)
    assert all(c.layout.recompute == "full" for c in result.candidates)


def test_no_layout_when_nothing_fits():
    result = search(load_arch("llama31_405b"), H100, 8, gbs=8, seq_length=8192, precision="fp8cs", top=3)
    assert result.candidates == [] and "RULE_MEMORY" in result.rejected


def test_estimate_layout_fields():
    arch = load_arch("llama3_8b")
    c = estimate_layout(Layout(mbs=1, gbs=128, seq_length=8192, world=8, fsdp=True), arch, H100, precision="fp8cs")
    assert c.fits and c.memory_limit_gb == pytest.approx(76.0) and c.memory_gb["total"] == pytest.approx(c.memory_total_gb, abs=0.01)
    assert c.step_time_s > 0 and c.tokens_per_sec_per_gpu == pytest.approx(128 * 8192 / c.step_time_s / 8)
    assert c.model_tflops_per_gpu == pytest.approx(c.tokens_per_sec_per_gpu * 51_470_401_536 / 1e12)
    assert c.mfu == pytest.approx(c.model_tflops_per_gpu / 1979)
    # an architecture without its widths (every catalog model has them since issue 34) is not estimated
    partial = ModelArch(name="partial", num_layers=42, hidden_size=3584, num_attention_heads=16)
    assert estimate_layout(Layout(world=8, gbs=8), partial, H100) is None


def test_throughput_responds_to_the_layout():
    arch = load_arch("llama3_70b")
    base = Layout(tp=4, pp=8, vp=5, sp=True, mbs=1, gbs=256, seq_length=8192, world=64)
    t0 = estimate_step(arch, H100, base, "fp8cs").tokens_per_sec_per_gpu
    assert estimate_step(arch, H100, base, "bf16").tokens_per_sec_per_gpu < t0  # FP8 GEMMs are faster
    assert estimate_step(arch, H100, evolve(base, recompute="full"), "fp8cs").tokens_per_sec_per_gpu < t0
    assert estimate_step(arch, H100, evolve(base, vp=None), "fp8cs").breakdown["pp_bubble"] > \
        estimate_step(arch, H100, base, "fp8cs").breakdown["pp_bubble"]  # VP shrinks the bubble
    # TP across nodes (16 > 8 GPUs of NVLink) is much slower than inside the node
    wide = estimate_step(arch, H100, evolve(base, tp=16, pp=4, vp=None), "fp8cs").breakdown["tp_comm"]
    assert wide > 3 * estimate_step(arch, H100, base, "fp8cs").breakdown["tp_comm"]
    lora = estimate_step(arch, H100, base, "fp8cs", "lora")
    assert lora.flops_per_token < estimate_step(arch, H100, base, "fp8cs").flops_per_token


def test_expert_all_to_all_prefers_nvlink():
    arch = load_arch("gpt_oss_120b")
    inside = Layout(ep=8, mbs=4, gbs=1280, seq_length=4096, world=64)
    across = evolve(inside, ep=64)
    ep_in = estimate_step(arch, B200, inside, "bf16").breakdown["ep_comm"]
    ep_out = estimate_step(arch, B200, across, "bf16").breakdown["ep_comm"]
    assert ep_out > 3 * ep_in  # B200 nodes: EP=64 crosses the network
    nvl = estimate_step(arch, GB200, across, "bf16").breakdown["ep_comm"]
    assert nvl < ep_out  # GB200 NVL72: EP=64 stays on NVLink


def test_ring_latency_charges_huge_data_parallel_groups():
    # Llama 3.1 405B, Megatron-FSDP at TP2 over 1,024 H100s: 512 data-parallel ranks, three ring
    # collectives per layer and micro-batch, each 511 steps that cross the network
    from dataclasses import replace

    from mbridge_launch.planner.throughput import CAL

    arch = load_arch("llama31_405b")
    fsdp = Layout(tp=2, sp=True, fsdp=True, recompute="full", mbs=1, gbs=1536, seq_length=8192, world=1024)
    no_latency = replace(CAL, ring_step_s=0.0)
    slow = estimate_step(arch, H100, fsdp, "fp8cs").breakdown["dp_comm"]
    fast = estimate_step(arch, H100, fsdp, "fp8cs", cal=no_latency).breakdown["dp_comm"]
    assert slow > fast
    # the same model in 8 data-parallel replicas (TP8 PP8 CP2) pays almost no ring latency
    small_dp = Layout(tp=8, pp=8, vp=8, cp=2, sp=True, cp_comm_type="p2p", mbs=1, gbs=1536, seq_length=8192, world=1024)
    a = estimate_step(arch, H100, small_dp, "fp8cs").breakdown["dp_comm"]
    b = estimate_step(arch, H100, small_dp, "fp8cs", cal=no_latency).breakdown["dp_comm"]
    assert a - b < (slow - fast) / 10


def _gemm_bound_cal():
    """Constants under which a layer's time is almost all GEMM, so the LM head's weight in layers
    is its FLOP ratio (about 2 for Llama 3 8B) whatever the committed fit says."""
    from dataclasses import replace

    from mbridge_launch.planner.throughput import CAL

    return replace(CAL, elementwise=1e-3, layer_latency_s=1e-9, attn_eff=0.9, attn_half_tokens=1.0)


def test_last_pipeline_stage_carries_the_lm_head():
    # Llama 3 8B (128,256-token vocabulary, hidden 4,096) at PP=4 (32 layers, 8 per stage): the
    # LM head costs about two layers, so the last stage is the slowest unless the recipe declares
    # an uneven split that gives it fewer layers (9 / 9 / 8 / 6 + head)
    arch, cal = load_arch("llama3_8b"), _gemm_bound_cal()
    even = Layout(pp=4, mbs=1, gbs=256, seq_length=4096, world=4)
    t_even = estimate_step(arch, H100, even, "bf16", cal=cal)
    t_balanced = estimate_step(arch, H100, evolve(even, uneven_pp=True), "bf16", cal=cal)
    # compared before the MFU ceiling (issue 17), which this GEMM-bound calibration reaches
    def raw(e):
        return e.step_time_s - e.breakdown.get("mfu_ceiling", 0.0)

    assert raw(t_even) > raw(t_balanced)
    one_stage = estimate_step(arch, H100, Layout(mbs=1, gbs=256, seq_length=8192, world=1), "fp8cs")
    assert one_stage.breakdown["pp_bubble"] == 0.0


def test_uneven_stages_hold_whole_layers():
    # the busiest rank's work in layers; the last rank also runs a head worth `head` layers
    from mbridge_launch.planner.throughput import _slowest_stage_layers

    even = Layout(pp=4, mbs=1, gbs=64, seq_length=4096, world=4)
    # 96 layers on 4 ranks, even split: 24 each, the last one 24 + 2.6
    assert _slowest_stage_layers(96, 4, 1, 2.6, even) == pytest.approx(26.6)
    # with VP=2 the chunks hold ceil(96 / 8) = 12 layers, two per rank
    assert _slowest_stage_layers(96, 4, 2, 0.0, even) == 24
    uneven = evolve(even, pp=32, world=32, uneven_pp=True)
    # 94 layers on 32 ranks, head 2.6: the last rank keeps 1 layer (3.6), 31 ranks hold 3 each
    # (93): 3.6 against a mean of (94 + 2.6) / 32 = 3.02, not the mean itself
    assert _slowest_stage_layers(94, 32, 1, 2.6, uneven) == pytest.approx(3.6)
    # 94 layers on 8 ranks: last rank 10 + 2.6, the other 7 hold 84 (12 each)
    assert _slowest_stage_layers(94, 8, 1, 2.6, evolve(uneven, pp=8, world=8)) == pytest.approx(12.6)
    # explicit first/last stage layer counts: 61 layers, first 4, last 3 (+0.5 head), 14 ranks share 54
    explicit = evolve(uneven, pp=16, world=16, first_stage_layers=4, last_stage_layers=3)
    assert _slowest_stage_layers(61, 16, 1, 0.5, explicit) == 4  # ceil(54 / 14) = 4 >= 3.5
    # a head worth less than one layer cannot be balanced with whole layers
    assert _slowest_stage_layers(32, 4, 1, 0.9, evolve(even, uneven_pp=True)) == \
        _slowest_stage_layers(32, 4, 1, 0.9, even) == pytest.approx(8.9)
    # and the step time follows: Llama 3 8B on 16 stages (2 layers each, head ~2 layers) cannot
    # balance its head, so the busiest stage's share of the work exceeds 1/16 by far
    arch, cal = load_arch("llama3_8b"), _gemm_bound_cal()
    deep = Layout(pp=16, mbs=1, gbs=256, seq_length=8192, world=16, uneven_pp=True)
    one = estimate_step(arch, H100, Layout(mbs=1, gbs=256, seq_length=8192, world=1), "fp8cs", cal=cal)
    t16 = estimate_step(arch, H100, deep, "fp8cs", cal=cal)
    assert t16.breakdown["gemm"] / deep.microbatches > 1.3 * one.breakdown["gemm"] / 256 / 16


@pytest.mark.parametrize("layers,pp", [(94, 32), (94, 8), (61, 16), (126, 16), (80, 3), (36, 4), (5, 4)])
@pytest.mark.parametrize("head", [0.0, 0.4, 1.0, 2.6, 7.5])
def test_uneven_split_is_the_best_whole_layer_split(layers, pp, head):
    # the closed form tries four counts for the last rank around the balance point; here every split is tried
    from mbridge_launch.planner.throughput import _slowest_stage_layers

    uneven = Layout(pp=pp, mbs=1, gbs=64, seq_length=4096, world=pp, uneven_pp=True)
    exhaustive = min(max(j + head, -(-(layers - j) // (pp - 1))) for j in range(layers + 1))
    assert _slowest_stage_layers(layers, pp, 1, head, uneven) == pytest.approx(exhaustive)


def test_interleaving_hides_pipeline_send_receive():
    # 1F1B without interleaving waits for every send/receive; interleaved schedules overlap them
    from mbridge_launch.planner.throughput import CAL

    arch = load_arch("llama3_70b")
    plain = Layout(tp=4, pp=8, sp=True, mbs=1, gbs=256, seq_length=8192, world=64)
    interleaved = evolve(plain, vp=5)
    per_send = {}
    for L in (plain, interleaved):
        est = estimate_step(arch, H100, L, "fp8cs")
        bubble = (L.pp - 1) / L.vp_size
        per_send[L.vp_size] = est.breakdown["pp_comm"] / ((L.microbatches + bubble) * 2 * L.vp_size)
    assert per_send[5] == pytest.approx(per_send[1] * CAL.tp_exposed)


def test_grace_hosts_pay_less_launch_latency():
    from dataclasses import replace

    from mbridge_launch.planner.throughput import CAL

    assert GB200.host == "grace" and B200.host == "x86" and H100.host == "x86"
    arch = load_arch("qwen3_30b_a3b")
    layout = Layout(ep=8, mbs=1, gbs=64, seq_length=4096, world=8)
    latency = {}
    for factor in (0.5, 1.0):
        cal = replace(CAL, host_latency={"x86": 1.0, "grace": factor})
        latency[factor] = estimate_step(arch, GB200, layout, "fp8mx", cal=cal).breakdown["latency"]
        # an x86 host is not affected by the Grace factor
        assert estimate_step(arch, B200, layout, "fp8mx", cal=cal).breakdown["latency"] == \
            estimate_step(arch, B200, layout, "fp8mx", cal=replace(CAL, host_latency={"x86": 1.0, "grace": 1.0})).breakdown["latency"]
    assert latency[0.5] < latency[1.0]


def test_search_cost_grows_with_divisors_not_gpus():
    arch, hw = load_arch("deepseek_v3"), GB200
    small = search(arch, hw, 1024, gbs=1024, seq_length=4096, precision="fp8mx", top=5)  # 11 divisors
    large = search(arch, hw, 16384, gbs=16384, seq_length=4096, precision="fp8mx", top=5)  # 15 divisors
    assert large.evaluated < 2 * small.evaluated


def test_utility_charges_only_near_full_memory():
    # MEMORY_PRESSURE per unit of HBM fraction above MEMORY_COMFORT: 0.95 costs MEMORY_PRESSURE x 0.15
    assert utility(1000.0, 0.5) == utility(1000.0, 0.8) > utility(1000.0, 0.95)
    assert utility(1000.0, 0.95) == pytest.approx(utility(1000.0, 0.5) - MEMORY_PRESSURE * (0.95 - MEMORY_COMFORT))
    assert MEMORY_COMFORT == 0.8 and MEMORY_PRESSURE > 0  # the validated charge (benchmarks/preferences.py)


def test_no_layout_preference_is_left_in_the_ranking():
    # the EP credit and the CP charge were removed (benchmarks/preferences.py: no held-out gain);
    # the layout changes the utility only through its speed and memory
    base = Layout(tp=1, pp=1, cp=1, ep=1, mbs=1, gbs=64, seq_length=8192, world=64)
    for other in (evolve(base, ep=64), evolve(base, cp=4), evolve(base, cp=4, seq_length=131072)):
        assert utility(1000.0, 0.5, other) == utility(1000.0, 0.5, base) == utility(1000.0, 0.5)
        assert set(ranking_terms(0.5, other)) == {"memory"}


@pytest.mark.parametrize("precision", ["fp8mx", "nvfp4"])
def test_fsdp_is_searched_in_every_precision_megatron_fsdp_runs(precision):
    # Megatron-FSDP gathers MXFP8 weights (megatron_fsdp/mixed_precision.py) and runs NVFP4 with
    # bf16 primary weights (Bridge's NVFP4 Megatron-FSDP perf recipes): the search offers it
    assert precision in FSDP_PRECISIONS
    arch, hw = load_arch("llama3_70b"), get_hardware("gb300")
    result = search(arch, hw, 64, gbs=256, seq_length=8192, precision=precision)
    assert any(c.layout.fsdp and c.layout.pp == 1 for c in result.candidates)
    assert not any(c.layout.fsdp and c.layout.pp > 1 for c in result.candidates)


@pytest.mark.parametrize("model,hw,gpus,gbs,seq,precision", [
    ("llama31_405b", H100, 1024, 1536, 8192, "fp8cs"),
    ("qwen3_235b_a22b", B200, 256, 8192, 4096, "fp8mx"),
    ("llama3_70b", GB200, 64, 128, 8192, "bf16"),
])
def test_pruning_gives_the_unpruned_ranking_and_prunes(model, hw, gpus, gbs, seq, precision):
    """Branch and bound (top=K) skips grids whose bound cannot reach the K-th (fewest pitfalls,
    utility) and so answers exactly as the full ranking does; it compares the rank key's pitfall
    and utility terms (search._prune_key), not positions of the key, which a new leading term
    (the measured layout first) once shifted so that nothing was pruned."""
    arch = load_arch(model)
    full = search(arch, hw, gpus, gbs=gbs, seq_length=seq, precision=precision)
    cut = search(arch, hw, gpus, gbs=gbs, seq_length=seq, precision=precision, top=5)
    grids = [(c.layout.tp, c.layout.pp, c.layout.cp, c.layout.ep, c.layout.fsdp, c.layout.mbs, c.layout.vp_size)
             for c in full.candidates[:5]]
    assert grids == [(c.layout.tp, c.layout.pp, c.layout.cp, c.layout.ep, c.layout.fsdp, c.layout.mbs,
                      c.layout.vp_size) for c in cut.candidates]
    assert cut.rejected["PRUNED_SLOWER"].count > 0
