"""`python -m mbridge_launch` and the `mbridge-launch` console script (entry).

Ctrl-C at any moment is `interrupted` and exit 130, from the first lines of this module on:

- A one-shot SIGINT handler is armed as soon as this module is imported as the program's entry
  (the console-script wrapper, or `python -m`), before the wrapper's own remaining lines (it
  compiles a regular expression for argv[0]) and before entry() runs. It ignores every later
  SIGINT: Python's default handler raises one KeyboardInterrupt per SIGINT, so a second Ctrl-C
  (pressed again; a terminal's goes to the whole process group) landed inside the handler that
  was printing `interrupted` and printed it twice or escaped as a traceback.
- A Ctrl-C before entry()'s try (in the wrapper's lines) is only recorded, and raised by entry()
  inside its try: a KeyboardInterrupt out there would be a traceback and exit -2 (Python kills
  itself with SIGINT when a KeyboardInterrupt escapes).
- The CLI and every command module are imported inside entry()'s try (the first ~0.2 s).
- A KeyboardInterrupt that Python drops (raised in a weakref callback or __del__: "Exception
  ignored in ...") is recorded by sys.unraisablehook, and the command ends `interrupted`.
- Before returning, SIGINT is ignored: Python's finalization puts SIG_DFL back, and a Ctrl-C then
  killed the finished command with -2 and no word.
- A SIGINT disposition inherited as ignored (a background job of a script, `nohup`-like
  launchers) stays ignored, as Python itself leaves it.

What runs before this module cannot be covered from here: the interpreter's start-up (site, the
venv's .pth files) and the wrapper finding and loading this module and the package's __init__
(one assignment). Hence this module imports only the built-in `sys` and `_signal` at its top:
`signal` (enums over `_signal`) costs ~13 ms of import and `typing` ~10 ms, windows in which
Ctrl-C would still be a traceback. benchmarks/RESULTS.md gives the start-up window's length.
"""

import _signal  # type: ignore[import-not-found]  # CPython's built-in under `signal`, no stub
import sys

EXIT_INTERRUPTED = 130  # base/errors.py's, which may not be importable yet

_IN_ENTRY: list = []  # non-empty once entry()'s try is active: a KeyboardInterrupt lands there
_PENDING: list = []  # a Ctrl-C that came before that
_SWALLOWED: list = []  # a Ctrl-C whose KeyboardInterrupt Python had to drop


def entry() -> "int | str | None":
    """The command's exit code (or argparse's SystemExit code, which sys.exit understands)."""
    _arm()
    try:
        _IN_ENTRY.append(True)
        if _PENDING:
            raise KeyboardInterrupt
        code: "int | str | None"
        try:
            code = _run()
        except SystemExit as exc:  # argparse: --help, --version, a bad argument
            code = exc.code
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # the result stands; see the module's doc
    except KeyboardInterrupt:
        return _interrupted()
    if _SWALLOWED:
        return _interrupted()
    return code


def _run() -> "int":
    from mbridge_launch.cli.main import main

    return main()


def _arm() -> None:
    """The one-shot handler and the unraisable hook, once; an ignored SIGINT stays ignored."""
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _first_ctrl_c)
    if not getattr(sys.unraisablehook, "mbridge_launch", False):
        sys.unraisablehook = _swallowed_ctrl_c_hook(sys.unraisablehook)  # type: ignore[assignment]


def _first_ctrl_c(_signum: int, _frame: object) -> None:
    """One KeyboardInterrupt per process, raised only inside entry()'s try; later SIGINTs are
    ignored."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    if not _IN_ENTRY:
        _PENDING.append(True)
        return
    raise KeyboardInterrupt


def _swallowed_ctrl_c_hook(default_hook: "object") -> "object":
    """A KeyboardInterrupt raised where Python cannot propagate it (a weakref callback of the
    import machinery, a __del__) is printed as 'Exception ignored in ...' and dropped: the command
    went on, and the one-shot handler had already ignored every later Ctrl-C. Such a Ctrl-C is
    recorded instead (the command then ends `interrupted`, 130) and the handler is re-armed so
    that the next Ctrl-C stops the command at once."""

    def hook(unraisable: "object") -> None:
        if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt):
            _SWALLOWED.append(True)
            try:
                _signal.signal(_signal.SIGINT, _first_ctrl_c)
            except ValueError:  # not the main thread; the end of entry() still reports it
                pass
            return
        default_hook(unraisable)  # type: ignore[operator]

    hook.mbridge_launch = True  # type: ignore[attr-defined]
    return hook


def _interrupted() -> int:
    """`interrupted` in the user's language when the CLI can say it, else the plain word."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    try:
        from mbridge_launch.base import i18n
        from mbridge_launch.cli.main import _lang_in, interrupted

        # Ctrl-C may have come before the command read its --lang
        i18n.set_lang(_lang_in(sys.argv[1:]) or i18n.current_lang())
        return interrupted()
    except Exception:  # noqa: BLE001 - the CLI is half-imported: its plain word, untranslated
        try:
            sys.stderr.write("interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        return EXIT_INTERRUPTED


def _is_program_entry() -> bool:
    """Imported by `python -m mbridge_launch` or by the `mbridge-launch` console script (not by a
    library user or a test, whose Ctrl-C handling this must not change)."""
    return __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1].startswith("mbridge-launch")


if _is_program_entry():
    _arm()

if __name__ == "__main__":
    sys.exit(entry())
