"""Memory side by side (issue 15): Megatron Bridge's own `estimate_training_memory` beside our memory
model, for every recipe the tier builds (benchmarks/memory_vs_bridge.py, which writes the committed
table benchmarks/results/memory_vs_bridge.md and its summary in benchmarks/RESULTS.md).

(a) the committed table lists exactly the recipes the session's `all_results` run built;
(b) every component more than 15% apart carries a reason code of the benchmark's REASONS (or says
    UNEXPLAINED), and RESULTS.md's unexplained counts are the table's;
(c) a few recipes probed again with the real code reproduce the committed figures and reasons.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import memory_vs_bridge as mvb  # noqa: E402  (the benchmark: its rows, reasons and table reader)

# a dense PEFT recipe without SP at TP=8 (frozen weights), an MoE recipe with full recompute and PP, an FP8
# benchmark with bf16 gradients and PP=8: most reasons of the table, in one probe process (~40 s of CPU)
PROBED = (("library", "llama3_70b_peft_8gpu_h100_bf16_config"), ("library", "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config"),
          ("benchmark", "llama3_70b_pretrain_64gpu_h100_fp8cs_config"))
FIGURES = ("state theirs", "state ours", "act theirs", "act ours", "total theirs", "total ours", "of which allowance")


@pytest.fixture(scope="module")
def table():
    return mvb.read_table()


def test_table_lists_exactly_the_built_recipes(table, all_results):
    built = {(r["kind"], r["name"]) for r in all_results if r.get("built")}
    assert built, "the run built no recipe"
    missing, extra = sorted(built - set(table)), sorted(set(table) - built)
    assert not missing and not extra, (
        f"benchmarks/results/memory_vs_bridge.md is not the built set of this run (rerun benchmarks/memory_vs_bridge.py): "
        f"{len(missing)} built but not in the table {missing[:8]}, {len(extra)} in the table but not built {extra[:8]}")


def _over(row: dict[str, str]) -> list[str]:
    """Components whose committed Δ is above the threshold."""
    out = []
    for key, name in (("state Δ", "state"), ("act Δ", "act"), ("total Δ", "total")):
        text = row[key].rstrip("%")
        if text == "inf" or (text not in ("-", "") and abs(float(text)) / 100 > mvb.THRESHOLD):
            out.append(name)
    return out


def test_every_difference_above_15_percent_has_a_reason(table):
    known = set(mvb.BY_CODE)
    problems, unexplained = [], {k: 0 for k in mvb.COMPONENTS}
    for (kind, name), row in table.items():
        cells = dict(part.split(": ", 1) for part in row["reasons (>15%)"].split("; ") if ": " in part)
        for component in _over(row):
            cell = cells.get(component)
            if cell is None:
                problems.append(f"{kind} {name}: {component} {row[component + ' Δ']} without a reason")
                continue
            if cell.startswith("UNEXPLAINED"):
                unexplained[component] += 1
                continue
            codes = set(cell.split("+"))
            if not codes or not codes <= known:
                problems.append(f"{kind} {name}: {component} reason {cell!r} is not a code of REASONS")
    assert not problems, "\n".join(problems[:20])
    text = mvb.RESULTS.read_text(encoding="utf-8")
    section = text[text.index(mvb.SECTION):]
    for component, count in unexplained.items():
        line = re.search(rf"^\| {mvb.COMPONENT_NAMES[component]} \|.*\| \*\*(\d+)\*\* \|", section, re.M)
        assert line and int(line.group(1)) == count, f"RESULTS.md's unexplained {component} count is not the table's ({count})"


def test_probed_recipes_reproduce_the_committed_figures(table, run_bridge, tmp_path):
    out = tmp_path / "probe.jsonl"
    proc = run_bridge(["tests/bridge/memory_probe.py", *(name for _, name in PROBED), "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {(r["kind"], r["name"]): r for r in mvb.rows_of(mvb.read_probe(out))}
    for key in PROBED:
        assert key in rows and rows[key]["status"] == "compared", f"{key}: {rows.get(key, {}).get('status')}"
        fresh = mvb.table_row(rows[key])
        committed = table[key]
        assert [fresh[c] for c in FIGURES] == [committed[c] for c in FIGURES], f"{key}: figures moved"
        assert fresh["reasons (>15%)"] == committed["reasons (>15%)"], f"{key}: reasons moved"
