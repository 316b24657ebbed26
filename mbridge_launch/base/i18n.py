"""One message catalog, English and Chinese.

Messages live in mbridge_launch/messages/<area>.py as MESSAGES = {key: (english, chinese)} with
str.format placeholders. The language comes from --lang, else MBRIDGE_LAUNCH_LANG, else a zh*
locale in LC_ALL / LC_MESSAGES / LANG, else English. Chinese terms follow the project glossary.
"""

from __future__ import annotations

import importlib
import os
import pkgutil

LANGS = ("en", "zh")
_current: str | None = None
_catalog: dict[str, tuple[str, str]] | None = None


def detect_lang() -> str:
    explicit = os.environ.get("MBRIDGE_LAUNCH_LANG")
    if explicit in LANGS:
        return explicit
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def set_lang(lang: str | None) -> None:
    global _current
    _current = lang if lang in LANGS else None


def current_lang() -> str:
    return _current or detect_lang()


def catalog() -> dict[str, tuple[str, str]]:
    global _catalog
    if _catalog is None:
        import mbridge_launch.messages as pkg

        merged: dict[str, tuple[str, str]] = {}
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{pkg.__name__}.{info.name}")
            for key, pair in module.MESSAGES.items():
                if key in merged:
                    raise RuntimeError(f"message key {key!r} defined twice (messages/{info.name}.py)")
                merged[key] = pair
        _catalog = merged
    return _catalog


def t(key: str, lang: str | None = None, **params: object) -> str:
    """The message `key` in `lang` (default: the current language), filled with `params`."""
    pair = catalog().get(key)
    if pair is None:
        # A missing key is a programming error, but the user still deserves the facts.
        return key + (" " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
    text = pair[1] if (lang or current_lang()) == "zh" else pair[0]
    return text.format(**params) if params else text
