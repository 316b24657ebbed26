"""Options several commands share."""

from __future__ import annotations

import argparse


def add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.runs.ledger import default_ledger_path

    parser.add_argument("--ledger", metavar="PATH", default=None,
                        help=t("ledger.arg.ledger", path=str(default_ledger_path())))


def int_arg(low: int | None = None, high: int | None = None):
    """An argparse `type` for a whole number in ASCII digits within [low, high] (base/numbers.py):
    a bad value is argparse's one line naming the flag and the valid range, exit 2. Without a
    range, any 64-bit integer: the command's own check names the field's limits (the planner's
    `--gpus=X is beyond any real job`)."""
    from mbridge_launch.base.numbers import ANY_INT, BadNumber, whole

    if low is None or high is None:
        low, high = ANY_INT

    def parse(text: str) -> int:
        try:
            return whole(text, low, high)
        except BadNumber as exc:
            raise argparse.ArgumentTypeError(exc.reason()) from None

    parse.__name__ = "int"  # argparse names the type in its own messages
    return parse
