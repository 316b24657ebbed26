"""Command-line entry point. Stays light: command modules import heavy libraries inside run().

Each module in COMMANDS defines HELP (the message key of its one-line help), add_arguments(parser)
and run(args) -> exit code. Every help text comes from the message catalog, in the user's language;
so do argparse's own words ("usage:", "options", its errors), through _ARGPARSE_WORDS.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from contextlib import contextmanager
from typing import IO, Any, Iterator, NoReturn

from mbridge_launch import __version__
from mbridge_launch.base.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_INTERRUPTED, UserError
from mbridge_launch.base.escape import escaped_output, one_line
from mbridge_launch.base.i18n import t

# name -> module; imported when the parser is built (argument definitions only, no heavy imports)
COMMANDS: dict[str, str] = {
    "recommend": "mbridge_launch.cli.commands.recommend",
    "catalog": "mbridge_launch.cli.commands.catalog",
    "plan": "mbridge_launch.cli.commands.plan",
    "estimate": "mbridge_launch.cli.commands.estimate",
    "calibrate": "mbridge_launch.cli.commands.calibrate",
    "preflight": "mbridge_launch.cli.commands.preflight",
    "submit": "mbridge_launch.cli.commands.submit",
    "runs": "mbridge_launch.cli.commands.runs",
    "status": "mbridge_launch.cli.commands.status",
    "logs": "mbridge_launch.cli.commands.logs",
    "cancel": "mbridge_launch.cli.commands.cancel",
    "checkpoints": "mbridge_launch.cli.commands.checkpoints",
    "rollback": "mbridge_launch.cli.commands.rollback",
    "watch": "mbridge_launch.cli.commands.watch",
    "versions": "mbridge_launch.cli.commands.versions",
    "diagnose": "mbridge_launch.cli.commands.diagnose",
    "doctor": "mbridge_launch.cli.commands.doctor",
    "tune": "mbridge_launch.cli.commands.tune",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line with exit code 2, in the user's language."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from mbridge_launch.base.i18n import t

        # one line, not argparse's usage block: the flags are one --help away; the message quotes
        # the arguments as given (`unrecognized arguments: ...`), newlines and ESC included
        line = t("error.see_help", message=one_line(f"{self.prog}: {message}"), prog=self.prog)
        print(t("error.prefix", message=line), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)

    if sys.version_info < (3, 13):
        def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
            # Python before 3.13 drops the value of `--opt=--` as if it were the `--` separator and
            # hands the command an empty list where a string belongs (an internal error later);
            # it is the text "--", as Python 3.13 reads it itself, for the command's own check to
            # refuse. Defined only where needed: 3.13's argparse is not touched.
            if action.nargs is None and arg_strings == ["--"]:
                value = self._get_value(action, "--")
                self._check_value(action, value)
                return value
            return super()._get_values(action, arg_strings)

    # --help, usage and exit messages through public methods (not argparse's private
    # _print_message): without this, a stream that refuses (--help into a closed pipe or onto a
    # full device) exited 0 with nothing shown; here it is one line on stderr and exit 1.
    def print_usage(self, file: IO[str] | None = None) -> None:  # type: ignore[override]
        _write(self.format_usage(), file or sys.stdout)

    def print_help(self, file: IO[str] | None = None) -> None:  # type: ignore[override]
        _write(self.format_help(), file or sys.stdout)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:  # type: ignore[override]
        if message:
            _write(message, sys.stderr)
        sys.exit(status)


class _VersionAction(argparse.Action):
    """--version, written through _write (argparse's own version action uses _print_message)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        _write(f"mbridge-launch {__version__}\n", sys.stdout)
        parser.exit()


def _write(message: str, stream: IO[str]) -> None:
    if not message:
        return
    try:
        stream.write(message)
    except OSError as exc:
        raise SystemExit(_stdout_lost(exc) if stream is sys.stdout else EXIT_CHECK_FAILED) from None


def add_common(parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("--lang", choices=("en", "zh"), help=t("help.common.lang"))
    if formats:
        parser.add_argument("--format", choices=formats, default=formats[0], help=t("help.common.format"))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mbridge-launch", description=t("help.main"))
    parser.add_argument("--version", action=_VersionAction, help=t("help.main.version"))
    # also accepted before the command (`mbridge-launch --lang zh plan ...`)
    parser.add_argument("--lang", dest="global_lang", choices=("en", "zh"), help=t("help.common.lang"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command_parser = sub.add_parser(name, help=t(module.HELP), description=t(module.HELP))
        module.add_arguments(command_parser)
        command_parser.set_defaults(_module=module)
    return parser


# argparse's own words, which it looks up through gettext (argparse._ and argparse.ngettext):
# msgid -> message key (the English text of the key is the msgid itself)
_ARGPARSE_WORDS = {
    "usage: ": "argparse.usage",
    "positional arguments": "argparse.positional_arguments",
    "options": "argparse.options",
    "show this help message and exit": "argparse.help",
    "argument %(argument_name)s: %(message)s": "argparse.argument",
    "unrecognized arguments: %s": "argparse.unrecognized",
    "not allowed with argument %s": "argparse.not_allowed_with",
    "ignored explicit argument %r": "argparse.ignored_explicit",
    "the following arguments are required: %s": "argparse.required",
    "one of the arguments %s is required": "argparse.one_required",
    "expected one argument": "argparse.expected_one",
    "expected at most one argument": "argparse.expected_at_most_one",
    "expected at least one argument": "argparse.expected_at_least_one",
    "expected %s argument": "argparse.expected_n",
    "ambiguous option: %(option)s could match %(matches)s": "argparse.ambiguous",
    "unexpected option string: %s": "argparse.unexpected_option",
    "invalid %(type)s value: %(value)r": "argparse.invalid_value",
    "invalid choice: %(value)r (choose from %(choices)s)": "argparse.invalid_choice",
    "unknown parser %(parser_name)r (choices: %(choices)s)": "argparse.unknown_parser",
    "can't open '%(filename)s': %(error)s": "argparse.cannot_open",
}


@contextmanager
def _argparse_in_language() -> Iterator[None]:
    """argparse's words in the current language while the parser is built, parses and prints."""
    def gettext(message: str) -> str:
        key = _ARGPARSE_WORDS.get(message)
        return t(key) if key else message

    def ngettext(singular: str, plural: str, n: int) -> str:
        key = _ARGPARSE_WORDS.get(singular)
        return t(key, count=n) if key else (singular if n == 1 else plural)

    # argparse 3.10-3.13 looks its words up through these two module names (checked on each by
    # tests/e2e/test_packaging.py's smoke under pyenv's 3.10 and 3.13); a later argparse without
    # them keeps its English words rather than fail
    if not (hasattr(argparse, "_") and hasattr(argparse, "ngettext")):
        yield
        return
    saved = argparse._, argparse.ngettext  # type: ignore[attr-defined]
    argparse._, argparse.ngettext = gettext, ngettext  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved  # type: ignore[attr-defined]


def _lang_in(argv: list[str]) -> str | None:
    """The value of the last --lang in argv, wherever it stands (None when absent or invalid)."""
    lang = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(argv):
            lang = argv[i + 1]
        elif arg.startswith("--lang="):
            lang = arg.split("=", 1)[1]
    return lang if lang in ("en", "zh") else None


def main(argv: list[str] | None = None) -> int:
    """The command line: run one command and return its exit code. Ctrl-C at any moment (building
    the parser imports every command module) is `interrupted`, 130; stdout that cannot take the
    output (a closed pipe, a full device) is one line on stderr and 1, flushed here so that the
    interpreter's own flush at exit finds nothing left to fail on."""
    try:
        _tolerant_output()
        with escaped_output():  # everything printed, by any command, has its control characters escaped
            return _escaped_main(argv)
    except KeyboardInterrupt:
        return interrupted()


def _escaped_main(argv: list[str] | None) -> int:
    try:
        code = _main(argv)
    except SystemExit:  # argparse: --help, --version, a bad argument
        if _flushed(0) != 0:
            raise SystemExit(EXIT_CHECK_FAILED) from None
        raise
    return _flushed(code)


def interrupted() -> int:
    """Say `interrupted` once (a second Ctrl-C meanwhile is ignored) and return 130."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        text = t("interrupted")
    except Exception:  # noqa: BLE001 - Ctrl-C came while the catalog (or yaml) was loading
        text = "interrupted"
    _say(text)
    return EXIT_INTERRUPTED


def _say(line: str) -> None:
    """One line on stderr; a closed stderr leaves nothing else to tell."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _tolerant_output() -> None:
    """A terminal that cannot show a character (ASCII-only with --lang zh) gets it as an escape
    (\\u4e2d), not a UnicodeEncodeError; streams with another error policy keep it."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def _flushed(code: int) -> int:
    """`code` once stdout is flushed; EXIT_CHECK_FAILED when stdout refused the output."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        return _stdout_lost(exc)
    return code


def _stdout_lost(exc: BaseException) -> int:
    """stdout is gone (EPIPE) or full (ENOSPC): exit 1. stdout is pointed at /dev/null so that the
    interpreter's flush at exit does not print 'Exception ignored' and exit 120 (Python's
    documented handling of SIGPIPE/BrokenPipeError). A reader that went away (`| head` has seen
    enough) is told nothing: it asked for no more; a full device gets one line on stderr."""
    import errno

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's capture)
        pass
    if isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) == errno.EPIPE:
        return EXIT_CHECK_FAILED
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    _say(t("error.prefix", message=t("output.lost", reason=one_line(reason))))
    return EXIT_CHECK_FAILED


def _main(argv: list[str] | None) -> int:
    from mbridge_launch.base import i18n

    argv = list(sys.argv[1:] if argv is None else argv)
    i18n.set_lang(_lang_in(argv))  # before parsing, so that argparse's own errors are in it too
    with _argparse_in_language():
        parser = build_parser()
        args = parser.parse_args(argv)
        i18n.set_lang(getattr(args, "lang", None) or getattr(args, "global_lang", None))
        if not getattr(args, "_module", None):
            parser.print_help()
            return EXIT_BAD_INPUT
    try:
        code = args._module.run(args)
    except UserError as exc:
        print(i18n.t("error.prefix", message=exc.render()), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # the same words, and a second Ctrl-C ignored, as main()'s
        return interrupted()
    except BrokenPipeError as exc:
        return _stdout_lost(exc)
    except OSError as exc:
        # the machine refused (disk full, permissions, a vanished folder): not a bug to report
        if os.environ.get("MBRIDGE_LAUNCH_DEBUG"):
            raise
        reason = one_line(exc.strerror or str(exc) or type(exc).__name__)
        message = (i18n.t("file.system_error", path=one_line(exc.filename), reason=reason) if exc.filename
                   else i18n.t("os.error", reason=reason))
        print(i18n.t("error.prefix", message=message), file=sys.stderr)
        return EXIT_CHECK_FAILED
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("MBRIDGE_LAUNCH_DEBUG"):
            raise
        ledger_error = _ledger_fault(exc)
        if ledger_error is not None:
            print(i18n.t("error.prefix", message=ledger_error.render()), file=sys.stderr)
            return ledger_error.exit_code
        print(i18n.t("internal_error", error=one_line(f"{type(exc).__name__}: {exc}")), file=sys.stderr)
        return 1
    return int(code or 0)


def _ledger_fault(exc: Exception) -> UserError | None:
    """The one place where a ledger failure a command let through (SQLite's error at any query: a
    lock held too long, a full disk, a read-only or damaged file; a row another program wrote)
    becomes one line naming the ledger file and what to do (runs/ledger_faults.py)."""
    from mbridge_launch.runs.ledger_faults import fault

    return fault(exc)


if __name__ == "__main__":
    sys.exit(main())
