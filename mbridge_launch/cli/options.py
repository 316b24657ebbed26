"""Options several commands share."""

from __future__ import annotations

import argparse


def add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.runs.ledger import default_ledger_path

    parser.add_argument("--ledger", metavar="PATH", default=None,
                        help=t("ledger.arg.ledger", path=str(default_ledger_path())))
