"""estimate and plan agree on uneven pipeline splits: NVIDIA's published layouts are estimated
without --uneven-pp, the split is printed, and plan -o writes it into a Plan that preflight accepts."""

import json

import pytest

from mbridge_launch.cli.main import main

SHIPPED = [
    ("llama31_405b", ["--gpus", "256", "--tp", "8", "--pp", "8", "--vp", "8"], "account"),
    ("qwen3_235b_a22b", ["--gpus", "256", "--tp", "4", "--pp", "8", "--vp", "3", "--ep", "8"], "account"),
    ("qwen3_235b_a22b", ["--gpus", "256", "--pp", "16", "--ep", "16"], "account"),
    ("DeepSeek-V3", ["--gpus", "1024", "--tp", "2", "--pp", "16", "--ep", "64"], "layout"),
    ("DeepSeek-V3", ["--gpus", "1024", "--pp", "8", "--vp", "4", "--ep", "64", "--gpu-type", "gb200"], "layout"),
]


def _estimate(capsys, *args):
    code = main(["estimate", *args, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


@pytest.mark.parametrize("model,args,kind", SHIPPED)
def test_estimate_accepts_the_shipped_uneven_layouts_and_says_the_split(capsys, model, args, kind):
    code, data = _estimate(capsys, "--model", model, *args)
    assert code == 0
    assert data["pipeline_split"]["kind"] == kind and data["uneven_pp"] is True
    assert data["split_overrides"]  # the settings that make Megatron run that split
    main(["estimate", "--model", model, *args])
    assert "pipeline split:" in capsys.readouterr().out


def test_estimate_takes_a_users_layout_and_reports_a_wrong_one(capsys):
    base = ["--model", "DeepSeek-V3", "--gpus", "1024", "--tp", "2", "--pp", "16", "--ep", "64"]
    code, data = _estimate(capsys, *base, "--pp-layout", "Et*4|(t*4|)*14tmL")
    assert code == 0 and data["split_overrides"] == {"model.pipeline_model_parallel_layout": "Et*4|" + "t*4|" * 14 + "tmL"}
    code, data = _estimate(capsys, *base, "--first-stage-layers", "3", "--last-stage-layers", "2")
    assert code == 0 and data["pipeline_split"]["decoder_layers_per_rank"] == [3] + [4] * 14 + [2]
    code = main(["estimate", *base, "--pp-layout", "Et*4|t*4|tmL"])
    err = capsys.readouterr().err
    assert code == 2 and "RULE_PP_UNEVEN" in err and "3 virtual stages" in err
    assert main(["estimate", *base, "--pp-layout", "Et|tL", "--first-stage-layers", "3"]) == 2


def test_uneven_pp_flag_is_still_accepted(capsys):
    code, data = _estimate(capsys, "--model", "llama31_405b", "--gpus", "256", "--tp", "8", "--pp", "8", "--vp", "8",
                           "--uneven-pp")
    assert code == 0 and data["pipeline_split"]["kind"] == "account"


def test_plan_top_layout_carries_its_split_and_passes_preflight_rules(capsys, tmp_path):
    from mbridge_launch.plan.model import load_plan

    out = tmp_path / "q.yaml"
    args = ["--model", "DeepSeek-V3", "--gpus", "1024", "--gpu-type", "gb200"]
    assert main(["plan", *args, "--format", "json", "--top", "1"]) == 0
    top = json.loads(capsys.readouterr().out)["candidates"][0]
    assert main(["plan", *args, "-o", str(out)]) == 0
    capsys.readouterr()
    plan = load_plan(out)
    written = {o.key: o.value for o in plan.overrides}
    for key, value in top.get("split_overrides", {}).items():
        assert written[key] == value
    # the estimate of plan is the estimate of that layout with the Plan's recipe (its memory settings)
    p = plan.parallelism
    est = ["--model", "DeepSeek-V3", "--gpus", "1024", "--gpu-type", "gb200", "--tp", str(p.tp), "--pp", str(p.pp),
           "--ep", str(p.ep), "--mbs", str(p.mbs), "--gbs", str(p.gbs), "--recompute", p.recompute,
           "--recipe", plan.recipe.name]
    if p.vp:
        est += ["--vp", str(p.vp)]
    code, data = _estimate(capsys, *est)
    assert code == 0 and data["tokens_per_sec_per_gpu"] == top["tokens_per_sec_per_gpu"]
    assert data["memory_gb"]["total"] == top["memory_gb"]["total"]
    main(["preflight", str(out), "--no-cluster", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    codes = {c["code"] for c in report["checks"] if c["severity"] == "error"}
    assert not any(code.startswith("plan.rule.") for code in codes), codes


def test_dsv3_recommend_on_gb200_passes_preflight_rules_without_h100_findings(capsys, tmp_path):
    out = tmp_path / "p.yaml"
    assert main(["recommend", "--model", "DeepSeek-V3", "--gpus", "256", "--gpu-type", "gb200", "-o", str(out)]) == 0
    capsys.readouterr()
    main(["preflight", str(out), "--no-cluster", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    errors = {c["code"] for c in report["checks"] if c["severity"] == "error"}
    assert not any(code.startswith("plan.rule.") for code in errors), errors
    # no finding computed for the recipe's H100 system (EP=64 beyond 8 GPUs of NVLink)
    assert not any("NVLink" in c["message"] or "H100 SXM" in c["message"] for c in report["checks"])


def test_estimate_of_a_shipped_layout_above_hbm_warns_and_exits_0(capsys):
    """NVIDIA ships llama3_8b_pretrain_2gpu_h100 at TP1 PP1 CP2, GBS 512, 8k tokens; the memory
    model puts it above 80 GB. estimate of exactly that layout says so as a warning naming the
    recipe (as recommend and preflight do), while one GPU count or GBS away it is refused (exit 3)."""
    shipped = ["estimate", "--model", "llama3_8b", "--gpus", "2", "--cp", "2", "--gbs", "512", "--seq-length", "8192"]
    assert main([*shipped, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["verdict"] is None
    warning = next(w for w in data["warnings"] if w["code"] == "MEMORY_SHIPPED")
    assert "llama3_8b_pretrain_2gpu_h100_bf16_config" in warning["message"]
    assert main(["estimate", "--model", "llama3_8b", "--gpus", "2", "--cp", "2", "--gbs", "256", "--seq-length", "8192"]) == 3
    assert "does not fit" in capsys.readouterr().err
