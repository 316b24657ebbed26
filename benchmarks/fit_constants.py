"""Fit the throughput model's constants on every published benchmark row (regression on tokens/s
plus the ranking term: the published layout ahead of the alternatives) and print them; with
--write, store them in mbridge_launch/planner/throughput.py (between the FITTED markers).

    python benchmarks/fit_constants.py [--write] [--iters N] [--fresh]

The fit starts from the physical defaults of Calibration (and perturbations of them) and, unless
--fresh, also refines the committed constants (projected into their ranges first); the lowest
objective wins. Every constant stays inside its physical range (throughput.BOUNDS); those the
rows press against a bound are printed. The objective is flat
near its minimum (fits whose objectives differ by 0.2% rank a few near-tie rows differently), so
Nelder-Mead from the defaults alone can stop short of a point it has already reached once.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_rows import ROOT, load_rows  # noqa: E402
from fitting import RESTARTS, at_bounds, fit_ranked, objective, predict, prepared, rank_problems  # noqa: E402
from mbridge_launch.planner.throughput import CAL, Calibration  # noqa: E402

TARGET = ROOT / "mbridge_launch" / "planner" / "throughput.py"


def render(cal) -> str:
    """The Calibration as Python source, every field in declaration order (none can be dropped)."""
    def num(v: float) -> str:
        return f"{v:.4g}"

    lines = ["CAL = Calibration("]
    for f in fields(Calibration):
        value = getattr(cal, f.name)
        if isinstance(value, dict):
            inner = ", ".join(f'"{k}": {num(v)}' for k, v in value.items())
            lines.append(f"    {f.name}={{{inner}}},")
        else:
            lines.append(f"    {f.name}={num(value)},")
    return "\n".join([*lines, ")"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the constants into throughput.py")
    parser.add_argument("--iters", type=int, default=800, help="Nelder-Mead iterations per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the ranking term")
    parser.add_argument("--restarts", type=int, default=RESTARTS,
                        help=f"fits from the defaults and from perturbed starts; the lowest objective wins (default {RESTARTS})")
    parser.add_argument("--fresh", action="store_true", help="start from the defaults only, not also from the committed constants")
    args = parser.parse_args()
    rows = load_rows()
    start = time.time()
    problems = rank_problems(rows)
    items = prepared(rows)
    cal = fit_ranked(rows, start=Calibration(), rounds=args.rounds, iters=args.iters, restarts=args.restarts,
                     problems=problems)
    if not args.fresh:
        refined = fit_ranked(rows, start=CAL, rounds=args.rounds, iters=args.iters, problems=problems)
        scores = {name: objective(items, problems, c) for name, c in (("defaults", cal), ("committed", refined))}
        print(f"# objective from the defaults {scores['defaults']:.6f}, refining the committed constants "
              f"{scores['committed']:.6f}")
        if scores["committed"] < scores["defaults"]:
            cal = refined
    errors = [abs(predict(r, L, cal) / r.tokens_per_sec - 1) for r, L in items]
    text = render(cal)
    print(text)
    pressed = at_bounds(cal)
    if pressed:
        # the rows push these against physics: the model lacks something there, the rows do not win
        print("# at their physical bound (throughput.BOUNDS): " + ", ".join(pressed))
    print(f"# fitted on {len(items)} rows in {time.time() - start:.0f} s: median |error| "
          f"{statistics.median(errors):.1%}, within 15%: {sum(e <= 0.15 for e in errors) / len(errors):.0%}")
    if args.write:
        source = TARGET.read_text(encoding="utf-8")
        pattern = re.compile(r"(# BEGIN FITTED CONSTANTS[^\n]*\n)(.*?)(# END FITTED CONSTANTS)", re.S)
        if not pattern.search(source):
            print("markers not found in throughput.py", file=sys.stderr)
            return 1
        TARGET.write_text(pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(3), source), encoding="utf-8")
        print(f"# written to {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
