"""The main path agrees with itself over the scenario matrix (scenario_table.SCENARIOS): every
step accepts what the one before wrote, in both languages, with no traceback (see
scenario_chain for what counts as a contradiction)."""

from __future__ import annotations

from collections import Counter

import pytest
from scenario_chain import run_chain
from scenario_table import SCENARIOS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_matrix_covers_what_the_issue_asks():
    families = Counter(s.family for s in SCENARIOS)
    args = [a for s in SCENARIOS for a in s.args]
    gpu_types = {args[i + 1] for i, a in enumerate(args) if a == "--gpu-type"} | {"h100"}
    goals = {args[i + 1] for i, a in enumerate(args) if a == "--goal"} | {"pretrain"}
    counts = {int(args[i + 1]) for i, a in enumerate(args) if a == "--gpus"}
    seqs = {int(args[i + 1]) for i, a in enumerate(args) if a == "--seq-length"}
    assert len(SCENARIOS) >= 60
    assert all(families[f] >= 5 for f in ("dense", "moe", "hybrid", "vlm")), families
    assert gpu_types >= {"h100", "h200", "b200", "b300", "gb200", "gb300"}
    assert goals >= {"pretrain", "sft", "lora", "dora"}
    assert counts >= {1, 2, 12, 24, 48, 96, 8, 16, 256, 1024}
    assert min(seqs) <= 2048 and max(seqs) >= 131072
    assert len({s.id for s in SCENARIOS}) == len(SCENARIOS)


_outcomes: dict = {}  # scenario id -> Outcome, shared by the tests below (each chain runs once)


def _outcome(scenario, tmp_path_factory, monkeypatch):
    if scenario.id not in _outcomes:
        directory = tmp_path_factory.mktemp(scenario.id)
        monkeypatch.setenv("NEMORUN_HOME", str(directory / "nemorun-home"))  # NeMo-Run rewrites a "/nemo_run" part
        _outcomes[scenario.id] = run_chain(scenario, directory)
    return _outcomes[scenario.id]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_main_path_agrees_with_itself(scenario, tmp_path_factory, monkeypatch):
    outcome = _outcome(scenario, tmp_path_factory, monkeypatch)
    assert not outcome.contradictions, "\n".join(outcome.contradictions)


def test_most_scenarios_reach_the_end_of_the_path(tmp_path_factory, monkeypatch):
    """Refusing is allowed (a 70B LoRA on one GPU has no layout), but a matrix that mostly refuses
    proves nothing: at least 85% of the requests go all the way to a dry-run script."""
    done = sum(1 for s in SCENARIOS if not _outcome(s, tmp_path_factory, monkeypatch).refused)
    assert done >= 0.85 * len(SCENARIOS), f"{done} of {len(SCENARIOS)} reached the dry run"
