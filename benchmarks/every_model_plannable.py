"""`plan` at every library recipe's own size (issue 34, part 1): what it answers, counted.

For each library recipe of catalog/megatron-bridge-0.6.2.json (not raising NotImplementedError):
`plan --model M --gpus N --gpu-type T --goal G [--seq-length S]` with the recipe's GPU count (or
the smallest grid its own layout needs, for the few that name none), in process. Counts by outcome:
layouts (exit 0), refused by a named planner rule (exit 3: memory, grid), refused as input (exit 2:
diffusion and template models, a missing architecture); the refused recipes are listed with the
first reason. tests/unit/test_every_model_plannable.py asserts the same loop; this prints the table.

    .venv/bin/python benchmarks/every_model_plannable.py [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbridge_launch.cli.main import main as cli  # noqa: E402 - after the path

RECIPES = json.loads((ROOT / "catalog" / "megatron-bridge-0.6.2.json").read_text())["recipes"]


def _gpus(r: dict) -> int:
    if r["gpus"]:
        return int(r["gpus"])
    tp, pp, cp = r["tensor_model_parallel_size"] or 1, r["pipeline_model_parallel_size"] or 1, r["context_parallel_size"] or 1
    ep, etp = r["expert_model_parallel_size"] or 1, r["expert_tensor_parallel_size"] or tp
    dense, expert = tp * pp * cp, etp * ep * pp
    return dense * expert // math.gcd(dense, expert)


def _args(r: dict) -> list[str]:
    goal = (r["peft_scheme"] or "lora") if r["mode"] == "peft" else r["mode"]
    args = ["plan", "--model", r["model"], "--gpus", str(_gpus(r)), "--gpu-type", r["hardware"] or "h100",
            "--goal", goal, "--format", "json", "--lang", "en"]
    return args + (["--seq-length", str(r["seq_length"])] if r["seq_length"] else [])


def _outcome(r: dict) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli(_args(r))
    text = err.getvalue().strip().splitlines()
    reason = text[-1] if text else ""
    if rc == 3:
        first = re.search(r"(RULE_\w+) x\d+", reason)
        reason = first.group(1) if first else reason[:80]
    return rc, reason


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="a table for benchmarks/RESULTS.md")
    args = ap.parse_args()
    rows = [(r, *_outcome(r)) for r in RECIPES if r["kind"] == "library" and not r.get("raises_not_implemented")]
    counts = Counter(rc for _, rc, _ in rows)
    models = {r["model"] for r, _, _ in rows}
    answered = {r["model"] for r, rc, _ in rows if rc in (0, 3)}
    print(f"{len(rows)} library recipes of {len(models)} models: layouts {counts[0]}, refused by a named rule "
          f"{counts[3]}, refused as input {counts[2]}; models answered {len(answered)} of {len(models)}")
    refused = [(r["name"], rc, why) for r, rc, why in rows if rc != 0]
    if args.markdown:
        print("\n| recipe | exit | first reason |\n|---|---|---|")
        for name, rc, why in refused:
            print(f"| {name} | {rc} | {why.replace('|', '/')[:120]} |")
    else:
        for name, rc, why in refused:
            print(f"  {rc}  {name}: {why[:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
