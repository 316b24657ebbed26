"""What a diagnosis reads about a ledger run or a Slurm job, gathered in one place for `diagnose`,
`status` and the auto-rollback watcher: every log file of the run, Slurm's view of its current job
(sacct/scontrol, runs/job_report.py; without Slurm the logs alone) and its Plan (gpu_oom's memory
view). The classification itself is mbridge_launch/diagnosis (pure)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mbridge_launch.runs import ledger as L

# Slurm states of a job that is still going (its logs are read as far as they go)
LIVE_STATES = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "RESIZING", "SUSPENDED",
               "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT")
DIAGNOSIS_EVENT = "diagnosis"


@dataclass
class Subject:
    """What is diagnosed together as one job: logs, Slurm's view, the Plan, the ledger run."""

    logs: list[Path] = field(default_factory=list)
    slurm: Any = None  # diagnosis.model.SlurmView | None
    job_id: Optional[str] = None
    plan: Any = None
    run: Any = None  # RunRecord of the first run named, if any
    running: bool = False

    def add_log(self, path: Path) -> None:
        resolved = Path(os.path.abspath(path))
        if resolved not in self.logs:
            self.logs.append(resolved)

    def add_job(self, job_id: str, *, logs: bool = True) -> bool:
        """Slurm's view of a job (the first job named wins) and, with `logs`, its StdOut/StdErr while
        the controller still knows them. False when Slurm knows no such job (or cannot be asked)."""
        from mbridge_launch.runs.job_report import job_facts, slurm_view

        facts = job_facts(job_id)
        view = slurm_view(job_id, facts=facts)
        if view is None:
            return False
        if self.slurm is None:
            self.slurm, self.job_id = view, job_id
        if view.state.upper() in LIVE_STATES:
            self.running = True
        if logs and facts is not None:
            for name in (facts.stdout, facts.stderr):
                if name and Path(name).is_file():
                    self.add_log(Path(name))
                    # the training step's own logs, which the sbatch executor writes next to the batch
                    # log as <slug>-<job>-restart<N>.log (executors/common.py step_log_parts)
                    for step in sorted(Path(name).parent.glob(f"*-{job_id}-restart*.log"))[:100]:
                        self.add_log(step)
        return True

    def add_run(self, ledger: L.Ledger, record: L.RunRecord, job_id: Optional[str] = None, query: Any = None) -> None:
        """A ledger run: its state refreshed from Slurm, its current job's Slurm view, its logs, its Plan."""
        from mbridge_launch.base.errors import UserError
        from mbridge_launch.runs.operations import refresh, run_log_paths

        if record.active:
            record = refresh(ledger, [record], query)[0]
        if self.run is None:
            self.run = record
            try:
                self.plan = record.plan()
            except UserError:  # a ledger copy that no longer loads: diagnose without the memory view
                self.plan = None
        job = job_id or (record.job_ids[-1] if record.job_ids else None)
        if job is not None:
            self.add_job(job, logs=False)
        if record.active:
            self.running = True
        for path in run_log_paths(record):
            if path.is_file():
                self.add_log(path)

    def diagnose(self) -> Any:
        from mbridge_launch.diagnosis.classify import diagnose

        if self.run is not None and self.slurm is None and not self.logs:
            never = submission_failure(self.run)
            if never is not None:
                return never
        found = diagnose(self.logs, self.slurm, plan=self.plan)
        self._fill_nodes(found)
        return found

    def _fill_nodes(self, diagnosis: Any) -> None:
        """The node of a rank the logs did not place (an srun-native job without --label): from
        Slurm's node list and the Plan's tasks per node (srun's block distribution: one task per
        GPU); a one-node job's node whatever the shape. Symptoms likewise."""
        from mbridge_launch.runs.job_report import expand_hostlist, node_of_rank

        view = self.slurm
        if view is None or not view.node_list:
            return
        per_node = 0
        if self.plan is not None and self.plan.launch.shape == "srun":
            per_node = int(self.plan.cluster.gpus_per_node)
        single = len(expand_hostlist(view.node_list)) == 1

        def place(rank: Any) -> Optional[str]:
            if rank is None:
                return None
            return node_of_rank(view.node_list, int(rank), per_node) if (per_node or single) else None

        if diagnosis.node is None and diagnosis.failed and diagnosis.cause not in ("time_limit", "preempted"):
            diagnosis.node = place(diagnosis.rank)
            if diagnosis.node is not None:  # the fix and the node to skip name the node now known
                from mbridge_launch.diagnosis.classify import refresh_node_fix

                refresh_node_fix(diagnosis, self.plan)
        for symptom in diagnosis.symptoms:
            if isinstance(symptom, dict) and symptom.get("node") is None:
                symptom["node"] = place(symptom.get("rank"))


# Ledger states of a run that never got a Slurm job: nothing ran, there are no logs to read.
NO_JOB_STATES = (L.SUBMIT_FAILED, L.LOST)
_EXCEPTION_NAME = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit): ")


def submission_reason(error: Optional[str]) -> str:
    """The reason a submission failed, as the ledger recorded it (`SubmissionError: Slurm refused the
    job: ...`, then Slurm's raw output on the next lines): its first line, without the exception's
    class name."""
    first = next((line.strip() for line in (error or "").splitlines() if line.strip()), "")
    return _EXCEPTION_NAME.sub("", first, count=1)


def submission_failure(record: L.RunRecord) -> Any:
    """The Diagnosis of a run that never got a job ("submission failed: <reason>"), or None when
    the run has or had a job."""
    from mbridge_launch.base.escape import one_line
    from mbridge_launch.base.i18n import msg
    from mbridge_launch.diagnosis.model import RETRY_OF, Diagnosis

    if record.state not in NO_JOB_STATES or record.job_ids:
        return None
    reason = submission_reason(record.error)
    text: Any = one_line(reason) if reason else msg(f"diagnose.submit_failed.no_reason.{record.state}")
    fix = msg("diagnose.fix.submit_failed.unresolved", run=record.name) if record.unresolved else \
        msg("diagnose.fix.submit_failed")
    return Diagnosis(cause="submit_failed", rank=None, node=None, evidence=[], retry=RETRY_OF["submit_failed"],
                     fix=fix, summary=msg("diagnose.cause.submit_failed", text=text), first_error=reason or None)


def run_with_job(ledger: L.Ledger, job_id: str) -> Optional[L.RunRecord]:
    """The newest run of the ledger whose jobs include `job_id` (bounded: the last 500 runs)."""
    for record in ledger.list_runs(limit=500):
        if job_id in record.job_ids:
            return record
    return None


def diagnose_run(ledger: L.Ledger, record: L.RunRecord, query: Any = None) -> Any:
    """The Diagnosis of one ledger run: its logs, its current job's Slurm view, its Plan."""
    subject = Subject()
    subject.add_run(ledger, record, query=query)
    return subject.diagnose()


def record_diagnosis(ledger: L.Ledger, record: L.RunRecord, diagnosis: Any) -> None:
    """The diagnosis of an ended run, as a ledger event (English text: the ledger is shared)."""
    data = diagnosis.as_json("en")
    detail = {k: data.get(k) for k in ("cause", "rank", "node", "retry", "summary", "exclude_nodes", "restarts")}
    detail["evidence"] = data.get("evidence", [])[:5]
    earlier = [e for e in ledger.events(record.id) if e.get("kind") == DIAGNOSIS_EVENT]
    if earlier and earlier[-1].get("detail") == detail:
        return  # diagnosed the same way before: one event per distinct diagnosis
    ledger.add_event(record.id, DIAGNOSIS_EVENT, detail)
