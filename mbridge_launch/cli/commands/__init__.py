"""CLI commands: each module defines HELP, add_arguments(parser) and run(args) -> exit code."""
