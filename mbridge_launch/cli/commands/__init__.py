"""CLI commands: each module defines HELP (a message key), add_arguments(parser) and run(args) -> exit code."""
