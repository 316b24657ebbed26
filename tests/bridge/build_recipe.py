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
import contextlib
import enum
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CATALOG = ROOT / "catalog" / "megatron-bridge-0.6.2.json"
NAME_RE = re.compile(r"_(\d+)gpu_(h100|h200|b200|b300|gb200|gb300|r100|vr200)_")


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
    data = json.loads(CATALOG.read_text())
    out: dict[str, dict[str, Any]] = {}
    # a name that is both a library and a benchmark function means the library one, as in
    # megatron.bridge.recipes (--all benchmark reaches the other)
    for rec in sorted(data["recipes"], key=lambda r: r["kind"] != "library"):
        out.setdefault(rec["name"], rec)
        for alias in rec.get("aliases") or ():
            out.setdefault(alias, rec)
    return out


def gpus_and_type(name: str, rec: dict[str, Any] | None) -> tuple[int, str]:
    m = NAME_RE.search(name)
    if m:
        return int(m.group(1)), m.group(2)
    if rec and rec.get("gpus") and rec.get("hardware"):
        return int(rec["gpus"]), str(rec["hardware"])
    return 8, "h100"


# ------------------------------------------------------------------ reading the real ConfigContainer


def to_data(value: Any) -> Any:
    """Plain JSON data, spelled as the static catalog spells it (extract.to_data)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_data(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, type):
        return value.__name__
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    return type(value).__name__


def lineage(obj: Any) -> list[str]:
    return [c.__name__ for c in type(obj).__mro__]


def get(obj: Any, *path: str) -> Any:
    for name in path:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def record(cfg: Any) -> dict[str, Any]:
    """The fields the catalog stores, read from a real ConfigContainer (mirrors extract.Extractor)."""
    from mbridge_launch.catalog_sync import extract as ex

    out: dict[str, Any] = {}
    for name, section, attr in ex.LAYOUT_FIELDS:
        out[name] = to_data(get(cfg, section, attr))
    out["hf_model_id"] = get(cfg, "model", "hf_model_id") if isinstance(get(cfg, "model", "hf_model_id"), str) else None
    peft = get(cfg, "peft")
    if peft is None:
        out["peft_scheme"] = None
    else:
        lin = lineage(peft)
        out["peft_scheme"] = "dora" if any("DoRA" in n for n in lin) else "lora" if any("LoRA" in n for n in lin) else type(peft).__name__.lower()
        out["peft"] = {k: to_data(getattr(peft, k)) for k in ("dim", "alpha", "dropout", "target_modules") if hasattr(peft, k)}
    out["dataset"] = dataset_record(get(cfg, "dataset"))
    features: dict[str, Any] = {}
    precision = get(cfg, "mixed_precision")
    if isinstance(precision, str):
        features["precision_recipe"] = precision
        from megatron.bridge.training.mixed_precision import get_mixed_precision_config

        precision = get_mixed_precision_config(precision)  # the extractor reads the preset's fields too
    if precision is not None:
        # an object: the catalog names the preset function that made it (extract: precision.origin),
        # which the real object does not record; its fp8/fp4 fields below are compared instead
        values = {n: to_data(getattr(precision, n, None)) for n in ex.PRECISION_FIELDS}
        if values["fp8"] is None:
            values["fp8_recipe"] = values["fp8_param_gather"] = None
        if values["fp4"] is None:
            values["fp4_recipe"] = None
        features.update(values)
    for name, section, attr in ex.FEATURE_FIELDS:
        features[name] = to_data(get(cfg, section, attr))
    overlap = get(cfg, "comm_overlap")
    for name in ex.COMM_OVERLAP_FIELDS:
        features[name] = to_data(getattr(overlap, name, None)) if overlap is not None else None
    out["features"] = {k: v for k, v in features.items() if v is not None}
    env = get(cfg, "env_vars") or {}
    out["env_vars"] = {k: to_data(env[k]) for k in sorted(env)}
    # the model facts the validation used (from the tier's HF config), for the reader of a failure
    out["model_facts"] = {
        k: to_data(get(cfg, "model", k))
        for k in ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "num_moe_experts", "vocab_size")
    }
    out["data_parallel_size"] = to_data(getattr(cfg, "data_parallel_size", None))
    return out


def dataset_record(dataset: Any) -> dict[str, Any]:
    """extract.Extractor._dataset on a real dataset config."""
    from mbridge_launch.catalog_sync import extract as ex

    if dataset is None:
        return {"selector": None, "class": None}
    lin = lineage(dataset)
    info: dict[str, Any] = {"selector": None, "class": type(dataset).__name__, "modality": "text"}
    source = next((s for s in (get(dataset, "hf_dataset"), get(dataset, "source")) if s is not None), None)
    preset = get(source, "dataset_name")
    hf_path = get(source, "path_or_dataset")
    if "MockGPTDatasetConfig" in lin or ("GPTDatasetConfig" in lin and "GPTSFTDatasetConfig" not in lin):
        blend = [get(dataset, a) for a in ("blend", "blend_per_split", "data_path")]
        info["selector"] = "megatron-indexed" if any(v is not None for v in blend) else "mock"
    elif "MockVLMSFTDatasetConfig" in lin:
        info["selector"], info["modality"] = "mock", "vlm"
    elif "EnergonDatasetConfig" in lin:
        info["selector"], info["modality"] = "energon", "vlm"
    elif "DirectHFSFTDatasetConfig" in lin:
        info["modality"] = "vlm"
        info["selector"] = "local-vlm" if hf_path == "json" else ex._PRESET_SELECTORS.get(preset or "")
    elif "GPTSFTDatasetConfig" in lin:
        root = get(dataset, "dataset_root")
        info["selector"] = ex._PRESET_SELECTORS.get(preset or "") or ("local-jsonl" if isinstance(root, str) else None)
        if isinstance(root, str):
            info["dataset_root"] = root
    else:
        info["modality"] = None
    if preset is not None:
        info["hf_dataset"] = to_data(preset)
    if isinstance(hf_path, str) and hf_path != "json":
        info["hf_dataset_id"] = hf_path
    elif preset is not None:
        from megatron.bridge.data.sources.hf import _HF_DATASET_PRESETS

        known = _HF_DATASET_PRESETS.get(preset)
        if known is not None:
            info["hf_dataset_id"] = known.path_or_dataset
    info["seq_length"] = to_data(get(dataset, "seq_length"))
    packing = get(dataset, "enable_offline_packing")
    if isinstance(packing, bool):
        info["offline_packing"] = packing
        if packing:
            info["packed_sequence_size"] = to_data(get(dataset, "offline_packing_specs", "packed_sequence_size"))
    in_batch = get(dataset, "enable_in_batch_packing")
    if isinstance(in_batch, bool):
        info["in_batch_packing"] = in_batch
    return info


# ------------------------------------------------------------------ building


@contextlib.contextmanager
def scoped_environ(world_size: int) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ["WORLD_SIZE"] = str(world_size)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def error_of(exc: BaseException) -> dict[str, str]:
    tb = traceback.extract_tb(exc.__traceback__)
    where = next((f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb) if "megatron" in f.filename), "")
    chain = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 3:
        chain.append(f"{type(e).__name__}: {str(e)[:600]}")
        e = e.__cause__ or e.__context__
    return {"type": type(exc).__name__, "message": str(exc)[:1200], "where": where, "chain": " <- ".join(chain)}


def find_function(name: str, rec: dict[str, Any] | None) -> Any:
    import importlib

    if rec is not None:
        module = importlib.import_module(rec["module"])
        fn = getattr(module, name, None) or getattr(module, rec["name"], None)
        if fn is not None:
            return fn
    for package in ("megatron.bridge.recipes", "megatron.bridge.perf_recipes"):
        module = importlib.import_module(package)
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(f"no recipe function {name} in megatron.bridge.recipes or perf_recipes")


def no_config_retry_sleep() -> None:
    """Offline, `safe_load_config_with_retry` retries a missing config.json 3 times with 1+2+4 s of
    back-off (7 s per recipe whose HF id the tier has no architecture for): a retry cannot find a
    file that is not there, so its module's `time.sleep` is made a no-op (its `time.time` stays)."""
    import time as real_time
    import types

    from megatron.bridge.models.hf_pretrained import safe_config_loader

    safe_config_loader.time = types.SimpleNamespace(sleep=lambda seconds: None, time=real_time.time)  # type: ignore[assignment]


# set by main(): empty directories under the tier's HF home (validation asserts the checkpoint exists)
PLACEHOLDERS: dict[str, str] = {}


def make_placeholders(hf_home: Path) -> None:
    for key in ("pretrained-checkpoint", "energon-dataset"):
        path = hf_home / "placeholders" / key
        path.mkdir(parents=True, exist_ok=True)
        PLACEHOLDERS[key] = str(path)


def user_inputs(cfg: Any) -> list[str]:
    """The overrides a user must add before the recipe can run, as placeholders (--placeholder-inputs).

    run_recipe.py asks for them too: a PEFT recipe needs `checkpoint.pretrained_checkpoint`
    (validate: "PEFT requires a pretrained checkpoint path"), an Energon recipe `dataset.path`.
    Validation checks that the checkpoint path exists (an empty directory passes), not what is in it.
    """
    out = []
    if get(cfg, "peft") is not None and not get(cfg, "checkpoint", "pretrained_checkpoint"):
        out.append(f"checkpoint.pretrained_checkpoint={PLACEHOLDERS['pretrained-checkpoint']}")
    if "EnergonDatasetConfig" in lineage(get(cfg, "dataset")) and not get(cfg, "dataset", "path"):
        out.append(f"dataset.path={PLACEHOLDERS['energon-dataset']}")
    return out


def build_one(name: str, rec: dict[str, Any] | None, overrides: list[str], gpus: int | None, gpu_type: str | None,
              placeholders: bool = False) -> dict[str, Any]:
    from fake_gpu import fake_gpu
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    n, hw = gpus_and_type(name, rec)
    n, hw = gpus or n, gpu_type or hw
    out: dict[str, Any] = {"name": name, "kind": rec["kind"] if rec else None, "world_size": n, "gpu_type": hw,
                           "overrides": overrides, "built": False, "validated": False}
    t0 = time.perf_counter()
    stage = "lookup"
    try:
        with scoped_environ(n), fake_gpu(hw):
            fn = find_function(name, rec)
            stage = "build"
            cfg = fn()
            out["built"] = True
            out["recipe"] = record(cfg)
            overrides = list(overrides) + (user_inputs(cfg) if placeholders else [])
            out["overrides"] = overrides
            if overrides:
                stage = "override"
                cfg = process_config_with_overrides(cfg, cli_overrides=overrides)
            stage = "validate"
            runtime_config_update(cfg)
            out["validated"] = True
            out["validated_fields"] = record(cfg)
    except Exception as exc:  # every failure is data: the stage and the real error
        out["stage"] = stage
        out["error"] = error_of(exc)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def all_records(kind: str) -> list[dict[str, Any]]:
    """Every canonical recipe record of that kind. Records, not names: ten function names exist both
    in recipes/ and in perf_recipes/ (e.g. deepseek_v3_pretrain_1024gpu_h100_bf16_config), and
    each is looked up in its own record's module."""
    data = json.loads(CATALOG.read_text())
    return sorted((r for r in data["recipes"] if kind in ("all", r["kind"])), key=lambda r: (r["kind"], r["name"]))


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
    args = ap.parse_args(argv)

    import hf_cache  # the tier's own module: stdlib only, safe before setup_environment

    hf_home = args.hf_home or hf_cache.default_home()
    hf_cache.ensure(hf_home)
    setup_environment(hf_home)
    make_placeholders(hf_home)
    catalog = load_catalog()
    todo = [(n, catalog.get(n)) for n in args.names] + [(r["name"], r) for r in (all_records(args.all) if args.all else [])]
    if not todo:
        ap.error("name at least one recipe, or --all")

    t = time.perf_counter()
    import megatron.bridge.perf_recipes  # noqa: F401
    import megatron.bridge.recipes  # noqa: F401 - timed: this import is most of a run's CPU
    import_s = round(time.perf_counter() - t, 1)
    no_config_retry_sleep()
    print(json.dumps({"event": "import", "seconds": import_s, "hf_home": str(hf_home)}), file=sys.stderr, flush=True)

    sink = args.out.open("w") if args.out else None
    counts = {"recipes": 0, "built": 0, "validated": 0}
    for name, rec in todo:
        result = build_one(name, rec, args.override, args.gpus, args.gpu_type, args.placeholder_inputs)
        line = json.dumps(result, sort_keys=True, default=str)
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
        counts["recipes"] += 1
        counts["built"] += result["built"]
        counts["validated"] += result["validated"]
    if sink:
        sink.close()
    from transformer_engine import SERVED

    print(json.dumps({"event": "done", "import_seconds": import_s, **counts, "te_shim_served": sorted(set(SERVED))}),
          file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
