"""Completed ledger runs as calibration rows: what the run's Plan asked for (model, system, GPU
count, precision, layout) and what Megatron's log lines say it achieved (runs/step_metrics.py),
in the columns of benchmarks/data/perf_calibration.csv, for `calibrate --from-runs` and `tune`.

A run's Plan is the ledger's copy (what was submitted), its logs are those `diagnose` reads
(operations.run_log_paths). Only COMPLETED runs give rows: a failed or cancelled run may have
stopped in its warm-up or been slowed by what failed. Runs the ledger still has as active are
refreshed from Slurm first, as `status` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.records import COMPLETED, FORGOTTEN
from mbridge_launch.runs.step_metrics import StepMetrics, read_step_metrics

# the columns of benchmarks/data/perf_calibration.csv, in its order
COLUMNS = ("release", "task", "model", "system", "num_gpus", "precision", "gbs", "mbs", "seq_length", "tp", "pp",
           "cp", "vp", "ep", "fsdp", "ga", "model_variant", "tokens_per_sec_per_gpu", "model_tflops_per_gpu")
# planner precision -> the spelling of the calibration CSV (which benchmarks read back through
# knowledge.vocabulary.normalize_precision)
CSV_PRECISION = {"bf16": "bf16", "fp8cs": "fp8_cs", "fp8mx": "mxfp8", "fp8sc": "fp8_sc", "fp8ds": "fp8_ds",
                 "nvfp4": "nvfp4"}
RELEASE_PREFIX = "local:"
MAX_RUNS = 2000  # the newest runs of the ledger that are looked at
WARM_UP = 3


def _skip(key: str, run: L.RunRecord, **params: Any) -> str:
    from mbridge_launch.base.escape import t_line

    return t_line(key, name=run.name, id=run.id, **params)


def _fmt(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.1f}"


def plan_facts(plan: Any) -> dict[str, Any]:
    """What a row needs from a Plan: model, system, precision, goal and the layout fields."""
    from mbridge_launch.preflight.context import PreflightContext
    from mbridge_launch.preflight.plan_checks import plan_precision

    p, c = plan.parallelism, plan.cluster
    return {"model": plan.recipe.model, "system": c.gpu_type, "gpus": c.total_gpus, "goal": plan.mode,
            "precision": plan_precision(PreflightContext(plan=plan)), "tp": p.tp, "pp": p.pp, "cp": p.cp,
            "vp": p.vp, "ep": p.ep, "mbs": p.mbs, "gbs": p.gbs, "seq_length": p.seq_length, "fsdp": p.fsdp,
            "dp": p.dp, "ga": p.grad_accum}


def _model_tflops(arch: Any, facts: dict[str, Any], metrics: StepMetrics) -> Optional[float]:
    """Megatron's own figure when it logged one (logger.log_throughput), else tokens/s x the
    planner's training FLOPs per token (planner/flops.py: Megatron's formula)."""
    if metrics.tflops_per_gpu is not None:
        return metrics.tflops_per_gpu
    if metrics.tokens_per_sec_per_gpu is None:
        return None
    from mbridge_launch.planner.flops import flops_per_token

    per_token = flops_per_token(arch, int(facts["seq_length"]), tp=int(facts["tp"]), goal=str(facts["goal"]))
    return metrics.tokens_per_sec_per_gpu * per_token.total / 1e12


def build_row(run: L.RunRecord, plan: Any, metrics: StepMetrics) -> tuple[Optional[dict[str, str]], Optional[str]]:
    """(the CSV row, None) or (None, why not) for a run whose metrics are read."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.hardware import get_hardware
    from mbridge_launch.knowledge.models import load_arch
    from mbridge_launch.knowledge.vocabulary import recipe_task

    facts = plan_facts(plan)
    arch = load_arch(facts["model"])
    if arch is None:
        return None, _skip("measured.skip.unknown_model", run, model=facts["model"])
    try:
        system = get_hardware(facts["system"]).name
    except (UserError, KeyError, ValueError):
        return None, _skip("measured.skip.unknown_system", run, gpu=facts["system"])
    if metrics.tokens_per_sec_per_gpu is None:
        return None, _skip("measured.skip.no_metrics", run, skip=WARM_UP)
    gbs = metrics.global_batch_size or int(facts["gbs"])
    row = {
        "release": f"{RELEASE_PREFIX}{run.name}", "task": recipe_task(str(facts["goal"])), "model": str(facts["model"]),
        "system": system, "num_gpus": str(facts["gpus"]),
        "precision": CSV_PRECISION.get(str(facts["precision"]), str(facts["precision"])),
        "gbs": str(gbs), "mbs": str(facts["mbs"]), "seq_length": str(facts["seq_length"]),
        "tp": str(facts["tp"]), "pp": str(facts["pp"]), "cp": str(facts["cp"]),
        "vp": str(facts["vp"]) if facts["vp"] and facts["vp"] > 1 else "", "ep": str(facts["ep"]),
        "fsdp": str(facts["dp"]) if facts["fsdp"] else "0",
        "ga": str(max(1, gbs // max(1, int(facts["mbs"]) * int(facts["dp"])))),
        "model_variant": "", "tokens_per_sec_per_gpu": _fmt(metrics.tokens_per_sec_per_gpu),
        "model_tflops_per_gpu": _fmt(_model_tflops(arch, facts, metrics)),
    }
    return row, None


def read_run(run: L.RunRecord, *, skip: int = WARM_UP) -> tuple[Any, Optional[StepMetrics], Optional[str]]:
    """(Plan, metrics, None) or (Plan or None, None, why not): the run's Plan and what its logs say."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.runs.operations import run_log_paths

    try:
        plan = run.plan()
    except UserError as exc:
        return None, None, _skip("measured.skip.no_plan", run, reason=str(exc))
    logs = [p for p in run_log_paths(run) if p.is_file()]
    if not logs:
        return plan, None, _skip("measured.skip.no_logs", run)
    metrics = read_step_metrics(logs, skip=skip, seq_length=plan.parallelism.seq_length, gpus=plan.cluster.total_gpus)
    if metrics.step_time_s is None:
        return plan, None, _skip("measured.skip.no_metrics", run, skip=skip)
    return plan, metrics, None


def run_measurement(run: L.RunRecord, *, skip: int = WARM_UP) -> Optional[dict[str, Any]]:
    """One run's measurements (any state: tune reads its trials with it), or None when its logs
    have no step time after the warm-up: run id and name, step_time_s, tokens_per_sec_per_gpu,
    peak_memory_gb (GiB), tflops_per_gpu, iterations, samples, the StepMetrics as a dict under
    `metrics`, and `row` (the calibration CSV row, or None with `reason`)."""
    plan, metrics, _ = read_run(run, skip=skip)
    if metrics is None:
        return None
    row, reason = build_row(run, plan, metrics)
    return {"run_id": run.id, "run": run.name, "state": run.state, "step_time_s": metrics.step_time_s,
            "tokens_per_sec_per_gpu": metrics.tokens_per_sec_per_gpu, "peak_memory_gb": metrics.peak_memory_gb,
            "tflops_per_gpu": metrics.tflops_per_gpu, "iterations": metrics.iterations, "samples": metrics.samples,
            "metrics": metrics.as_dict(), "row": row, "reason": reason}


def ledger_path(state: Optional[Path]) -> Path:
    """The ledger of a state directory (None: the default ledger, MBRIDGE_LAUNCH_LEDGER honoured);
    a path to the database file itself is taken as it is."""
    if state is None:
        return L.default_ledger_path()
    state = Path(state).expanduser()
    return state if state.suffix == Path(L.LEDGER_FILENAME).suffix and not state.is_dir() else state / L.LEDGER_FILENAME


def ledger_rows(state: Optional[Path] = None, *, skip: int = WARM_UP, refresh: bool = True,
                query: Any = None) -> tuple[list[dict[str, str]], list[str]]:
    """(rows, reasons): a calibration row per COMPLETED run of the ledger (newest first) whose logs
    give a step time, and one line per other run saying why it gave none. Runs the ledger still
    has as active are first refreshed from Slurm (`refresh`; `query`: the Slurm query, default
    squeue/sacct), as `status` does: a job that ended since is read with its final state.
    Forgotten runs are left out silently. A ledger that does not exist gives no rows (it is
    never created here)."""
    from mbridge_launch.runs.operations import refresh as refresh_runs

    rows: list[dict[str, str]] = []
    reasons: list[str] = []
    with L.Ledger.open(ledger_path(state), create=False) as ledger:
        runs = ledger.list_runs(limit=MAX_RUNS)
        active = [r for r in runs if r.active]
        if refresh and active:
            fresh = {r.id: r for r in refresh_runs(ledger, active, query)}
            runs = [fresh.get(r.id, r) for r in runs]
    for run in runs:
        if run.state == FORGOTTEN:
            continue
        if run.state != COMPLETED:
            reasons.append(_skip("measured.skip.not_completed", run, state=run.state))
            continue
        plan, metrics, reason = read_run(run, skip=skip)
        if metrics is None:
            reasons.append(reason or "")
            continue
        row, reason = build_row(run, plan, metrics)
        if row is None:
            reasons.append(reason or "")
        else:
            rows.append(row)
    return rows, reasons
