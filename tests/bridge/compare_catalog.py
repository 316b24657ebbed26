"""Compare the static catalog with real ConfigContainers, at a shell (the test tier's reader).

The comparison itself is the package's (mbridge_launch/catalog_sync/conformance.py, which
`catalog verify` uses too: read its docstring); the reviewed differences are shipped beside the
catalog (catalog/reviewed-differences-0.6.2.yaml). Runs in any Python >= 3.10 (no torch):

    python tests/bridge/compare_catalog.py results.jsonl [--examples 3] [--json diffs.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.catalog_sync.conformance import (  # noqa: E402
    Difference,
    differences,
    load_catalog,
    load_reviewed,
    reason_of,
    reviewed_file,
    summary,
    summary_line,
    triage,
    uncompared_fields,
)

CATALOG = ROOT / "catalog" / "megatron-bridge-0.6.2.json"
REVIEWED = reviewed_file("0.6.2")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="static catalog vs real ConfigContainer")
    ap.add_argument("results", type=Path)
    ap.add_argument("--catalog", type=Path, default=CATALOG)
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="also list the reviewed differences")
    ap.add_argument("--json", type=Path, help="write every difference here")
    ap.add_argument("--summary-json", type=Path, help="write the counts here (for the README; the test only prints them)")
    args = ap.parse_args(argv)
    catalog = load_catalog(args.catalog)
    lines = [json.loads(s) for s in args.results.read_text().splitlines() if s.strip()]
    lines = [line for line in lines if "name" in line]
    for reason, n in collections.Counter(reason_of(x) for x in lines if not x.get("validated")).most_common():
        print(f"  not validated: {n:3d} {reason}")
    diffs = differences(lines, catalog)
    reviewed = load_reviewed() if REVIEWED.exists() else []
    open_diffs, stale = triage(diffs, reviewed)
    shown = diffs if args.all else open_diffs
    per_field: dict[tuple[str, str], list[Difference]] = collections.defaultdict(list)
    for d in shown:
        per_field[(d.stage, d.field)].append(d)
    for (stage, field), rows in sorted(per_field.items(), key=lambda kv: -len(kv[1])):
        print(f"  {stage} {field}: {len(rows)} ({sum(1 for d in rows if d.catalog is None)} catalog null)")
        for d in rows[: args.examples]:
            print(f"      {d.name}: catalog={json.dumps(d.catalog)} real={json.dumps(d.real)}")
    for entry in stale:
        print(f"  stale reviewed entry (no such difference now): {entry['field']} {entry['recipes']}")
    counts = summary(lines, catalog, open_diffs, len(diffs) - len(open_diffs))
    print(summary_line(counts))
    if args.summary_json:
        args.summary_json.write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
    uncovered = uncompared_fields(r for r in catalog.values())
    if uncovered:
        print(f"  stored fields not compared and without a reason: {uncovered}")
    if args.json:
        args.json.write_text(json.dumps([asdict(d) for d in diffs], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
