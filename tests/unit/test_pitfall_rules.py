"""Layout pitfalls are inputs of the search (planner.pitfall_rules): the chosen layout never carries
one that a layout which fits could have avoided, and every rule code the planner can produce has a
message in both languages."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from mbridge_launch.base.i18n import messages
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner import pitfall_rules
from mbridge_launch.planner.pitfall_rules import ranked_count
from mbridge_launch.planner.rules import Layout
from mbridge_launch.planner.search import search

PLANNER = Path(pitfall_rules.__file__).resolve().parent


def _violation_keys() -> set[tuple[str, str]]:
    """(code, message key) of every Violation the planner builds: rules.py `_v(` calls, the
    search's own `_rule(` rejections and the pitfall rules' `_pitfall(` calls."""
    found = set()
    for name in ("rules.py", "search.py", "pitfall_rules.py"):
        tree = ast.parse((PLANNER / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_v", "_rule", "_pitfall"):
                code, key = node.args[0], node.args[1]
                assert isinstance(code, ast.Constant) and isinstance(key, ast.Constant), ast.dump(node)[:80]
                found.add((code.value, key.value))
    return found


def test_every_planner_rule_code_has_a_message_in_english_and_chinese():
    keys = _violation_keys()
    codes = {code for code, _ in keys}
    assert {"RULE_MEMORY", "RULE_TP_NVLINK", "RULE_GBS", "RULE_FSDP_PP", "RULE_TP_KV_HEADS"} <= codes
    assert set(pitfall_rules.CODES) <= codes
    for lang in ("en", "zh"):
        missing = sorted(f"{code}: {key}" for code, key in keys if key not in messages(lang))
        assert not missing, f"{lang}.yaml lacks the messages of {missing}"


def test_fsdp_with_tp_on_hopper_is_a_pitfall_and_not_on_blackwell():
    layout = Layout(tp=4, fsdp=True, world=16, gbs=64)
    assert [p.code for p in pitfall_rules.layout_pitfalls(layout, None, get_hardware("h100"))] == ["FSDP_TP_H100"]
    assert pitfall_rules.layout_pitfalls(layout, None, get_hardware("b200")) == []


def test_pp_without_vp_is_a_pitfall_only_when_the_bubble_is_real():
    many_steps = Layout(pp=4, world=32, gbs=1024, mbs=1)  # DP 8, 128 micro-batches: bubble 2%
    few_steps = Layout(pp=4, world=32, gbs=64, mbs=1)  # 8 micro-batches: bubble 27%
    assert pitfall_rules.layout_pitfalls(many_steps, None, None) == []
    assert [p.code for p in pitfall_rules.layout_pitfalls(few_steps, None, None)] == ["PP_WITHOUT_VP"]


# dense and MoE models, three systems, 8 to 1024 GPUs, 4k to 128k tokens
REQUESTS = [
    *itertools.product(("llama3_8b",), ("h100", "b200"), (8, 1024), (4096, 32768)),
    ("llama3_70b", "h100", 32, 8192), ("llama3_70b", "h100", 64, 8192), ("llama3_70b", "b200", 64, 32768),
    ("llama31_405b", "h100", 256, 8192), ("llama31_405b", "gb200", 256, 131072),
    ("qwen3_30b_a3b", "h100", 16, 4096), ("qwen3_30b_a3b", "gb200", 64, 32768),
    ("deepseek_v3", "h100", 256, 4096), ("gpt_oss_120b", "b200", 128, 4096),
]


@pytest.mark.parametrize("model,gpu,gpus,seq", REQUESTS)
def test_the_best_layout_carries_no_pitfall_that_a_fitting_layout_avoids(model, gpu, gpus, seq):
    arch, hw = load_arch(model), get_hardware(gpu)
    gbs = max(512, gpus)
    best = search(arch, hw, gpus, gbs=gbs, seq_length=seq, top=1).best
    assert best is not None, f"nothing fits {model} on {gpus} x {gpu} at {seq}"
    every = search(arch, hw, gpus, gbs=gbs, seq_length=seq)  # no pruning: every fitting layout's best
    fewest = min(ranked_count(c.pitfalls) for c in every.candidates)
    assert ranked_count(best.pitfalls) == fewest
    # a pitfall left on it is explained: the step model prices it (PRICED: weighed by speed), or
    # none of the layouts that fit avoided it, or each one that did carried more pitfalls
    reasons = dict(best.kept_pitfalls)
    assert set(reasons) == set(best.pitfall_codes)
    for code, reason in reasons.items():
        avoiders = [c for c in every.candidates if code not in c.pitfall_codes]
        if code in pitfall_rules.PRICED:
            assert reason == "priced"
        elif reason == "unavoidable":
            assert not avoiders
        else:
            assert reason == "fewest" and all(ranked_count(c.pitfalls) > ranked_count(best.pitfalls) for c in avoiders)


def test_megatron_fsdp_with_tp_is_not_chosen_on_h100_when_a_layout_avoids_it():
    for gpus in (16, 32, 64):
        best = search(load_arch("llama3_70b"), get_hardware("h100"), gpus, gbs=512, seq_length=8192, top=5)
        for c in best.candidates[:1]:
            assert not (c.layout.fsdp and c.layout.tp > 1), c.layout
