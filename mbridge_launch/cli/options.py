"""Options several commands share."""

from __future__ import annotations

import argparse


def add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.runs.ledger import default_ledger_path

    parser.add_argument("--ledger", metavar="PATH", default=None, type=path_arg,
                        help=t("ledger.arg.ledger", path=str(default_ledger_path())))


def path_arg(text: str) -> str:
    """An argparse `type` for a file path: an empty or blank one is refused (`--ledger ""` read
    the default ledger and `-o " "` wrote a file named by a space, both exit 0)."""
    from mbridge_launch.base.i18n import t

    if not text.strip():
        raise argparse.ArgumentTypeError(t("cli.path_empty"))
    return text


def run_name_arg(text: str) -> str:
    """An argparse `type` for a run NAME (a filter such as `runs --name`): the run-name rule, so
    that an empty or blank name is refused instead of matching nothing, exit 0."""
    from mbridge_launch.base.escape import one_line
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.names import MAX_RUN_NAME, run_name_problem

    problem = run_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(t(f"plan.error.{problem}", value=f"'{one_line(text)}'", max=MAX_RUN_NAME))
    return text


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


def seq_length_arg(text: str) -> int:
    """An argparse `type` for --seq-length: 4096, 4k, 32K, 128k (knowledge/vocabulary.py's one
    parser); a bad value is argparse's one line naming the flag and the accepted forms, exit 2.
    Its bounds are the command's own check (recommend.seq_positive, the planner's size limit)."""
    from mbridge_launch.base.numbers import BadNumber
    from mbridge_launch.knowledge.vocabulary import BadSeqLength, parse_seq_length

    try:
        return parse_seq_length(text)
    except (BadSeqLength, BadNumber) as exc:
        raise argparse.ArgumentTypeError(exc.reason()) from None


seq_length_arg.__name__ = "seq_length"


def target_arg(text: str) -> str:
    """An argparse `type` for RUN|DIR: an empty (or blank) target is refused, not read as the
    current directory (Path('') is '.')."""
    from mbridge_launch.base.i18n import t

    if not text.strip():
        raise argparse.ArgumentTypeError(t("arg.empty_target"))
    return text



def run_arg(text: str) -> str:
    """An argparse `type` for RUN: the one run-name rule (base/names.py), so that `status ..` or a
    name holding a newline is one line naming the rule, not a ledger search for it. `job:JOBID`
    (no run name holds a `:`) is the run holding that Slurm job (Ledger.get_run)."""
    from mbridge_launch.base.escape import one_line
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.names import MAX_RUN_NAME, run_name_problem
    from mbridge_launch.runs.ledger import JOB_REF_PREFIX

    number = text[len(JOB_REF_PREFIX):] if text.startswith(JOB_REF_PREFIX) else text[1:] if text.startswith("#") else None
    if number is not None and number.isascii() and number.isdigit():
        return text  # `#12`: run id 12; `job:61`: the run holding Slurm job 61 (a bare number is a run id)
    problem = run_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(t(f"plan.error.{problem}", value=f"'{one_line(text)}'", max=MAX_RUN_NAME))
    return text
