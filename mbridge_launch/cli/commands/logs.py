"""`mbridge-launch logs RUN [-f]`: print a run's log files; -f follows them while the run is active
(new per-restart logs are picked up as they appear)."""

from __future__ import annotations

import argparse
import math
import sys
import time

from mbridge_launch.base.i18n import t
from mbridge_launch.cli.main import add_common

HELP = "help.logs"
REFRESH_S = 5.0  # at most this long between two Slurm queries while following
POLL_FLOOR_S = 0.05  # a poll reads the log files: cheap, but --poll 0 spun a core
SLURM_FLOOR_S = 0.5  # squeue and sacct at most this often (--poll 0 asked 21 times a second)


def poll_seconds(value: float, floor: float = POLL_FLOOR_S) -> float:
    """--poll as given, if finite and at least `floor` (nan, inf and negatives crashed sleep)."""
    from mbridge_launch.base.errors import UserError

    if not math.isfinite(value) or value < floor:
        raise UserError("cli.poll_invalid", value=f"{value:g}", floor=f"{floor:g}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument, run_arg

    parser.add_argument("run", type=run_arg, metavar="RUN", help=t("help.common.run"))
    parser.add_argument("-f", "--follow", action="store_true", help=t("help.logs.follow"))
    parser.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
    add_ledger_argument(parser)
    add_common(parser, formats=())


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.escape import t_line  # the log's own lines are escaped by the output stream
    from mbridge_launch.rollback.lossmon import LogFollower
    from mbridge_launch.runs.operations import open_ledger, refresh, run_log_paths

    poll_seconds(args.poll)
    with open_ledger(args.ledger) as ledger:
        record = ledger.get_run(args.run)
        followers: dict[str, LogFollower] = {}
        last_check = 0.0
        finishing = False
        refresh_s = max(SLURM_FLOOR_S, args.poll, min(REFRESH_S, args.poll * 5))  # Slurm: every few polls
        while True:
            paths = run_log_paths(record)
            if not paths and not args.follow:
                print(t("ledger.logs.none", run=record.name, executor=record.executor,
                        jobs=", ".join(record.job_ids) or "-"), file=sys.stderr)
                return 1
            wrote = False
            for path in paths:
                key = str(path)
                if key not in followers:
                    if not path.exists():
                        if not args.follow:
                            print(t_line("ledger.logs.missing", path=path), file=sys.stderr)
                        continue
                    followers[key] = LogFollower(path)
                    if len(paths) > 1:
                        print(t_line("ledger.logs.file_header", path=path))
                lines = followers[key].read_new()
                if lines:
                    sys.stdout.write("".join(lines))
                    wrote = True
            if not args.follow or (finishing and not wrote):
                # the run has ended (or we are not following): a last line without its newline too
                sys.stdout.write("".join(f.take_partial() for f in followers.values()))
                sys.stdout.flush()
                return 0
            sys.stdout.flush()
            now = time.monotonic()
            if record.active and now - last_check >= refresh_s:
                last_check = now
                record = refresh(ledger, [record])[0]
            finishing = not record.active
            if not wrote and not finishing:
                time.sleep(args.poll)
