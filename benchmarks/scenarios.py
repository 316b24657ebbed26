"""The scenario matrix of tests/scenarios as a table, for humans: per request the recipe, the
layout, memory per GPU against HBM, tokens/s per GPU and each step's verdict along the main path
(recommend -> preflight --no-cluster -> estimate -> submit --dry-run per executor), then every
contradiction found. The same chains are what tests/scenarios/test_scenario_matrix.py asserts on.

    python benchmarks/scenarios.py [--only ID_SUBSTRING] [--markdown] [--write]

--write puts the Markdown table into the "Scenario matrix" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "scenarios"))

from scenario_chain import Outcome, run_chain  # noqa: E402
from scenario_table import SCENARIOS  # noqa: E402

os.environ.setdefault("MBRIDGE_LAUNCH_STRICT_MESSAGES", "1")


def row(o: Outcome) -> list[str]:
    answer, plan = o.answer or {}, o.plan or {}
    p = plan.get("parallelism") or {}
    est = plan.get("estimates") or {}
    layout = (f"TP{p['tp']} PP{p['pp']}" + (f" VP{p['vp']}" if p.get("vp") else "") + f" CP{p['cp']} EP{p['ep']}"
              f" DP{p['dp']}" + (" FSDP" if p.get("fsdp") else "") + f" {p['recompute']}") if p else "-"
    memory = f"{est['memory_gb_per_gpu']:.0f}/{est['hbm_gb']:.0f}" if est.get("memory_gb_per_gpu") else "-"
    tps = f"{est['tokens_per_sec_per_gpu']:,.0f}" if est.get("tokens_per_sec_per_gpu") else "-"
    gpus = f"{plan['cluster']['nodes'] * plan['cluster']['gpus_per_node']}x{plan['cluster']['gpu_type']}" if plan else "-"
    verdicts = " ".join(f"{k.split(':')[-1].replace('recommend --lang zh', 'zh')}:{v}" for k, v in o.verdicts().items())
    refused = o.steps["recommend"].err.strip().splitlines()[-1][:90] if o.refused else ""
    return [o.scenario.id, answer.get("recipe", refused or "-"), gpus, layout, memory, tps, verdicts,
            str(len(o.contradictions))]


SECTION = "## Scenario matrix (`python benchmarks/scenarios.py --write`)"
INTRO = ("Every request of tests/scenarios/scenario_table.py along the main path: `recommend -o` (and the "
         "same in Chinese: same Plan hash), `preflight --no-cluster`, `estimate` of the written layout, "
         "`submit --dry-run` with each executor. Verdicts are exit codes; preflight's and the dry runs' exit 1 "
         "here are facts of this machine (checkpoints on node-local /tmp, disk space), which the test does not "
         "count as contradictions; a contradiction is a step that disagrees with another "
         "(tests/scenarios/scenario_chain.py). GB/GPU is the Plan's memory estimate against HBM.")
HEAD = ["request", "recipe (or refusal)", "GPUs", "layout", "GB/GPU", "tok/s/GPU", "verdicts", "contra."]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run only scenarios whose id contains this")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for benchmarks/RESULTS.md)")
    ap.add_argument("--write", action="store_true", help="write the Markdown table into benchmarks/RESULTS.md")
    args = ap.parse_args()
    chosen = [s for s in SCENARIOS if not args.only or args.only in s.id]
    started = time.perf_counter()
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NEMORUN_HOME"] = str(Path(tmp) / "nemorun-home")  # NeMo-Run rewrites a "/nemo_run" part
        for s in chosen:
            outcomes.append(run_chain(s, Path(tmp) / s.id))
    rows = [row(o) for o in outcomes]
    bad = [o for o in outcomes if o.contradictions]
    done = sum(1 for o in outcomes if not o.refused)
    summary = (f"{len(outcomes)} scenarios, {done} reached the dry run, {len(outcomes) - done} refused clearly, "
               f"{len(bad)} with contradictions")
    table = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    table += ["| " + " | ".join(x.replace("|", "/") for x in r) + " |" for r in rows]
    if args.write:
        from results_file import write_section

        write_section(SECTION, "\n".join([SECTION, "", INTRO, "", *table, "", summary + ".", ""]))
    if args.markdown:
        print("\n".join(table))
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEAD)]
        for r in [HEAD, *rows]:
            print("  ".join(x.ljust(w) for x, w in zip(r, widths)))
    print(f"\n{summary} ({time.perf_counter() - started:.0f} s)")
    for o in bad:
        print(f"\n## {o.scenario.id}: {' '.join(o.scenario.args)}")
        for c in o.contradictions:
            print("  - " + c.replace("\n", "\n    "))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
