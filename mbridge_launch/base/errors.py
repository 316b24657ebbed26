"""Typed user-facing failures and the documented exit codes.

Every error a user can cause is a UserError carrying a message key (see messages/) and an exit
code; the CLI prints one line for it, never a traceback. Asserts are never used for user errors.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

# Documented exit codes (README "Exit codes").
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # preflight found an error, a job failed, a gate refused
EXIT_BAD_INPUT = 2  # invalid arguments, unknown model, invalid Plan file, broken rule
EXIT_NO_LAYOUT = 3  # no valid parallel layout for the GPUs given (estimate: the layout does not fit)
EXIT_SUBMIT_FAILED = 4  # the scheduler refused or failed the submission
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A failure the user can fix. `key` names a message in the catalog; `params` fill it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, key: str, exit_code: int | None = None, **params: object) -> None:
        self.key = key
        self.params = params
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(key)

    def render(self, lang: str | None = None) -> str:
        from mbridge_launch.base.i18n import Msg, t

        # a parameter that is itself a message renders in the error's language, not the process's
        return t(self.key, lang=lang, **{k: printable_value(v.render(lang) if isinstance(v, Msg) else v)
                                         for k, v in self.params.items()})

    def __str__(self) -> str:  # English text, for logs and exceptions that escape to Python callers
        return self.render("en")


def printable_value(value: object) -> object:
    """A value echoed back inside a one-line message: text with its control characters (an ESC
    that would recolour or move the cursor, a NUL, a line break that would split the line)
    written as escapes (base/escape.py, the one escaping function); other values as they are."""
    if not isinstance(value, str):
        return value
    from mbridge_launch.base.escape import one_line

    return one_line(value)


class NoLayoutError(UserError):
    exit_code = EXIT_NO_LAYOUT


class CheckFailed(UserError):
    exit_code = EXIT_CHECK_FAILED


class SubmissionError(UserError):
    """The scheduler refused a job; keeps the scheduler's raw output for the ledger and -v."""

    exit_code = EXIT_SUBMIT_FAILED

    def __init__(self, key: str, raw_output: str = "", **params: object) -> None:
        self.raw_output = raw_output
        super().__init__(key, **params)


@contextmanager
def writable(path: object) -> Iterator[None]:
    """`with writable(path): ...` around writing a file or folder the user named (-o, submit --script-dir):
    a file-system refusal (missing parent, permission, read-only) becomes one clear UserError
    naming that path and the reason, instead of an internal error."""
    try:
        yield
    except OSError as exc:
        raise UserError("file.unwritable", path=str(path), reason=exc.strerror or str(exc)) from None
