"""benchmarks/RESULTS.md, one section per benchmark: each script replaces its own section (from
its `## ` heading to the next one) and keeps every other section as it is."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TITLE = "# Planner benchmarks\n"


def write_section(heading: str, text: str, *, before: str = "## Speed") -> None:
    """Replace the section that starts with `heading` by `text` (which starts with it), or add it
    before the section `before` (else at the end)."""
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else TITLE
    text = text.rstrip("\n") + "\n"
    if heading in old:
        start = old.index(heading)
        nxt = old.find("\n## ", start + len(heading))
        new = old[:start] + text + (old[nxt:] if nxt >= 0 else "")
    else:
        at = old.find(before)
        new = old[:at] + text + "\n" + old[at:] if at >= 0 else old.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(new, encoding="utf-8")
