"""Helpers for the submission-gate and watcher-job tests (tests/e2e/test_gate.py,
tests/e2e/test_watch_job.py): the `recommend -o` plan they start from (the module-scoped
`base_plan` fixture of tests/e2e/conftest.py), per-test copies of it, run names no other test or
session uses, and the faked scheduler and preflight of the unit-level gate tests."""

from __future__ import annotations

import copy
import secrets
import sys
from pathlib import Path

import yaml

from cli_helpers import ROOT, run_cli
from mbridge_launch.plan.model import plan_from_dict, save_plan

STANDIN = ROOT / "tests" / "standin_trainer.py"


def unique(name: str) -> str:
    """A run name no other test or session uses (reconciliation matches jobs by name)."""
    return f"{name}-{secrets.token_hex(3)}"


def recommend_base_plan(directory: Path, *overrides: str) -> dict:
    """`mbridge-launch recommend -o` (Llama 3.2 1B on 2 GPUs, which passes preflight on the local
    cluster, with the stand-in trainer as entry), written under `directory`; its data. `overrides`:
    more KEY=VALUE settings of the user's."""
    out = directory / "plan.yaml"
    proc = run_cli("recommend", "--model", "llama32_1b", "--gpus", "2", "--goal", "pretrain", "--dataset", "mock",
                   "--name", "gate", "--partition", "h100", "--time", "00:10:00", "--save-dir", str(out.parent / "ckpt"),
                   "--entry", sys.executable, str(STANDIN), "-o", str(out), "train.train_iters=6",
                   "checkpoint.save_interval=3", *overrides)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(out.read_text())


def write_plan(base: dict, shared: Path, name: str, *, iters: int = 6, save_interval: int = 3, env: dict | None = None,
               auto_rollback: dict | None = None, dp: int | None = None) -> Path:
    """A copy of `base` named `name` with its checkpoints, work and log directories under `shared`."""
    data = copy.deepcopy(base)
    data["name"] = name
    data["checkpoint"].update(save=str(shared / "ckpt"), load=str(shared / "ckpt"))
    data["launch"].update(workdir=str(shared), log_dir=str(shared / "logs"))
    kept = [o for o in data["overrides"] if o["key"] not in ("train.train_iters", "checkpoint.save_interval")]
    data["overrides"] = kept + [
        {"key": "train.train_iters", "value": str(iters), "class": "convergence", "reason": "test length"},
        {"key": "checkpoint.save_interval", "value": str(save_interval), "class": "execution", "reason": "test"}]
    data["env_vars"].update(env or {})
    if auto_rollback is not None:
        data["auto_rollback"] = auto_rollback
    if dp is not None:
        data["parallelism"]["dp"] = dp
    return save_plan(plan_from_dict(data), shared / f"{name}.yaml")


def log_text(shared: Path) -> str:
    """Every job log under `shared`/logs, in name order."""
    return "\n".join(p.read_text(errors="replace") for p in sorted((shared / "logs").glob("*")) if p.is_file())


class FakeScheduler:
    """launch.render_plan and launch.schedule without Slurm: renders a stub script, 'schedules' it
    with increasing job ids. `install(monkeypatch)` puts both in place of the real stages."""

    def __init__(self):
        self.submitted = []

    def render(self, plan, executor, script_dir=None):
        from mbridge_launch.executors.base import Rendered

        directory = Path(script_dir or Path.cwd())
        return Rendered(executor=executor, plan=plan, script_dir=directory, text="#!/bin/sh\n",
                        submit_command=["sbatch", "x.sbatch"], files={str(directory / "x.sbatch"): "#!/bin/sh\n"},
                        script_path=directory / "x.sbatch")

    def schedule(self, rendered, job_token=None):
        from mbridge_launch.executors.base import Submitted

        self.submitted.append(rendered.plan)
        return Submitted(executor=rendered.executor, job_ids=[str(500 + len(self.submitted))])

    def install(self, monkeypatch):
        monkeypatch.setattr("mbridge_launch.executors.launch.render_plan", self.render)
        monkeypatch.setattr("mbridge_launch.executors.launch.schedule", self.schedule)
        return self


def preflight_with(*codes):
    """A run_preflight stand-in whose report has one error per code."""
    from mbridge_launch.preflight.model import Check, Report

    def fake(plan, **kw):
        return Report([Check(code, "error", text=f"{code} (fake)") for code in codes])
    return fake
