"""Compare the static catalog (catalog/megatron-bridge-0.6.2.json) with real ConfigContainers.

Input: the JSON lines of build_recipe.py. For every recipe that built, each field the catalog
stores is compared with the same field read from the real ConfigContainer right after the recipe
function returned (`recipe` in the line: what the static reading describes; the runtime update
changes some on purpose). Runs in any Python >= 3.10 (no torch):

    python tests/bridge/compare_catalog.py results.jsonl [--examples 3] [--json diffs.json]

Prints the counts (recipes, built, validated, failures by stage and reason) and the differences
by field with examples. A difference is "catalog null" when the catalog could not resolve a value
the real code has, else "mismatch".
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
CATALOG = HERE.parent.parent / "catalog" / "megatron-bridge-0.6.2.json"
TOP_FIELDS = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
    "micro_batch_size", "global_batch_size", "seq_length", "dataset_seq_length", "train_iters",
    "peft_scheme", "hf_model_id",
)


def flat(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flat(f"{prefix}.{k}", v)
    else:
        yield prefix, value


def norm(v: Any) -> Any:
    """Spelling differences that are not differences: 1 vs 1.0, tuples as lists, "1" vs 1 in env."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def compare(cat: dict[str, Any], real: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    diffs = []
    for f in TOP_FIELDS:
        if f == "hf_model_id" and real.get(f) is None:
            continue  # the provider does not always keep the HF id; not a catalog error
        if norm(cat.get(f)) != norm(real.get(f)):
            diffs.append((f, cat.get(f), real.get(f)))
    for section in ("dataset", "features"):
        c = dict(flat(section, cat.get(section) or {}))
        r = dict(flat(section, real.get(section) or {}))
        for k in sorted(set(c) | set(r)):
            if k == "features.precision_recipe" and k not in r:
                continue  # a MixedPrecisionConfig object: the real one does not record its preset's name
            if norm(c.get(k)) != norm(r.get(k)):
                diffs.append((k, c.get(k), r.get(k)))
    c_env = {k: str(v) for k, v in (cat.get("env_vars") or {}).items()}
    r_env = {k: str(v) for k, v in (real.get("env_vars") or {}).items()}
    for k in sorted(set(c_env) | set(r_env)):
        if c_env.get(k) != r_env.get(k):
            diffs.append((f"env_vars.{k}", c_env.get(k), r_env.get(k)))
    return diffs


def reason_of(line: dict[str, Any]) -> str:
    err = line.get("error") or {}
    msg = f"{err.get('chain', '')} {err.get('message', '')}"
    if "offline" in msg.lower() or "config.json" in msg or "LocalEntryNotFound" in msg or "outgoing traffic" in msg:
        return "no offline HF config.json (architecture not written by hf_cache.py)"
    if "ShimUsed" in msg:
        return "used the Transformer Engine shim for real"
    if line.get("stage") == "build" and "NotImplementedError" in msg:
        return "recipe raises NotImplementedError"
    return f"{err.get('type')}: {err.get('message', '')[:140]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="static catalog vs real ConfigContainer")
    ap.add_argument("results", type=Path)
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write every difference here")
    args = ap.parse_args(argv)
    catalog = {(r["kind"], r["name"]): r for r in json.loads(CATALOG.read_text())["recipes"]}
    for r in list(catalog.values()):
        for alias in r.get("aliases") or ():
            catalog.setdefault((r["kind"], alias), r)
    lines = [json.loads(s) for s in args.results.read_text().splitlines() if s.strip()]
    by_kind = collections.Counter(line.get("kind") for line in lines)
    built = [line for line in lines if line["built"]]
    validated = [line for line in lines if line["validated"]]
    print(f"recipes {len(lines)} ({dict(by_kind)}), built {len(built)}, validated {len(validated)}")
    failures = collections.Counter((line.get("stage"), reason_of(line)) for line in lines if not line["validated"])
    for (stage, reason), n in failures.most_common():
        print(f"  not validated, {stage}: {n:3d} {reason}")
    per_field: dict[str, list[tuple[str, Any, Any]]] = collections.defaultdict(list)
    agree = 0
    for line in built:
        cat = catalog.get((line["kind"], line["name"]))
        if cat is None:
            continue
        diffs = compare(cat, line["recipe"])
        agree += not diffs
        for field, c, r in diffs:
            per_field[field].append((line["name"], c, r))
    print(f"catalog vs real (built recipes): {agree} of {len(built)} agree on every stored field")
    for field, rows in sorted(per_field.items(), key=lambda kv: -len(kv[1])):
        nulls = sum(1 for _, c, _ in rows if c is None)
        print(f"  {field}: {len(rows)} ({nulls} catalog null)")
        for name, c, r in rows[: args.examples]:
            print(f"      {name}: catalog={json.dumps(c)} real={json.dumps(r)}")
    if args.json:
        args.json.write_text(json.dumps({f: rows for f, rows in per_field.items()}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
