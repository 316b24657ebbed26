"""A near-tie set the model cannot rank (issue 34, item 4): never "within 100% of the first";
plan says the model cannot rank these layouts, points to `tune` and lists a bounded part."""

from __future__ import annotations

import json
from types import SimpleNamespace

from mbridge_launch.cli.main import main
from mbridge_launch.cli.render import plan_report as report
from mbridge_launch.planner.near_tie import LARGE_SET, NO_RELIABLE_ESTIMATE, SHOWN, cannot_rank, shown

# bf16 dense Qwen SFT at 131k tokens on one H100 node: far outside the calibrated domain, the
# near-tie tolerance reaches its cap (100%) and the set holds more than SHOWN layouts
WIDE = ["plan", "--model", "qwen3_8b", "--gpus", "8", "--gpu-type", "h100", "--goal", "sft",
        "--seq-length", "131072", "--top", "30"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_wide_tolerance_or_a_large_set_cannot_be_ranked():
    assert cannot_rank(NO_RELIABLE_ESTIMATE, 2)
    assert cannot_rank(1.0, 3)
    assert not cannot_rank(NO_RELIABLE_ESTIMATE - 0.01, 3)
    assert cannot_rank(0.05, LARGE_SET + 1)
    assert not cannot_rank(0.05, LARGE_SET)
    assert not cannot_rank(1.0, 1)  # the first alone is no tie


def test_an_unranked_set_shows_its_first_part_only():
    ties = [(i, object()) for i in range(1, 14)]
    assert shown(ties, unranked=True) == ties[:SHOWN]
    assert shown(ties, unranked=False) == ties


def _result(within: float, size: int, listed: int | None = None):
    """A PlanResult stand-in with the fields the renderers read."""
    from mbridge_launch.planner.entry import PlanResult

    cand = SimpleNamespace(layout=SimpleNamespace(tp=1, pp=1, vp=None, cp=1, ep=1, etp=None, dp=8, mbs=1, fsdp=False,
                                                  recompute="none", recompute_layers=None),
                           tokens_per_sec_per_gpu=1000.0, mfu=0.3, step_time_s=1.0, memory_total_gb=40.0)
    ties = [(i, cand) for i in range(1, size + 1)]
    tie = SimpleNamespace(within=within, evidence=False, basis=lambda lang=None: "BASIS")
    result = SimpleNamespace(near_tie=ties, tie=tie, near_tie_complete=True, candidates=[c for _, c in ties])
    result.near_tie_unranked = PlanResult.near_tie_unranked.fget(result)
    result.near_tie_shown = PlanResult.near_tie_shown.fget(result)
    return result


def test_the_text_says_cannot_rank_and_tune_never_within_100_percent():
    lines = report.near_tie_text(_result(1.0, 13))
    text = "\n".join(lines)
    assert "cannot rank layouts 1, 2, 3, 4, 5:" in text and "mbridge-launch tune" in text
    assert "13 layouts" in text and f"first {SHOWN} are listed" in text
    assert "within 100%" not in text and "6," not in text


def test_a_narrow_small_set_keeps_its_tolerance_wording():
    text = "\n".join(report.near_tie_text(_result(0.04, 3)))
    assert "Layouts 1, 2, 3 are predicted within 4% of the first" in text
    assert "cannot rank" not in text
    data = report.near_tie_json(_result(0.04, 3))
    assert data["cannot_rank"] is False and data["advice"] is None and len(data["layouts"]) == data["size"] == 3


def test_plan_json_and_text_carry_the_unranked_set(capsys):
    code, out, _ = run(capsys, *WIDE, "--format", "json")
    assert code == 0
    data = json.loads(out)
    ties = data["near_tie_set"]
    assert ties["within"] >= NO_RELIABLE_ESTIMATE
    assert ties["cannot_rank"] is True and ties["advice"] == "tune"
    assert data["near_tie"] == ties["size"] > len(ties["layouts"]) == SHOWN
    assert [x["rank"] for x in ties["layouts"]] == list(range(1, SHOWN + 1))
    code, text, _ = run(capsys, *WIDE, "--lang", "en")
    assert code == 0
    assert "The model cannot rank layouts 1, 2, 3, 4, 5:" in text and "`mbridge-launch tune`" in text
    assert "are predicted within" not in text
    code, text, _ = run(capsys, *WIDE, "--lang", "zh")
    assert code == 0
    assert "模型无法为布局 1, 2, 3, 4, 5 排序" in text and "mbridge-launch tune" in text
