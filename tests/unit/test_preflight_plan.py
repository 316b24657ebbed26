"""Plan checks: the planner's rules (TP vs KV heads), memory fit (a plan that cannot fit), world
size vs cluster, recipe kind vs data, mock data with fine-tuning, change control, invalid Plans."""

from __future__ import annotations

import pydantic
import pytest

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.plan_checks import plan_precision, run_plan_checks
from preflight_fixtures import codes, edit, override, preflight_json, valid_plan, write


def plan_checks(plan):
    return run_plan_checks(PreflightContext(plan=plan, env={}))


def problems(plan):
    return [c.code for c in plan_checks(plan) if c.severity != "info"]


@pytest.fixture
def plan(shared_dir):
    return valid_plan(shared_dir)


def test_valid_plan_has_no_plan_problems(plan):
    checks = plan_checks(plan)
    assert [c.code for c in checks if c.severity != "info"] == []
    memory = next(c for c in checks if c.code == "plan.memory_ok")
    assert memory.params["source"] == "planner.memory" and float(memory.params["total"]) < float(memory.params["usable"])


def test_tp_a_multiple_of_the_kv_heads_is_accepted(plan, tmp_path):
    """qwen3_600m has 16 attention heads and 8 KV heads: TP=16 divides the heads and is a multiple of
    the KV heads, which Megatron Core replicates over the TP ranks (issue 15: the real validation
    accepts it, so preflight does too; TP that neither divides nor multiplies: tests/unit/test_rules.py)."""
    layout = edit(plan, **{"parallelism.tp": 16, "parallelism.sp": True, "parallelism.dp": 1, "parallelism.gbs": 4,
                           "cluster.nodes": 2})
    _, report = preflight_json(write(layout, tmp_path), "--no-cluster")
    assert "plan.rule.tp_kv_heads" not in codes(report) and "plan.rule.tp_heads" not in codes(report)


def test_plan_that_cannot_fit_memory(plan, tmp_path):
    """Qwen3 0.6B at 128k tokens per micro batch without recompute on one H100: activations alone
    exceed 80 GB."""
    broken = edit(plan, **{"parallelism.seq_length": 131072, "parallelism.mbs": 4, "parallelism.gbs": 64})
    rc, report = preflight_json(write(broken, tmp_path), "--no-cluster")
    assert rc == 1 and "plan.memory_oom" in codes(report, "error")
    check = next(c for c in report["checks"] if c["code"] == "plan.memory_oom")
    assert "80 GB" in check["message"] and "planner.memory" in check["message"] and check["hint"]


def _oom(plan):
    return edit(plan, **{"parallelism.seq_length": 131072, "parallelism.mbs": 4, "parallelism.gbs": 64})


def test_a_plan_can_accept_an_estimate_it_knows_better_than(plan, tmp_path):
    """accepted_checks turns the memory estimate's error into a warning that says why; the run
    passes preflight (and so the gate) without --force, and the reason shows on every report."""
    accepted = edit(_oom(plan), accepted_checks=[{"code": "plan.memory_oom", "reason": "ran at this layout in job 4711"}])
    rc, report = preflight_json(write(accepted, tmp_path), "--no-cluster")
    assert rc == 0 and report["ok"], codes(report, "error")
    assert "plan.memory_oom" in codes(report, "warning")
    note = next(c for c in report["checks"] if c["code"] == "plan.check_accepted")
    assert note["severity"] == "warning" and "ran at this layout in job 4711" in note["message"]
    assert "accepted_checks" in accepted.canonical_dict() and accepted.plan_hash() != _oom(plan).plan_hash()


def test_only_estimates_can_be_accepted_and_stale_acceptances_are_named(plan, tmp_path):
    wrong = edit(plan, accepted_checks=[{"code": "env.secret_leaked", "reason": "trust me"},
                                        {"code": "plan.memory_oom", "reason": "was tight once"}])
    rc, report = preflight_json(write(wrong, tmp_path), "--no-cluster")
    assert rc == 1 and codes(report, "error") == ["plan.accept_not_allowed"]
    refused = next(c for c in report["checks"] if c["code"] == "plan.accept_not_allowed")
    assert "env.secret_leaked" in refused["message"] and "plan.memory_oom" in refused["message"] and refused["hint"]
    unused = next(c for c in report["checks"] if c["code"] == "plan.accept_unused")
    assert unused["severity"] == "info" and "plan.memory_oom" in unused["message"]


def test_plans_without_acceptances_keep_their_hash(plan):
    assert "accepted_checks" not in plan.canonical_dict() and "accepted_checks" not in plan.to_yaml()
    with pytest.raises(pydantic.ValidationError):  # a reason is required
        edit(plan, accepted_checks=[{"code": "plan.memory_oom", "reason": ""}])


def test_memory_is_not_checked_from_the_plans_estimate(plan):
    """The Plan's estimates block is editable: without the architecture memory is unchecked."""
    unknown = edit(plan, **{"recipe.model": "not_a_model", "estimates.memory_gb_per_gpu": 90.0, "estimates.hbm_gb": 80.0})
    found = {c.code: c for c in plan_checks(unknown)}
    assert "plan.memory_oom" not in found and "plan.memory_ok" not in found
    assert found["plan.memory_unchecked"].severity == "warning" and "RULE_MEMORY" in found["plan.memory_unchecked"].message("en")
    assert found["plan.arch_unknown"].severity == "warning"


def test_layout_must_use_the_gpus_asked_for(plan):
    assert "plan.world_mismatch" in problems(edit(plan, **{"parallelism.dp": 4}))


def test_more_gpus_per_node_than_the_system_has(plan):
    gb200 = edit(plan, **{"cluster.gpu_type": "gb200"})
    assert "plan.gpus_per_node_exceeds" in problems(gb200)


def test_benchmark_recipe_with_real_data(plan):
    bench = edit(plan, **{"recipe.kind": "benchmark", "recipe.name": "llama3_8b_pretrain_8gpu_h100_bf16_config",
                          "recipe.model": "llama3_8b", "parallelism.tp": 2, "parallelism.sp": True, "parallelism.dp": 4})
    assert "plan.benchmark_real_data" in problems(bench)
    mock = edit(bench, **{"dataset.selector": "mock", "dataset.data_paths": [], "dataset.weights": None})
    assert problems(mock) == ["plan.benchmark_recipe"]


def test_catalog_knows_the_recipe(plan):
    assert "plan.recipe_unknown" in problems(edit(plan, **{"recipe.name": "qwen3_600m_pretrain_9gpu_h100_bf16_config"}))
    assert "plan.recipe_kind_mismatch" in problems(edit(plan, **{"recipe.kind": "benchmark", "dataset.selector": "mock",
                                                                  "dataset.data_paths": [], "dataset.weights": None}))
    assert "plan.recipe_mode_mismatch" in problems(edit(plan, mode="sft", **{"dataset.selector": "squad", "dataset.data_paths": [], "dataset.weights": None}))


def test_catalog_findings_are_reported(plan):
    long = edit(plan, mode="sft", **{"recipe.name": "qwen3_600m_sft_8gpu_h100_bf16_128k_config", "dataset.selector": "squad",
                                     "dataset.data_paths": [], "dataset.weights": None})
    finding = next(c for c in plan_checks(long) if c.code == "plan.recipe_finding")
    assert finding.params["code"] == "RULE_SEQ_POSITIONS" and finding.severity == "warning"


def test_mock_data_with_fine_tuning(plan, tmp_path):
    sft = edit(plan, mode="sft", **{"dataset.selector": "mock", "dataset.data_paths": [], "dataset.weights": None})
    rc, report = preflight_json(write(sft, tmp_path), "--no-cluster")
    assert rc == 1 and "plan.mock_finetune" in codes(report, "error")


def test_selector_that_does_not_serve_the_mode(plan):
    assert "plan.selector_mode" in problems(edit(plan, mode="lora"))
    assert "plan.selector_unknown" in problems(edit(plan, **{"dataset.selector": "webtext"}))


def test_required_dataset_settings(plan):
    energon = edit(plan, **{"dataset.selector": "energon", "dataset.data_paths": [], "dataset.weights": None})
    assert "plan.dataset_required" in problems(energon)
    given = edit(energon, **{"dataset.fields": {"path": "/data/energon"}})
    assert "plan.dataset_required" not in problems(given)


def test_catalog_version_unknown(plan):
    found = {c.code: c for c in plan_checks(edit(plan, **{"catalog.version": "9.9.9"}))}
    assert found["plan.catalog_skipped"].severity == "warning" and "9.9.9" in found["plan.catalog_skipped"].message("en")


def test_convergence_overrides_are_listed(plan):
    changed = edit(plan, overrides=[
        override("optimizer.lr", "1e-4", "convergence", "lower LR").model_dump(by_alias=True),
        override("ddp.overlap_grad_reduce", "true", "execution").model_dump(by_alias=True),
    ])
    listed = [c for c in plan_checks(changed) if c.code == "plan.convergence_override"]
    assert [c.subject for c in listed] == ["optimizer.lr"] and "lower LR" in listed[0].message("en")


def test_override_declared_execution_that_changes_convergence(plan):
    # the layout says the same (an override contradicting parallelism is refused at load)
    wrong = edit(plan, overrides=[override("train.global_batch_size", "512", "execution").model_dump(by_alias=True)],
                 **{"parallelism.gbs": 512})
    found = {c.code: c for c in plan_checks(wrong)}
    assert found["plan.override_misclassified"].params["actual"] == "convergence"
    assert "plan.convergence_override" in found  # listed under its real class


@pytest.mark.parametrize("key,value,bad", [
    ("model.recompute_num_layers", "2.5", True), ("model.recompute_num_layers", "0", True),
    ("model.recompute_num_layers", "4", False), ("model.num_layers_in_last_pipeline_stage", "four", True),
    ("model.num_layers_in_first_pipeline_stage", "0", False), ("model.num_layers_in_last_pipeline_stage", "null", False),
    ("model.recompute_num_layers", "²", True),  # str.isdigit says yes, int() would fail
])
def test_layer_counts_must_be_whole_numbers(plan, key, value, bad):
    """Megatron stops at start-up on recompute_num_layers=2.5: preflight says so before the queue."""
    given = edit(plan, overrides=[override(key, value, "execution").model_dump(by_alias=True)])
    found = [c for c in plan_checks(given) if c.code == "plan.override_not_integer"]
    assert bool(found) == bad
    if bad:
        assert found[0].severity == "error" and f"{key}={value}" in found[0].message("en") and found[0].hint("en")


def test_benchmark_shortcut_in_real_training(plan):
    forced = edit(plan, overrides=[override("model.moe_router_force_load_balancing", "true", "benchmark_only").model_dump(by_alias=True)])
    assert "plan.benchmark_override" in problems(forced)


def test_recorded_warnings_and_time(plan):
    noted = edit(plan, warnings=[{"code": "PP_WITHOUT_VP", "message": "PP>1 without VP", "severity": "warning"}])
    assert "plan.recorded.PP_WITHOUT_VP" in problems(noted)
    with pytest.raises(pydantic.ValidationError, match="cluster.time"):  # refused by the Plan itself
        edit(plan, **{"cluster.time": "four hours"})


def test_precision_from_recipe_name(plan):
    assert plan_precision(PreflightContext(plan=edit(plan, **{"recipe.name": "llama3_8b_pretrain_8gpu_b200_fp8cs_config"}))) == "fp8cs"
    assert plan_precision(PreflightContext(plan=plan)) == "bf16"


def test_plan_the_executor_refuses(plan):
    """torchrun cannot span nodes: the sbatch executor refuses to render, preflight says why."""
    multi = edit(plan, **{"launch.shape": "torchrun", "cluster.nodes": 2, "parallelism.dp": 16})
    found = {c.code: c for c in plan_checks(multi)}
    assert found["plan.render_failed"].severity == "error" and "torchrun" in found["plan.render_failed"].message("en")


# ---------------------------------------------------------------------- the Plan itself invalid: exit 2
def test_unknown_field_exits_2(plan, tmp_path, mbl):
    path = write(plan, tmp_path)
    path.write_text(path.read_text().replace("mode: pretrain", "mode: pretrain\nmodee: sft"))
    result = mbl.run("preflight", str(path))
    assert result.returncode == 2 and "modee" in result.stderr and "Traceback" not in result.stderr


def test_unparseable_plan_exits_2(tmp_path, mbl):
    path = tmp_path / "plan.yaml"
    path.write_text("name: [unclosed\n")
    result = mbl.run("preflight", str(path), "--no-cluster")
    assert result.returncode == 2 and "not valid YAML" in result.stderr


def test_missing_plan_file_exits_2(tmp_path, mbl):
    assert mbl.run("preflight", str(tmp_path / "nope.yaml")).returncode == 2


def test_block_recompute_counts_the_layers_that_keep_activations(plan):
    """Full recompute of 1 layer per chunk (recompute_method=block) keeps the other layers'
    activations: more memory than recomputing every layer, less than none."""
    from mbridge_launch.preflight.plan_checks import plan_layout

    def layout(**overrides):
        edited = edit(plan, **{"parallelism.recompute": "full"},
                      overrides=[override(k, v, "execution").model_dump(by_alias=True) for k, v in overrides.items()])
        return plan_layout(PreflightContext(plan=edited, env={}))

    block = layout(**{"model.recompute_granularity": "full", "model.recompute_method": "block",
                      "model.recompute_num_layers": "1"})
    assert (block.recompute, block.recompute_layers) == ("full", 1)
    every = layout(**{"model.recompute_granularity": "full", "model.recompute_method": "uniform",
                      "model.recompute_num_layers": "1"})
    assert (every.recompute, every.recompute_layers) == ("full", None)
