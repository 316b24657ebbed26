"""Two small recipe catalogs derived from the shipped 0.6.2 one, for `catalog diff` tests.

OLD holds four records of the real catalog; NEW is OLD after a release that changes one recipe's
defaults, renames one (keeping the old name as a legacy alias, as Megatron Bridge does), removes
one, adds one library recipe and one benchmark function that takes the name of a library recipe.
Both are written with the catalog writer, as `catalog sync` writes them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mbridge_launch.catalog_sync.writer import dump_catalog
from mbridge_launch.knowledge.catalog import catalog_file

KEPT = "llama3_8b_pretrain_2gpu_h100_bf16_config"  # defaults change; a benchmark takes its name
RENAMED = "qwen3_30b_a3b_sft_16gpu_h100_bf16_config"  # -> RENAMED_TO, alias kept
RENAMED_TO = "qwen3_30b_a3b_sft_32gpu_h100_bf16_config"
REMOVED = "deepseek_v2_lite_pretrain_8gpu_h100_bf16_config"
BENCHMARK = "deepseek_v3_pretrain_256gpu_b200_bf16_config"  # unchanged
ADDED = "llama3_8b_pretrain_4gpu_b200_bf16_config"  # a copy of KEPT under a new name, no alias


def shipped_records() -> dict[tuple[str, str], dict[str, Any]]:
    import json

    data = json.loads(catalog_file("0.6.2").read_text(encoding="utf-8"))
    return {(r["kind"], r["name"]): r for r in data["recipes"]}


def write(path: Path, records: list[dict[str, Any]], version: str, schema: int = 1) -> Path:
    meta = {"schema": schema, "megatron_bridge_version": version, "generated_from": f"synthetic-{version}",
            "counts": {"library": sum(r["kind"] == "library" for r in records)}}
    path.write_text(dump_catalog("synthetic catalog for tests", meta, records), encoding="utf-8")
    return path


def old_and_new(tmp_path: Path, schema: int = 1) -> tuple[Path, Path]:
    shipped = shipped_records()
    kept = copy.deepcopy(shipped[("library", KEPT)])
    renamed = copy.deepcopy(shipped[("library", RENAMED)])
    removed = copy.deepcopy(shipped[("library", REMOVED)])
    bench = copy.deepcopy(shipped[("benchmark", BENCHMARK)])
    old = [kept, renamed, removed, bench]

    new_kept = copy.deepcopy(kept)
    new_kept["tensor_model_parallel_size"] = 2
    new_kept["global_batch_size"] = 256
    new_kept["dataset"]["selector"] = "squad"
    new_kept["features"]["recompute_granularity"] = "selective"
    new_renamed = copy.deepcopy(renamed)
    new_renamed["name"] = RENAMED_TO
    new_renamed["aliases"] = [*renamed["aliases"], RENAMED]
    new_renamed["micro_batch_size"] = 2
    added = copy.deepcopy(kept)
    added["name"], added["aliases"], added["hardware"] = ADDED, [], "b200"
    shadow = copy.deepcopy(bench)
    shadow["name"], shadow["aliases"] = KEPT, []
    new = [new_kept, new_renamed, added, bench, shadow]
    return (write(tmp_path / "old.json", old, "0.0.1"),
            write(tmp_path / "new.json", new, "0.0.2", schema=schema))
