"""Findings conformance (issue 15): the catalog's findings against the real Megatron Bridge 0.6.2
validation of every recipe at the GPU count in its name (the session's `all_results`).

(a) every recipe the real code rejects is flagged by a finding that predicts the real error;
(b) every static ERROR finding agrees with the real code, or is listed (NOT_CONFIRMED) with why;
    a finding masked by an earlier real error is shown by a second real run without that cause;
(c) one summary line with the counts, and README's findings table holds for this run.
The mapping and its reasons: findings_conformance.py.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import findings_conformance as fc  # noqa: E402  (the tier's own module, beside this file)

README = Path(__file__).resolve().parent / "README.md"


@pytest.fixture(scope="module")
def catalog():
    return json.loads(fc.CATALOG.read_text())


@pytest.fixture(scope="module")
def summary(catalog, all_results):
    return fc.evaluate(catalog, all_results)


def test_every_real_rejection_is_flagged_with_its_cause(summary):
    unflagged = [f"{r.name} [{', '.join(r.codes) or 'no finding'}]: {r.error[:200]}" for r in summary.unflagged]
    assert not unflagged, "rejected by the real validation, no catalog finding predicts the error:\n" + "\n".join(unflagged)
    assert summary.rejected, "no real rejection at all: the run is not the --all all run this test expects"


def test_every_static_error_finding_agrees_or_is_listed(summary):
    unexplained = [f"{v.code} on {v.name}: {v.why}" for v in summary.verdicts if v.outcome == "disagrees"]
    assert not unexplained, "static error findings the real code does not confirm:\n" + "\n".join(unexplained)


def test_not_confirmed_entries_are_in_use(summary):
    used = {v.code for v in summary.verdicts if v.outcome in ("stricter", "not-checkable") and v.code in fc.NOT_CONFIRMED}
    stale = sorted(set(fc.NOT_CONFIRMED) - used)
    assert not stale, f"NOT_CONFIRMED entries no recipe needs any more: {stale}"


def test_masked_findings_surface_once_the_first_cause_is_removed(summary, run_jobs, tmp_path_factory):
    """Validation stops at its first error: gpt_oss_20b's fp8mx/nvfp4 benchmarks fail on the data
    cache path before the sequence-length check. One real run with that cause removed (FIXES) must
    show the masked finding's own error."""
    jobs, unfixable = fc.masked_jobs(summary, str(tmp_path_factory.mktemp("data-cache")))
    assert not unfixable, f"no FIXES entry for {sorted({c for v in unfixable for c in v.masked_by})}"
    if not jobs:
        pytest.skip("no finding masked by an earlier real error in this run")
    codes = {job["id"]: job.pop("code") for job in jobs}
    results = run_jobs(jobs)
    wrong = []
    for job_id, code in codes.items():
        line = results[job_id]
        text = fc.error_text(line) if not line.get("validated") else "validated"
        if not re.search(fc.PREDICTS[code][0], text):
            wrong.append(f"{job_id}: expected {code}, got {text[:200]}")
    assert not wrong, "\n".join(wrong)


def _readme_outcomes() -> dict[str, set[str]]:
    """The findings table of README.md: | code | ... | outcomes (comma separated, in backticks) | ..."""
    text = README.read_text()
    start, end = text.index("<!-- findings-table -->"), text.index("<!-- /findings-table -->")
    rows = {}
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = set(re.findall(r"`([a-z-]+)`", cells[2]))
    return rows


def test_readme_findings_table_holds_for_this_run(summary):
    declared = _readme_outcomes()
    seen = {code: set(outcomes) for code, outcomes in fc.table(summary).items()}
    missing = sorted(set(seen) - set(declared))
    assert not missing, f"static error findings without a row in README's findings table: {missing}"
    wrong = {code: sorted(out - declared[code]) for code, out in seen.items() if out - declared[code]}
    assert not wrong, f"outcomes of this run that README's table does not state: {wrong}"


def test_summary_line(summary, capsys):
    """(c): the numbers, printed whatever pytest captures; they must add up."""
    with capsys.disabled():
        print("\n" + summary.line())
    outcomes = ("agrees", "agrees-masked", "stricter", "not-checkable", "disagrees")
    # an outcome outside these (a typo in NOT_CONFIRMED) would be counted nowhere
    assert sum(summary.count(o) for o in outcomes) == len(summary.verdicts)
