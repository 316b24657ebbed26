"""Every 0.6.2 library recipe asked for at its own GPU count and system, along the main path:
does `recommend` keep it as NVIDIA ships it, and does `preflight` accept the Plan it writes?

    python benchmarks/shipped_recipes.py [--list] [--write]

For each library recipe with a GPU count and a system the tool knows: `recommend --model <its
model> --gpus <its count> --gpu-type <its system> --goal <its task> --precision <its precision>
-o plan.yaml`, then `preflight plan.yaml --no-cluster`. Counted as refused: an exit 3 (no
layout), a silent resize (the layout moved without a SHIPPED_* warning naming the rule that made
it move), or a preflight error about the Plan (plan.*; the facts of this machine, such as
checkpoint storage, are not counted). Reported separately: requests that select another recipe
at the same count (a variant such as 16k wins the selection), exits 2 with their reason.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "scenarios"))

from shipped_check import REFUSED, check  # noqa: E402

from mbridge_launch.knowledge.catalog import load_catalog  # noqa: E402
from mbridge_launch.knowledge.vocabulary import GPU_TYPES  # noqa: E402

os.environ.setdefault("MBRIDGE_LAUNCH_STRICT_MESSAGES", "1")
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every recipe's verdict")
    ap.add_argument("--write", action="store_true", help="write the summary into benchmarks/RESULTS.md")
    args = ap.parse_args()
    recipes = [r for r in load_catalog().recipes if r.kind == "library" and r.gpus and r.hardware in GPU_TYPES]
    verdicts: collections.Counter = collections.Counter()
    notable = []
    with tempfile.TemporaryDirectory() as tmp:
        for recipe in recipes:
            verdict, detail = check(recipe, Path(tmp))
            verdicts[verdict.split(" (")[0] if verdict.startswith("kept") else verdict] += 1
            if args.list or not verdict.startswith(("kept", "another")):
                notable.append((recipe.name, verdict, detail))
    refused = sum(verdicts[v] for v in REFUSED)
    lines = [f"{len(recipes)} library recipes with a GPU count and a known system, at their own count and system:", ""]
    lines += ["| recipes | verdict |", "|---|---|"] + [f"| {count} | {verdict} |" for verdict, count in verdicts.most_common()]
    lines += ["", f"Shipped layouts refused (exit 3, silent resize, preflight error while unchanged): **{refused}**.", ""]
    lines += [f"- `{name}`: {verdict}" + (f" ({detail})" if detail else "") for name, verdict, detail in notable]
    text = "\n".join(lines)
    print(text)
    if args.write:
        from results_file import write_section

        write_section(SECTION, SECTION + "\n\n" + NOTE + "\n\n" + text + "\n")
    return 1 if refused else 0


SECTION = "## Shipped recipes (`python benchmarks/shipped_recipes.py --write`)"
NOTE = ("Each recipe is requested as a user would (its model, GPU count, system, task and precision). "
        "A length variant (16k, 128k) is asked for with its own --seq-length. `another recipe selected`: a named "
        "variant (muon, deterministic, functional, energon, ...) that no request selects, because recommend "
        "has no flag that names a recipe: those are not checked here. `exit 2`: the request is refused by a fact, not an estimate: MXFP8/NVFP4 "
        "recipes named for H100 (Hopper has no MX formats) and a PEFT recipe that raises NotImplementedError "
        "in 0.6.2. `resized`: NVIDIA's layout breaks a rule Megatron Core enforces (a global batch not "
        "divisible by micro batch x DP, TP not dividing the KV heads); the recommendation says so "
        "(SHIPPED_LAYOUT_INVALID) and names the rule. `SHIPPED_SPLIT_ADDED`: the layout is kept and the "
        "pipeline split settings it lacks are added.")


if __name__ == "__main__":
    sys.exit(main())
