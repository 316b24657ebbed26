"""`python -m mbridge_launch` and the `mbridge-launch` console script (entry).

Ctrl-C can come while the command modules are still being imported (the first ~0.2 s): the
import of the CLI happens inside entry(), under the same `interrupted` / exit 130 handling as the
command itself, not at module level where it would print a traceback."""

import sys

EXIT_INTERRUPTED = 130  # base/errors.py's, which may not be importable yet


def entry() -> int:
    try:
        from mbridge_launch.cli.main import main
    except KeyboardInterrupt:
        return _interrupted_during_import()
    return main()


def _interrupted_during_import() -> int:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from mbridge_launch.cli.main import interrupted

        return interrupted()
    except Exception:  # noqa: BLE001 - the CLI is half-imported: its plain word, untranslated
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(entry())
