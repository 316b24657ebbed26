"""Parse the user's trailing KEY=VALUE overrides (run_recipe.py's Hydra-style syntax)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.hydra_values import override_text

# How run_recipe.py overrides and catalog features spell a switch. Anything else counts as on for
# is_on (a value such as "selective" or "full"); is_true wants an explicit yes.
OFF_WORDS = ("", "0", "false", "no", "off", "none", "null")
TRUE_WORDS = ("1", "true", "yes", "on")


def is_on(value: object) -> bool:
    """A switch as the catalog or an override gives it: None/False/'none'/'false'/'0'/... are off."""
    if value is None or value is False:
        return False
    return str(value).strip().lower() not in OFF_WORDS


def is_true(value: object) -> bool:
    """An explicit yes: True, '1', 'true', 'yes', 'on' (environment flags such as HF_HUB_OFFLINE)."""
    return value is True or str(value or "").strip().lower() in TRUE_WORDS


def whole_number(value: object) -> int | None:
    """The value as a non-negative integer when it is written as one in ASCII digits, else None.
    (str.isdigit also accepts '²', on which int() fails; Megatron reads only ASCII digits; a
    4,300-digit value would be int()'s own ValueError: base/numbers.py bounds it.)"""
    from mbridge_launch.base.numbers import whole_or_none

    return whole_or_none(str(value if value is not None else ""))


# fullmatch: `$` would let a trailing newline through
KEY_PATTERN = re.compile(r"[+~]?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class RawOverride:
    key: str  # with a leading + (add) or ~ (remove) kept
    value: str | None  # None for ~key removals

    @property
    def path(self) -> str:
        return self.key.lstrip("+~")

    def as_arg(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


def parse_overrides(items: list[str]) -> list[RawOverride]:
    parsed: list[RawOverride] = []
    for text in items:
        if text.startswith("~") and "=" not in text:
            key, value = text, None
        elif "=" in text:
            key, value = text.split("=", 1)
        else:
            raise UserError("override.syntax", text=text)
        if not KEY_PATTERN.fullmatch(key):
            raise UserError("override.syntax", text=text)
        parsed.append(RawOverride(key, value))
    return parsed


# The overrides that set what a Plan's `parallelism` records, by its field: the layout keys
# (vocabulary.LAYOUT_KEYS) and the recompute, FSDP and distributed-optimizer switches recommend
# writes from the layout (recommend/changes.py, plan/shipped.py).
SWITCH_KEYS = {
    "recompute": ("model.recompute_granularity",),
    "fsdp": ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp"),
    "distributed_optimizer": ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer"),
}
_BOOL_FIELDS = ("sp", "fsdp", "distributed_optimizer")
_OPTIONAL_SIZES = ("vp", "etp")  # null: no interleaving, expert TP as TP


def layout_override_keys() -> dict[str, str]:
    """ConfigContainer path -> the parallelism field it sets."""
    from mbridge_launch.knowledge.vocabulary import LAYOUT_KEYS

    keys = {key: name for name, key in LAYOUT_KEYS.items()}
    keys.update({key: name for name, names in SWITCH_KEYS.items() for key in names})
    return keys


def _as_layout_value(name: str, text: str) -> object:
    """An override's text as the parallelism field `name` holds it; the text itself when it is
    not one (an unreadable value contradicts any layout)."""
    word = text.strip().lower()
    if name in _BOOL_FIELDS:
        return is_on(word) if word in OFF_WORDS or word in TRUE_WORDS else text
    if name == "recompute":
        return "none" if not is_on(word) else word
    if name in _OPTIONAL_SIZES and word in ("null", "none", "~", ""):
        return None
    number = whole_number(word)
    return text if number is None else number


def layout_contradiction(parallelism: object, overrides: list[tuple[str, str]]) -> dict[str, object] | None:
    """The first override (the last of each key, as Hydra applies them) that sets a layout field
    to another value than `parallelism` records: {setting, value, field, layout}; else None.
    Equal values are fine (recommend writes the layout it changed as overrides)."""
    keys = layout_override_keys()
    last: dict[str, str] = {}
    for key, value in overrides:
        path = key.lstrip("+")
        if path in keys and not key.startswith("~"):
            last[path] = value
    for path, value in last.items():
        name = keys[path]
        held = getattr(parallelism, name)
        given = _as_layout_value(name, value)
        if name == "distributed_optimizer" and given is False:
            continue  # Bridge turns it on when EITHER switch asks: one `false` need not turn it off
        if given != held:
            return {"setting": path, "setting_value": value, "layout_field": f"parallelism.{name}",
                    "layout_value": override_text(held)}
    return None


# ------------------------------------------------------------------ keys against the real schema


def unknown_override(key: str, catalog_version: str | None, recipe: str | None = None,
                     kind: str | None = None) -> UserError | None:
    """The error for an override key that names no field of the release's ConfigContainer (the
    catalog's field tree, from the real classes), with the closest real keys; None when the key is
    known, is added on purpose (`+key`: Hydra's way to add a new key, passed through as written) or
    the catalog has no field tree. A model.* key is checked against the recipe's own provider class
    where its real build recorded it, else against every provider (and the message says so)."""
    if key.startswith("+"):
        return None
    from mbridge_launch.base.i18n import msg
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.knowledge.config_fields import load_field_tree

    version = catalog_version or load_catalog().version
    tree = load_field_tree(version)
    if tree is None:
        return None
    path = key.lstrip("~")
    found = tree.lookup(path, recipe=recipe, kind=kind)
    if found.known:
        return None
    scope: object = ""  # a key outside model.*: one tree for every recipe
    if found.provider is not None:
        scope = msg("override.scope.provider", provider=found.provider)
    elif found.union:
        scope = msg("override.scope.any_provider")
    if found.suggestions:
        return UserError("override.unknown_setting", setting=path, scope=scope,
                         suggestion=" or ".join(found.suggestions))
    return UserError("override.unknown_setting_none", setting=path, scope=scope, version=version)


def check_override_keys(keys: list[str], catalog_version: str | None, recipe: str | None = None,
                        kind: str | None = None) -> None:
    """Raise (exit 2, one line) on the first key that names no real setting (unknown_override)."""
    for key in keys:
        error = unknown_override(key, catalog_version, recipe, kind)
        if error is not None:
            raise error
