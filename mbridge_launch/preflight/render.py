"""The preflight report as text, in the user's language: shown by `preflight` and by the gate
before the plan card."""

from __future__ import annotations

from mbridge_launch.base.i18n import t
from mbridge_launch.base.terminal import display_width, pad
from mbridge_launch.preflight.model import Report

_ORDER = {"error": 0, "warning": 1, "info": 2}


def render_text(report: Report, title: str, verbose: bool = True) -> str:
    """The report as lines: errors first, then warnings, then notes; each with its hint. Without
    `verbose` the notes are counted, not listed (`preflight`/`submit --dry-run` without --verbose):
    they state what is fine, and the answer is the errors and warnings."""
    lines = [title]
    label = {s: t(f"preflight.severity.{s}") for s in _ORDER}
    width = max(display_width(v) for v in label.values())
    code_width = min(34, max((len(c.code) for c in report.checks), default=0))
    shown = [c for c in report.checks if verbose or c.severity != "info"]
    for check in sorted(shown, key=lambda c: _ORDER[c.severity]):
        name = pad(label[check.severity], width)
        lines.append(f"  {name}  {check.code:<{code_width}}  {check.message()}")
        hint = check.hint()
        if hint:
            lines.append(" " * (width + code_width + 6) + t("hint.prefix", message=hint))
    errors, warnings = len(report.errors), len(report.warnings)
    infos = len(report.checks) - errors - warnings
    key = "preflight.summary.passed" if report.ok else "preflight.summary.failed"
    lines.append(t(key, errors=t("preflight.count.errors", count=errors), warnings=t("preflight.count.warnings", count=warnings),
                   infos=t("preflight.count.notes", count=infos), code=report.exit_code)
                 + (t("preflight.notes_hidden") if infos and not verbose else ""))
    return "\n".join(lines)
