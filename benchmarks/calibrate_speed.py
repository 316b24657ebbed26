"""`mbridge-launch calibrate` on 300 rows: how long the real console command takes, and how the
constants it writes predict the shipped rows against the committed constants (issue 17: "calibrate
on the calibration rows reproduces the committed constants' accuracy and finishes within 60 s").
With --write, also the held-out comparison of calibrate_heldout.py (the closed-form correction
calibrate runs since issue 34 against the optimizer it ran before), and both go into the
`## Calibrate` section of RESULTS.md.

    nice -n 10 python benchmarks/calibrate_speed.py [--write] [--from-defaults] [--jobs N]

The 300 rows: the 129 shipped rows plus copies of the measured ones with seeded noise on tokens/s
(log-normal, 3%: what two runs of one layout differ by), in one CSV passed with --rows and
--no-shipped-rows. The command runs in a subprocess with a fresh state directory, so it starts from
the shipped constants as a new user's does; --from-defaults also runs it from the physical defaults
of Calibration() (a state file holding them), the harder case.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_rows import ROOT  # noqa: E402
from mbridge_launch.planner import calibration_file as cf  # noqa: E402
from mbridge_launch.planner.calibration_correction import accuracy, prepared  # noqa: E402
from mbridge_launch.planner.calibration_rows import COLUMNS, csv_path, load_rows  # noqa: E402
from mbridge_launch.planner.throughput import CAL, Calibration  # noqa: E402

ROWS = 300
NOISE = 0.03
SEED = 17
LIMIT_S = 60.0
TOLERANCE = 0.005  # 0.5 points of median error and of the within-15% share


def build_rows(path: Path, total: int = ROWS, seed: int = SEED) -> int:
    with open(csv_path(), newline="", encoding="utf-8") as handle:
        shipped = list(csv.DictReader(handle))
    rnd = random.Random(seed)
    measured = [r for r in shipped if r["tokens_per_sec_per_gpu"]]
    out = list(shipped)
    while len(out) < total:
        r = dict(measured[(len(out) - len(shipped)) % len(measured)])
        factor = math.exp(rnd.gauss(0.0, NOISE))
        r["tokens_per_sec_per_gpu"] = f"{float(r['tokens_per_sec_per_gpu']) * factor:.1f}"
        if r["model_tflops_per_gpu"]:
            r["model_tflops_per_gpu"] = f"{float(r['model_tflops_per_gpu']) * factor:.1f}"
        out.append(r)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(out)
    return len(out)


def command() -> list[str]:
    exe = shutil.which("mbridge-launch")
    return [exe] if exe else [sys.executable, "-m", "mbridge_launch"]


def run_calibrate(rows_csv: Path, out: Path, state: Path, extra: tuple[str, ...] = ()) -> tuple[float, dict, float, float]:
    """(wall seconds, the JSON report, the highest load average seen, CPU seconds of the command
    and its workers)."""
    import resource

    env = {**os.environ, "MBRIDGE_LAUNCH_STATE_DIR": str(state), "MBRIDGE_LAUNCH_LANG": "en"}
    argv = [*command(), "calibrate", "--no-shipped-rows", "--rows", str(rows_csv), "-o", str(out), "--format", "json",
            *extra]
    load = os.getloadavg()[0]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.monotonic() - began
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"calibrate failed ({proc.returncode}): {proc.stderr.strip()}")
    return seconds, json.loads(proc.stdout), max(load, os.getloadavg()[0]), cpu


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the ## Calibrate section of RESULTS.md")
    parser.add_argument("--from-defaults", action="store_true", help="also start from the physical defaults")
    parser.add_argument("--jobs", type=int, default=2, help="processes of the old optimizer (held-out table)")
    args = parser.parse_args()
    items = prepared(load_rows())
    committed = accuracy(items, CAL)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        count = build_rows(base / "rows.csv")
        # the command as a user runs it (closed form: no search, no time limit to reach)
        starts: list[tuple[str, Calibration | None, tuple[str, ...]]] = [("shipped constants", None, ())]
        if args.from_defaults:
            starts.append(("physical defaults (Calibration())", Calibration(), ()))
        for label, start, extra in starts:
            state = base / f"state-{len(results)}"
            if start is not None:
                cf.save(state / cf.FILE_NAME, start, cf.Meta(rows=0))
            out = base / f"cal-{len(results)}.json"
            seconds, report, load, cpu = run_calibrate(base / "rows.csv", out, state, extra)
            got = accuracy(items, cf.load(out))
            ok = (got.median <= committed.median + TOLERANCE and got.within_15 >= committed.within_15 - TOLERANCE)
            results.append((label, seconds, load, cpu, report, got, ok))
            print(f"{label}: {seconds:.1f} s, {cpu:.1f} CPU s (load {load:.1f} on {cores} cores), {report['rows']} rows, "
                  f"in-fit {pct(report['before']['median_error'])} -> {pct(report['after']['median_error'])}; "
                  f"shipped rows: median {pct(got.median)} (committed {pct(committed.median)}), within 15% "
                  f"{pct(got.within_15)} (committed {pct(committed.within_15)}); "
                  f"{'reproduces' if ok else 'does NOT reproduce'} the committed accuracy; "
                  f"{'within' if seconds <= LIMIT_S else 'OVER'} {LIMIT_S:.0f} s"
                  + ("; start kept" if report["kept_start"] else ""))
    if args.write:
        from calibrate_heldout import CALIBRATE_ITERS, CALIBRATE_RANK_ITERS, CALIBRATE_ROUNDS, run, table

        strength = (CALIBRATE_ITERS, CALIBRATE_ROUNDS, CALIBRATE_RANK_ITERS)
        held = table(run(args.jobs, strength), strength, args.jobs)
        write(results, committed, count, cores, held)
    return 0 if all(ok for *_, ok in results) and results[0][1] <= LIMIT_S else 1


def write(results, committed, count: int, cores: int, held: str) -> None:  # noqa: ANN001
    from results_file import write_section

    lines = [
        "## Calibrate",
        "",
        (f"`python benchmarks/calibrate_speed.py --write`: the real console command `mbridge-launch calibrate "
        f"--no-shipped-rows --rows FILE -o FILE` in a subprocess on {count} rows (the 129 shipped rows plus copies of "
        f"the measured ones with seeded log-normal noise of {NOISE:.0%} on tokens/s), a fresh state directory; the "
        f"written constants are then scored on the shipped rows against the committed ones (throughput.CAL). Target: "
        f"within {LIMIT_S:.0f} s on 2 cores, median |error| and within-15% no worse than the committed constants' by "
        f"more than {100 * TOLERANCE:.1f} points. Measured on {time.strftime('%Y-%m-%d', time.gmtime())}, {cores} "
        f"cores shared with other work (the load average is given: above the core count, the command got less than "
        f"the 2 cores)."),
        "",
        ("| start | wall time | CPU time (all processes) | load | in-fit median before -> after "
        "| shipped rows median (committed) | within 15% (committed) | accuracy reproduced | start kept |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, seconds, load, cpu, report, got, ok in results:
        lines.append(
            f"| {label} | {seconds:.1f} s | {cpu:.1f} s | {load:.1f} | {pct(report['before']['median_error'])} -> "
            f"{pct(report['after']['median_error'])} | {pct(got.median)} ({pct(committed.median)}) | "
            f"{pct(got.within_15)} ({pct(committed.within_15)}) | {'yes' if ok else 'no'} | "
            f"{'yes' if report['kept_start'] else 'no'} |")
    lines += [
        "",
        ("What the command does (planner/calibration_correction.py): no search. From the calibration in use it "
         "regresses the rows' log errors (pseudo-Huber weights around their median) on the model's own "
         "sensitivity to each fitted constant (a central difference per constant and row), solves one "
         "ridge-regularised least squares bounded by BOUNDS (a constant pushed out of its range is held at the "
         "bound and the rest solved again), and writes the full, half or quarter step, whichever lowers the "
         "robust loss on the rows most, or the start when none does. Until issue 34 it ran the "
         "optimizer now in benchmarks/fitting.py (fit_for_calibrate: 400 regression iterations, 2 rounds of 150 "
         "with the ranking term, 45 s limit; 30-32 s wall, 55-58 CPU s on this machine, 2026-12-02)."),
        "",
        held,
    ]
    write_section("## Calibrate", "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
