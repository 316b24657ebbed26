"""Shared state of one preflight run: the Plan, the submitting environment, and lookups that
several check groups need (architecture, hardware, catalog recipe, rendered script), each done
at most once per run. A lookup whose module is not available records why, so that the checks
depending on it can say they were skipped instead of passing silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from mbridge_launch.plan.model import Plan

if TYPE_CHECKING:
    from mbridge_launch.preflight.model import Check

_MISSING = object()


@dataclass
class Lookup:
    """The result of an optional lookup: a value, or the reason there is none."""

    value: Any = None
    reason: str = ""
    error: BaseException | None = None  # what the lookup raised, if it raised

    @property
    def ok(self) -> bool:
        return self.value is not None


def _reason(exc: BaseException) -> str:
    from mbridge_launch.base.errors import UserError

    if isinstance(exc, ModuleNotFoundError):
        from mbridge_launch.base.i18n import t

        return t("preflight.detail.module_missing", name=exc.name)
    if isinstance(exc, UserError):
        return exc.render()
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _not_found() -> str:
    from mbridge_launch.base.i18n import t

    return t("preflight.detail.not_found")


@dataclass
class PreflightContext:
    plan: Plan
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    plan_text: str | None = None  # the Plan file as written, when read from a file
    plan_path: Path | None = None
    cache_dir: Path | None = None
    progress_stream: Any = None  # where a progress bar may draw (a TTY), or None
    # where the submit runs (the gate's script directory), where a Plan without launch.workdir
    # starts its job; None for a preflight of its own, which cannot know it (the current directory
    # is the best guess then)
    submit_dir: Path | None = None
    # save dir -> rollback.claims.Ownership (who writes it now), from the layers that may open the
    # ledger (cli, gate); None: not checked here
    save_dir_ownership: Callable[[str], Any] | None = None
    # the permission policy (policy.files.Policy; run_preflight loads it when not given) and the
    # GPU-hours this user submitted in the last 24 h (runs.usage, from the layers that may open
    # the ledger; None: not known, said as an info when a policy sets a per-day limit)
    policy: Any = None
    gpu_hours_used: Callable[[], float] | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    def overrides(self) -> dict[str, str]:
        """The plan's overrides by key (`+key=` counts as `key`; the last one wins)."""
        return {item.key.lstrip("+"): item.value or "" for item in self.plan.overrides}

    def override(self, key: str) -> str | None:
        """The value of the plan's last override of `key`, or None."""
        return self.overrides().get(key)

    def lookup(self, name: str, build: Callable[[], Any]) -> Lookup:
        """Run `build` once per run; an exception (module missing, unknown name) becomes a reason."""
        cached = self._cache.get(name, _MISSING)
        if cached is _MISSING:
            try:
                value = build()
                cached = Lookup(value=value, reason="" if value is not None else _not_found())
            except Exception as exc:  # noqa: BLE001 - any failure means "skipped, here is why"
                cached = Lookup(reason=_reason(exc), error=exc)
            self._cache[name] = cached
        return cached

    # ------------------------------------------------------------------ shared lookups
    def arch(self) -> Lookup:
        def build() -> Any:
            from mbridge_launch.knowledge.models import load_arch

            return load_arch(self.plan.recipe.model)

        return self.lookup("arch", build)

    def hardware(self) -> Lookup:
        def build() -> Any:
            from mbridge_launch.knowledge.hardware import get_hardware

            return get_hardware(self.plan.cluster.gpu_type)

        return self.lookup("hardware", build)

    def recipe(self) -> Lookup:
        def build() -> Any:
            from mbridge_launch.knowledge.catalog import load_catalog

            catalog = load_catalog(version=self.plan.catalog.version)
            # ten benchmark functions share a library recipe's name: the plan's kind decides; a
            # plan whose kind matches no recipe of that name gets the other one (a kind mismatch)
            name = self.plan.recipe.name
            return catalog.get(name, kind=self.plan.recipe.kind) or catalog.get(name)

        return self.lookup("recipe", build)

    def rendered_script(self) -> Lookup:
        """The sbatch script the executor would submit (rendering has no side effects)."""

        def build() -> Any:
            from mbridge_launch.executors import get_executor

            return get_executor("sbatch").render(self.plan).text

        return self.lookup("rendered_script", build)

    def plan_yaml(self) -> str:
        """The Plan as text, for scanning for secret values: the file as written if we have it
        (comments included), plus its canonical form."""
        canonical = self.plan.to_yaml()
        return canonical if self.plan_text is None else self.plan_text + "\n" + canonical

    def job_env(self, name: str) -> str | None:
        """A variable as the job will see it: the Plan's own env_vars, else the submitting
        environment's value when the Plan forwards that name (cluster.env / cluster.secrets)."""
        if name in self.plan.env_vars:
            return self.plan.env_vars[name]
        if name in self.plan.cluster.env or name in self.plan.cluster.secrets:
            return self.env.get(name)
        return None

    def resolve_path(self, path: str) -> Path:
        """Relative paths in a Plan are relative to the job's working directory."""
        candidate = Path(os.path.expanduser(path))
        if candidate.is_absolute():
            return candidate
        return self.job_start_dir() / candidate

    def job_start_dir(self) -> Path:
        """Where the job starts: launch.workdir (itself relative to the submit directory), else
        the submit directory; the current directory when the submit directory is not known."""
        submit = self.submit_dir or Path.cwd()
        base = self.plan.launch.workdir
        if not base:
            return submit
        workdir = Path(os.path.expanduser(base))
        return workdir if workdir.is_absolute() else submit / workdir


def run_all(ctx: PreflightContext, groups: Iterable[Callable[[PreflightContext], list[Check]]]) -> list[Check]:
    """The checks of each function in `groups` on `ctx`, in that order (one check group's run)."""
    return [check for group in groups for check in group(ctx)]
