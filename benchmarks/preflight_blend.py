"""Benchmark: preflight's data check on a megatron-indexed blend of 10,000 prefixes.

Writes 10,000 small valid .bin/.idx pairs into a temporary directory, then times the data check
alone (run_data_checks, stat + header reads in a thread pool) and the whole preflight without the
cluster (`run_preflight(plan, cluster=False)`), each best of a few runs. Target (issue 4): < 2 s.

    .venv/bin/python benchmarks/preflight_blend.py [--prefixes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mbridge_launch.plan.model import CatalogRef, Cluster, DatasetSpec, Parallelism, Plan, RecipeRef
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.data_checks import run_data_checks
from mbridge_launch.preflight.megatron_index import write_index
from mbridge_launch.preflight.runner import run_preflight


def make_blend(root: Path, count: int) -> list[str]:
    prefixes = []
    for i in range(count):
        sub = root / f"shard{i // 1000:02d}"
        sub.mkdir(exist_ok=True)
        prefix = str(sub / f"part_{i:05d}_text_document")
        write_index(prefix, [5, 7, 3])
        prefixes.append(prefix)
    return prefixes


def make_plan(prefixes: list[str]) -> Plan:
    return Plan(
        name="bench-blend",
        catalog=CatalogRef(source="bench", version="0.6.2"),
        recipe=RecipeRef(name="qwen3_600m_pretrain_config", kind="library", model="qwen3_600m"),
        mode="pretrain",
        dataset=DatasetSpec(selector="megatron-indexed", data_paths=prefixes, weights=[1.0] * len(prefixes)),
        parallelism=Parallelism(tp=1, pp=1, dp=8, mbs=1, gbs=64, seq_length=4096),
        cluster=Cluster(nodes=1, gpus_per_node=8, gpu_type="h100", partition="h100"),
    )


def timed(func, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefixes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mbl-blend-") as tmp:
        start = time.perf_counter()
        prefixes = make_blend(Path(tmp), args.prefixes)
        made = time.perf_counter() - start
        plan = make_plan(prefixes)
        ctx = PreflightContext(plan=plan)
        checks = run_data_checks(ctx)
        assert [c.code for c in checks] == ["data.blend_ok"], [c.code for c in checks]
        data = timed(lambda: run_data_checks(PreflightContext(plan=plan)), args.repeat)
        whole = timed(lambda: run_preflight(plan, cluster=False), args.repeat)
    print(f"blend of {args.prefixes} prefixes (fixture written in {made:.2f} s)")
    print(f"  data check alone       best {min(data):.3f} s, median {statistics.median(data):.3f} s")
    print(f"  preflight --no-cluster best {min(whole):.3f} s, median {statistics.median(whole):.3f} s")
    print(f"  target < 2 s: {'met' if max(statistics.median(data), statistics.median(whole)) < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
