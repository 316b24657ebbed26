"""One message catalog, English and Chinese.

The messages are data: mbridge_launch/messages/en.yaml and zh.yaml, one `key: text` entry per
message with str.format placeholders, the same keys and placeholders in both files. A message that
depends on a number is a mapping of plural forms chosen by its `count` parameter: English has `one`
(count 1) and `other`, Chinese only `other`. Only the language in use is read (a few ms).

The language comes from --lang, else MBRIDGE_LAUNCH_LANG, else a zh* locale in LC_ALL /
LC_MESSAGES / LANG, else English. Chinese terms follow the project glossary.

A key missing from the catalog is a programming error that tests/unit/test_messages.py finds in the
source; at run time the user still gets the key and its parameters, and with
MBRIDGE_LAUNCH_STRICT_MESSAGES=1 (set by the test suite) it raises KeyError instead.
"""

from __future__ import annotations

import os
from typing import Union

LANGS = ("en", "zh")
PLURAL_FORMS = {"en": ("one", "other"), "zh": ("other",)}  # the forms each language's entries need

Entry = Union[str, dict[str, str]]
_current: str | None = None
_messages: dict[str, dict[str, Entry]] = {}


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


def messages(lang: str) -> dict[str, Entry]:
    """Every message of `lang` ("en" or "zh"), as read from messages/<lang>.yaml (cached)."""
    found = _messages.get(lang)
    if found is None:
        from importlib.resources import files

        import yaml

        # BaseLoader: every scalar is a string (a message reading "no" or "1.0" stays text)
        loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
        text = files("mbridge_launch.messages").joinpath(f"{lang}.yaml").read_text(encoding="utf-8")
        found = _messages[lang] = yaml.load(text, Loader=loader) or {}
    return found


def has(key: str) -> bool:
    return key in messages("en")


def template(key: str, lang: str = "en") -> Entry:
    """The raw entry of `key` (a template, or a mapping of plural forms); KeyError when missing."""
    return messages(lang)[key]


def plural_form(lang: str, count: object) -> str:
    """The plural form a number takes in `lang`: "one" or "other" in English, always "other" in Chinese."""
    return "one" if lang == "en" and str(count) == "1" else "other"


def _strict() -> bool:
    return os.environ.get("MBRIDGE_LAUNCH_STRICT_MESSAGES") == "1"


def t(key: str, lang: str | None = None, **params: object) -> str:
    """The message `key` in `lang` (default: the current language), filled with `params`."""
    lang = lang or current_lang()
    if lang not in LANGS:
        lang = "en"
    entry = messages(lang).get(key)
    if entry is None and _strict():
        raise KeyError(f"message key {key!r} is missing from messages/{lang}.yaml")
    if entry is None:
        # A missing key is a programming error, but the user still deserves the facts.
        return key + (" " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
    if isinstance(entry, dict):
        if "count" not in params and _strict():
            raise KeyError(f"message {key!r} has plural forms but no count parameter")
        entry = entry.get(plural_form(lang, params.get("count"))) or entry["other"]
    return entry.format(**params) if params else entry


class Msg:
    """A message not yet rendered: its key and parameters (a parameter may itself be a Msg).

    What the tool stores (a Plan's warnings and change reasons, the ledger) holds Msgs, never text,
    so that the same request gives the same Plan and the same hash in every language; the text is
    made when it is shown (`str(m)` in the current language, `m.render("zh")`)."""

    __slots__ = ("key", "params")

    def __init__(self, key: str, **params: object) -> None:
        self.key = key
        self.params = params

    def render(self, lang: str | None = None) -> str:
        if self.key == BY_LANG_KEY:  # text that came in both languages (catalog findings)
            chosen = self.params.get(lang or current_lang()) or self.params.get("en")
            return "" if chosen is None else str(chosen)
        values = {k: (v.render(lang) if isinstance(v, Msg) else v) for k, v in self.params.items()}
        return t(self.key, lang=lang, **values)

    def __str__(self) -> str:
        return self.render()

    def __bool__(self) -> bool:
        """False only for empty literal text (an Override without a reason)."""
        return not (self.key == LITERAL_KEY and not self.params.get("text"))

    def __repr__(self) -> str:
        return f"Msg({self.key!r}, {self.params!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Msg) and (self.key, self.params) == (other.key, other.params)

    def __hash__(self) -> int:
        return hash(self.key)

    def as_data(self) -> object:
        """JSON/YAML form: {"key": ..., "params": {...}} with nested Msgs in the same form; literal
        text stays a plain string."""
        if self.key == LITERAL_KEY:
            return self.params.get("text", "")
        params = {k: (v.as_data() if isinstance(v, Msg) else v) for k, v in self.params.items()}
        return {"key": self.key, "params": params} if params else {"key": self.key}

    @classmethod
    def from_data(cls, data: object) -> "Msg":
        """The inverse of as_data; a plain string (a Plan written before messages were data) is
        kept as literal text."""
        if isinstance(data, Msg):
            return data
        if isinstance(data, str):
            return cls(LITERAL_KEY, text=data)
        if not isinstance(data, dict) or not isinstance(data.get("key"), str):
            raise ValueError("a message is a mapping with a 'key' and optional 'params'")
        params = data.get("params") or {}
        if not isinstance(params, dict):
            raise ValueError("message params must be a mapping")
        return cls(data["key"], **{str(k): (cls.from_data(v) if isinstance(v, dict) and "key" in v else v)
                                   for k, v in params.items()})


LITERAL_KEY = "text.literal"
BY_LANG_KEY = "text.by_lang"


def msg(key: str, **params: object) -> Msg:
    """Msg(key, **params): a message to store; `t()` is for text shown now."""
    return Msg(key, **params)


def by_lang(**texts: str) -> Msg:
    """A Msg for text that exists as data in each language already (en=..., zh=...)."""
    return Msg(BY_LANG_KEY, **texts)


def placeholders(key: str) -> set[str]:
    """The {names} the English message `key` needs (every plural form); KeyError when unknown."""
    import string

    entry = template(key)
    texts = entry.values() if isinstance(entry, dict) else [entry]
    return {name for text in texts for _, name, _, _ in string.Formatter().parse(text) if name}


def check_msg(m: Msg) -> None:
    """ValueError unless `m` (and every Msg among its parameters) names a known message and gives
    every parameter it needs: a stored message (a hand-edited Plan) must render, not crash later."""
    if m.key == BY_LANG_KEY:
        return
    if not has(m.key):
        raise ValueError(f"unknown message key {m.key!r}")
    missing = sorted(placeholders(m.key) - set(m.params))
    if missing:
        raise ValueError(f"message {m.key!r} needs the parameters {', '.join(missing)}")
    for value in m.params.values():
        if isinstance(value, Msg):
            check_msg(value)
