"""Extract the external memory set from Megatron-LM's functional tests.

    python benchmarks/external/memory_mlm_extract.py GIT_DIR [--out FILE]

GIT_DIR is a bare clone of github.com/NVIDIA/Megatron-LM (the `fetch` tool gives one). For every
training golden-values file of the H100 and GB200 platforms
(tests/functional_tests/test_cases/<family>/<case>/golden_values_dev_dgx_{h100,gb200}[_2nd].json)
the row keeps: the measured `mem-max-allocated-bytes` (torch.cuda.max_memory_allocated, the
maximum over the logged steps, GiB) and `mem-allocated-bytes`, the Megatron-LM arguments of the
case's model_config.yaml that shape memory (paths, logging, learning-rate and inference options
dropped), and the GPU count from the CI recipes (tests/test_utils/recipes/<platform>/*.yaml:
spec.nodes x spec.gpus of every recipe that lists the case for that platform). Every row names
the source repository, commit and paths it came from.

Only extraction happens here; benchmarks/external_memory.py turns rows into planner requests. The
set is validation data: nothing in mbridge_launch/ is fitted on it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = "NVIDIA/Megatron-LM"
CASES = "tests/functional_tests/test_cases"
RECIPES = "tests/test_utils/recipes"
GOLDEN = re.compile(r"^tests/functional_tests/test_cases/([^/]+)/(.+)/golden_values_dev_(dgx_h100|dgx_gb200)(_2nd)?\.json$")
PLATFORM_DIR = {"dgx_h100": "h100", "dgx_gb200": "gb200"}
OUT = Path(__file__).resolve().parent / "data" / "memory_mlm_functional.json"
GIB = float(2**30)

# argument names (without --) left out of the extract: they do not change memory, or are paths
_DROP = re.compile(
    r"(path|-dir$|^save|^load|^log|wandb|tensorboard|^eval|^lr|lr$|^min-lr|^split$|ckpt|^seed$|interval|iters$|"
    r"^timing|prompt|inference|grpo|^rl-|^exit|^adam|weight-decay|clip-grad|init-method|dropout|warmup|decay|"
    r"num-workers|temperature|^top|^return|^output|straggler|^merge-file$|^data-|^distributed-backend$|"
    r"mock-data|^train-samples$|^use-checkpoint|^no-load|^finetune$|^dist-ckpt|^async|persistent|"
    r"^check-|^no-mmap|^manual-gc|^num-tokens|^incoming|^exp-avg|^termination|^stop-words)")


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True, text=True).stdout


def keep_args(model_args: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in model_args.items():
        name = key.lstrip("-")
        if "vocab" in name or "tokenizer" in name:
            # a tokenizer file says which tokenizer (and so which vocabulary) the run used
            kept[name] = Path(str(value)).name if isinstance(value, str) and "/" in value else value
            continue
        if _DROP.search(name):
            continue
        kept[name] = value
    return kept


def recipe_world_sizes(git_dir: str, commit: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(case, platform) -> the recipes that run it: path, nodes, gpus per node."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in git(git_dir, "ls-tree", "-r", "--name-only", commit, RECIPES).split():
        platform_dir = path.split("/")[-2]
        if platform_dir not in PLATFORM_DIR.values() or not path.endswith(".yaml"):
            continue
        doc = yaml.safe_load(git(git_dir, "show", f"{commit}:{path}"))
        spec = (doc or {}).get("spec") or {}
        if "nodes" not in spec or "gpus" not in spec:
            continue
        default_platforms = spec.get("platforms")
        for product in doc.get("products") or []:
            cases = product.get("test_case") or []
            platforms: set[str] = set()
            for sub in product.get("products") or [{}]:
                value = sub.get("platforms", default_platforms)
                platforms.update(value if isinstance(value, list) else [value])
            for case in cases:
                for platform in platforms:
                    if platform in PLATFORM_DIR:
                        found.setdefault((case, platform), []).append(
                            {"recipe": path, "nodes": int(spec["nodes"]), "gpus_per_node": int(spec["gpus"])})
    return found


def _series(golden: dict[str, Any], key: str) -> list[float]:
    series = golden.get(key)
    values = series.get("values") or {} if isinstance(series, dict) else {}
    out = []
    for v in values.values():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f) and f > 0:
            out.append(f)
    return out


def extract(git_dir: str) -> dict[str, Any]:
    commit = git(git_dir, "rev-parse", "HEAD").strip()
    worlds = recipe_world_sizes(git_dir, commit)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for path in sorted(git(git_dir, "ls-tree", "-r", "--name-only", commit, CASES).split()):
        m = GOLDEN.match(path)
        if not m:
            continue
        family, case, platform, second = m.group(1), m.group(2), m.group(3), bool(m.group(4))
        golden = json.loads(git(git_dir, "show", f"{commit}:{path}"))
        if not isinstance(golden, dict):
            golden = {}
        peak = _series(golden, "mem-max-allocated-bytes")
        if "iteration-time" not in golden or not peak:
            reason = "not a training test (inference or no memory series)"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        config_path = f"{CASES}/{family}/{case}/model_config.yaml"
        try:
            config = yaml.safe_load(git(git_dir, "show", f"{commit}:{config_path}")) or {}
        except subprocess.CalledProcessError:
            skipped["no model_config.yaml"] = skipped.get("no model_config.yaml", 0) + 1
            continue
        recipes = worlds.get((case, platform), [])
        allocated = _series(golden, "mem-allocated-bytes")
        rows.append({
            "id": f"{family}/{case}@{platform}{'_2nd' if second else ''}",
            "family": family, "case": case, "platform": platform, "second_run": second,
            "peak_max_allocated_gib": round(max(peak) / GIB, 4),
            "max_allocated_after_step1_gib": round(max(peak[1:] or peak) / GIB, 4),
            "allocated_gib": round(max(allocated) / GIB, 4) if allocated else None,
            "steps": len(peak),
            "test_type": config.get("TEST_TYPE"),
            "args": keep_args(config.get("MODEL_ARGS") or {}),
            "env": {k: v for k, v in (config.get("ENV_VARS") or {}).items()
                    if k in ("PYTORCH_CUDA_ALLOC_CONF", "NVTE_FUSED_ATTN", "NVTE_FLASH_ATTN",
                             "NVTE_ALLOW_NONDETERMINISTIC_ALGO")},
            "recipes": recipes,
            "source": {"repo": REPO, "commit": commit, "golden": path, "config": config_path},
        })
    return {"source": {"repo": REPO, "commit": commit,
                       "committed": git(git_dir, "show", "-s", "--format=%cI", commit).strip()},
            "skipped_at_extraction": skipped, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    data = extract(args.git_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{len(data['rows'])} rows -> {args.out} (skipped: {data['skipped_at_extraction']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
