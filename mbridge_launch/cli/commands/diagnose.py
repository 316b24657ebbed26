"""`mbridge-launch diagnose RUN|JOBID|LOGFILE...`: why a run or job failed (or that it has not).

Each argument is, in this order: an existing file (a log), a Slurm job written `job:JOBID` (a
ledger run holding that job brings its logs and Plan along; else the job alone), or a ledger run
(its name, or its id `12` / `#12`: the same RUN grammar as every other command). What all
arguments name is diagnosed together as one job: its log files (every rank's), Slurm's view of the
first job named (sacct/scontrol; without Slurm, the logs alone) and the Plan of the first run named
(gpu_oom's memory view). A run that has ended gets the diagnosis recorded in the ledger as a
`diagnosis` event; a run or job still going is diagnosed as far as its logs go, and says so.

Exit codes: 0 no failure found, 1 a failure diagnosed, 2 bad input (an unknown run or job, a
missing file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from mbridge_launch.cli.main import add_common

HELP = "help.diagnose"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument

    parser.add_argument("targets", nargs="+", metavar="RUN|JOBID|LOGFILE", help=t("help.diagnose.targets"))
    add_ledger_argument(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.runs.run_diagnosis import Subject, record_diagnosis

    subject = Subject()
    ledger = None
    try:
        for target in args.targets:
            ledger = _resolve(target, subject, ledger, args.ledger)
        diagnosis = subject.diagnose()
        if subject.run is not None and ledger is not None and not subject.running:
            record_diagnosis(ledger, subject.run, diagnosis)
    finally:
        if ledger is not None:
            ledger.close()
    lang = _lang(args)
    if args.format == "json":
        from mbridge_launch.base.output import print_json

        data = diagnosis.as_json(lang)
        data["running"] = subject.running
        data["job_id"] = subject.job_id
        data["run"] = subject.run.name if subject.run is not None else None
        data["slurm_state"] = subject.slurm.state if subject.slurm is not None else None
        print_json(data)
    else:
        _print_text(diagnosis, subject, lang)
    return 1 if diagnosis.failed else 0


def _lang(args: argparse.Namespace) -> str:
    from mbridge_launch.base.i18n import current_lang

    return args.lang or current_lang()


# ---------------------------------------------------------------------- what the arguments name
def _resolve(target: str, subject, ledger, ledger_path: Optional[str]):
    """Add what `target` names to `subject` (a runs.run_diagnosis.Subject); returns the (lazily
    opened) ledger."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.runs.ledger import JOB_REF_PREFIX
    from mbridge_launch.runs.run_diagnosis import run_with_job

    path = Path(target).expanduser()
    if path.is_dir():
        raise UserError("diagnose.cli.not_a_file", path=target)
    if path.is_file():
        subject.add_log(path)
        return ledger
    job = target[len(JOB_REF_PREFIX):] if target.startswith(JOB_REF_PREFIX) else None
    if job is not None:
        if not (job.isascii() and job.isdigit()):
            raise UserError("diagnose.cli.bad_job", target=target)
        ledger = ledger or _open_ledger(ledger_path)
        record = run_with_job(ledger, job)
        if record is not None:
            subject.add_run(ledger, record, job_id=job)
        elif not subject.add_job(job):
            raise UserError("diagnose.cli.unknown_job", job=job)
        return ledger
    if "/" in target or target.startswith(".") or Path(target).suffix in (".log", ".out", ".err", ".txt"):
        raise UserError("diagnose.cli.missing_file", path=target)
    ledger = ledger or _open_ledger(ledger_path)
    subject.add_run(ledger, ledger.get_run(target))  # an unknown name: get_run's error, naming the runs it knows
    return ledger


def _open_ledger(path: Optional[str]):
    from mbridge_launch.runs.operations import open_ledger

    return open_ledger(path)


# ---------------------------------------------------------------------- text output
def _print_text(diagnosis, subject, lang: str) -> None:
    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.i18n import t

    data = diagnosis.as_json(lang)
    if subject.running:
        name = subject.run.name if subject.run is not None else (subject.job_id or "-")
        state = subject.slurm.state if subject.slurm is not None else "RUNNING"
        print(t_line("diagnose.cli.running", target=name, state=state), file=sys.stderr)
    if subject.slurm is None and subject.job_id is None and subject.run is not None and data["cause"] != "submit_failed":
        print(t_line("diagnose.cli.no_slurm", run=subject.run.name), file=sys.stderr)
    print(t_line("diagnose.cli.cause", cause=data["cause"], summary=data["summary"]))
    if data["rank"] is not None:
        print("  " + t_line("diagnose.cli.rank", rank=data["rank"]))
    if data["node"]:
        print("  " + t_line("diagnose.cli.node", node=data["node"]))
    if subject.slurm is not None:
        s = subject.slurm
        print("  " + t_line("diagnose.cli.slurm", job=s.job_id, state=s.state or "-", exit_code=s.exit_code or "-",
                            nodes=s.node_list or "-"))
    if data.get("restarts"):
        print("  " + t_line("diagnose.cli.restarts", count=data["restarts"]))
    if data["evidence"]:
        print("  " + t("diagnose.cli.evidence"))
        for ev in data["evidence"]:
            print("    " + t_line("diagnose.cli.evidence_line", file=ev["file"], line=ev["line"], text=ev["text"]))
    if diagnosis.failed:
        print("  " + t_line("diagnose.cli.fix", fix=data["fix"]))
        print("  " + t_line("diagnose.cli.retry", retry=t(f"diagnose.retry_name.{data['retry']}"), advice=t(f"diagnose.retry.{data['retry']}")))
    if data.get("exclude_nodes"):
        print("  " + t_line("diagnose.cli.exclude", nodes=", ".join(data["exclude_nodes"])))
    if data["symptoms"]:
        print("  " + t("diagnose.cli.symptoms"))
        for sym in data["symptoms"]:
            first = (sym.get("evidence") or [{}])[0]
            print("    " + t_line("diagnose.cli.symptom", cause=sym.get("cause", "?"),
                                  rank="-" if sym.get("rank") is None else sym["rank"], node=sym.get("node") or "-",
                                  file=first.get("file", "-"), line=first.get("line", "-"), text=first.get("text", "")))
