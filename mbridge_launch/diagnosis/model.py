"""The data of a diagnosis: cause codes, retry advice, evidence, Slurm's view of a job.

Pure data (no I/O): the CLI (`diagnose`, `status`), the watcher and the requeue logic all read the
same Diagnosis, so a NaN is never retried as "flaky" and a hardware fault names the node to skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mbridge_launch.base.i18n import Msg, msg

CAUSES: tuple[str, ...] = (
    "gpu_oom", "host_oom", "nccl_timeout", "gpu_hardware", "network",
    "dataset_missing", "tp_kv_mismatch", "time_limit", "preempted", "node_failure", "import_error",
    "port_in_use", "nan_loss", "loss_spike", "checkpoint_corrupt", "cuda_graph_conflict", "shared_fs",
    "unknown", "none", "submit_failed",
)  # "none": no failure evidence (job running or COMPLETED, logs clean); "submit_failed": the run
# never got a job (the ledger says why: runs/run_diagnosis.py), no log is read

RETRY: tuple[str, ...] = ("resubmit", "resubmit_excluding_node", "rollback", "no")

# What an automatic retry should do for each cause: hardware is resubmitted without the node, a
# transient interruption is resubmitted (resuming from the last checkpoint), a numeric failure is
# rolled back (never retried blindly), a software error is not retried.
RETRY_OF: dict[str, str] = {
    "gpu_oom": "no", "host_oom": "no", "nccl_timeout": "resubmit",
    "gpu_hardware": "resubmit_excluding_node", "network": "resubmit",
    "dataset_missing": "no", "tp_kv_mismatch": "no", "time_limit": "resubmit",
    "preempted": "resubmit", "node_failure": "resubmit_excluding_node", "import_error": "no",
    "port_in_use": "resubmit", "nan_loss": "rollback", "loss_spike": "rollback",
    "checkpoint_corrupt": "no", "cuda_graph_conflict": "no", "shared_fs": "no",
    "unknown": "no", "none": "no", "submit_failed": "no",
}
LEDGER_CAUSES: tuple[str, ...] = ("submit_failed",)  # decided from the ledger, never from logs


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int  # from 1
    text: str

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class StepView:
    step_id: str
    state: str
    exit_code: str
    node_list: str = ""
    start: float | None = None
    end: float | None = None


@dataclass(frozen=True)
class SlurmView:
    """Slurm's view of one job (filled from sacct/squeue by the CLI)."""

    job_id: str
    state: str
    exit_code: str = ""
    reason: str = ""
    node_list: str = ""
    restarts: int | None = None
    time_limit: str = ""
    elapsed: str = ""
    steps: tuple[StepView, ...] = ()
    derived_exit_code: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SlurmView":
        """The inverse of as_json (a fixture's slurm.json); unknown keys are ignored."""
        steps = tuple(StepView(**{k: v for k, v in s.items() if k in StepView.__dataclass_fields__})
                      for s in data.get("steps") or ())
        kw = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "steps"}
        kw["job_id"] = str(kw.get("job_id", ""))
        kw.setdefault("state", "")
        return cls(steps=steps, **kw)

    def as_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "steps"}
        out["steps"] = [dict(s.__dict__) for s in self.steps]
        return out


@dataclass
class Diagnosis:
    cause: str
    rank: int | None
    node: str | None
    evidence: list[Evidence]
    retry: str  # one of RETRY
    fix: Msg
    summary: Msg
    first_error: str | None = None
    symptoms: list[dict[str, Any]] = field(default_factory=list)
    exclude_nodes: list[str] = field(default_factory=list)
    restarts: int | None = None  # Slurm's requeue count, when known

    @property
    def failed(self) -> bool:
        return self.cause != "none"

    def as_json(self, lang: str = "en") -> dict[str, Any]:
        return {
            "cause": self.cause,
            "rank": self.rank,
            "node": self.node,
            "evidence": [e.as_json() for e in self.evidence],
            "fix": self.fix.render(lang),
            "retry": self.retry,
            "summary": self.summary.render(lang),
            "symptoms": [
                {**s, "evidence": [e.as_json() if isinstance(e, Evidence) else e for e in s.get("evidence", [])]}
                for s in self.symptoms
            ],
            "exclude_nodes": list(self.exclude_nodes),
            "first_error": self.first_error,
            "restarts": self.restarts,
        }

    def one_line(self, lang: str = "en") -> str:
        """For `status`: "gpu_oom on rank 3 (h100-1): <summary>"."""
        return msg(
            "diagnose.one_line",
            cause=self.cause,
            where=self._where(lang),
            summary=self.summary,
        ).render(lang)

    def _where(self, lang: str) -> str:
        if self.rank is not None and self.node:
            return msg("diagnose.where.rank_node", rank=self.rank, node=self.node).render(lang)
        if self.rank is not None:
            return msg("diagnose.where.rank", rank=self.rank).render(lang)
        if self.node:
            return msg("diagnose.where.node", node=self.node).render(lang)
        return ""
