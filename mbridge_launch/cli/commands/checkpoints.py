"""`mbridge-launch checkpoints RUN|DIR [--log FILE]`: every iter_* with completeness, trackers, loss."""

from __future__ import annotations

import argparse
import math
import time

from mbridge_launch.base.escape import t_line  # directory names and trackers are others' files
from mbridge_launch.base.i18n import t
from mbridge_launch.base.terminal import display_width, pad
from mbridge_launch.cli.main import add_common

HELP = "help.checkpoints"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import add_ledger_argument, target_arg

    parser.add_argument("target", metavar="RUN|DIR", type=target_arg, help=t("help.common.target"))
    parser.add_argument("--log", metavar="FILE", action="append", default=None,
                        help=t("help.checkpoints.log"))
    add_ledger_argument(parser)
    add_common(parser)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _loss(value) -> str:
    if value is None:
        return "-"
    return str(value) if not math.isfinite(value) else f"{value:.4f}"


def _tracker_text(report) -> tuple[str, str]:
    tr = report.trackers
    if not tr.pt_present:
        pt = t("ckpt.tracker_absent")
    elif tr.pt_iteration is None:
        pt = t("ckpt.tracker_unknown")
    elif tr.pt_match_location.startswith("rolled_back"):
        pt = t_line("ckpt.tracker_in_rolled_back", iteration=tr.pt_iteration, where=tr.pt_match_location)
    else:
        pt = str(tr.pt_iteration)
    txt = t("ckpt.tracker_absent") if tr.txt_raw is None else (tr.txt_raw.strip() or "''")
    return pt, txt


def print_report(report) -> None:
    print(t_line("ckpt.header", path=report.save_dir))
    if not report.checkpoints:
        print("  " + t("ckpt.none"))
    else:
        rows = [t("ckpt.columns").split("  ")]
        for c in report.checkpoints:
            complete = (t("ckpt.complete") if c.complete else t("ckpt.mixed") if c.mixed and not c.missing
                        else t_line("ckpt.incomplete", missing=", ".join(c.missing)))
            trackers = ",".join(sorted("pt" if n.endswith(".pt") else "txt" for n in c.tracked_by)) or "-"
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.mtime)) if c.mtime else "-"
            rows.append([str(c.iteration), complete, _size(c.size_bytes), when, trackers, _loss(c.loss)])
        widths = [max(display_width(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  " + "  ".join(pad(cell, w) for cell, w in zip(row, widths)).rstrip())
        for c in report.checkpoints:
            if c.notes:
                print("  " + t_line("ckpt.notes", iteration=c.iteration, notes=", ".join(c.notes)))
            if c.shard_reason:  # shards vs. the checkpoint's own index (two world sizes in one dir)
                print("  " + t_line("ckpt.shard_line", iteration=c.iteration, reason=c.shard_reason))
    pt, txt = _tracker_text(report)
    print(t_line("ckpt.trackers", pt=pt, txt=txt))
    tr = report.trackers
    if tr.pt_iteration is not None and tr.txt_iteration is not None and tr.pt_iteration != tr.txt_iteration:
        print(t_line("warning.prefix", message=t("ckpt.trackers_disagree")))
    res = report.resume
    if not res.loadable:
        print(t_line("warning.prefix", message=t_line("ckpt.resume_broken", source=res.source, reason=res.reason)))
    elif res.iteration is None:
        print(t("ckpt.resume_fresh"))
    else:
        print(t_line("ckpt.resume_ok", iteration=res.iteration, source=res.source))
    for s in report.rolled_back:
        print(t_line("ckpt.rolled_back_set", stamp=s.stamp, iters=", ".join(map(str, s.iterations)) or "-",
                to_iter=s.to_iter if s.to_iter is not None else "?", state=s.journal_state or "?"))
    if report.interrupted:
        print(t_line("warning.prefix", message=t_line("ckpt.interrupted", stamps=", ".join(s.stamp for s in report.interrupted),
                                           dir=report.save_dir)))


def run(args: argparse.Namespace) -> int:
    from mbridge_launch.base.output import print_json
    from mbridge_launch.rollback.checkpoints import list_checkpoints
    from mbridge_launch.runs.operations import open_ledger, resolve_target, run_log_paths

    with open_ledger(args.ledger) as ledger:
        target = resolve_target(args.target, ledger)
        logs = args.log
        if logs is None and target.run is not None:
            chain = ledger.run_chain(target.run.id)
            logs = [str(p) for r in chain for p in run_log_paths(r) if p.is_file()]
    report = list_checkpoints(target.save_dir, logs or None)
    if args.format == "json":
        data = report.as_dict()
        data["run"] = target.run.summary() if target.run else None
        print_json(data)
    else:
        print_report(report)
    return 0
