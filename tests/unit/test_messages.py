"""The message catalog: every message exists in English and Chinese with the same placeholders."""

from __future__ import annotations

import re
import string

from mbridge_launch.base.i18n import catalog, t

CJK = re.compile(r"[\u4e00-\u9fff]")


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_message_has_both_languages_with_the_same_placeholders():
    problems = []
    for key, pair in catalog().items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(s, str) and s for s in pair)):
            problems.append(f"{key}: not a (en, zh) pair of non-empty strings")
            continue
        en, zh = pair
        if _fields(en) != _fields(zh):
            problems.append(f"{key}: placeholders differ {sorted(_fields(en))} vs {sorted(_fields(zh))}")
        bare = string.Formatter().parse(zh)
        literal = "".join(part for part, _, _, _ in bare)
        technical_term = zh == en and " " not in en  # e.g. 'logits' stays untranslated
        if not technical_term and literal.strip(" :：()（）{}-./,，;；") and re.search(r"[A-Za-z]{3}", literal) and not CJK.search(zh):
            problems.append(f"{key}: Chinese text has no Chinese characters: {zh!r}")
    assert not problems, "\n".join(problems)


def test_lookup_follows_language():
    assert t("error.prefix", lang="en", message="x") == "error: x"
    assert t("error.prefix", lang="zh", message="x") == "错误：x"


def test_echoed_values_cannot_drive_the_terminal():
    """A user-given value with an escape sequence (or a NUL) comes back escaped, not executed by
    the terminal; CJK text, line breaks and tabs are kept."""
    from mbridge_launch.base.errors import UserError

    text = UserError("models.unknown", model="x\x1b[31my\x00", closest="llama3_8b").render("en")
    assert "\x1b" not in text and "\x00" not in text and "x\\x1b[31my\\x00" in text
    assert UserError("models.unknown", model="模型\n\tb", closest="-").render("zh").startswith("未知模型 '模型\n\tb'")
