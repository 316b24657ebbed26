"""`mbridge-launch preflight PLAN`: prove a Plan can run before a GPU-hour is spent.

Exit 0: every check passed (warnings allowed); 1: an error was found; 2: the Plan itself is
invalid (unparseable, unknown or mistyped fields).
"""

from __future__ import annotations

import argparse
import sys

from mbridge_launch.cli.main import add_common

HELP = "check a Plan before submitting: rules, memory, data, paths, secrets, the cluster (read-only), optionally the nodes"

_ORDER = {"error": 0, "warning": 1, "info": 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", metavar="PLAN", help="Plan file (YAML) written by recommend or plan -o")
    parser.add_argument("--no-cluster", action="store_true", help="skip the Slurm queries and sbatch --test-only (for CI)")
    parser.add_argument("--on-nodes", action="store_true", help="also submit the short node-check step and report per node (the only option that submits)")
    add_common(parser)


def _width(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def render_text(report, title: str) -> str:  # noqa: ANN001 - Report, kept import-light
    """The report as lines: errors first, then warnings, then notes; each with its hint."""
    from mbridge_launch.base.i18n import t

    lines = [title]
    label = {s: t(f"preflight.severity.{s}") for s in _ORDER}
    width = max(_width(v) for v in label.values())
    code_width = min(34, max((len(c.code) for c in report.checks), default=0))
    for check in sorted(report.checks, key=lambda c: _ORDER[c.severity]):
        name = label[check.severity] + " " * (width - _width(label[check.severity]))
        lines.append(f"  {name}  {check.code:<{code_width}}  {check.message()}")
        hint = check.hint()
        if hint:
            lines.append(" " * (width + code_width + 6) + t("hint.prefix", message=hint))
    errors, warnings = len(report.errors), len(report.warnings)
    infos = len(report.checks) - errors - warnings
    key = "preflight.summary.passed" if report.ok else "preflight.summary.failed"
    lines.append(t(key, errors=errors, warnings=warnings, infos=infos, code=report.exit_code))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.plan.model import load_plan
    from mbridge_launch.preflight import run_preflight
    from mbridge_launch.preflight.runner import default_progress_stream

    plan = load_plan(args.plan)  # UserError (exit 2) for an unreadable or invalid Plan
    try:
        plan_text = Path(args.plan).read_text(encoding="utf-8")
    except OSError:
        plan_text = None
    report = run_preflight(
        plan, cluster=not args.no_cluster, on_nodes=args.on_nodes,
        plan_text=plan_text, progress_stream=default_progress_stream(),
    )
    if args.format == "json":
        print_json(report.to_json())
    else:
        title = t("preflight.title", name=plan.name, hash=plan.plan_hash(), path=args.plan)
        sys.stdout.write(render_text(report, title) + "\n")
    return report.exit_code
