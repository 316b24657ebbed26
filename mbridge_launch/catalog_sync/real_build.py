"""Build recipes with the REAL Megatron Bridge and read them as the catalog describes them.

This module runs inside a Python that has Megatron Bridge installed (a user's training container,
or the test tier's env), never in the tool's own process: `catalog verify` and tests/bridge start
it as `python -m mbridge_launch.catalog_sync.real_build` with the tool's package on PYTHONPATH,
and read its JSON lines. It imports nothing heavy at module level, and of the tool only the
catalog's field tables (catalog_sync.extract), so any Python 3.10-3.12 with Megatron Bridge runs it.

For each job: WORLD_SIZE = the GPU count (the recipe's own by default), the recipe function
called, the `key=value` overrides applied with `process_config_with_overrides` (the function
run_recipe.py uses), then `runtime_config_update(cfg)` (mixed precision, comm overlap, then
`cfg.validate()`). The line says `built` and `validated`, the stage and real error of a failure,
and the catalog's fields read from the real ConfigContainer twice: `recipe` right after the recipe
function (what the static catalog describes) and `validated_fields` after the runtime update.
Each job runs with os.environ restored afterwards: `runtime_config_update` exports the recipe's
env_vars into the process (os.environ.setdefault), which would otherwise leak into later jobs.

    python -m mbridge_launch.catalog_sync.real_build --catalog FILE (--all KIND | --jobs FILE | NAME...)
        [--placeholder-inputs DIR] [--present-gpu] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Iterator

NAME_RE = re.compile(r"_(\d+)gpu_(h100|h200|b200|b300|gb200|gb300|r100|vr200)_")


# ------------------------------------------------------------------ reading a real ConfigContainer


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
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value)  # torch.bfloat16, as the recipe source (and so the static catalog) spells it
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
    elif precision is not None:
        # an object: the catalog names the preset it equals (extract: Extractor._preset_name),
        # which the real object does not record; the presets it equals field for field stand in
        out["precision_presets"] = precision_presets(precision)
    if precision is not None:
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
    # the model facts the validation used, for the reader of a failure
    out["model_facts"] = {
        k: to_data(get(cfg, "model", k))
        for k in ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "num_moe_experts", "vocab_size")
    }
    out["data_parallel_size"] = to_data(getattr(cfg, "data_parallel_size", None))
    # the provider class decides which model.* keys an override may name (config_fields.py)
    model = get(cfg, "model")
    out["model_class"] = f"{type(model).__module__}.{type(model).__qualname__}" if model is not None else None
    return out


def precision_presets(precision: Any) -> list[str]:
    """Names of the registered mixed-precision presets whose fresh config equals this one (none:
    the recipe changed the preset's fields after making it)."""
    from megatron.bridge.training.mixed_precision import MIXED_PRECISION_RECIPES

    return sorted(name for name, make in MIXED_PRECISION_RECIPES.items() if "-" not in name and make() == precision)


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
    """The real error as data: type, message, the innermost Megatron frame, and its cause chain."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = next((f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb) if "megatron" in f.filename), "")
    chain: list[str] = []
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


def gpus_and_type(name: str, rec: dict[str, Any] | None) -> tuple[int, str]:
    """The GPU count and type a recipe is named for (its record's, else 8 x H100)."""
    m = NAME_RE.search(name)
    if m:
        return int(m.group(1)), m.group(2)
    if rec and rec.get("gpus") and rec.get("hardware"):
        return int(rec["gpus"]), str(rec["hardware"])
    return 8, "h100"


class Placeholders:
    """The inputs a user must add before a recipe can run, as empty placeholder directories.

    run_recipe.py asks for them too: a PEFT recipe needs `checkpoint.pretrained_checkpoint`
    (validate: "PEFT requires a pretrained checkpoint path"), an Energon recipe `dataset.path`.
    Validation checks that the checkpoint path exists (an empty directory passes), not what is in it.
    """

    def __init__(self, root: Path) -> None:
        self.paths = {}
        for key in ("pretrained-checkpoint", "energon-dataset"):
            path = root / "placeholders" / key
            path.mkdir(parents=True, exist_ok=True)
            self.paths[key] = str(path)

    def overrides(self, cfg: Any) -> list[str]:
        out = []
        if get(cfg, "peft") is not None and not get(cfg, "checkpoint", "pretrained_checkpoint"):
            out.append(f"checkpoint.pretrained_checkpoint={self.paths['pretrained-checkpoint']}")
        if "EnergonDatasetConfig" in lineage(get(cfg, "dataset")) and not get(cfg, "dataset", "path"):
            out.append(f"dataset.path={self.paths['energon-dataset']}")
        return out


@dataclasses.dataclass
class Job:
    name: str
    rec: dict[str, Any] | None
    overrides: list[str]
    gpus: int | None = None
    gpu_type: str | None = None
    placeholders: bool = False
    id: str | None = None


# a device for one job: gpu type -> context manager (the test tier's fake GPU, verify's presented one)
DeviceFor = Callable[[str], ContextManager[Any]]


def build_one(job: Job, device_for: DeviceFor | None = None, placeholders: Placeholders | None = None) -> dict[str, Any]:
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    n, hw = gpus_and_type(job.name, job.rec)
    n, hw = job.gpus or n, job.gpu_type or hw
    overrides = list(job.overrides)
    out: dict[str, Any] = {"name": job.name, "kind": job.rec["kind"] if job.rec else None, "world_size": n,
                           "gpu_type": hw, "overrides": overrides, "built": False, "validated": False}
    if job.id is not None:
        out["id"] = job.id
    t0 = time.perf_counter()
    stage = "lookup"
    device = device_for(hw) if device_for else contextlib.nullcontext()
    try:
        with scoped_environ(n), device:
            fn = find_function(job.name, job.rec)
            stage = "build"
            cfg = fn()
            out["built"] = True
            out["recipe"] = record(cfg)
            if job.placeholders and placeholders is not None:
                overrides += placeholders.overrides(cfg)
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


# ------------------------------------------------------------------ the job list


def catalog_records(catalog_file: Path) -> list[dict[str, Any]]:
    return list(json.loads(catalog_file.read_text())["recipes"])


def by_name(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name and alias -> record; a name that is both a library and a benchmark function means the
    library one, as in megatron.bridge.recipes (a job with "kind": "benchmark" reaches the other)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in sorted(records, key=lambda r: r["kind"] != "library"):
        out.setdefault(rec["name"], rec)
        for alias in rec.get("aliases") or ():
            out.setdefault(alias, rec)
    return out


def all_jobs(records: list[dict[str, Any]], kind: str, placeholders: bool) -> list[Job]:
    """Every canonical recipe record of that kind. Records, not names: ten function names exist both
    in recipes/ and in perf_recipes/, and each is looked up in its own record's module."""
    chosen = sorted((r for r in records if kind in ("all", r["kind"])), key=lambda r: (r["kind"], r["name"]))
    return [Job(r["name"], r, [], placeholders=placeholders) for r in chosen]


def read_jobs(path: Path, records: list[dict[str, Any]]) -> list[Job]:
    """--jobs: one JSON object per line: {id, name, overrides, gpus, gpu_type, placeholders, kind}."""
    names = by_name(records)
    by_kind = {(r["kind"], r["name"]): r for r in records}
    jobs = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        rec = by_kind.get((d["kind"], d["name"])) if d.get("kind") else names.get(d["name"])
        jobs.append(Job(d["name"], rec, list(d.get("overrides") or []), d.get("gpus"), d.get("gpu_type"),
                        bool(d.get("placeholders")), str(d.get("id", n))))
    return jobs


def import_recipes() -> float:
    """Import every recipe module once (most of a run's CPU: about 40 s); returns the seconds."""
    t = time.perf_counter()
    import megatron.bridge.perf_recipes  # noqa: F401
    import megatron.bridge.recipes  # noqa: F401
    return round(time.perf_counter() - t, 1)


def installed_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in ("megatron-bridge", "megatron-core", "torch", "transformers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def build_each(jobs: Iterable[Job], counts: dict[str, int], device_for: DeviceFor | None = None,
               placeholders: Placeholders | None = None) -> Iterator[dict[str, Any]]:
    """build_one for each job, counting recipes, built and validated into `counts` as it goes."""
    for job in jobs:
        result = build_one(job, device_for, placeholders)
        counts["recipes"] = counts.get("recipes", 0) + 1
        counts["built"] = counts.get("built", 0) + result["built"]
        counts["validated"] = counts.get("validated", 0) + result["validated"]
        yield result


def emit_lines(results: Iterable[dict[str, Any]], out: Path | None = None) -> int:
    """Each result as one JSON line on stdout (flushed: a reader follows a long run) and in `out`."""
    count = 0
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(out.open("w")) if out else None
        for result in results:
            line = json.dumps(result, sort_keys=True, default=str)
            print(line, flush=True)
            if sink:
                sink.write(line + "\n")
            count += 1
    return count


def present_gpu(gpu_type: str) -> ContextManager[Any]:
    """On a machine without a GPU (a login node), torch.cuda reports one of the recipe's type while
    it builds, since MoE recipes choose their dispatcher by the device (presented_device.py)."""
    import torch

    if torch.cuda.is_available():
        return contextlib.nullcontext()
    from mbridge_launch.catalog_sync.presented_device import presented_gpu

    return presented_gpu(gpu_type)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbridge_launch.catalog_sync.real_build",
                                 description="build and validate Megatron Bridge recipes with the real code; JSON lines")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--catalog", type=Path, required=True, help="the catalog JSON the jobs name recipes of")
    ap.add_argument("--all", choices=("library", "benchmark", "all"))
    ap.add_argument("--jobs", type=Path)
    ap.add_argument("--placeholder-inputs", type=Path, metavar="DIR",
                    help="give PEFT and Energon recipes empty placeholder inputs under DIR")
    ap.add_argument("--present-gpu", action="store_true",
                    help="without a GPU, present one of each recipe's type to torch.cuda")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    records = catalog_records(args.catalog)
    names = by_name(records)
    holder = args.placeholder_inputs is not None
    jobs = [Job(n, names.get(n), [], placeholders=holder) for n in args.names]
    jobs += all_jobs(records, args.all, holder) if args.all else []
    jobs += read_jobs(args.jobs, records) if args.jobs else []
    if not jobs:
        ap.error("name at least one recipe, --all or --jobs")
    placeholders = Placeholders(args.placeholder_inputs) if holder else None
    import_s = import_recipes()
    print(json.dumps({"event": "start", "import_seconds": import_s, "versions": installed_versions()}),
          file=sys.stderr, flush=True)
    counts = {"recipes": 0, "built": 0, "validated": 0}
    emit_lines(build_each(jobs, counts, present_gpu if args.present_gpu else None, placeholders), args.out)
    print(json.dumps({"event": "done", **counts}), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
