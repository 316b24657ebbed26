"""Build Megatron Bridge recipes with the real code and validate them, one JSON line per recipe.

Runs INSIDE the tier's Python 3.12 environment (tests/bridge/make-env.sh), never in the project's:

    ENV=$(bash tests/bridge/make-env.sh | tail -n1)
    $ENV/bin/python tests/bridge/build_recipe.py llama3_8b_pretrain_8gpu_h100_bf16_config ...
    $ENV/bin/python tests/bridge/build_recipe.py --all library --out results.jsonl
    $ENV/bin/python tests/bridge/build_recipe.py NAME --override train.global_batch_size=64 --gpus 16

For each recipe: WORLD_SIZE = the GPU count in its name (or --gpus), torch.cuda answering with a
GPU of its hardware (fake_gpu.py; or --gpu-type), the recipe function called, the overrides applied
with `process_config_with_overrides` (the function run_recipe.py uses), then
`runtime_config_update(cfg)` (mixed precision, comm overlap, then `cfg.validate()`). The line says
`built` and `validated`, the stage and error of a failure, and the catalog's fields read from the
real ConfigContainer twice: `recipe` right after the recipe function (what the static catalog
describes) and `validated` after the runtime update. Every run is offline (HF_HUB_OFFLINE=1) against
the tier's own HF cache (hf_cache.py), which it writes first when missing.

Each recipe runs with os.environ restored afterwards: `runtime_config_update` exports the recipe's
env_vars into the process (os.environ.setdefault), which would otherwise leak into later recipes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CATALOG = ROOT / "catalog" / "megatron-bridge-0.6.2.json"


def setup_environment(hf_home: Path) -> None:
    """Offline, quiet, tier-private caches; the TE shim first on sys.path. Before any import."""
    os.environ["HF_HOME"] = str(hf_home)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    # safe_load_config_with_retry takes a lock file under ~/.cache/huggingface unless told otherwise
    os.environ["MEGATRON_CONFIG_LOCK_DIR"] = str(hf_home / "locks")
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    sys.path.insert(0, str(HERE / "shim"))
    sys.path.insert(1, str(HERE))
    sys.path.insert(2, str(ROOT))  # mbridge_launch.catalog_sync.extract: the catalog's field tables


def load_catalog() -> dict[str, dict[str, Any]]:
    """name and alias -> catalog record."""
    return by_name(catalog_records(CATALOG))


# ------------------------------------------------------------------ reading the real ConfigContainer


if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# the builder itself is the package's (catalog verify runs it in a user's Python): this file adds
# the tier's stand-ins around it (TE shim, fake GPU, offline HF cache, placeholder inputs)
from mbridge_launch.catalog_sync.real_build import (  # noqa: E402
    Job,
    Placeholders,
    all_jobs,
    build_each,
    by_name,
    catalog_records,
    emit_lines,
    error_of,
    find_function,
    get,
    gpus_and_type,
    import_recipes,
    lineage,
    precision_presets,
    read_jobs,
    record,
    scoped_environ,
    to_data,
)
from mbridge_launch.catalog_sync.real_build import build_one as real_build_one  # noqa: E402

__all__ = ["Job", "error_of", "find_function", "get", "gpus_and_type", "lineage", "precision_presets", "record",
           "scoped_environ", "to_data"]


def no_config_retry_sleep() -> None:
    """Offline, `safe_load_config_with_retry` retries a missing config.json 3 times with 1+2+4 s of
    back-off (7 s per recipe whose HF id the tier has no architecture for): a retry cannot find a
    file that is not there, so its module's `time.sleep` is made a no-op (its `time.time` stays)."""
    import time as real_time
    import types

    from megatron.bridge.models.hf_pretrained import safe_config_loader

    safe_config_loader.time = types.SimpleNamespace(sleep=lambda seconds: None, time=real_time.time)  # type: ignore[assignment]


# set by main() (make_placeholders): empty directories under the tier's HF home
PLACEHOLDERS: dict[str, str] = {}
_HOLDER: list[Placeholders] = []


def make_placeholders(hf_home: Path) -> None:
    holder = Placeholders(hf_home)
    _HOLDER[:] = [holder]
    PLACEHOLDERS.update(holder.paths)


def user_inputs(cfg: Any) -> list[str]:
    """The overrides a user must add before the recipe can run, as placeholders (Placeholders.overrides)."""
    return _HOLDER[0].overrides(cfg)


def build_one(name: str, rec: dict[str, Any] | None, overrides: list[str], gpus: int | None, gpu_type: str | None,
              placeholders: bool = False) -> dict[str, Any]:
    """real_build.build_one with the tier's fake GPU of the recipe's (or the job's) type."""
    from fake_gpu import fake_gpu

    return real_build_one(Job(name, rec, list(overrides), gpus, gpu_type, placeholders), fake_gpu,
                          _HOLDER[0] if _HOLDER else None)


def all_records(kind: str) -> list[dict[str, Any]]:
    """Every canonical recipe record of that kind (real_build.all_jobs says why records, not names)."""
    return [job.rec for job in all_jobs(catalog_records(CATALOG), kind, False) if job.rec is not None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="recipe function names (canonical or legacy aliases)")
    ap.add_argument("--all", choices=("library", "benchmark", "all"), help="every canonical recipe of the catalog of that kind")
    ap.add_argument("--override", action="append", default=[], help="KEY=VALUE, Hydra style, repeatable (applied to every recipe)")
    ap.add_argument("--gpus", type=int, help="world size instead of the GPU count in the recipe name")
    ap.add_argument("--gpu-type", help="GPU type torch.cuda reports instead of the recipe's hardware")
    ap.add_argument("--hf-home", type=Path, help="the tier's HF cache (default: $MBL_BRIDGE_CACHE or ~/.cache/mbridge-launch, hf-home-<key>)")
    ap.add_argument("--out", type=Path, help="also write the JSON lines to this file")
    ap.add_argument("--placeholder-inputs", action="store_true",
                    help="add the inputs a user must give (PEFT pretrained checkpoint, Energon path) as placeholder paths")
    ap.add_argument("--jobs", type=Path,
                    help="JSON lines, one job each: {id, name, overrides, gpus, gpu_type, placeholders}; "
                         "one output line per job, with its id (many layouts in one process: the import is most of the cost)")
    args = ap.parse_args(argv)

    import hf_cache  # the tier's own module: stdlib only, safe before setup_environment

    hf_home = args.hf_home or hf_cache.default_home()
    hf_cache.ensure(hf_home)
    setup_environment(hf_home)
    make_placeholders(hf_home)
    catalog = load_catalog()
    todo = [Job(n, catalog.get(n), args.override, args.gpus, args.gpu_type, args.placeholder_inputs) for n in args.names]
    todo += [Job(r["name"], r, args.override, args.gpus, args.gpu_type, args.placeholder_inputs)
             for r in (all_records(args.all) if args.all else [])]
    todo += read_jobs(args.jobs, all_records("all")) if args.jobs else []
    if not todo:
        ap.error("name at least one recipe, --all or --jobs")

    import_s = import_recipes()  # most of a run's CPU
    no_config_retry_sleep()
    print(json.dumps({"event": "import", "seconds": import_s, "hf_home": str(hf_home)}), file=sys.stderr, flush=True)

    from fake_gpu import fake_gpu

    counts = {"recipes": 0, "built": 0, "validated": 0}
    emit_lines(build_each(todo, counts, fake_gpu, _HOLDER[0] if _HOLDER else None), args.out)
    from transformer_engine import SERVED

    print(json.dumps({"event": "done", "import_seconds": import_s, **counts, "te_shim_served": sorted(set(SERVED))}),
          file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
