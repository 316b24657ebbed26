"""How long the tool takes where issue 32 sets a bound, measured here and not asserted in tests (a
loaded CI machine would fail a stopwatch; the tests check what makes the waits short instead):

- a 370-byte YAML alias bomb refused by `preflight --no-cluster` (bound 1 s, 100 MB): wall time and
  peak RSS of the whole process, over --repeat runs (min / median / max);
- Ctrl-C of `submit` under a stopped slurmctld (bound 5 s), per executor, and `status` / `runs` with
  slurmctld and slurmdbd stopped (bound 15 s): the e2e tests print these figures; this script runs
  them with -s against the local cluster (tests/cluster/start-cluster.sh) and collects the lines.

    python benchmarks/bounded_waits.py [--repeat 5] [--no-cluster]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def _bomb_once(path: Path) -> tuple[float, float]:
    """(wall s, peak RSS MB) of one `preflight BOMB --no-cluster` in a child of a fresh wrapper."""
    code = (f"import resource,subprocess,sys,time,json\nt=time.monotonic()\n"
            f"p=subprocess.run([sys.executable,'-m','mbridge_launch','preflight',{str(path)!r},'--no-cluster'],"
            f"capture_output=True)\nw=time.monotonic()-t\n"
            f"print(json.dumps([p.returncode,w,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    rc, wall, peak_kb = json.loads(out)
    if rc != 2:
        raise SystemExit(f"the bomb was not refused (exit {rc})")
    return wall, peak_kb / 1024


def alias_bomb(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.yaml"
        path.write_text(BOMB)
        runs = [_bomb_once(path) for _ in range(repeat)]
    walls, peaks = [w for w, _ in runs], [m for _, m in runs]
    print(f"alias bomb ({len(BOMB)} bytes) refused by preflight --no-cluster, {repeat} runs: wall "
          f"{min(walls):.2f} / {statistics.median(walls):.2f} / {max(walls):.2f} s, peak RSS "
          f"{min(peaks):.0f} / {statistics.median(peaks):.0f} / {max(peaks):.0f} MB (bound 1 s, 100 MB)")


def outage_waits() -> None:
    tests = ["tests/e2e/test_controller_outage.py::test_ctrl_c_under_a_stopped_controller_stops_the_waiting_sbatch",
             "tests/e2e/test_slurm_outage_e2e.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *tests],
                          capture_output=True, text=True, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if re.search(r"(Ctrl-C with the controller stopped \([^)]*\)|with slurmctld and slurmdbd stopped): [\d.]+ s", line):
            print(line.strip(), "(bound 5 s)" if "Ctrl-C" in line else "(bound 15 s)")
    if proc.returncode != 0:
        print(proc.stdout[-3000:], file=sys.stderr)
        raise SystemExit("the outage tests failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-cluster", action="store_true", help="only the alias bomb")
    args = parser.parse_args()
    alias_bomb(args.repeat)
    if not args.no_cluster:
        outage_waits()


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"({time.monotonic() - started:.0f} s; rusage of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB)")
