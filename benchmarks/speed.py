"""Wall time of `plan` (whole process, cold) and how the search grows with the GPU count's divisors.

    python benchmarks/speed.py [--repeats N] [--no-write]

1. `python -m mbridge_launch plan ...` in a fresh subprocess, N times, median: DeepSeek-V3 on
   16,384 GB200 GPUs and Llama 3.1 405B on 16,384 H100 GPUs (target: under 1 s).
2. In-process search time for DeepSeek-V3 on GB200 at GPU counts with more and more divisors:
   the time per divisor must not grow (no worse than linear in the number of divisors).
Writes the speed section of benchmarks/RESULTS.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

CASES = [
    ("DeepSeek-V3, 16,384 x GB200, MXFP8", ["--model", "deepseek_v3", "--gpus", "16384", "--gpu-type", "gb200",
                                            "--precision", "fp8mx", "--seq-length", "4096", "--gbs", "16384"]),
    ("Llama 3.1 405B, 16,384 x H100, FP8", ["--model", "llama31_405b", "--gpus", "16384", "--gpu-type", "h100",
                                             "--precision", "fp8cs", "--seq-length", "8192", "--gbs", "16384"]),
]
SCALING_WORLDS = [1024, 4096, 16384, 3072, 12288, 9216, 15360, 13824, 6912]


def divisor_count(n: int) -> int:
    return sum(1 for d in range(1, int(n ** 0.5) + 1) if n % d == 0 for _ in ((d,) if d * d == n else (d, n // d)))


def run_cli(args: list[str], repeats: int) -> list[float]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="0")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "mbridge_launch", "plan", *args, "--format", "json"],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"plan failed ({proc.returncode}): {proc.stderr.strip()}")
    return times


def scaling() -> list[tuple[int, int, float, int, int]]:
    from mbridge_launch.knowledge.hardware import get_hardware
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.planner.search import search

    arch, hw = load_arch("deepseek_v3"), get_hardware("gb200")
    out = []
    for world in SCALING_WORLDS:
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            result = search(arch, hw, world, gbs=world, seq_length=4096, precision="fp8mx", top=5)
            runs.append(time.perf_counter() - start)
        grids = sum(r.count for r in result.rejected.values()) + len(result.candidates)
        out.append((world, divisor_count(world), statistics.median(runs), result.evaluated, grids))
    return sorted(out, key=lambda item: item[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    lines = ["## Speed (`python benchmarks/speed.py`)", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}. "
             f"Whole `python -m mbridge_launch plan ... --format json` process, cold, {args.repeats} runs each.", "",
             "| case | median | min | max | target |", "|---|---|---|---|---|"]
    for label, cli_args in CASES:
        times = run_cli(cli_args, args.repeats)
        lines.append(f"| {label} | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | < 1 s |")
    lines += ["", "Search only (in process), DeepSeek-V3 on GB200, GBS = GPUs, top 5, by number of divisors of the GPU count:", "",
              "| GPUs | divisors | search time | time per divisor | memory checks | grids considered |", "|---|---|---|---|---|---|"]
    for world, ndiv, seconds, evaluated, grids in scaling():
        lines.append(f"| {world:,} | {ndiv} | {1000 * seconds:.0f} ms | {1000 * seconds / ndiv:.1f} ms | {evaluated} | {grids} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        head = ""
        if RESULTS.exists():
            old = RESULTS.read_text(encoding="utf-8")
            head = old[:old.index("## Speed")] if "## Speed" in old else old.rstrip() + "\n\n"
        RESULTS.write_text(head + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
