"""The stored ConfigContainer field tree (catalog/config-fields-0.6.2.json, which override keys are
checked against) equals what the real Megatron Bridge 0.6.2 classes have: extracted afresh in the
tier's env from the real ConfigContainer (dataclasses.fields, recursively) and from the provider
class of every recipe's real build (all_results), it must be the shipped file, field for field."""

from __future__ import annotations

import json
from pathlib import Path

from mbridge_launch.knowledge.config_fields import file_name

STORED = Path(__file__).resolve().parents[2] / "catalog" / file_name("0.6.2")


def test_the_stored_field_tree_is_the_real_configcontainers(run_bridge, all_results, tmp_path):
    builds = tmp_path / "builds.jsonl"
    builds.write_text("".join(json.dumps(line) + "\n" for line in all_results))
    out = tmp_path / "fields.json"
    proc = run_bridge(["tests/bridge/extract_config_fields.py", "--builds", str(builds), "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    real, stored = json.loads(out.read_text()), json.loads(STORED.read_text())
    assert real["megatron_bridge_version"] == stored["megatron_bridge_version"] == "0.6.2"
    assert real["root"] == stored["root"] == "ConfigContainer"
    # class by class, so that a failure names what changed
    assert sorted(real["classes"]) == sorted(stored["classes"])
    for name, entry in real["classes"].items():
        assert entry == stored["classes"][name], name
    assert real["recipe_model_class"] == stored["recipe_model_class"]
    # every recipe the real code built has its provider recorded
    built = {line["name"] for line in all_results if line.get("built")}
    assert built <= {key.removeprefix("benchmark:") for key in stored["recipe_model_class"]}


def test_every_recipes_provider_is_the_class_its_real_build_returns(all_results):
    stored = json.loads(STORED.read_text())["recipe_model_class"]
    library = {line["name"] for line in all_results if line.get("kind") != "benchmark"}
    for line in all_results:
        if not line.get("built"):
            continue
        key = f"benchmark:{line['name']}" if line.get("kind") == "benchmark" and line["name"] in library else line["name"]
        real = line["recipe"]["model_class"]
        assert real.endswith("." + stored[key]) or real == stored[key], (line["name"], real, stored[key])
