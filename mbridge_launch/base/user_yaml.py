"""Loading YAML that users (or anyone who can write a repository) wrote: Plans, policies, ledger copies.

This is the one reader of user YAML (package data files keep their own loaders). Anchors and
aliases (`&a`, `*a`, and the `<<: *a` merges built on them) are refused on the event stream,
before any node is built: a 370-byte "billion laughs" document expands to gigabytes once its
aliases are followed, and no file the tool reads needs them (a Plan, a policy and the ledger's
copy are written out in full). libyaml's parser (yaml.CSafeLoader) when PyYAML was built with it: the pure-Python one takes
about a minute on an 8 MB file. A duplicate mapping key is refused (PyYAML keeps the last one
silently, so an edit could be undone by a line further down), and so is nesting deeper than
MAX_DEPTH, checked on the flat event stream before any node is built (building a 20,000-deep
document recurses: a RecursionError, or a C stack overflow in libyaml's composer).
"""

from __future__ import annotations

from typing import Any

import yaml

from mbridge_launch.base.errors import UserError

MAX_DEPTH = 64
_BASE: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int) -> None:
        self.key, self.line = key, line
        super().__init__(f"duplicate key {key!r} at line {line}")


class UserLoader(_BASE):  # type: ignore[misc,valid-type]
    """The safe loader (libyaml's when present) refusing duplicate mapping keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<:` merges are not keys of this mapping
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class says so
                break
            if duplicate:
                raise DuplicateKey(key, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        """An integer as the safe loader reads it; one of more digits than Python converts (4,300
        by default) is a YAML error at its line, not a ValueError from int()."""
        try:
            return self.construct_yaml_int(node)
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, "an integer with too many digits",
                                                    node.start_mark) from None


UserLoader.add_constructor("tag:yaml.org,2002:int", UserLoader.construct_bounded_int)


def check_events(text: str, where: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH and any anchor or alias, from the parser's events
    alone (a flat stream: memory and time grow with the text, never with what aliases expand to)."""
    depth = 0
    for event in yaml.parse(text, Loader=_BASE):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise UserError("yaml.alias", path=where, line=event.start_mark.line + 1)
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError("yaml.too_deep", path=where, line=event.start_mark.line + 1, limit=MAX_DEPTH)
        elif isinstance(event, _CLOSE):
            depth -= 1


def load_user_yaml(text: str, where: str) -> Any:
    """The document in `text`; one-line UserError naming `where` (and the line) otherwise."""
    try:
        check_events(text, where)
        return yaml.load(text, Loader=UserLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKey as exc:
        raise UserError("yaml.duplicate_key", path=where, name=str(exc.key), line=exc.line) from None
    except yaml.YAMLError as exc:
        raise UserError("yaml.invalid", path=where, reason=_reason(exc)) from None


def _reason(exc: yaml.YAMLError) -> str:
    """The problem and where it is, on one line (PyYAML's own text spans several)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or type(exc).__name__
        return f"{what} (line {mark.line + 1}, column {mark.column + 1})" if mark else what
    return (str(exc).splitlines() or [type(exc).__name__])[0]
