"""Wall times: `plan` (whole process, cold), `recommend`'s cold start, loading the recipe catalog,
preflight of a 10,000-prefix blend, and how the search grows with the GPU count's divisors.

    python benchmarks/speed.py [--repeats N] [--no-write]

1. `python -m mbridge_launch plan ...` in a fresh subprocess, N times, median: DeepSeek-V3 on
   16,384 GB200 GPUs and Llama 3.1 405B on 16,384 H100 GPUs (target: under 1 s).
2. Start-up work (each run in a fresh interpreter, the interpreter's own start excluded):
   `recommend --smoke-test --format json` from the first import to the answer (target < 0.5 s),
   and `load_catalog()` the first time in a process (target < 1 s).
3. `run_preflight(plan, cluster=False)` of a megatron-indexed blend of 10,000 prefixes, in process
   (the blend of benchmarks/preflight_blend.py; target < 2 s).
4. In-process search time for DeepSeek-V3 on GB200 at GPU counts with more and more divisors:
   the time per divisor must not grow (no worse than linear in the number of divisors).
Writes the speed section of benchmarks/RESULTS.md (unless --no-write). These are the speed checks;
the tests assert no times (the machines they run on are shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

CASES = [
    ("DeepSeek-V3, 16,384 x GB200, MXFP8", ["--model", "deepseek_v3", "--gpus", "16384", "--gpu-type", "gb200",
                                            "--precision", "fp8mx", "--seq-length", "4096", "--gbs", "16384"]),
    ("Llama 3.1 405B, 16,384 x H100, FP8", ["--model", "llama31_405b", "--gpus", "16384", "--gpu-type", "h100",
                                             "--precision", "fp8cs", "--seq-length", "8192", "--gbs", "16384"]),
]
SCALING_WORLDS = [1024, 4096, 16384, 3072, 12288, 9216, 15360, 13824, 6912]

# Timed inside a fresh interpreter (its own start excluded); each prints the seconds it took.
RECOMMEND_COLD = """
import time; t = time.perf_counter()
import contextlib, io
from mbridge_launch.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["recommend", "--smoke-test", "--format", "json"])
assert rc == 0, rc
print(time.perf_counter() - t)
"""
CATALOG_LOAD = """
import time
from mbridge_launch.knowledge.catalog import load_catalog
t = time.perf_counter(); load_catalog(); print(time.perf_counter() - t)
"""
STARTUP = [
    ("`recommend --smoke-test --format json`, imports included", 0.5, RECOMMEND_COLD),
    ("`load_catalog()`, first call in the process (module imported)", 1.0, CATALOG_LOAD),
]
BLEND_PREFIXES = 10_000


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


def run_startup(code: str, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"start-up case failed ({proc.returncode}): {proc.stderr.strip()}")
        times.append(float(proc.stdout.split()[-1]))
    return times


def blend_preflight(repeats: int) -> list[float]:
    """run_preflight without the cluster on a blend of BLEND_PREFIXES prefixes; the blend must pass."""
    from mbridge_launch.preflight.runner import run_preflight
    from preflight_blend import make_blend, make_plan

    with tempfile.TemporaryDirectory(prefix="mbl-blend-") as tmp:
        plan = make_plan(make_blend(Path(tmp), BLEND_PREFIXES))
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            report = run_preflight(plan, cluster=False, env={})
            times.append(time.perf_counter() - start)
            if "data.blend_ok" not in report.codes():
                raise SystemExit(f"the blend did not pass the data checks: {report.codes()}")
    return times


def row(label: str, times: list[float], target: float) -> str:
    return (f"| {label} | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | "
            f"< {target:g} s |")


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
             (f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"load average {os.getloadavg()[0]:.1f} at the start. "
              f"Whole `python -m mbridge_launch plan ... --format json` process, cold, {args.repeats} runs each."), "",
             "| case | median | min | max | target |", "|---|---|---|---|---|"]
    for label, cli_args in CASES:
        lines.append(row(label, run_cli(cli_args, args.repeats), 1))
    blend_runs = max(3, args.repeats // 2)
    intro = (f"Start-up work, each run in a fresh interpreter (the interpreter's own start excluded), "
             f"{args.repeats} runs each; then preflight without the cluster (`run_preflight(plan, cluster=False)`, "
             f"in process) of a megatron-indexed blend of {BLEND_PREFIXES:,} prefixes "
             f"(benchmarks/preflight_blend.py's blend), {blend_runs} runs:")
    lines += ["", intro, "", "| case | median | min | max | target |", "|---|---|---|---|---|"]
    for label, target, code in STARTUP:
        lines.append(row(label, run_startup(code, args.repeats), target))
    lines.append(row(f"preflight of a {BLEND_PREFIXES:,}-prefix blend", blend_preflight(blend_runs), 2))
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
