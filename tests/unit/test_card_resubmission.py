"""The plan card states the real reason of a resubmission (issue 32, "Smaller": it said "after a
rollback" for a node-failure retry). The reasons are the confirmation details the three
resubmitting paths give the gate: gate/retry.auto_retry (a diagnosed failure), gate/submit.
auto_resubmit (the watcher's automatic rollback), and `rollback --resubmit` (none)."""

from __future__ import annotations

import pytest

from mbridge_launch.gate.card import render_card
from plan_fixtures import single_node_h100


def _parent_line(resubmission) -> str:
    card = render_card(single_node_h100(), executor="sbatch", script_path="/x.sh", parent_run_id=7, watcher=False,
                       resubmission=resubmission)
    return card.splitlines()[1]


def test_a_node_failure_retry_says_so(english):
    line = _parent_line({"reason": "diagnosis", "cause": "node_failure", "retry": "resubmit_excluding_node",
                         "exclude_nodes": ["h100-2"], "parent_run_id": 7})
    assert "rollback" not in line and "failed (node_failure; nodes left out: h100-2)" in line and "#7" in line


def test_the_watchers_automatic_rollback_says_so(english):
    line = _parent_line({"reason": "plan.auto_rollback", "to_iter": 300, "trigger": {}, "parent_run_id": 7})
    assert "automatic rollback to iteration 300" in line


@pytest.mark.parametrize("resubmission", [None, {}])
def test_a_rollback_by_hand_keeps_its_words(english, resubmission):
    assert _parent_line(resubmission).startswith("Resubmission of run #7 after a rollback")


def test_no_parent_no_line(english):
    card = render_card(single_node_h100(), executor="sbatch", script_path="/x.sh", watcher=False,
                       resubmission={"reason": "diagnosis"})
    assert "Resubmission" not in card
