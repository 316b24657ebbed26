"""diagnose(): the first failure by time and rank, its cause, evidence, fix and retry advice.

Order of decision:
1. a ROOT cause from the logs, the earliest by time (then by the order of the files given, then
   the line): a symptom (an NCCL timeout, a SIGTERM cascade, `Exited with exit code`) never wins
   over a root cause, however early;
2. Slurm's view: TIMEOUT / `DUE TO TIME LIMIT` -> time_limit, PREEMPTED -> preempted, NODE_FAIL
   -> node_failure, OUT_OF_MEMORY / exit 9 / 0:9 -> host_oom, exit 16/17 -> nan_loss (Megatron's
   rerun state machine); it comes after every log root cause (it has no time of its own);
3. a loss spike the run survived (SOFT);
4. an exception nothing explains -> unknown, with that line;
5. only symptoms -> nccl_timeout (naming the rank torchrun saw fail first) or unknown;
6. nothing: "none" when Slurm says running/completed or there is no Slurm view, else unknown.
A missing file on node-local storage (/tmp, /local, $TMPDIR, ...) reported by a rank other than 0,
while rank 0 did not report it, is shared_fs: the file exists on rank 0's node only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional, Sequence

from mbridge_launch.base.escape import one_line
from mbridge_launch.base.i18n import Msg, msg
from mbridge_launch.diagnosis.fixes import fix_for
from mbridge_launch.diagnosis.model import RETRY_OF, Diagnosis, Evidence, SlurmView
from mbridge_launch.diagnosis.patterns import (
    ERROR_LINE,
    EXCEPTION,
    MISSING_FILE,
    NODE_LOCAL,
    ROOT,
    SOFT,
    SYMPTOM,
)
from mbridge_launch.diagnosis.scan import Collector, Event, scan_file

MAX_SYMPTOMS = 16
SUMMARY_TEXT = 160  # characters of the evidence line quoted in the summary (`status` shows it on one line)
_RUNNING = ("RUNNING", "PENDING", "REQUEUED", "RESIZING", "SUSPENDED", "CONFIGURING", "COMPLETING")
_HOST_OOM_EXITS = ("0:9", "9:0", "137:0")
_NAN_EXITS = ("16:0", "17:0")


def diagnose(logs: Sequence[str | Path], slurm: Optional[SlurmView] = None, *, plan: Any = None,
             max_bytes: Optional[int] = None) -> Diagnosis:
    """Diagnose a job from its log files (any size, read as a stream) and Slurm's view of it."""
    sink = Collector()
    for index, path in enumerate(logs):
        scan_file(path, str(path), index, sink, max_bytes=max_bytes, loss_watcher=_watcher(plan))
    return classify(sink, slurm, plan=plan)


def _watcher(plan: Any) -> object:
    from mbridge_launch.rollback.lossmon import LossWatcher

    config = getattr(plan, "auto_rollback", None)
    return LossWatcher.from_auto_rollback(config) if config is not None else LossWatcher()


def classify(sink: Collector, slurm: Optional[SlurmView], *, plan: Any = None) -> Diagnosis:
    events = sink.events()
    _apply_shared_fs(events)
    winner = _earliest(events, ROOT)
    if winner is None:
        winner = _from_slurm(slurm, events)
    if winner is None:
        winner = _earliest(events, SOFT) or _earliest(events, EXCEPTION)
    if winner is None:
        winner = _from_symptoms(events, sink)
    if winner is None and slurm is not None and slurm.state and not _benign(slurm.state):
        first = _earliest(events, ERROR_LINE)
        winner = first or _slurm_event("unknown", slurm)
        winner = Event("unknown", ERROR_LINE, winner.file, winner.file_index, winner.line, winner.text,
                       winner.time, winner.rank, winner.node)
    first_error = _first_error(events)
    if winner is None:
        return _none(slurm, first_error)
    rank = winner.rank
    if rank is None and sink.torchrun_root is not None and winner.tier <= EXCEPTION:
        rank = sink.torchrun_root.rank  # torchrun saw which rank failed first
    node = winner.node or (sink.nodes.get(rank) if rank is not None else None) or _slurm_node(slurm, winner.cause)
    cause = winner.cause
    if cause in _PLACED_BY_SRUN and (node is None or rank is None):
        node, rank = _placed_by_srun(events, winner, node, rank, plan)
    evidence = [Evidence(winner.file, winner.line, winner.text)]
    exclude = [node] if cause in _EXCLUDED and node else []
    quoted = winner.text if len(winner.text) <= SUMMARY_TEXT else winner.text[:SUMMARY_TEXT - 1] + "…"
    summary: Msg = msg(f"diagnose.cause.{cause}", text=one_line(quoted))
    restarts = slurm.restarts if slurm is not None else None
    if restarts:
        summary = msg("diagnose.fix.join", head=summary, tail=msg("diagnose.requeued", count=restarts))
    return Diagnosis(
        cause=cause, rank=rank, node=node, evidence=evidence, retry=RETRY_OF[cause],
        fix=fix_for(cause, node, plan), summary=summary, first_error=first_error,
        symptoms=_symptoms(events, winner, sink), exclude_nodes=exclude, restarts=restarts,
    )


_EXCLUDED = ("gpu_hardware", "node_failure")  # causes whose node the next submission skips


def refresh_node_fix(diagnosis: Diagnosis, plan: Any = None) -> None:
    """After the node of a diagnosis became known later (from Slurm's node list): the fix names it
    and a node to skip is listed."""
    diagnosis.fix = fix_for(diagnosis.cause, diagnosis.node, plan)
    if diagnosis.cause in _EXCLUDED and diagnosis.node and diagnosis.node not in diagnosis.exclude_nodes:
        diagnosis.exclude_nodes.append(diagnosis.node)


# ---------------------------------------------------------------------- choosing
# Causes whose first line (slurmstepd's `Detected 1 oom_kill event in StepId=5120.0`, sacct's
# NODE_FAIL) names no node, while srun's own line for the same failure does
# (`srun: error: node002: task 11: Out Of Memory`, `srun: error: Node failure on node002`).
_PLACED_BY_SRUN = ("host_oom", "node_failure")


def _placed_by_srun(events: list[Event], winner: Event, node: Optional[str], rank: Optional[int],
                    plan: Any) -> tuple[Optional[str], Optional[int]]:
    """The node and rank of `winner` from the lines of the same cause that name them (the winner's
    own first). srun's task id is the global rank when srun started one task per rank (its
    --label prefixes, or the Plan's srun launch shape, the default one); under torchrun srun
    starts one task per node, whose id says nothing about a rank."""
    per_rank_tasks = getattr(getattr(plan, "launch", None), "shape", "srun") != "torchrun"
    for event in [winner] + [e for e in events if e is not winner and e.cause == winner.cause]:
        tasks = event.detail.get("tasks") or []
        if node is None and event.node:
            node = event.node
        if rank is None and event.rank is not None and event is not winner:
            rank = event.rank
        if rank is None and len(tasks) == 1 and (event.detail.get("labelled") or per_rank_tasks):
            rank = int(tasks[0])
        if node is not None and rank is not None:
            break
    return node, rank


def _earliest(events: list[Event], tier: int) -> Optional[Event]:
    found = [e for e in events if e.tier == tier]
    return min(found, key=lambda e: e.key) if found else None


def _apply_shared_fs(events: list[Event]) -> None:
    """A file on node-local storage missing on rank N (N != 0) but not on rank 0: shared_fs."""
    missing: dict[str, set[Optional[int]]] = {}
    for event in events:
        path = _local_missing(event.text)
        if path:
            missing.setdefault(path, set()).add(event.rank)
    for event in events:
        path = _local_missing(event.text)
        if path and event.tier >= EXCEPTION and event.rank not in (None, 0) and 0 not in missing[path]:
            event.cause, event.tier = "shared_fs", ROOT
            event.detail["path"] = path


def _local_missing(text: str) -> Optional[str]:
    m = MISSING_FILE.search(text)
    if not m:
        return None
    local = NODE_LOCAL.match(m.group(1))
    return m.group(1) if local else None


def _benign(state: str) -> bool:
    """Running or completed: no failure unless the logs show one."""
    words = state.split()
    return not words or words[0].upper() in _RUNNING + ("COMPLETED",)


def _slurm_event(cause: str, slurm: SlurmView, node: Optional[str] = None) -> Event:
    text = msg("diagnose.slurm_state", state=slurm.state, exit_code=slurm.exit_code or "?").render("en")
    if slurm.reason:
        text += f" ({slurm.reason})"
    return Event(cause, ROOT, f"slurm:{slurm.job_id}", 1 << 30, 0, one_line(text), None, None, node)


def _from_slurm(slurm: Optional[SlurmView], events: list[Event]) -> Optional[Event]:
    """What Slurm's view alone decides (states, reasons, exit codes of the job and its steps)."""
    if slurm is None:
        return None
    states = [slurm.state.upper(), slurm.reason.upper()] + [s.state.upper() for s in slurm.steps]
    codes = [slurm.exit_code, slurm.derived_exit_code] + [s.exit_code for s in slurm.steps]
    joined = " ".join(states)
    if "TIMEOUT" in joined or "TIME LIMIT" in joined or "TIMELIMIT" in joined:
        return _slurm_event("time_limit", slurm)
    if "PREEMPT" in joined:
        return _slurm_event("preempted", slurm)
    if "NODE_FAIL" in joined or "NODE FAILURE" in joined:
        failed = [s for s in slurm.steps if "NODE_FAIL" in s.state.upper() and s.node_list]
        return _slurm_event("node_failure", slurm, _single_node(failed[0].node_list) if failed else None)
    if "OUT_OF_MEMORY" in joined or any(c in _HOST_OOM_EXITS for c in codes if c):
        return _slurm_event("host_oom", slurm)
    if any(c in _NAN_EXITS for c in codes if c):
        return _slurm_event("nan_loss", slurm)
    return None


def _from_symptoms(events: list[Event], sink: Collector) -> Optional[Event]:
    symptoms = [e for e in events if e.tier == SYMPTOM]
    if not symptoms:
        return None
    timeouts = [e for e in symptoms if e.cause == "nccl_timeout"]
    chosen = min(timeouts or symptoms, key=lambda e: e.key)
    root = sink.torchrun_root
    cause = "nccl_timeout" if timeouts else "unknown"
    rank = root.rank if root is not None and root.rank is not None else chosen.rank
    node = root.node if root is not None and root.rank == rank else chosen.node
    return Event(cause, SYMPTOM, chosen.file, chosen.file_index, chosen.line, chosen.text, chosen.time, rank, node)


def _symptoms(events: list[Event], winner: Event, sink: Collector) -> list[dict[str, Any]]:
    """Later failures, one per (cause, rank): what the first failure set off."""
    seen: set[tuple[str, Optional[int]]] = {(winner.cause, winner.rank)}
    out: list[dict[str, Any]] = []
    for event in events:
        if event is winner or event.tier < SYMPTOM or event.cause == "cascade":
            continue
        key = (event.cause, event.rank)
        if key in seen:
            continue
        seen.add(key)
        node = event.node or (sink.nodes.get(event.rank) if event.rank is not None else None)
        out.append({"cause": event.cause, "rank": event.rank, "node": node,
                    "evidence": [Evidence(event.file, event.line, event.text)]})
        if len(out) >= MAX_SYMPTOMS:
            break
    return out


def _first_error(events: list[Event]) -> Optional[str]:
    candidates = [e for e in events if e.tier in (ROOT, EXCEPTION, ERROR_LINE, SYMPTOM) and e.line > 0]
    return min(candidates, key=lambda e: e.key).text if candidates else None


def _single_node(node_list: str) -> Optional[str]:
    """A node list that names exactly one node (`h100-1`), else None (`h100-[1-2]`, `a,b`)."""
    node_list = node_list.strip()
    return node_list if node_list and not re.search(r"[\[\],\s]", node_list) and node_list != "None" else None


def _slurm_node(slurm: Optional[SlurmView], cause: str) -> Optional[str]:
    if slurm is None:
        return None
    return _single_node(slurm.node_list)


def _none(slurm: Optional[SlurmView], first_error: Optional[str]) -> Diagnosis:
    state = slurm.state if slurm is not None else ""
    word = state.split()[0].upper() if state.split() else ""
    if word == "COMPLETED":
        detail = msg("diagnose.none.completed", state=one_line(state))
    elif word in _RUNNING:
        detail = msg("diagnose.none.running", state=one_line(state))
    else:
        detail = msg("diagnose.none.clean")
    return Diagnosis(cause="none", rank=None, node=None, evidence=[], retry="no", fix=msg("diagnose.fix.none"),
                     summary=msg("diagnose.cause.none", text=detail), first_error=first_error,
                     restarts=slurm.restarts if slurm is not None else None)
