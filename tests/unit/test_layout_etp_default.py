"""An unset expert TP is what Megatron Bridge 0.6.2 runs: 1 with EP > 1, else TP (Megatron Core's
default); the memory of an EP=1 MoE layout at TP4 splits its experts four ways, as the run does."""

from __future__ import annotations

from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.layout_words import layout_msg
from mbridge_launch.planner.memory import estimate_memory
from mbridge_launch.planner.rules import Layout


def _layout(**kw) -> Layout:
    base = dict(tp=4, pp=1, cp=1, ep=1, sp=True, mbs=1, gbs=64, seq_length=4096, world=4)
    base.update(kw)
    return Layout(**base)


def test_unset_etp_follows_bridge_default():
    assert _layout().etp_size == 4  # EP = 1: Megatron Core's ETP = TP
    assert _layout(ep=4, world=16).etp_size == 1  # EP > 1: Bridge's ETP = 1
    assert _layout(etp=2).etp_size == 2  # set: as set
    assert _layout().etp_shown == 1  # texts keep "ETP=1" for an unset value


def test_ep1_moe_experts_split_by_tp_when_etp_unset():
    arch = load_arch("qwen3_30b_a3b")
    assert arch is not None and arch.num_moe_experts
    unset = estimate_memory(arch, _layout())
    one = estimate_memory(arch, _layout(etp=1))
    # experts are most of this model's weights: split four ways they take far less
    assert unset.weights < 0.5 * one.weights


def test_layout_text_does_not_show_tp_as_etp_for_a_dense_layout():
    text = layout_msg(_layout()).render("en")
    assert "ETP=4" not in text
