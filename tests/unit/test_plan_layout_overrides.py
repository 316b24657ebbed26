"""The Plan's overrides the rules read back (issue 15, rules conformance): the hierarchical CP
sizes that a2a+p2p needs (without them a Plan that gives them would be refused), and in-batch
packing, which needs MBS > 1."""

from __future__ import annotations

from dataclasses import replace

from mbridge_launch.plan.layout import int_list_override, layout_of
from mbridge_launch.planner.rules import check_layout
from plan_fixtures import moe_ep, override


def _with(**items: str):
    plan = moe_ep()
    plan.overrides = [*plan.overrides, *(override(k, v) for k, v in items.items())]
    return plan


def test_hierarchical_sizes_are_read_from_the_plan():
    plan = _with(**{"model.cp_comm_type": "a2a+p2p", "model.hierarchical_context_parallel_sizes": "[2, 4]"})
    assert int_list_override(plan, "model.hierarchical_context_parallel_sizes") == (2, 4)
    layout = layout_of(plan)
    assert layout.hierarchical_cp == (2, 4)
    codes = [v.code for v in check_layout(replace(layout, cp=8, seq_length=8192), None)]
    assert "RULE_CP_HIERARCHICAL" not in codes
    assert "RULE_CP_HIERARCHICAL" in [v.code for v in check_layout(replace(layout, cp=8, hierarchical_cp=None,
                                                                           seq_length=8192), None)]


def test_a_malformed_size_list_reads_as_none():
    for text in ("2,4", "[2, x]", "[]", "[-1]"):
        plan = _with(**{"model.hierarchical_context_parallel_sizes": text})
        assert layout_of(plan).hierarchical_cp is None, text


def test_in_batch_packing_override_reaches_the_rule():
    layout = layout_of(_with(**{"dataset.enable_in_batch_packing": "true"}))
    assert layout.in_batch_packing is True
    assert "RULE_IN_BATCH_PACKING_MBS" in [v.code for v in check_layout(replace(layout, mbs=1), None)]
    assert "RULE_IN_BATCH_PACKING_MBS" not in [v.code for v in check_layout(replace(layout, mbs=2), None)]
