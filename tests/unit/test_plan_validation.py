"""The Plan's own constraints (plan/model.py): every field a consumer trusts is checked at load, a bad
Plan reports every error at once (field, bad value escaped and bounded, what is valid), values that
could be secrets are never echoed, and the Plans the project writes stay valid."""

from __future__ import annotations

import pytest

import plan_fixtures as pf
from mbridge_launch.base.errors import EXIT_BAD_INPUT
from mbridge_launch.plan.model import PlanInvalid, plan_from_dict

pytestmark = pytest.mark.usefixtures("english")


def data(**changes: object) -> dict:
    """The two-node golden Plan as a dict, with dotted-path changes (a list index as a number)."""
    plan = pf.two_node_h100().canonical_dict()
    for dotted, value in changes.items():
        node = plan
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        node[last] = value
    return plan


def refused(plan: dict, lang: str = "en") -> tuple[PlanInvalid, str]:
    with pytest.raises(PlanInvalid) as err:
        plan_from_dict(plan, "plan.yaml")
    return err.value, err.value.render(lang)


def fields_of(error: PlanInvalid) -> list[str]:
    return [field for field, _, _ in error.problems]


def test_a_plan_with_many_bad_fields_reports_all_of_them_at_once():
    bad = data(**{
        "name": "run $(id)", "parallelism.tp": -4, "parallelism.vp": 0, "parallelism.recompute": "partial",
        "cluster.time": "4h", "cluster.gpu_type": "a100", "cluster.nodes": 0, "checkpoint.save_interval": 0,
        "auto_rollback.window": 0, "auto_rollback.spike_factor": 0.5, "auto_rollback.max_rollbacks": -1,
        "cluster.container_mounts": [{"source": "/lustre", "target": "lustre"}],
    })
    error, text = refused(bad)
    expected = ["name", "parallelism.tp", "parallelism.vp", "parallelism.recompute", "cluster.nodes",
                "cluster.gpu_type", "cluster.time", "cluster.container_mounts[0].target",
                "checkpoint.save_interval", "auto_rollback.spike_factor", "auto_rollback.window",
                "auto_rollback.max_rollbacks"]
    assert sorted(fields_of(error)) == sorted(expected)
    lines = text.splitlines()
    assert lines[0] == f"invalid plan plan.yaml: {len(expected)} errors:" and len(lines) == 1 + len(expected)
    assert "  - parallelism.tp: -4 is too small; must be at least 1" in lines
    assert "  - parallelism.recompute: \"partial\" is not a valid choice; valid: none, selective, full" in lines
    assert "  - cluster.gpu_type: \"a100\" is not a valid choice; valid: h100, h200, b200, b300, gb200, gb300" in lines
    assert "  - auto_rollback.spike_factor: 0.5 is too small; must be above 1" in "\n".join(lines).replace("1.0", "1")
    assert error.exit_code == EXIT_BAD_INPUT
    zh = error.render("zh").splitlines()
    assert "12 个错误" in zh[0] and len(zh) == len(lines) and "  - parallelism.tp：-4 太小；至少为 1" in zh


def test_one_error_is_one_line_naming_field_value_and_valid_forms():
    _, text = refused(data(**{"cluster.time": "4h"}))
    assert text == ('invalid plan plan.yaml: cluster.time: "4h" is not a Slurm time; valid forms: '
                    "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS")


def test_golden_plans_stay_valid():
    for name, load in pf.GOLDEN_PLANS.items():
        plan = load()
        assert plan_from_dict(plan.canonical_dict()).plan_hash() == plan.plan_hash(), name


def test_plans_recommend_writes_stay_valid(tmp_path, mbl):
    from mbridge_launch.plan.model import load_plan

    requests = [
        ("--model", "llama3_8b", "--gpus", "8"),
        ("--model", "llama3_70b", "--gpus", "64", "--gpu-type", "gb200", "--time", "1-00:00:00"),
        ("--model", "qwen3_30b_a3b", "--gpus", "16", "--env", "HF_TOKEN", "--env", "WANDB_PROJECT"),
        ("--model", "llama3_8b", "--gpus", "8", "--goal", "lora", "--time", "30"),
        ("--model", "llama3_8b", "--gpus", "16", "--save-dir", "/shared/ckpt", "--mount", "/data:/data", "--name", "l3.run_1"),
    ]
    for i, request in enumerate(requests):
        out = tmp_path / f"plan{i}.yaml"
        result = mbl.run("recommend", *request, "-o", out)
        assert result.rc == 0, (request, result.stderr)
        assert load_plan(out).name, request


@pytest.mark.parametrize("time", ["30", "30:00", "04:00:00", "1-00", "1-12:00", "2-00:00:00", "100:00:00"])
def test_slurm_time_forms_are_accepted(time):
    assert plan_from_dict(data(**{"cluster.time": time})).cluster.time == time


@pytest.mark.parametrize("time,key", [("4h", "plan.error.time"), ("four hours", "plan.error.time"),
                                      ("1:2:3:4", "plan.error.time"), ("0", "plan.error.time_finite"),
                                      ("00:00:00", "plan.error.time_finite"), ("UNLIMITED", "plan.error.time_finite"),
                                      ("infinite", "plan.error.time_finite")])
def test_times_recommend_refuses_are_refused(time, key):
    """The same times `recommend --time` refuses: malformed, 0 (no limit at all) and UNLIMITED."""
    error, _ = refused(data(**{"cluster.time": time}))
    assert [(f, k) for f, k, _ in error.problems] == [("cluster.time", key)]


@pytest.mark.parametrize("spelling,canonical", [("GB200", "gb200"), ("h100-sxm", "h100"), ("H100 SXM", "h100"),
                                                ("gb200-nvl72", "gb200"), (" H200 ", "h200")])
def test_gpu_type_aliases_are_read_as_their_type(spelling, canonical):
    assert plan_from_dict(data(**{"cluster.gpu_type": spelling})).cluster.gpu_type == canonical


@pytest.mark.parametrize("field,value", [
    ("parallelism.tp", 0), ("parallelism.pp", -1), ("parallelism.cp", 0), ("parallelism.ep", 0),
    ("parallelism.etp", 0), ("parallelism.vp", 0), ("parallelism.mbs", 0), ("parallelism.gbs", 0),
    ("parallelism.dp", 0), ("parallelism.seq_length", 0), ("cluster.nodes", 0), ("cluster.gpus_per_node", 0),
    ("cluster.segment", 0), ("checkpoint.save_interval", 0),
])
def test_sizes_must_be_at_least_one(field, value):
    error, text = refused(data(**{field: value}))
    assert fields_of(error) == [field] and text.endswith(f"{field}: {value} is too small; must be at least 1")


def test_optional_sizes_may_be_unset_and_vp_one_means_no_interleaving():
    plan = plan_from_dict(data(**{"parallelism.vp": None, "parallelism.etp": None, "checkpoint.save_interval": None}))
    assert (plan.parallelism.vp, plan.parallelism.etp, plan.checkpoint.save_interval) == (None, None, None)
    assert plan_from_dict(data(**{"parallelism.vp": 1, "parallelism.etp": 1})).parallelism.vp == 1


def test_auto_rollback_bounds_are_those_of_the_loss_monitor():
    from mbridge_launch.rollback.lossmon import LossWatcher

    ok = plan_from_dict(data(**{"auto_rollback": {"enabled": True, "window": 1, "spike_factor": None, "max_rollbacks": 0}}))
    assert LossWatcher.from_auto_rollback(ok.auto_rollback).window == 1
    for field, value in (("window", 0), ("spike_factor", 1.0), ("spike_factor", float("nan")), ("max_rollbacks", -1)):
        error, _ = refused(data(**{f"auto_rollback.{field}": value}))
        assert fields_of(error) == [f"auto_rollback.{field}"], (field, value)


def test_override_values_of_any_yaml_scalar_type_are_the_text_the_trainer_line_writes():
    from mbridge_launch.plan.trainer_args import trainer_args

    overrides = [{"key": "train.train_iters", "value": 4, "class": "convergence"},
                 {"key": "model.sequence_parallel", "value": True, "class": "execution"},
                 {"key": "model.cp_comm_type", "value": None, "class": "execution"},
                 {"key": "optimizer.lr", "value": 0.0003, "class": "convergence"}]
    plan = plan_from_dict(data(overrides=overrides))
    assert [o.value for o in plan.overrides] == ["4", "true", "null", "0.0003"]
    assert trainer_args(plan)[-4:] == ["train.train_iters=4", "model.sequence_parallel=true",
                                       "model.cp_comm_type=null", "optimizer.lr=0.0003"]
    error, _ = refused(data(overrides=[{"key": "x.y", "value": [1, 2], "class": "execution"}]))
    assert error.problems[0][:2] == ("overrides[0].value", "plan.error.text")


def test_dataset_weights_are_positive_and_one_per_path():
    assert plan_from_dict(data(**{"dataset.weights": [0.3, 0.7]})).dataset.weights == [0.3, 0.7]
    error, text = refused(data(**{"dataset.weights": [1.0]}))
    assert fields_of(error) == ["dataset.weights"] and "1 weights for 2 data paths" in text
    error, _ = refused(data(**{"dataset.weights": [0.5, -0.5]}))  # each weight is checked where it stands
    assert error.problems[0][:2] == ("dataset.weights[1]", "plan.error.above")
    assert plan_from_dict(data(**{"dataset.fields": {"num_workers": 2}})).dataset.fields["num_workers"] == "2"


@pytest.mark.parametrize("changes,field", [
    ({"cluster.env": ["HF TOKEN"]}, "cluster.env[0]"), ({"cluster.env": ["OK", "MY VAR"]}, "cluster.env[1]"),
    ({"cluster.secrets": ["X$(id)"]}, "cluster.secrets[0]"), ({"cluster.secrets": ["HF-TOKEN"]}, "cluster.secrets[0]"),
    ({"env_vars": {"BAD NAME": "1"}}, 'env_vars."BAD NAME"'), ({"env_vars": {"A;B": "1"}}, 'env_vars."A;B"'),
    ({"name": "run\n#SBATCH --qos=top"}, "name"), ({"name": "run\nrm -rf /"}, "name"), ({"name": "a b"}, "name"),
])
def test_names_no_quoting_makes_safe_are_refused_by_the_plan(changes, field):
    """Formerly refused by each executor (plan_fixtures.UNSAFE_VALUES): now by the Plan at load."""
    error, text = refused(data(**changes))
    assert fields_of(error) == [field] and "\n" not in text


def test_values_that_could_be_secrets_are_never_echoed():
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz" + "0123456789"  # token-shaped, fake; built so no scanner flags the file
    for changes in ({"cluster.secrets": [f"HF_TOKEN={token}"]}, {"cluster.env": [f"{token}!"]},
                    {"cluster.secrets": token}, {"env_vars": {"HF_TOKEN": {"value": token}}}):
        error, text = refused(data(**changes))
        assert token not in text and "(value not shown)" in text, changes
        assert token not in error.render("zh")
    _, text = refused(data(env_vars={"NCCL_DEBUG": True}))
    assert "env_vars.NCCL_DEBUG: (value not shown) is not text" in text
    plan = plan_from_dict(data(env_vars={"CUDA_DEVICE_MAX_CONNECTIONS": 1}))
    assert plan.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"


def test_bad_values_are_escaped_and_bounded():
    error, text = refused(data(**{"cluster.time": "\x1b[2J" + "9" * 500, "recipe.name": 7}))
    assert "\x1b" not in text and "\\u001b[2J" in text
    time_line = next(line for line in text.splitlines() if "cluster.time" in line)
    assert len(time_line) < 250 and "..." in time_line


def test_unknown_and_missing_fields_are_named_with_the_valid_ones():
    plan = data()
    plan["cluster"]["gpus_per_nod"] = 8
    del plan["recipe"]["model"]
    error, text = refused(plan)
    assert sorted(fields_of(error)) == ["cluster.gpus_per_nod", "recipe.model"]
    assert "cluster.gpus_per_nod: unknown field; valid fields here: account, partition" in text
    assert "recipe.model: missing (required)" in text


def test_schema_version_and_mount_targets():
    error, _ = refused(data(schema_version=2))
    assert error.problems[0][:2] == ("schema_version", "plan.error.choice")
    error, text = refused(data(**{"cluster.container_mounts": [{"source": "/a", "target": "data"}]}))
    assert 'cluster.container_mounts[0].target: "data" is not an absolute path' in text


def test_a_plan_file_that_is_not_a_mapping_is_refused_in_the_users_language():
    with pytest.raises(PlanInvalid) as err:
        plan_from_dict(["name", "x"], "plan.yaml")
    assert err.value.render("en") == "invalid plan plan.yaml: (top level): !!seq is not a mapping (key: value)"
    # a secret file given as a Plan reads as one string: its content is never echoed
    with pytest.raises(PlanInvalid) as err:
        plan_from_dict("hf_abcdefSECRET", "token.txt")
    assert "SECRET" not in err.value.render("en") and "SECRET" not in err.value.render("zh")
    assert "不是映射" in err.value.render("zh")
