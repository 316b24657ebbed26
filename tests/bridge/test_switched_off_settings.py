"""Recipe settings the planner switches off beside a layout (planner.recipe_settings.SWITCH_OFF), in
the real Megatron Bridge 0.6.2: the Plan recommend writes passes the real validation, and the same
Plan without the switch-off override is rejected with Megatron Core's own error. Library recipes
with per-layer CUDA graphs run at full recompute (model.cuda_graph_impl=none)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import plan_conformance as pc
import pytest

# (model, GPUs, system): library recipes shipped with per-layer CUDA graphs at that size
CASES = [("nemotron_3_nano", 8, "gb200"), ("qwen3_30b_a3b", 16, "h100"), ("nemotron_3_super", 16, "h100")]
FULL = ["model.recompute_granularity=full", "model.recompute_method=uniform", "model.recompute_num_layers=1"]


def _jobs() -> list[pc.PlanJob]:
    from mbridge_launch.plan.overrides import parse_overrides
    from mbridge_launch.recommend.build import recommend
    from mbridge_launch.recommend.request import Request
    from mbridge_launch.recommend.to_plan import ClusterFlags, build_plan

    jobs = []
    for model, gpus, gpu_type in CASES:
        rec = recommend(Request(model=model, gpus=gpus, gpu_type=gpu_type, overrides=parse_overrides(FULL)))
        plan = build_plan(rec, ClusterFlags())
        switch = [o for o in plan.overrides if o.key == "model.cuda_graph_impl"]
        assert [o.value for o in switch] == ["none"], model
        jobs.append(pc.job_of(plan, f"{model}:as-written", "scenario"))
        control = plan.model_copy(update={"overrides": [o for o in plan.overrides if o not in switch]})
        jobs.append(pc.job_of(control, f"{model}:without-switch", "scenario"))
    return jobs


@pytest.fixture(scope="module")
def verdicts(run_bridge, tmp_path_factory) -> dict[str, dict]:
    work = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp(), prefix="switched-"))
    pc.write_jobs(_jobs(), work / "jobs.jsonl")
    proc = run_bridge(["tests/bridge/run_plan.py", "--jobs", str(work / "jobs.jsonl"), "--out", str(work / "out.jsonl")])
    if proc.returncode != 0:
        pytest.fail(f"run_plan.py exited {proc.returncode}:\n" + "\n".join(proc.stderr.splitlines()[-30:]), pytrace=False)
    return {r["id"]: r for r in (json.loads(line) for line in (work / "out.jsonl").read_text().splitlines() if line)}


@pytest.mark.parametrize("model", [m for m, _, _ in CASES])
def test_the_switch_is_what_megatron_needs(verdicts, model):
    written, control = verdicts[f"{model}:as-written"], verdicts[f"{model}:without-switch"]
    assert written["validated"], written.get("error")
    assert not control["validated"]
    assert "full recompute is only supported with full iteration CUDA graph" in control["error"]["message"]
