"""Rules conformance (issue 15): every rule of planner.rules / planner.pitfall_rules against the real
Megatron Bridge 0.6.2 validation, both ways (the probe table: tests/bridge/rules_conformance.py).

Forward: a layout that breaks exactly one rule is rejected by the real code too, or the rule says
why it is stricter (rules.STRICTER_THAN_MEGATRON / pitfall_rules.STRICTER_THAN_MEGATRON).
Reverse: every layout the real code rejects is rejected by some error of check_layout, unless the
reviewed table says why no layout rule can see it (`outside_layout`).
All probes run in one build_recipe.py --jobs process (one recipe import).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import pytest

from mbridge_launch.planner.rules import check_layout

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rules_conformance as rc  # noqa: E402  (the tier's own module, beside this file)

FORWARD = [p for p in rc.PROBES if not p.reverse]
ALL_IDS = [p.id for p in rc.PROBES]


@pytest.fixture(scope="module")
def real(run_jobs):
    return run_jobs(rc.jobs())


def _rejected(verdict: str) -> bool:
    return verdict.startswith(rc.REJECTS)


def _errors(probe: rc.Probe) -> list[tuple[str, str]]:
    return [(v.code, v.key) for v in rc.violations(probe) if v.severity == "error"]


# ------------------------------------------------------------------ planner side (no real code needed)


def test_every_rule_the_source_can_produce_has_a_probe():
    probed = {p.variant for p in FORWARD}
    missing = rc.rule_variants() - probed
    assert not missing, f"rules without a conformance probe (add one to rules_conformance.PROBES): {sorted(missing)}"
    assert not probed - rc.rule_variants(), "a probe names a rule the source no longer produces"


def test_probe_ids_are_unique():
    assert len(set(ALL_IDS)) == len(ALL_IDS)


@pytest.mark.parametrize("probe", FORWARD, ids=[p.id for p in FORWARD])
def test_probe_breaks_exactly_its_rule(probe):
    found = rc.violations(probe)
    code, key = probe.variant
    mine = [v for v in found if (v.code, v.key) == (code, key)]
    assert mine, f"{probe.id}: {code}/{key} not raised; got {[str(v) for v in found]}"
    if mine[0].severity == "error":
        others = [e for e in _errors(probe) if e != (code, key)]
        assert not others, f"{probe.id} breaks other rules too: {others}"


@pytest.mark.parametrize("code", sorted(rc.stricter_reasons()))
def test_every_stricter_reason_names_a_rule_and_says_why(code):
    assert code in {c for c, _ in rc.rule_variants()}, f"reason for an unknown rule {code}"
    assert len(rc.stricter_reasons()[code].split()) >= 4, f"{code}: the reason must say why"


# ------------------------------------------------------------------ against the real validation


@pytest.mark.parametrize("pid", ALL_IDS)
def test_the_real_verdict_is_the_recorded_one(pid, real):
    probe = next(p for p in rc.PROBES if p.id == pid)
    result = real[pid]
    assert rc.built(result), f"{pid}: the base recipe did not build: {result.get('error')}"
    got = rc.verdict(result)
    assert _rejected(got) == _rejected(probe.real), f"{pid}: recorded {probe.real!r}, the real code says {got!r}"
    if _rejected(got):
        fragment = probe.real[len(rc.REJECTS):]
        assert fragment and fragment in got, f"{pid}: recorded {fragment!r}, the real error is {got!r}"


@pytest.mark.parametrize("probe", FORWARD, ids=[p.id for p in FORWARD])
def test_rule_is_rejected_by_megatron_or_says_why(probe, real):
    code = probe.variant[0]
    if not _rejected(rc.verdict(real[probe.id])):
        assert code in rc.stricter_reasons(), (
            f"{code} ({probe.id}): the real validation accepts {rc.overrides(probe)}; add why the rule is "
            f"stricter to STRICTER_THAN_MEGATRON")


def test_no_stale_stricter_reason(real):
    accepted = defaultdict(list)
    for probe in FORWARD:
        accepted[probe.variant[0]].append(not _rejected(rc.verdict(real[probe.id])))
    stale = [code for code in rc.stricter_reasons() if not any(accepted[code])]
    assert not stale, f"the real code rejects every probe of {stale}: drop their STRICTER_THAN_MEGATRON reasons"


@pytest.mark.parametrize("pid", ALL_IDS)
def test_every_real_layout_rejection_is_caught_by_a_rule(pid, real):
    probe = next(p for p in rc.PROBES if p.id == pid)
    if not _rejected(rc.verdict(real[pid])):
        return  # accepted: nothing to catch (its rule, if any, is checked above)
    if probe.outside_layout:
        assert not _errors(probe), f"{pid} is listed as outside the layout, yet a rule catches it"
        return
    assert _errors(probe), f"{pid}: the real code rejects it ({rc.verdict(real[pid])}) and no rule does: a missing rule"


def test_every_recipe_rejected_for_its_layout_is_caught_by_a_rule(all_results):
    # the reverse direction on the recipes themselves: each recipe the real validation rejects for a
    # layout reason (rules_conformance.LAYOUT_ERRORS) is rejected by a rule on its own layout, or the
    # reason is reviewed in OUTSIDE_LAYOUT
    missed = [f"{result['name']}: {result['error']['message'][:200]}" for result in _recipe_rejections(all_results)
              if not _recipe_caught(result) and rc.layout_rejection(result) not in rc.OUTSIDE_LAYOUT]
    assert not missed, "recipes the real code rejects for their layout and no rule does:\n" + "\n".join(missed)


def _recipe_rejections(all_results):
    return [r for r in all_results if rc.layout_rejection(r) is not None]


def _recipe_caught(result) -> bool:
    layout, arch, hardware = rc.recipe_layout(result)
    return any(v.severity == "error" for v in check_layout(layout, arch, hardware))


def test_summary(real, all_results, capsys):
    variants = sorted(rc.rule_variants())
    rejected = {p.variant for p in FORWARD if _rejected(rc.verdict(real[p.id]))}
    stricter = [v for v in variants if v not in rejected and v[0] in rc.stricter_reasons()]
    reverse_rejected = [p for p in rc.PROBES if _rejected(rc.verdict(real[p.id]))]
    caught = [p for p in reverse_rejected if _errors(p)]
    outside = [p for p in reverse_rejected if p.outside_layout]
    recipes = _recipe_rejections(all_results)
    recipes_caught = [r for r in recipes if _recipe_caught(r)]
    line = (f"rules conformance: {len(variants)} rules, {len(rejected)} real rejects, {len(stricter)} stricter with reason, "
            f"{len(rc.PROBES)} probes ({sum(p.reverse for p in rc.PROBES)} reverse or control), {len(reverse_rejected)} real "
            f"layout rejections, {len(caught)} caught by a rule, {len(outside)} outside the layout (reviewed); recipes "
            f"rejected for their layout: {len(recipes)}, {len(recipes_caught)} caught by a rule")
    with capsys.disabled():
        print("\n" + line)
    assert len(rejected) + len(stricter) == len(variants), line
    assert len(caught) + len(outside) == len(reverse_rejected), line
