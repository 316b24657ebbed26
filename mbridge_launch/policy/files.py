"""Permission policy files, strictest wins: site, user, project.

- site: /etc/mbridge-launch/policy.yaml, and the file named by $MBRIDGE_LAUNCH_SITE_POLICY (sites
  that keep it elsewhere, and tests). The variable adds a file, it does not replace /etc's: a
  submitter cannot set a variable to escape the site's limits (nothing a user runs is a security
  boundary against that user, who can call sbatch directly, but the tool must not make it easy);
- user: $XDG_CONFIG_HOME/mbridge-launch/policy.yaml ($HOME/.config when XDG_CONFIG_HOME is unset
  or empty);
- project: .mbridge-launch.yaml in the working directory.

A missing file sets nothing; one that exists must be a readable regular file (bounded read) with a
flat mapping of known keys (schema.py), else the command stops with a UserError naming it: a
policy that cannot be read must not be ignored. Merging (per key): maxima and the confirmation
level take the minimum, accounts/partitions the intersection of the lists that are set, booleans
AND, max_per_run the minimum; rollback_dirs allow a directory only if every file that sets them
does. Each effective Limit keeps the file that set it (the strictest one).

Without any policy the defaults are conservative: nothing automatic cancels or resubmits unless the
Plan enables it, at most DEFAULT_MAX_AUTO_ROLLBACKS automatic rollbacks per run, and rollback only
touches the run's own save directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mbridge_launch.base.files import read_bounded_text
from mbridge_launch.base.user_yaml import load_user_yaml
from mbridge_launch.policy.schema import KEYS, NAME_LISTS, read_mapping

SITE_POLICY = "/etc/mbridge-launch/policy.yaml"
SITE_ENV = "MBRIDGE_LAUNCH_SITE_POLICY"
USER_RELATIVE = Path("mbridge-launch") / "policy.yaml"
PROJECT_FILE = ".mbridge-launch.yaml"
MAX_BYTES = 64 * 1024  # a policy is a dozen lines
DEFAULT_MAX_AUTO_ROLLBACKS = 3
_BOOLEANS = ("allow_benchmark_recipes", "auto_rollback.allow")


@dataclass(frozen=True)
class Limit:
    key: str
    value: Any
    source: str  # the file that set it (the strictest one)


@dataclass
class Policy:
    files: list[str] = field(default_factory=list)  # the files read, in order site, user, project
    limits: dict[str, Limit] = field(default_factory=dict)  # effective limits, only keys some file sets
    # every file's own value per key, in file order: which file refuses an account, a directory
    per_file: dict[str, list[Limit]] = field(default_factory=dict)

    def get(self, key: str) -> Limit | None:
        return self.limits.get(key)

    def refusing_source(self, key: str, item: str) -> str | None:
        """The first file whose list `key` (accounts, partitions) lacks `item`."""
        return next((lim.source for lim in self.per_file.get(key, []) if item not in lim.value), None)

    def auto_rollback_allowed(self, plan_enabled: bool) -> tuple[bool, str | None]:
        """Whether the watcher may cancel and resubmit: only if the Plan enables it and no file
        forbids it; the source is the file that decided (None: the Plan or the default)."""
        limit = self.get("auto_rollback.allow")
        if not plan_enabled:
            return False, None
        if limit is not None:
            return bool(limit.value), limit.source
        return True, None

    def max_auto_rollbacks(self, plan_value: int) -> tuple[int, str | None]:
        """min(the Plan's max_rollbacks, the policy's max_per_run or the default cap 3); the
        source is the file when its cap is what binds."""
        limit = self.get("auto_rollback.max_per_run")
        cap = DEFAULT_MAX_AUTO_ROLLBACKS if limit is None else int(limit.value)
        if plan_value <= cap:
            return plan_value, None
        return cap, None if limit is None else limit.source

    def rollback_dir_allowed(self, save_dir: Path, own_save_dir: Path | None) -> tuple[bool, str | None]:
        """Whether rollback may modify `save_dir`. With rollback_dirs set: only inside a directory
        of every file that sets them (symlinks resolved); the source is the first file refusing.
        Without: only the run's own save directory `own_save_dir` (from the ledger); None means no
        recorded run writes there and the user named the directory by hand (allowed, with the
        command's own warning)."""
        sets = self.per_file.get("rollback_dirs", [])
        if sets:
            from mbridge_launch.base.files import inside

            for limit in sets:
                if not any(inside(save_dir, root) for root in limit.value):
                    return False, limit.source
            return True, None
        if own_save_dir is None or os.path.realpath(save_dir) == os.path.realpath(own_save_dir):
            return True, None
        return False, None

    def summary_lines(self, lang: str | None = None) -> list[str]:
        """One line per effective limit for the plan card: "max_gpus 8 (from /etc/...)"."""
        from mbridge_launch.base.i18n import t

        lines = []
        for key in _ORDER:
            if key == "rollback_dirs":
                lines += [t("policy.card.line", lang=lang, name=key, value=", ".join(lim.value), path=lim.source)
                          for lim in self.per_file.get(key, [])]
            elif key in self.limits:
                limit = self.limits[key]
                lines.append(t("policy.card.line", lang=lang, name=key, value=shown_value(key, limit.value),
                               path=limit.source))
        return lines


_ORDER = ("max_gpus", "max_nodes", "max_time", "max_gpu_hours", "max_gpu_hours_per_day", "accounts", "partitions",
          "allow_benchmark_recipes", "auto_rollback.allow", "auto_rollback.max_per_run", "rollback_dirs",
          "typed_confirmation_above_gpu_hours")


def shown_value(key: str, value: Any) -> str:
    """A limit as a person reads it (the time as H:M:S, lists joined, numbers without .0)."""
    from mbridge_launch.base.slurm_time import format_seconds

    if key == "max_time":
        return format_seconds(int(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ", ".join(value) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def policy_paths(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> list[Path]:
    """The places, in order site (/etc, then $MBRIDGE_LAUNCH_SITE_POLICY), user, project (whether
    or not the files exist). Without HOME and XDG_CONFIG_HOME there is no user file."""
    environ = os.environ if env is None else env
    paths = [Path(SITE_POLICY)]
    extra = environ.get(SITE_ENV) or ""
    if extra and os.path.abspath(extra) != SITE_POLICY:
        paths.append(Path(extra))
    config = environ.get("XDG_CONFIG_HOME") or ""
    home = environ.get("HOME") or ""
    if config:
        paths.append(Path(config) / USER_RELATIVE)
    elif home:
        paths.append(Path(home) / ".config" / USER_RELATIVE)
    if cwd is None:
        try:
            cwd = Path.cwd()
        except OSError:  # the working directory was removed: there is no project file to read
            return paths
    paths.append(Path(cwd) / PROJECT_FILE)
    return paths


def read_policy_file(path: Path) -> dict[str, Any] | None:
    """The normalised limits of one file; None when it does not exist (os.path.lexists: a
    dangling symlink is there, and refused, not skipped)."""
    if not os.path.lexists(path):
        return None
    text = read_bounded_text(path, MAX_BYTES, "policy")
    return read_mapping(str(path), load_user_yaml(text, str(path)))


def load_policy(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Policy:
    """The effective policy of the files that exist (UserError, exit 2, for a bad one)."""
    policy = Policy()
    for path in policy_paths(cwd, env):
        found = read_policy_file(path)
        if found is None:
            continue
        policy.files.append(str(path))
        for key, value in found.items():
            policy.per_file.setdefault(key, []).append(Limit(key, value, str(path)))
    policy.limits = {key: _merge(key, sets) for key, sets in policy.per_file.items()}
    return policy


def _merge(key: str, sets: list[Limit]) -> Limit:
    if key in NAME_LISTS:
        allowed = [item for item in sets[0].value if all(item in lim.value for lim in sets[1:])]
        # the source of an intersection: every file that narrowed it (the refusing one is found
        # per item by Policy.refusing_source)
        return Limit(key, tuple(allowed), ", ".join(lim.source for lim in sets))
    if key == "rollback_dirs":
        return Limit(key, tuple(d for lim in sets for d in lim.value), ", ".join(lim.source for lim in sets))
    if key in _BOOLEANS:
        refusing = next((lim for lim in sets if not lim.value), None)
        return refusing or sets[0]
    strictest = sets[0]
    for lim in sets[1:]:
        if lim.value < strictest.value:  # ties keep the earlier (site) file
            strictest = lim
    return strictest


__all__ = ["KEYS", "Limit", "Policy", "load_policy", "policy_paths", "DEFAULT_MAX_AUTO_ROLLBACKS", "SITE_ENV"]
