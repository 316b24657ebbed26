"""What preflight returns: one `Check` per finding and a `Report` that sums them up.

A Check carries a message *key* and its parameters rather than rendered text, so the same report
can be printed in English or Chinese (`--lang`), and its `code` stays stable for CI pipelines that
grep for it. Codes are dotted, `<group>.<what>` (`data.idx_missing`); the message key is
`preflight.<code>` and the hint key `preflight.<code>.hint` unless a check names others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping

from mbridge_launch.base.errors import EXIT_CHECK_FAILED, EXIT_OK, printable_value

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Check:
    """One finding. `message` names the values found and expected; `hint` says what to do."""

    code: str
    severity: Severity
    params: Mapping[str, Any] = field(default_factory=dict)
    subject: str = ""
    key: str | None = None  # message key; default preflight.<code>
    hint_key: str | None = None  # hint key; default preflight.<code>.hint when it exists
    text: str | None = None  # message already rendered by another module (a planner rule)
    hint_text: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:  # a programming error, not a user error
            raise ValueError(f"severity {self.severity!r} is not one of {SEVERITIES}")

    def message(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import t

        if self.text is not None:
            return self.text
        return t(self.key or f"preflight.{self.code}", lang=lang, **self._shown_params(lang))

    def hint(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import has, t

        if self.hint_text is not None:
            return self.hint_text
        key = self.hint_key or f"preflight.{self.code}.hint"
        if not has(key):
            return ""
        return t(key, lang=lang, **self._shown_params(lang))

    def _shown_params(self, lang: str | None = None) -> dict[str, Any]:
        """The parameters as echoed to the terminal (paths and values from the Plan, escaped; a
        stored message, such as a Plan warning, rendered in `lang` first)."""
        from mbridge_launch.base.i18n import Msg

        return {k: printable_value(v.render(lang) if isinstance(v, Msg) else v) for k, v in self.params.items()}

    def to_dict(self, lang: str | None = None) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message(lang),
            "hint": self.hint(lang),
            "subject": self.subject,
        }


@dataclass
class Report:
    """All checks of one preflight run, in the order the groups ran."""

    checks: list[Check] = field(default_factory=list)

    def add(self, checks: Iterable[Check]) -> None:
        self.checks.extend(checks)

    @property
    def errors(self) -> list[Check]:
        return [c for c in self.checks if c.severity == "error"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.severity == "warning"]

    @property
    def ok(self) -> bool:
        """Warnings are allowed; one error fails the plan."""
        return not self.errors

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_CHECK_FAILED

    def codes(self, severity: str | None = None) -> list[str]:
        return [c.code for c in self.checks if severity is None or c.severity == severity]

    def find(self, code: str) -> list[Check]:
        return [c for c in self.checks if c.code == code]

    def to_json(self, lang: str | None = None) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_dict(lang) for c in self.checks]}
