"""One vocabulary (knowledge/vocabulary.py) for every command: each spelling of a goal, a
precision or a GPU type that one command accepts, every command that takes that kind of value
accepts too, and resolves to the same canonical value: `recommend`, `plan`, `estimate` (in
process, through cli.main.main), `catalog list --mode` (a goal names its recipe task) and Plan
files read by `preflight` (a Plan names a goal as its `mode` and a GPU type as
`cluster.gpu_type`; its precision is its recipe's, not a field).
Also: the tables the vocabulary replaced agree with it (Plan modes, hardware systems, the
catalog's Megatron names, the Plan <-> Layout mapping)."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest
import yaml

from mbridge_launch.cli.main import main
from mbridge_launch.knowledge import vocabulary as V

pytestmark = pytest.mark.usefixtures("english")


def spellings(canonical: tuple[str, ...], aliases: dict[str, str]) -> list[tuple[str, str]]:
    """(spelling, canonical value): each canonical value and each alias."""
    return [(c, c) for c in canonical] + sorted(aliases.items())


GOALS = spellings(V.GOALS, V.GOAL_ALIASES)
PRECISIONS = spellings(V.PRECISIONS, V.PRECISION_ALIASES)
GPU_TYPES = spellings(V.GPU_TYPES, V.GPU_ALIASES) + [("H100 SXM", "h100"), ("GB200 NVL72", "gb200")]


def run_json(capsys, *argv: str) -> dict:
    rc = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, (argv, err)
    return json.loads(out)


def recommend(capsys, *argv: str) -> dict:
    return run_json(capsys, "recommend", "--model", "llama3_8b", "--gpus", "8", *argv)


_CANONICAL_ANSWERS: dict[tuple[str, ...], dict] = {}


def recommend_canonical(capsys, *argv: str) -> dict:
    """recommend's answer for canonical values, computed once per value."""
    if argv not in _CANONICAL_ANSWERS:
        _CANONICAL_ANSWERS[argv] = recommend(capsys, *argv)
    return _CANONICAL_ANSWERS[argv]


def plan(capsys, *argv: str) -> dict:
    return run_json(capsys, "plan", "--model", "llama3_8b", "--gpus", "8", "--top", "1", *argv)


def estimate(capsys, *argv: str) -> dict:
    return run_json(capsys, "estimate", "--model", "llama3_8b", "--gpus", "8", "--tp", "2", *argv)


# ---------------------------------------------------------------------- the tables themselves
def test_every_alias_names_a_canonical_value_and_no_alias_shadows_one():
    for canonical, aliases in ((V.GOALS, V.GOAL_ALIASES), (V.PRECISIONS, V.PRECISION_ALIASES),
                               (V.GPU_TYPES, V.GPU_ALIASES)):
        assert set(aliases.values()) <= set(canonical)
        assert not set(aliases) & set(canonical)
        assert all(a == a.strip().lower() for a in aliases)  # the tables are looked up in lower case
    assert set(V.PEFT_GOALS) <= set(V.GOALS) and {V.recipe_task(g) for g in V.GOALS} == set(V.RECIPE_TASKS)
    assert all(V.task_goal(V.recipe_task(g)) in V.GOALS for g in V.GOALS)


def test_the_plan_modes_and_the_hardware_systems_are_the_vocabulary():
    from mbridge_launch.knowledge.hardware import known_hardware
    from mbridge_launch.plan.model import Mode

    assert typing.get_args(Mode) == V.GOALS
    assert tuple(known_hardware()) == V.GPU_TYPES
    assert set(V.PEAK_CLASS) == set(V.PRECISIONS)


def test_unknown_spellings_are_one_clear_error_naming_the_choices(capsys):
    for argv, needle in ((["--goal", "banana"], "pretrain, sft, lora, dora"),
                         (["--precision", "int4"], "bf16, fp8cs, fp8mx"),
                         (["--gpu-type", "a100"], "h100, h200, b200")):
        for command in (["recommend", "--model", "llama3_8b"], ["plan", "--model", "llama3_8b", "--gpus", "8"],
                        ["estimate", "--model", "llama3_8b", "--gpus", "8"]):
            assert main([*command, *argv]) == 2
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err, (command, err)


def test_case_and_surrounding_spaces_do_not_matter(capsys):
    for table, normalize in ((GOALS, V.goal_or_none), (PRECISIONS, V.normalize_precision),
                             (GPU_TYPES, V.gpu_type_or_none)):
        for spelling, canonical in table:
            assert normalize(f" {spelling.upper()} ") == normalize(spelling.title()) == canonical
    got = estimate(capsys, "--goal", " PEFT ", "--precision", "BFloat16", "--gpu-type", " DGX-H100 ")
    assert (got["goal"], got["precision"], got["gpu_type"]) == ("lora", "bf16", "h100")


# ---------------------------------------------------------------------- every command, every spelling
def recommend_both_ways(capsys, flag: str, spelling: str, canonical: str, *on: str) -> tuple[dict, dict]:
    """Checks that `plan` and `estimate` report `canonical` for `flag spelling` (after the arguments
    `on`); returns recommend's answers for the spelling and for the canonical value."""
    field = flag.removeprefix("--").replace("-", "_")
    assert plan(capsys, *on, flag, spelling)[field] == canonical
    assert estimate(capsys, *on, flag, spelling)[field] == canonical
    same = recommend_canonical(capsys, *on, flag, canonical)
    return recommend(capsys, *on, flag, spelling), same


@pytest.mark.parametrize("spelling,canonical", GOALS)
def test_goal_spellings(capsys, spelling, canonical):
    answer, same = recommend_both_ways(capsys, "--goal", spelling, canonical)
    assert answer["mode"] == canonical and answer["plan_hash"] == same["plan_hash"]


@pytest.mark.parametrize("spelling,canonical", PRECISIONS)
def test_precision_spellings(capsys, spelling, canonical):
    on = ("--gpu-type", "b200")  # runs every precision
    answer, same = recommend_both_ways(capsys, "--precision", spelling, canonical, *on)
    assert (answer["recipe"], answer["plan_hash"]) == (same["recipe"], same["plan_hash"])


@pytest.mark.parametrize("spelling,canonical", GPU_TYPES)
def test_gpu_type_spellings(capsys, spelling, canonical):
    answer, same = recommend_both_ways(capsys, "--gpu-type", spelling, canonical)
    assert answer["gpu_type"] == canonical and answer["plan_hash"] == same["plan_hash"]


def test_catalog_list_takes_every_goal_spelling_as_its_recipe_task(capsys):
    def names(mode: str) -> list[str]:
        return [r["name"] for r in run_json(capsys, "catalog", "list", "--mode", mode)["recipes"]]

    by_task = {task: names(task) for task in V.RECIPE_TASKS}
    assert all(by_task.values())
    for spelling, canonical in GOALS:
        assert names(spelling) == by_task[V.recipe_task(canonical)], spelling


# ---------------------------------------------------------------------- Plan files read by preflight
@pytest.fixture(scope="module")
def plan_data(tmp_path_factory) -> dict:
    """A Plan recommend writes (LoRA, so that every goal's recipe checks run), as YAML data."""
    from mbridge_launch.base import i18n

    path = tmp_path_factory.mktemp("plan") / "plan.yaml"
    i18n.set_lang("en")
    assert main(["recommend", "--model", "llama3_8b", "--gpus", "8", "--goal", "lora", "-o", str(path)]) == 0
    return yaml.safe_load(path.read_text())


def preflight(capsys, tmp_path: Path, data: dict, name: str) -> tuple[list[str], object]:
    """(check codes, the hardware preflight resolved) of the Plan `data` written to a file."""
    from mbridge_launch.plan.model import load_plan
    from mbridge_launch.preflight.context import PreflightContext

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    rc = main(["preflight", str(path), "--no-cluster", "--format", "json"])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err  # a finding may fail the plan; an unreadable Plan would be 2
    hardware = PreflightContext(plan=load_plan(path), env={}).hardware()
    return sorted(c["code"] for c in json.loads(out)["checks"]), hardware.value.name if hardware.ok else None


_CANONICAL_REPORTS: dict[tuple[str, str], tuple[list[str], object]] = {}


def preflight_canonical(capsys, tmp_path: Path, data: dict, field: str, value: str) -> tuple[list[str], object]:
    """preflight of the Plan with a canonical `mode` or `cluster.gpu_type`, once per value."""
    if (field, value) not in _CANONICAL_REPORTS:
        edited = {**data, "mode": value} if field == "mode" else {**data, "cluster": {**data["cluster"], field: value}}
        _CANONICAL_REPORTS[field, value] = preflight(capsys, tmp_path, edited, "canonical")
    return _CANONICAL_REPORTS[field, value]


@pytest.mark.parametrize("spelling,canonical", GOALS)
def test_plan_file_modes(capsys, tmp_path, plan_data, spelling, canonical):
    from mbridge_launch.plan.model import load_plan

    codes, _ = preflight(capsys, tmp_path, {**plan_data, "mode": spelling}, "alias")
    assert load_plan(tmp_path / "alias.yaml").mode == canonical
    assert codes == preflight_canonical(capsys, tmp_path, plan_data, "mode", canonical)[0]


@pytest.mark.parametrize("spelling,canonical", GPU_TYPES)
def test_plan_file_gpu_types(capsys, tmp_path, plan_data, spelling, canonical):
    cluster = dict(plan_data["cluster"])
    codes, hardware = preflight(capsys, tmp_path, {**plan_data, "cluster": {**cluster, "gpu_type": spelling}}, "alias")
    same, same_hardware = preflight_canonical(capsys, tmp_path, plan_data, "gpu_type", canonical)
    assert hardware == same_hardware == canonical and "plan.gpu_type_unknown" not in codes
    assert codes == same


def test_a_plans_gpu_type_alias_reaches_the_cluster_checks_and_node_check_as_canonical(plan_data):
    from mbridge_launch.executors.node_check import node_check_args
    from mbridge_launch.plan.model import plan_from_dict
    from mbridge_launch.preflight.cluster_checks import gpus_of_type
    from mbridge_launch.preflight.slurm import Node

    aliased = plan_from_dict({**plan_data, "cluster": {**plan_data["cluster"], "gpu_type": "DGX-H100"}})
    assert node_check_args(aliased)[1] == "h100"  # what nvidia-smi's "NVIDIA H100 80GB HBM3" holds
    assert gpus_of_type(Node("n1", "idle", gres="gpu:h100:8"), V.gpu_type_or_none(aliased.cluster.gpu_type)) == 8


# ---------------------------------------------------------------------- tables that name the layout
def test_the_catalog_and_the_overrides_name_the_layout_with_the_one_key_table():
    from mbridge_launch.knowledge.catalog import MEGATRON_NAMES
    from mbridge_launch.plan.settings import recipe_default

    assert MEGATRON_NAMES["tp"] == "tensor_model_parallel_size" and MEGATRON_NAMES["dataset_seq_length"] == "dataset_seq_length"
    assert list(MEGATRON_NAMES) == list(V.RECIPE_KEYS)

    class Recipe:
        features: dict = {}
        dataset: dict = {}
        tp, pp, vp, cp, ep, etp, sp, mbs, gbs, seq_length, dataset_seq_length, train_iters = range(12)

    for attr, path in V.RECIPE_KEYS.items():
        assert recipe_default(Recipe(), path) == getattr(Recipe, attr)


def test_plan_parallelism_and_planner_layout_share_their_fields():
    from mbridge_launch.plan.layout import SHARED_FIELDS, layout_of, parallelism_of
    from mbridge_launch.plan.model import Parallelism
    from mbridge_launch.planner.rules import Layout

    layout_fields = {f.name: f for f in dataclasses.fields(Layout)}
    for name in SHARED_FIELDS:
        assert Parallelism.model_fields[name].default == layout_fields[name].default, name
    assert set(Parallelism.model_fields) - set(SHARED_FIELDS) == {"dp"}
    assert set(V.LAYOUT_KEYS) <= set(SHARED_FIELDS)

    import plan_fixtures as pf

    plan = pf.two_node_h100()
    layout = layout_of(plan)
    assert layout.world == plan.cluster.total_gpus and layout.dp == plan.parallelism.dp
    assert parallelism_of(layout) == plan.parallelism
