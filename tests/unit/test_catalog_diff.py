"""catalog_sync.diff on two small catalogs derived from the shipped one (tests/catalog_diff_fixtures.py):
the exact names added, removed and renamed, the aliases, each changed default, the run_recipe.py
name a new benchmark function takes over, and no difference between a catalog and itself."""

from __future__ import annotations

import json

import pytest

import catalog_diff_fixtures as fx
from mbridge_launch.base.errors import UserError
from mbridge_launch.catalog_sync.diff import FieldChange, RunRecipeChange, diff_specs
from mbridge_launch.knowledge.catalog import available_versions


@pytest.fixture()
def result(tmp_path):
    old, new = fx.old_and_new(tmp_path)
    return diff_specs(str(old), str(new))


def test_library_names_added_removed_renamed(result):
    lib = result.kinds["library"]
    assert (lib.old_count, lib.new_count) == (3, 3)
    assert lib.added == (fx.ADDED,)
    assert lib.removed == (fx.REMOVED,)
    assert lib.renamed == ((fx.RENAMED, fx.RENAMED_TO),)
    removed_aliases = tuple(sorted(fx.shipped_records()[("library", fx.REMOVED)]["aliases"]))
    assert lib.aliases_added == (fx.RENAMED,) and lib.aliases_removed == removed_aliases


def test_benchmark_kept_apart_from_library(result):
    bench = result.kinds["benchmark"]
    assert (bench.old_count, bench.new_count) == (1, 2)
    assert bench.added == (fx.KEPT,)  # the same name as a library recipe: a new benchmark, not a change of it
    assert bench.removed == () and bench.renamed == ()


def test_changed_defaults_exactly(result):
    by_name = {c.name: c for c in result.changed}
    assert sorted(by_name) == sorted([fx.KEPT, fx.RENAMED_TO])
    kept = by_name[fx.KEPT]
    assert kept.kind == "library" and kept.old_name == fx.KEPT
    old_recompute = fx.shipped_records()[("library", fx.KEPT)]["features"].get("recompute_granularity")  # absent: null
    assert set(kept.fields) == {
        FieldChange("tensor_model_parallel_size", 1, 2),
        FieldChange("global_batch_size", 512, 256),
        FieldChange("dataset.selector", "mock", "squad"),
        FieldChange("features.recompute_granularity", old_recompute, "selective"),
    }
    renamed = by_name[fx.RENAMED_TO]
    assert renamed.old_name == fx.RENAMED
    old_record = fx.shipped_records()[("library", fx.RENAMED)]
    old_aliases = sorted(old_record["aliases"])
    assert renamed.fields == (FieldChange("micro_batch_size", old_record["micro_batch_size"], 2),
                              FieldChange("aliases", old_aliases, sorted([*old_aliases, fx.RENAMED])))
    assert dict(result.field_counts()) == {"tensor_model_parallel_size": 1, "global_batch_size": 1,
                                           "dataset.selector": 1, "features.recompute_granularity": 1,
                                           "micro_batch_size": 1, "aliases": 1}


def test_run_recipe_name_taken_by_a_new_benchmark(result):
    # run_recipe.py gives the benchmark function precedence: the library recipe is now reached by its alias
    alias = fx.shipped_records()[("library", fx.KEPT)]["aliases"][0]
    assert result.run_recipe == [RunRecipeChange(fx.KEPT, fx.KEPT, alias)]
    # the renamed recipe keeps its old name as an alias: its old command still works, no entry


def test_rename_that_drops_the_old_name_breaks_its_run_recipe_name(tmp_path):
    old, new = fx.old_and_new(tmp_path)
    data = json.loads(new.read_text())
    for record in data["recipes"]:
        if record["name"] == fx.RENAMED_TO:
            record["aliases"].remove(fx.RENAMED)  # still linked to the old recipe by the other alias
    new.write_text(json.dumps(data))
    result = diff_specs(str(old), str(new))
    assert result.kinds["library"].renamed == ((fx.RENAMED, fx.RENAMED_TO),)
    assert RunRecipeChange(fx.RENAMED_TO, fx.RENAMED, fx.RENAMED_TO) in result.run_recipe


def test_provenance_shown_not_counted(result):
    assert result.catalog == []
    assert {f.field for f in result.provenance} >= {"megatron_bridge_version", "generated_from"}
    assert result.differs


def test_schema_change_is_a_difference(tmp_path):
    old, new = fx.old_and_new(tmp_path, schema=2)
    assert diff_specs(str(old), str(new)).catalog == [FieldChange("schema", 1, 2)]


def test_a_catalog_equals_itself_and_a_resync_of_it(tmp_path):
    version = available_versions()[-1]
    assert not diff_specs(version, version).differs
    # the same records under other provenance (a sync from the source tree instead of the wheel)
    old, _ = fx.old_and_new(tmp_path)
    records = json.loads(old.read_text())["recipes"]
    copy = fx.write(tmp_path / "copy.json", records, "0.0.1-resync")
    same = diff_specs(str(old), str(copy))
    assert not same.differs and same.changed == [] and same.provenance


def test_json_form_round_trips(result):
    data = json.loads(json.dumps(result.to_dict()))
    assert data["library"]["renamed"] == [{"old": fx.RENAMED, "new": fx.RENAMED_TO}]
    assert data["differs"] is True and data["old"]["version"] == "0.0.1" and data["new"]["version"] == "0.0.2"


@pytest.mark.parametrize("spec", ["0.5.9", "latest"])
def test_unknown_version_names_the_valid_ones(spec):
    with pytest.raises(UserError) as err:
        diff_specs(spec, available_versions()[-1])
    assert err.value.key == "catalog.diff.unknown"
    assert all(v in str(err.value) for v in available_versions())


@pytest.mark.parametrize("content", [None, "not json", "[]", '{"megatron_bridge_version": "1", "recipes": [{"name": 3}]}'])
def test_bad_file_names_the_valid_versions(tmp_path, content):
    path = tmp_path / "cat.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError) as err:
        diff_specs(str(path), available_versions()[-1])
    assert err.value.key == "catalog.diff.bad_file" and str(path) in str(err.value)
    assert all(v in str(err.value) for v in available_versions())
