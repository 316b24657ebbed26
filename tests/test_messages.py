"""The message catalog: every message exists in English and Chinese with the same placeholders."""

from __future__ import annotations

import re
import string

from mbridge_launch.i18n import catalog, t

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
