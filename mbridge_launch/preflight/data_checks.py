"""Data checks: Megatron indexed blends (every prefix's .bin/.idx, blend weights), local JSONL
fine-tuning files (first records and their keys), and Hugging Face presets (offline cache).

A blend of 10,000 prefixes must be checked in well under 2 s: each prefix costs two stats, one
open and three small preads (megatron_index.py), spread over a thread pool because on network
file systems each call waits on a round trip. Findings are grouped per kind of problem, so
10,000 missing files make one check with a count and examples, not 10,000 lines.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.files import open_regular_text
from mbridge_launch.base.i18n import t
from mbridge_launch.base.json_text import parse_json
from mbridge_launch.base.numbers import is_number as _is_number
from mbridge_launch.plan.overrides import is_true
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.megatron_index import PrefixResult, check_prefix
from mbridge_launch.preflight.model import Check
from mbridge_launch.preflight.progress import Progress

SCAN_WORKERS = 16
CHUNK = 256  # prefixes per pool task: keeps the per-future overhead negligible
EXAMPLES = 3
JSONL_RECORDS = 5  # first records read from each JSONL file
JSONL_LINE_MAX = 16 << 20  # characters of one record: a file with no newline is not read whole

# problem -> severity (megatron_index.PrefixResult.problem)
PREFIX_SEVERITY = {
    "bin_missing": "error", "bin_unreadable": "error", "bin_empty": "error", "bin_truncated": "error",
    "idx_missing": "error", "idx_unreadable": "error", "idx_empty": "error", "idx_not_megatron": "error",
    "idx_truncated": "error", "idx_bad_version": "error", "idx_bad_dtype": "error", "idx_no_sequences": "error",
    "idx_size_mismatch": "warning", "bin_size_mismatch": "warning",
}

CHAT_KEYS = ("messages", "conversations", "conversation")


def run_data_checks(ctx: PreflightContext) -> list[Check]:
    selector = ctx.plan.dataset.selector
    if selector == "megatron-indexed":
        return check_blend(ctx)
    if selector == "local-jsonl":
        return check_local_jsonl(ctx)
    if selector == "energon":
        return _check_field_path(ctx, "path")
    repo = _hf_repo(selector)
    return check_hf_preset(ctx, selector, repo) if repo else []


def _hf_repo(selector: str) -> str | None:
    """The Hugging Face dataset behind a named preset (catalog/datasets.yaml), else None."""
    from mbridge_launch.knowledge.datasets import load_datasets

    spec = load_datasets().get(selector)
    return spec.hf_dataset_id if spec is not None and spec.kind == "hf" else None


# ---------------------------------------------------------------------- megatron-indexed blends
def blend_from_plan(ctx: PreflightContext) -> tuple[list[str], list[str] | None]:
    """Prefixes and weights (as written) of the blend. Accepts weights in `dataset.weights` or
    Megatron's interleaved form in data_paths ("0.3", "prefix_a", "0.7", "prefix_b")."""
    ds = ctx.plan.dataset
    paths = list(ds.data_paths)
    if not paths and ds.fields.get("data_path"):
        paths = ds.fields["data_path"].replace(",", " ").split()
    weights: list[str] | None = [repr(w) for w in ds.weights] if ds.weights is not None else None
    if paths and weights is None and len(paths) % 2 == 0 and _is_number(paths[0]):
        weights, paths = paths[0::2], paths[1::2]
    return paths, weights


def check_weights(prefixes: list[str], weights: list[str] | None) -> list[Check]:
    if weights is None:
        return []
    if len(weights) != len(prefixes):
        return [Check("data.weights_count", "error", {"count": len(weights), "prefixes": len(prefixes)})]
    bad = []
    for weight, prefix in zip(weights, prefixes):
        try:
            value = float(weight)
        except ValueError:
            value = float("nan")
        if not math.isfinite(value) or value <= 0:
            bad.append((weight, prefix))
    if bad:
        weight, prefix = bad[0]
        return [Check("data.weight_invalid", "error", {"count": len(bad), "weight": weight, "prefix": prefix}, subject=prefix)]
    return []


def scan_prefixes(prefixes: list[str], progress: Progress | None = None, workers: int = SCAN_WORKERS) -> list[PrefixResult]:
    """check_prefix over every prefix, in parallel, results in input order."""

    def chunk_results(chunk: list[str]) -> list[PrefixResult]:
        results = [check_prefix(p) for p in chunk]
        if progress is not None:
            progress.advance(len(chunk))
        return results

    chunks = [prefixes[i:i + CHUNK] for i in range(0, len(prefixes), CHUNK)]
    if len(chunks) <= 1:
        return chunk_results(prefixes)
    with ThreadPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
        return [r for part in pool.map(chunk_results, chunks) for r in part]


def check_blend(ctx: PreflightContext) -> list[Check]:
    prefixes, weights = blend_from_plan(ctx)
    if not prefixes:
        return []  # the missing dataset.data_path is reported by plan checks (plan.dataset_required)
    checks = check_weights(prefixes, weights)
    suffixed = [p for p in prefixes if p.endswith((".bin", ".idx"))]
    if suffixed:
        checks.append(Check("data.prefix_has_suffix", "error", {"count": len(suffixed), "prefix": suffixed[0], "stem": suffixed[0][:-4]}, subject=suffixed[0]))
    duplicates = len(prefixes) - len(set(prefixes))
    if duplicates:
        checks.append(Check("data.duplicate_prefixes", "warning", {"count": duplicates}))
    resolved = [str(ctx.resolve_path(p)) for p in prefixes]
    from mbridge_launch.base.i18n import t

    with Progress(ctx.progress_stream, t("preflight.progress.data"), len(resolved)) as progress:
        results = scan_prefixes(resolved, progress)
    checks += summarize_prefixes(results)
    return checks


def summarize_prefixes(results: Iterable[PrefixResult]) -> list[Check]:
    results = list(results)
    by_problem: dict[str, list[PrefixResult]] = {}
    for result in results:
        if result.problem:
            by_problem.setdefault(result.problem, []).append(result)
    checks: list[Check] = []
    for problem, items in sorted(by_problem.items(), key=lambda kv: (PREFIX_SEVERITY.get(kv[0], "error") != "error", kv[0])):
        examples = "; ".join(f"{r.prefix}" + (f" ({r.detail})" if r.detail else "") for r in items[:EXAMPLES])
        if len(items) > EXAMPLES:
            examples += f"; +{len(items) - EXAMPLES}"
        checks.append(Check(
            f"data.{problem}", PREFIX_SEVERITY.get(problem, "error"),
            {"count": len(items), "total": len(results), "examples": examples}, subject=items[0].prefix,
        ))
    good = [r for r in results if r.problem is None or PREFIX_SEVERITY.get(r.problem) != "error"]
    if good:
        checks.append(Check("data.blend_ok", "info", {
            "count": len(good), "total": len(results),
            "gb": f"{sum(r.bin_bytes for r in good) / 1e9:.2f}",
            "documents": sum(max(0, r.documents - 1) for r in good),
        }))
    return checks


# ---------------------------------------------------------------------- local JSONL
def _dataset_setting(ctx: PreflightContext, name: str) -> str | None:
    """A dataset.* setting from the Plan's dataset fields or its overrides (overrides win, as on
    the run_recipe.py line)."""
    value = ctx.plan.dataset.fields.get(name)
    for override in ctx.plan.overrides:
        if override.key.lstrip("+") in (f"dataset.{name}", name):
            value = override.value
    return value


def check_local_jsonl(ctx: PreflightContext) -> list[Check]:
    root_text = _dataset_setting(ctx, "dataset_root")
    if not root_text:
        return []  # reported by plan checks (plan.dataset_required)
    root = ctx.resolve_path(root_text)
    if not root.is_dir():
        return [Check("data.jsonl_root_missing", "error", {"path": str(root)}, subject=str(root))]
    prompt_key = _dataset_setting(ctx, "preprocessing.prompt_column") or "input"
    completion_key = _dataset_setting(ctx, "preprocessing.completion_column") or "output"
    checks: list[Check] = []
    for name, required in (("training.jsonl", True), ("validation.jsonl", False)):
        path = root / name
        if not path.is_file():
            code = "data.jsonl_missing" if required else "data.jsonl_validation_missing"
            checks.append(Check(code, "error" if required else "warning", {"path": str(path)}, subject=str(path)))
            continue
        checks += check_jsonl_file(path, prompt_key, completion_key)
    return checks


def check_jsonl_file(path: Path, prompt_key: str = "input", completion_key: str = "output") -> list[Check]:
    expected = f"{prompt_key}+{completion_key} | " + " | ".join(CHAT_KEYS)
    subject = str(path)
    records = 0
    try:
        # bounded reader: a FIFO or device at the path is one error, never a hang; lines bounded
        with open_regular_text(path, "jsonl", errors="strict") as handle:
            for line_no, line in enumerate(iter(lambda: handle.readline(JSONL_LINE_MAX + 1), ""), start=1):
                if len(line) > JSONL_LINE_MAX:
                    reason = t("file.line_too_long", limit=JSONL_LINE_MAX)
                    return [Check("data.jsonl_parse", "error", {"path": subject, "line": line_no, "reason": reason}, subject=subject)]
                if not line.strip():
                    continue
                try:
                    record = parse_json(line)
                except ValueError as exc:
                    return [Check("data.jsonl_parse", "error", {"path": subject, "line": line_no, "reason": str(exc)}, subject=subject)]
                if not isinstance(record, dict):
                    return [Check("data.jsonl_keys", "error", {"path": subject, "line": line_no, "found": type(record).__name__, "expected": expected}, subject=subject)]
                chat = any(isinstance(record.get(k), list) for k in CHAT_KEYS)
                if not chat and not (prompt_key in record and completion_key in record):
                    found = ", ".join(sorted(map(str, record))) or "-"
                    return [Check("data.jsonl_keys", "error", {"path": subject, "line": line_no, "found": found, "expected": expected}, subject=subject)]
                records += 1
                if records >= JSONL_RECORDS:
                    break
    except UnicodeDecodeError as exc:
        return [Check("data.jsonl_parse", "error", {"path": subject, "line": "?", "reason": str(exc)}, subject=subject)]
    except OSError as exc:
        return [Check("data.jsonl_unreadable", "error", {"path": subject, "reason": exc.strerror or str(exc)}, subject=subject)]
    except UserError as exc:  # not a regular file
        return [Check("data.jsonl_unreadable", "error", {"path": subject, "reason": exc.render()}, subject=subject)]
    if records == 0:
        return [Check("data.jsonl_empty", "error", {"path": subject}, subject=subject)]
    return [Check("data.jsonl_ok", "info", {"path": subject, "count": records}, subject=subject)]


# ---------------------------------------------------------------------- Hugging Face presets
def hf_cache_dirs(ctx: PreflightContext) -> list[Path]:
    """Where the job's `datasets`/`huggingface_hub` would look, by the job's environment."""
    home = ctx.job_env("HF_HOME")
    if not home:
        xdg = ctx.job_env("XDG_CACHE_HOME") or ctx.env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    hub = ctx.job_env("HF_HUB_CACHE") or ctx.job_env("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    datasets = ctx.job_env("HF_DATASETS_CACHE") or os.path.join(home, "datasets")
    return [Path(os.path.expanduser(hub)), Path(os.path.expanduser(datasets))]


def hf_dataset_cached(repo: str, caches: list[Path]) -> Path | None:
    """The hub cache folder (`datasets--org--name/snapshots/*`) or the datasets cache folder
    (`org___name`) of `repo`, when one holds files."""
    hub, datasets = caches
    snapshot_root = hub / ("datasets--" + repo.replace("/", "--")) / "snapshots"
    if snapshot_root.is_dir() and any(snapshot_root.iterdir()):
        return snapshot_root
    processed = datasets / repo.replace("/", "___")
    if processed.is_dir() and any(processed.iterdir()):
        return processed
    return None


def check_hf_preset(ctx: PreflightContext, selector: str, repo: str) -> list[Check]:
    offline = is_true(ctx.job_env("HF_HUB_OFFLINE")) or is_true(ctx.job_env("HF_DATASETS_OFFLINE"))
    params = {"dataset": selector, "repo": repo}
    if not offline:
        return [Check("data.hf_needs_network", "warning", params, subject=selector)]
    caches = hf_cache_dirs(ctx)
    found = hf_dataset_cached(repo, caches)
    if found is None:
        return [Check("data.hf_not_cached", "error", {**params, "cache": " | ".join(map(str, caches))}, subject=selector)]
    return [Check("data.hf_cached", "info", {**params, "path": str(found)}, subject=selector)]


def _check_field_path(ctx: PreflightContext, name: str) -> list[Check]:
    value = _dataset_setting(ctx, name)
    if not value:
        return []
    path = ctx.resolve_path(value)
    if not path.exists():
        return [Check("data.path_missing", "error", {"field": f"dataset.{name}", "path": str(path)}, subject=str(path))]
    return []
