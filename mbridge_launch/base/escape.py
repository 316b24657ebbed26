"""The one escaping function for everything the tool prints, and the stream wrapper that applies it.

Values the tool prints come from files and people it does not control (directory names, trackers,
ledgers, Plans, arguments): an ESC would recolour or move the terminal's cursor, a CR or a bidi
override (U+202E) would hide text, a NUL or a lone surrogate (an undecodable file name) would break
the line. `escape_controls` writes every character that is not printable as Python's ascii() form
(`\\x1b`, `\\u202e`, `\\U000e0001`, `\\udc80`), keeping ordinary spaces (category Zs: U+00A0,
U+3000 in Chinese text). Multi-line output keeps its line breaks and tabs; a one-line context (an
error, a table cell, a title) escapes them too, so that a value cannot split its line.

`escaped_output()` puts an `EscapingStream` over sys.stdout and sys.stderr for one command, so that
nothing printed can bypass the escaping; the progress bar's deliberate carriage return is the only
exception, written through `write_control`.
"""

from __future__ import annotations

import sys
import unicodedata
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

_CACHE_LIMIT = 1 << 16  # characters remembered per table (a hostile text cannot grow it without bound)


class _Table(dict):
    """A str.translate table filled on demand: each character's output is worked out once, then
    str.translate looks it up in C (output text is translated on every write)."""

    def __init__(self, keep: str, escape: Callable[[str], str]) -> None:
        super().__init__()
        self.keep = keep
        self.escape = escape

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        out = ch if ch.isprintable() or ch in self.keep or unicodedata.category(ch) == "Zs" else self.escape(ch)
        if len(self) < _CACHE_LIMIT:
            self[code] = out
        return out


def _python_escape(ch: str) -> str:
    return ascii(ch)[1:-1]


def _json_escape(ch: str) -> str:
    """JSON's own escape for one character (a surrogate pair above U+FFFF)."""
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_ONE_LINE = _Table("", _python_escape)
_MULTI_LINE = _Table("\n\t", _python_escape)
_JSON = _Table("\n", _json_escape)  # json.dumps escaped what it must; its indentation's newlines stay


_FEW = 32  # distinct characters to escape in one text, beyond which one translate() pass is faster


def _escaped(text: str, table: _Table) -> str:
    """`text` through `table`: the distinct characters to escape are found with set() (in C) and
    each replaced with str.replace (in C); translate() only for texts holding many of them."""
    bad = [ch for ch in set(text) if table[ord(ch)] != ch]
    if len(bad) > _FEW:
        return text.translate(table)
    for ch in bad:  # an escape is printable ASCII, so the order of the replacements does not matter
        text = text.replace(ch, table[ord(ch)])
    return text


def escape_controls(text: str, *, one_line: bool) -> str:
    """`text` with every non-printable character (Zs spaces kept) written as an escape; with
    one_line=False, line breaks and tabs stay."""
    if text.isprintable() or (text == "\n" and not one_line):  # print()'s end: the commonest write
        return text
    return _escaped(text, _ONE_LINE if one_line else _MULTI_LINE)


def one_line(value: object) -> str:
    """A value shown inside one line (a table cell, a title, an error's parameter)."""
    return escape_controls(str(value), one_line=True)


def t_line(key: str, **params: object) -> str:
    """The message `key` (base/i18n.t) filled with its parameters escaped as one line: a line of
    a table or a status listing whose values (paths, names, Slurm's words) cannot split it."""
    from mbridge_launch.base.i18n import t

    shown: dict[str, object] = {k: v if isinstance(v, (int, float)) else one_line(v) for k, v in params.items()}
    return t(key, None, **shown)


def json_printable(text: str) -> str:
    """JSON text (from json.dumps) with the characters it leaves raw (DEL, C1 controls, U+2028,
    bidi overrides, lone surrogates) written as JSON escapes, so that it is the same valid JSON,
    free of control characters: the stream wrapper then has nothing to change in it."""
    if text.isprintable():
        return text
    return _escaped(text, _JSON)


class EscapingStream:
    """A text stream whose write() escapes control characters (line breaks and tabs stay); every
    other attribute (flush, isatty, fileno, encoding, errors, buffer, reconfigure) is the stream's."""

    def __init__(self, stream: Any) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(escape_controls(text, one_line=False))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def write_control(self, text: str) -> int:
        """Text written as it is: the progress bar's carriage return on a terminal, nothing else."""
        return self.wrapped.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def write_control(stream: Any, text: str) -> None:
    """`text` with its deliberate control characters onto `stream` (escaped streams included)."""
    writer = getattr(stream, "write_control", None)
    (writer or stream.write)(text)


@contextmanager
def escaped_output() -> Iterator[None]:
    """sys.stdout and sys.stderr escaped for the duration of the block, restored after it (tests
    run many commands in one process, under pytest's own captured streams)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if s is None or isinstance(s, EscapingStream) else EscapingStream(s) for s in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
