"""Helpers of the `diagnose` tests on the real local cluster (tests/e2e/test_diagnose_e2e.py): a
Plan per failure scenario (a copy of the module's `recommend -o` plan with its own shape, env knobs
and overrides), its submission through the real gate, and `diagnose --format json` on the result."""

from __future__ import annotations

import copy
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mbridge_launch.plan.model import plan_from_dict, save_plan


def unique(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}"


def scenario_plan(base: dict, shared: Path, name: str, *, iters: int = 6, save_interval: int | None = None,
                  env: dict | None = None, nodes: int = 1, gpus_per_node: int = 2, partition: str = "h100",
                  exclusive: bool = False, requeue: bool = False, time_limit: str = "00:05:00",
                  signal: str | None = "TERM@60", overrides: dict[str, str] | None = None,
                  data_paths: list[str] | None = None, sbatch_args: list[str] | None = None,
                  ckpt: Path | None = None, tp: int = 1) -> Path:
    """A copy of `base` named `name`, everything it writes under `shared`. Not exclusive by
    default, so several scenarios share a node (each its own GPUs); no requeue unless asked (a
    failed job must stay failed to be diagnosed)."""
    data = copy.deepcopy(base)
    data["name"] = name
    ck = str(ckpt or shared / "ckpt")
    data["checkpoint"].update(save=ck, load=ck, save_interval=save_interval)
    data["launch"].update(workdir=str(shared), log_dir=str(shared / "logs"))
    data["cluster"].update(nodes=nodes, gpus_per_node=gpus_per_node, partition=partition, exclusive=exclusive,
                           requeue=requeue, time=time_limit, signal=signal, gpu_type=partition,
                           sbatch_args=list(sbatch_args or []))
    data["parallelism"].update(tp=tp, dp=nodes * gpus_per_node // tp)
    if tp != 1:
        overrides = {"model.tensor_model_parallel_size": str(tp), **(overrides or {})}
    kept = [o for o in data["overrides"] if o["key"] not in ("train.train_iters", *(overrides or {}))]
    data["overrides"] = kept + [{"key": "train.train_iters", "value": str(iters), "class": "convergence",
                                 "reason": "test length"}]
    for key, value in (overrides or {}).items():
        data["overrides"].append({"key": key, "value": value, "class": "execution", "reason": "test scenario"})
    data["env_vars"].update({"MBL_STANDIN_ITER_SECONDS": "0.2", **(env or {})})
    if data_paths is not None:
        data["dataset"].update(selector="megatron-indexed", data_paths=data_paths)
    return save_plan(plan_from_dict(data), shared / f"{name}.yaml")


@dataclass
class Submitted:
    name: str
    shared: Path
    job_id: str
    run_id: int
    ledger: Path
    notes: dict[str, Any] = field(default_factory=dict)


def submit(mbl, plan: Path, shared: Path, *, force: bool = True) -> Submitted:
    """Through the real gate (`submit --yes`); `force`: past preflight's errors (a scenario's
    fault is often one preflight would have caught: that is the point)."""
    db = shared / "ledger.sqlite3"
    args = ["submit", str(plan), "--yes", "--script-dir", str(shared), "--ledger", str(db), "--format", "json",
            "--no-watcher"]
    if force:
        args += ["--force", "--reason", "diagnose scenario"]
    proc = mbl.run(*args, env={"MBRIDGE_LAUNCH_STATE_DIR": str(shared / "state")})
    if proc.returncode != 0 and force and "force" in proc.stderr.lower():
        proc = mbl.run(*args[:-3], env={"MBRIDGE_LAUNCH_STATE_DIR": str(shared / "state")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer = json.loads(proc.stdout)
    return Submitted(plan.stem, shared, answer["job_ids"][0], int(answer.get("run_id") or answer.get("id")), db)


def diagnose(mbl, target: str, ledger: Optional[Path] = None, *extra: str):
    args = ["diagnose", target, "--format", "json", *extra]
    if ledger is not None:
        args += ["--ledger", str(ledger)]
    return mbl.run(*args, timeout=120)


def wait_until(check: Callable[[], Any], timeout: float, what: str, poll: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(poll)


def find_line(path: Path, needle: str) -> tuple[int, str]:
    """(line number from 1, the line without its newline) of the first line holding `needle`."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if needle in line:
                return number, line.rstrip("\n")
    raise AssertionError(f"{needle!r} not in {path}")


def step_log(sub: Submitted) -> Path:
    """The training step's log of the job's first attempt."""
    found = sorted((sub.shared / "logs").glob(f"*-{sub.job_id}-restart*.log"))
    assert found, list((sub.shared / "logs").glob("*"))
    return found[0]
