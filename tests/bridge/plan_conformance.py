"""Plan conformance (issue 15), project side: every Plan the tool writes, as the job would run it.

Two sources of Plans: the scenario matrix (tests/scenarios/scenario_table.SCENARIOS, each row made
into a Plan with `recommend -o`, in this process, as scenario_chain does) and the golden Plans
(tests/golden/plans/*.yaml). Each Plan becomes one job for the in-env runner (run_plan.py): the
argument list the job's run_recipe.py gets, taken from `mbridge_launch.plan.trainer_args.trainer_args`
(the very function the executors render; never a second rendering), the Plan's GPU count as
WORLD_SIZE and its GPU type for the fake device.

Runs under the PROJECT's Python (3.11); it never imports megatron. Usable by hand:

    python tests/bridge/plan_conformance.py --out /tmp/plan-jobs.jsonl     # the jobs
    $ENV/bin/python tests/bridge/run_plan.py --jobs /tmp/plan-jobs.jsonl   # the real verdicts
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCENARIO_DIR = ROOT / "tests" / "scenarios"
GOLDEN_DIR = ROOT / "tests" / "golden" / "plans"


# Plans the real Megatron Bridge rejects whose fix is not a small one of the tool, each with its
# reason (reviewed). The test marks them xfail(strict=True): fixed, they fail until removed here.
KNOWN_REJECTIONS: dict[str, str] = {
    **{f"golden:{stem}": (
        f"golden fixture names {name}, which only perf_recipes exports (a benchmark recipe), as kind "
        "library: run_recipe.py loads the benchmark and refuses --dataset (\"Benchmark recipes own their "
        "canonical dataset\"); the tool's own preflight refuses this Plan too (plan.recipe_kind_mismatch). "
        "Fix: a library recipe in the fixture, which moves the renders, hashes and texts of ~18 test files")
       for stem, name in (("four_node_gb200", "llama3_70b_pretrain_64gpu_gb200_bf16_config"),
                          ("single_node_h100", "llama3_8b_sft_8gpu_h100_bf16_config"),
                          ("two_node_h100", "llama3_70b_pretrain_64gpu_h100_bf16_config"))},
}


@dataclass(frozen=True)
class PlanJob:
    id: str  # "scenario:<id>" or "golden:<file stem>"
    source: str  # scenario | golden
    argv: tuple[str, ...]  # trainer_args(plan): what run_recipe.py receives after its script name
    gpus: int
    gpu_type: str
    recipe: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "argv": list(self.argv), "gpus": self.gpus,
                "gpu_type": self.gpu_type, "recipe": self.recipe}


def job_of(plan: Any, job_id: str, source: str) -> PlanJob:
    from mbridge_launch.plan.trainer_args import trainer_args

    c = plan.cluster
    return PlanJob(job_id, source, tuple(trainer_args(plan)), c.nodes * c.gpus_per_node, c.gpu_type, plan.recipe.name)


def scenarios() -> tuple[Any, ...]:
    if str(SCENARIO_DIR) not in sys.path:
        sys.path.insert(0, str(SCENARIO_DIR))
    from scenario_table import SCENARIOS

    return SCENARIOS


def plan_ids() -> list[str]:
    """Every Plan's job id, known without writing the Plans (pytest parametrizes over them)."""
    return [f"scenario:{s.id}" for s in scenarios()] + [f"golden:{p.stem}" for p in sorted(GOLDEN_DIR.glob("*.yaml"))]


def golden_jobs() -> list[PlanJob]:
    from mbridge_launch.plan.model import load_plan

    return [job_of(load_plan(path), f"golden:{path.stem}", "golden") for path in sorted(GOLDEN_DIR.glob("*.yaml"))]


@dataclass(frozen=True)
class Refusal:
    """A scenario for which recommend wrote no Plan (a clear refusal: nothing to check)."""

    id: str
    rc: int
    reason: str


def first_error(text: str) -> str:
    """recommend's refusal as it prints it: the `error:` line (a traceback's last line otherwise)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "")[:600]


def scenario_jobs(workdir: Path) -> tuple[list[PlanJob], list[Refusal]]:
    """`recommend ARGS -o plan.yaml` per scenario row, as a user types it (scenario_chain's flags)."""
    from mbridge_launch.plan.model import load_plan

    rows = scenarios()
    from scenario_chain import _job_flags, call  # the matrix's own way of turning a row into a Plan

    jobs, refused = [], []
    for scenario in rows:
        where = workdir / scenario.id
        where.mkdir(parents=True, exist_ok=True)
        plan_file = where / "plan.yaml"
        step = call(["recommend", *scenario.args, *_job_flags(where), "-o", str(plan_file), "--format", "json"], where)
        if step.rc != 0 or not plan_file.exists():
            refused.append(Refusal(f"scenario:{scenario.id}", step.rc, first_error(step.crash or step.err)))
            continue
        jobs.append(job_of(load_plan(plan_file), f"scenario:{scenario.id}", "scenario"))
    return jobs, refused


def all_jobs(workdir: Path | None = None) -> tuple[list[PlanJob], list[Refusal]]:
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="mbl-plan-conformance-"))
    jobs, refused = scenario_jobs(workdir)
    return jobs + golden_jobs(), refused


def write_jobs(jobs: list[PlanJob], path: Path) -> Path:
    path.write_text("".join(json.dumps(j.as_json(), sort_keys=True) + "\n" for j in jobs), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="write the jobs here, one JSON line each")
    args = ap.parse_args(argv)
    jobs, refused = all_jobs()
    write_jobs(jobs, args.out)
    for r in refused:
        print(f"refused {r.id} (exit {r.rc}): {r.reason}", file=sys.stderr)
    print(f"{len(jobs)} jobs, {len(refused)} scenarios refused by recommend", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
