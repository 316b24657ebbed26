"""Round-trip edits of a user's YAML file: only the values that changed are replaced, so the
file's comments, key order, quoting and the spelling of every untouched value stay as the user
wrote them (ruamel.yaml's round-trip mode; PyYAML drops every comment on load).

The edit is the difference between two plain documents, `before` (what the file meant when it
was read) and `after` (what it must mean now), applied to the file's own node tree: a changed
mapping is edited key by key (a new key goes after the key that precedes it in `after`), a list
of unchanged length item by item, anything else is replaced whole. A key the file leaves out
whose value did not change (a default) stays out.

A replaced value is written the way PyYAML (the tool's reader, YAML 1.1) would write it, then
read back with its quoting kept: ruamel writes YAML 1.2, where `yes`, `on` and `1e-05` are plain
strings and numbers that PyYAML would read as a boolean, a boolean and a string.
"""

from __future__ import annotations

import io
from typing import Any, Optional

from mbridge_launch.base.user_yaml import check_events

_MISSING = object()


class NotEditable(ValueError):
    """The document cannot be edited in place (empty, or its top level is not a mapping)."""


def _round_trip() -> Any:
    from ruamel.yaml import YAML  # lazily: only a rewrite needs it

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True  # 'yes' stays quoted: it is a string only while quoted
    # a null is written `null`, as PyYAML writes it (ruamel leaves the value empty)
    yaml.representer.add_representer(
        type(None), lambda rep, _data: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return yaml


def edit_yaml_text(text: str, where: str, before: Any, after: Any) -> str:
    """`text` changed from meaning `before` to meaning `after` (plain data: mappings, lists,
    scalars). Anchors and aliases are refused first (a user file has none: user_yaml), so no
    node is shared and one edit changes one place."""
    check_events(text, where)
    yaml = _round_trip()
    doc = yaml.load(text)
    if not (_is_mapping(doc) and isinstance(before, dict) and isinstance(after, dict)):
        raise NotEditable(where)
    _edit_mapping(doc, before, after, yaml)
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def _is_mapping(node: Any) -> bool:
    from ruamel.yaml.comments import CommentedMap

    return isinstance(node, CommentedMap)


def _is_sequence(node: Any) -> bool:
    from ruamel.yaml.comments import CommentedSeq

    return isinstance(node, CommentedSeq)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True in Python; not in a file)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _edit_mapping(node: Any, before: dict, after: dict, yaml: Any) -> None:
    for key in [k for k in node if k not in after]:
        keys = list(node)
        lines = _take_slot(node, key)
        del node[key]
        at = keys.index(key)
        if at > 0:  # the lines before the next key stay before it
            _put_slot(node, keys[at - 1], lines)
        elif lines is not None and len(keys) > 1:  # the first key went: they go before the new first
            _put_before(node, keys[1], lines)
    previous = None  # the last key of `after` that the file has: a new key goes after it
    for key, value in after.items():
        old = before.get(key, _MISSING)
        if key in node:
            if old is _MISSING or not same(old, value):
                lines = _take_slot(node, key)
                node[key] = _edited(node[key], old, value, yaml)
                _put_slot(node, key, lines)
            previous = key
        elif old is _MISSING or not same(old, value):
            lines = _take_slot(node, previous) if previous is not None else None
            position = list(node).index(previous) + 1 if previous is not None else 0
            node.insert(position, key, _fresh(value, yaml))
            _put_slot(node, key, lines)
            previous = key


def _edited(node: Any, old: Any, new: Any, yaml: Any) -> Any:
    if isinstance(new, dict) and isinstance(old, dict) and _is_mapping(node):
        _edit_mapping(node, old, new, yaml)
        return node
    if isinstance(new, list) and isinstance(old, list) and _is_sequence(node) and len(node) == len(old):
        _edit_sequence(node, old, new, yaml)
        return node
    return _fresh(new, yaml)


def _edit_sequence(node: Any, old: list, new: list, yaml: Any) -> None:
    """Item by item over the common length; items added or removed at the end. The comment lines
    after the list (before the next key) stay after it."""
    lines = _take_trailing(node) if len(old) != len(new) else None
    for i, (was, now) in enumerate(zip(old, new)):
        if not same(was, now):
            item_lines = _take_slot(node, i)
            node[i] = _edited(node[i], was, now, yaml)
            _put_slot(node, i, item_lines)
    del node[len(new):]
    for item in new[len(old):]:
        node.append(_fresh(item, yaml))
    _put_trailing(node, lines)


# ruamel keeps the comment lines that follow a value (up to the next key or item) in the comment
# entry of the deepest last scalar before them: in a mapping's ca.items[key][2], in a sequence's
# ca.items[index][0], after that scalar's own inline comment. A value replaced or a list grown
# would carry them off (or drop them); they are taken out first and put back at the new end.
def _slot_index(container: Any) -> int:
    return 2 if _is_mapping(container) else 0


def _is_container(value: Any) -> bool:
    return (_is_mapping(value) or _is_sequence(value)) and len(value) > 0


def _take_slot(container: Any, key: Any) -> Optional[str]:
    """The comment lines after the value at `key` (not its inline comment), removed; or None."""
    value = container[key]
    if _is_container(value):
        return _take_trailing(value)
    entry = container.ca.items.get(key)
    index = _slot_index(container)
    token = entry[index] if entry and len(entry) > index else None
    if token is None:
        return None
    text = token.value
    if text.startswith("#"):  # the value's inline comment, then the lines after it
        inline, _, rest = text.partition("\n")
        inline += "\n"
    else:  # the end of the value's line, then the lines after it
        inline, rest = "", text[1:] if text.startswith("\n") else text
    if "#" not in rest:
        return None
    if inline:
        token.value = inline
    else:
        entry[index] = None
    return rest


def _put_slot(container: Any, key: Any, lines: Optional[str]) -> None:
    if lines is None:
        return
    value = container[key]
    if _is_container(value):
        _put_trailing(value, lines)
        return
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    index = _slot_index(container)
    entry = container.ca.items.setdefault(key, [None, None, None, None])
    while len(entry) <= index:
        entry.append(None)
    if entry[index] is not None:
        entry[index].value = entry[index].value + lines
    else:
        entry[index] = CommentToken("\n" + lines, CommentMark(0), None)


def _put_before(mapping: Any, key: Any, lines: str) -> None:
    """Comment lines above `key`, the first key of `mapping` (ruamel writes them with '# ')."""
    text = [line.strip()[1:].removeprefix(" ") if line.strip() else "" for line in lines.rstrip("\n").split("\n")]
    mapping.yaml_set_comment_before_after_key(key, before="\n".join(text), indent=getattr(mapping.lc, "col", 0) or 0)


def _take_trailing(container: Any) -> Optional[str]:
    if not _is_container(container):
        return None
    return _take_slot(container, list(container)[-1] if _is_mapping(container) else len(container) - 1)


def _put_trailing(container: Any, lines: Optional[str]) -> None:
    if lines is not None and _is_container(container):
        _put_slot(container, list(container)[-1] if _is_mapping(container) else len(container) - 1, lines)


def _fresh(value: Any, yaml: Any) -> Any:
    """`value` as nodes written the way PyYAML writes it (block style, YAML 1.1 quoting)."""
    import yaml as pyyaml

    text = pyyaml.safe_dump(value, default_flow_style=False, allow_unicode=True, sort_keys=False)
    return yaml.load(text)
