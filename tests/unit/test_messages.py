"""The message catalog (mbridge_launch/messages/en.yaml and zh.yaml) and the code that uses it:
both languages hold the same keys with the same placeholders and the plural forms each language
needs; every key the code names exists, and every key in the catalog is used."""

from __future__ import annotations

import ast
import io
import re
import string
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import pytest

from mbridge_launch.base import i18n
from mbridge_launch.base.i18n import LANGS, PLURAL_FORMS, messages, t

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = (REPO / "mbridge_launch", REPO / "executors")
MESSAGES_DIR = REPO / "mbridge_launch" / "messages"
CJK = re.compile(r"[\u4e00-\u9fff]")
PERCENT_FIELD = re.compile(r"%(?:\((\w+)\))?[-#0 +]*\d*(?:\.\d+)?[sdrif%]")  # argparse's own words


def _forms(entry: object) -> list[str]:
    return list(entry.values()) if isinstance(entry, dict) else [entry]  # type: ignore[list-item]


def _fields(text: str) -> set[str]:
    fields = {name for _, name, _, _ in string.Formatter().parse(text) if name}
    return fields | {f"%{m.group(1) or 's'}" for m in PERCENT_FIELD.finditer(text) if m.group(0) != "%%"}


def test_both_languages_have_the_same_keys_in_the_same_order():
    en, zh = (list(messages(lang)) for lang in LANGS)
    assert set(en) - set(zh) == set(), "keys missing from zh.yaml"
    assert set(zh) - set(en) == set(), "keys missing from en.yaml"
    assert en == zh, "en.yaml and zh.yaml list their keys in different orders"


def test_entries_are_text_or_the_plural_forms_each_language_needs():
    problems = []
    for lang in LANGS:
        for key, entry in messages(lang).items():
            if isinstance(entry, dict):
                if set(entry) != set(PLURAL_FORMS[lang]):
                    problems.append(f"{lang}.yaml {key}: plural forms {sorted(entry)}, {lang} needs {list(PLURAL_FORMS[lang])}")
            if not all(isinstance(form, str) and form for form in _forms(entry)):
                problems.append(f"{lang}.yaml {key}: not a non-empty text (or a mapping of plural forms to texts)")
        for key in messages("en"):
            if isinstance(messages("zh").get(key), dict) and not isinstance(messages("en")[key], dict):
                problems.append(f"{key}: plural forms in zh.yaml but one text in en.yaml")
    assert not problems, "\n".join(problems)


def test_every_message_has_the_same_placeholders_in_every_language_and_form():
    """The same placeholders everywhere; a text with plural forms may leave out {count}, which
    chooses the form ("finished an interrupted rollback" / "finished interrupted rollbacks")."""
    problems = []
    for key, en in messages("en").items():
        forms = {f"en/{i}": form for i, form in enumerate(_forms(en))}
        forms.update({f"zh/{i}": form for i, form in enumerate(_forms(messages("zh").get(key, "")))})
        optional = {"count"} if isinstance(en, dict) else set()
        seen = {where: sorted(_fields(form) - optional) for where, form in forms.items()}
        if len({str(fields) for fields in seen.values()}) > 1:
            problems.append(f"{key}: placeholders differ {seen}")
    assert not problems, "\n".join(problems)


def test_chinese_texts_are_chinese():
    problems = []
    for key, entry in messages("zh").items():
        for zh in _forms(entry):
            literal = "".join(part for part, _, _, _ in string.Formatter().parse(zh))
            technical_term = zh in _forms(messages("en")[key]) and " " not in zh  # e.g. 'logits' stays
            if not technical_term and literal.strip(" :：()（）{}-./,，;；") and re.search(r"[A-Za-z]{3}", literal) and not CJK.search(zh):
                problems.append(f"{key}: Chinese text has no Chinese characters: {zh!r}")
    assert not problems, "\n".join(problems)


def test_lookup_follows_language():
    assert t("error.prefix", lang="en", message="x") == "error: x"
    assert t("error.prefix", lang="zh", message="x") == "错误：x"


def test_plural_forms_follow_the_count():
    assert t("preflight.count.errors", lang="en", count=1) == "1 error"
    assert t("preflight.count.errors", lang="en", count=0) == "0 errors"
    assert t("preflight.count.errors", lang="en", count=2) == "2 errors"
    assert t("preflight.count.errors", lang="zh", count=1) == "1 个错误"


def test_a_missing_key_still_shows_its_facts_but_fails_under_the_test_suite(monkeypatch):
    with pytest.raises(KeyError, match="no.such.key"):
        t("no.such.key", lang="en", path="/x")
    monkeypatch.delenv("MBRIDGE_LAUNCH_STRICT_MESSAGES")
    assert t("no.such.key", lang="zh", path="/x") == "no.such.key path=/x"


def test_the_messages_package_is_data_only():
    """messages/ holds the two YAML files and an __init__.py without code (nothing to import)."""
    files = sorted(p.name for p in MESSAGES_DIR.iterdir() if p.name != "__pycache__")
    assert files == ["__init__.py", "en.yaml", "zh.yaml"]
    body = ast.parse((MESSAGES_DIR / "__init__.py").read_text(encoding="utf-8")).body
    assert all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)


def _python_files() -> Iterator[Path]:
    for top in PACKAGE_DIRS:
        for path in sorted(top.rglob("*.py")):
            if MESSAGES_DIR not in path.parents:
                yield path


def test_no_user_facing_text_in_chinese_outside_the_catalog():
    """Chinese text lives in zh.yaml only: no Python string of the package holds any (comments may)."""
    found = []
    for path in _python_files():
        source = path.read_text(encoding="utf-8")
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING and CJK.search(token.string):
                found.append(f"{path.relative_to(REPO)}:{token.start[0]}: {token.string[:60]}")
    assert not found, "move these texts into mbridge_launch/messages/*.yaml:\n" + "\n".join(found)


# --------------------------------------------------------------------------- keys the code uses
# A call that takes a message key: name -> (position of the key argument, its keyword, what the
# call puts before and after it). Functions that pass one of their parameters on to such a call
# (`_reason(key)` calling t(f"ckpt.reason.{key}")) are found in the source and added.
KEY_CALLS: dict[str, list[tuple[int | None, str, str, str]]] = {
    **{name: [(0, "key", "", "")] for name in ("t", "UserError", "NoLayoutError", "CheckFailed", "SubmissionError")},
    # a preflight Check's message is preflight.<code> unless it names key=; its hint preflight.<code>.hint
    "Check": [(0, "code", "preflight.", ""), (None, "key", "", ""), (None, "hint_key", "", "")],
    "Violation": [(1, "key", "", "")],
}


@lru_cache(maxsize=1)
def _trees() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple((path, ast.parse(path.read_text(encoding="utf-8"))) for path in _python_files())


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _argument(node: ast.Call, position: int | None, keyword: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(node.args) > position and not any(isinstance(a, ast.Starred) for a in node.args[:position + 1]):
        return node.args[position]
    return None


def _shape(expr: ast.expr | None, names: dict[str, ast.expr] | None = None) -> tuple[str, ast.expr | None, str] | None:
    """(prefix, the variable part, suffix) of a key expression: 'a.b' -> ('a.b', None, ''),
    f'a.{x}' and 'a.' + x -> ('a.', x, ''); None when it is none of these."""
    if isinstance(expr, ast.Name) and names and expr.id in names:
        return _shape(names[expr.id])
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value, None, ""
    if isinstance(expr, ast.JoinedStr):
        holes = [i for i, v in enumerate(expr.values) if isinstance(v, ast.FormattedValue)]
        if len(holes) == 1:
            i = holes[0]
            text = lambda values: "".join(v.value for v in values if isinstance(v, ast.Constant))  # noqa: E731
            return text(expr.values[:i]), expr.values[i].value, text(expr.values[i + 1:])  # type: ignore[attr-defined]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add) and isinstance(expr.left, ast.Constant) and isinstance(expr.left.value, str):
        return expr.left.value, expr.right, ""
    if expr is not None:
        return "", expr, ""
    return None


def _key_calls() -> dict[str, list[tuple[int | None, str, str, str]]]:
    calls = {name: list(specs) for name, specs in KEY_CALLS.items()}
    changed = True
    while changed:
        changed = False
        for _, tree in _trees():
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                if positional[:1] in (["self"], ["cls"]):
                    positional = positional[1:]
                params = set(positional) | {a.arg for a in fn.args.kwonlyargs}
                local = {n.targets[0].id: n.value for n in ast.walk(fn)
                         if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
                for node in ast.walk(fn):
                    if not (isinstance(node, ast.Call) and _call_name(node) in calls):
                        continue
                    for position, keyword, before, after in calls[_call_name(node)]:  # type: ignore[index]
                        shape = _shape(_argument(node, position, keyword), local)
                        if shape and isinstance(shape[1], ast.Name) and shape[1].id in params:
                            name = shape[1].id
                            spec = (positional.index(name) if name in positional else None, name,
                                    before + shape[0], shape[2] + after)
                            if spec not in calls.setdefault(fn.name, []):
                                calls[fn.name].append(spec)
                                changed = True
    return calls


def _literals() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.setdefault(node.value, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def _key_patterns() -> list[tuple[str, str, str]]:
    """(where, prefix, suffix) of every key the code builds from a fixed part and a variable one."""
    patterns = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
                shape = _shape(node)
                if shape and shape[1] is not None and (shape[0] or shape[2]):
                    patterns.append((f"{path.relative_to(REPO)}:{node.lineno}", shape[0], shape[2]))
    return patterns


def _named_keys() -> list[tuple[str, str, str, str, ast.Call]]:
    """(where, prefix, '-' for a literal key or '' for a variable part, suffix, the call) of the
    key of every key-taking call."""
    calls = _key_calls()
    named = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) in calls:
                for position, keyword, before, after in calls[_call_name(node)]:  # type: ignore[index]
                    if _call_name(node) == "Check" and keyword == "code" and _argument(node, None, "key") is not None:
                        continue  # the Check names its message key itself
                    shape = _shape(_argument(node, position, keyword))
                    if shape:
                        fixed, variable, tail = shape
                        named.append((f"{path.relative_to(REPO)}:{node.lineno}", before + fixed,
                                      "" if variable is not None else "-", tail + after, node))
    return named


def test_every_key_the_code_names_exists():
    keys = set(messages("en"))
    missing = []
    for where, prefix, fixed, suffix, _ in _named_keys():
        if fixed == "-":  # a literal key
            if prefix + suffix not in keys:
                missing.append(f"{where}: {prefix + suffix}")
        elif (prefix or suffix) and not any(k.startswith(prefix) and k.endswith(suffix) and len(k) > len(prefix + suffix) for k in keys):
            missing.append(f"{where}: {prefix}<...>{suffix} matches no key")
    # keys kept in tables (change-control reasons, ...): a literal under a key's parent is a key
    parents = {k.rsplit(".", 1)[0] for k in keys if k.count(".") >= 2}
    for literal, where in _literals().items():
        if re.fullmatch(r"[a-z_]+(\.[a-z0-9_]+){2,}", literal) and literal.rsplit(".", 1)[0] in parents:
            if literal not in keys and not any(k.startswith(literal + ".") for k in keys):
                missing.append(f"{where[0]}: {literal}")
    assert not missing, "message keys missing from mbridge_launch/messages/*.yaml:\n" + "\n".join(missing)


def test_messages_with_plural_forms_are_given_a_count():
    """A text with plural forms is chosen by its {count} parameter: every call that names such a
    key passes count= (or a parameter dict holding "count"), unless its parameters come from elsewhere."""
    plural = {key for key, entry in messages("en").items() if isinstance(entry, dict)}
    problems = []
    for where, prefix, fixed, suffix, node in _named_keys():
        if fixed != "-" or prefix + suffix not in plural:
            continue
        given = {kw.arg for kw in node.keywords}
        dicts = [a for a in [*node.args, *(kw.value for kw in node.keywords)] if isinstance(a, ast.Dict)]
        given |= {k.value for d in dicts for k in d.keys if isinstance(k, ast.Constant)}
        opaque = None in given or any(None in d.keys for d in dicts) or any(isinstance(a, ast.Name) for a in node.args[1:])
        if "count" not in given and not opaque:
            problems.append(f"{where}: {prefix + suffix} has plural forms but no count")
    assert not problems, "\n".join(problems)


def test_every_key_in_the_catalog_is_used():
    """A key is used when the code names it, names a preflight check code it belongs to
    (preflight.<code>, preflight.<code>.hint), or builds it from a prefix (f"ckpt.reason.{key}")
    and a text the code holds ("dir_missing")."""
    literals = set(_literals())
    patterns = _key_patterns()

    def built(key: str, prefix: str, suffix: str) -> bool:
        middle = key[len(prefix):len(key) - len(suffix)]
        return key.startswith(prefix) and key.endswith(suffix) and len(key) > len(prefix + suffix) and middle in literals

    def used(key: str) -> bool:
        if key.endswith(".hint") and key not in literals:  # the hint of a used message
            return used(key.removesuffix(".hint"))
        if key in literals or (key.startswith("preflight.") and key.removeprefix("preflight.") in literals):
            return True
        return any(built(key, prefix, suffix) or built(key, "preflight." + prefix, suffix) for _, prefix, suffix in patterns)

    unused = [key for key in messages("en") if not used(key)]
    assert not unused, "message keys no code uses (remove them from both files):\n" + "\n".join(unused)


def test_echoed_values_cannot_drive_the_terminal():
    """A user-given value with an escape sequence (or a NUL) comes back escaped, not executed by
    the terminal; CJK text is kept, line breaks and tabs are escaped too (an error is one line)."""
    from mbridge_launch.base.errors import UserError

    text = UserError("models.unknown", model="x\x1b[31my\x00", closest="llama3_8b").render("en")
    assert "\x1b" not in text and "\x00" not in text and "x\\x1b[31my\\x00" in text
    assert UserError("models.unknown", model="模型\n\tb", closest="-").render("zh").startswith("未知模型 '模型\\n\\tb'")


def test_loading_reads_only_the_language_in_use(monkeypatch):
    monkeypatch.setattr(i18n, "_messages", {})
    t("error.prefix", lang="zh", message="x")
    assert list(i18n._messages) == ["zh"]


# --------------------------------------------------------------------------- --help in both languages
def _help_commands() -> list[list[str]]:
    from mbridge_launch.cli.main import COMMANDS

    return [[], *([name] for name in COMMANDS), ["catalog", "sync"], ["catalog", "list"], ["catalog", "show"]]


def _help_text(argv: list[str], capsys, monkeypatch) -> str:
    from mbridge_launch.cli.main import main

    monkeypatch.setenv("COLUMNS", "400")  # one line per option: a wrapped line would look untranslated
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


# an option's invocation ("-o OUTPUT, --output OUTPUT", "--mode {pretrain,sft,peft}", "KEY=VALUE")
INVOCATION = re.compile(r"(-{1,2}[\w-]+|\{[^}]*\}|[A-Z][A-Z0-9_=:.-]*|\.\.\.|[,\[\]])")


@pytest.mark.parametrize("argv", _help_commands(), ids=lambda argv: " ".join(argv) or "mbridge-launch")
def test_help_is_chinese_with_lang_zh(argv, capsys, monkeypatch):
    text = _help_text(["--lang", "zh", *argv, "--help"], capsys, monkeypatch)
    usage, _, body = text.partition("\n\n")
    assert usage.startswith("用法：mbridge-launch")
    untranslated = [line for line in body.splitlines()
                    if line.strip() and not CJK.search(line) and INVOCATION.sub("", line).strip()]
    assert not untranslated, "help lines without Chinese:\n" + "\n".join(untranslated)
    assert "help." not in text  # no message key shows instead of its text


@pytest.mark.parametrize("argv", _help_commands(), ids=lambda argv: " ".join(argv) or "mbridge-launch")
def test_help_is_english_by_default(argv, capsys, monkeypatch):
    monkeypatch.delenv("MBRIDGE_LAUNCH_LANG", raising=False)
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.setenv(var, "C.UTF-8")
    text = _help_text([*argv, "--help"], capsys, monkeypatch)
    assert text.startswith("usage: mbridge-launch") and "options:" in text
    assert not CJK.search(text) and "help." not in text


def test_every_option_has_a_help_text_in_both_languages():
    import argparse

    from mbridge_launch.cli.main import build_parser

    def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    yield from parsers(sub)

    for lang in LANGS:
        i18n.set_lang(lang)
        try:
            parser = build_parser()
        finally:
            i18n.set_lang(None)
        for each in parsers(parser):
            assert each.description is None or (CJK.search(each.description) is not None) == (lang == "zh"), each.prog
            for action in each._actions:
                if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                    continue
                where = f"{each.prog} {'/'.join(action.option_strings) or action.dest}"
                assert action.help, f"{where}: no help text"
                if action.dest != "help":  # argparse's own -h, translated while main() parses
                    assert (CJK.search(action.help) is not None) == (lang == "zh"), f"{where} ({lang}): {action.help}"


def test_argparse_errors_are_in_the_users_language(capsys):
    from mbridge_launch.cli.main import main

    with pytest.raises(SystemExit):
        main(["--lang", "zh", "estimate"])
    assert "缺少以下必需参数：--gpus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "catalog", "list", "--mode", "x"])
    assert "无效的选择：'x'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["estimate", "--gpus", "x"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --gpus: invalid int value: 'x'" in err
