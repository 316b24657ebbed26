"""Carry one scenario along the main path, as a user would type it, and list every contradiction.

recommend ARGS -o plan.yaml (and the same in Chinese) -> preflight plan.yaml --no-cluster ->
estimate of the layout the Plan holds -> submit plan.yaml --dry-run --no-cluster-checks with each
executor. The commands run in this process (`mbridge_launch.cli.main.main`), which is what makes
~70 scenarios x 7 commands affordable in CI; their stdout/stderr are captured, and an exception
escaping `main` (a traceback for the user) is recorded, never raised.

A contradiction is an answer that disagrees with another answer of the tool, or is not an answer
at all:
- a traceback or an "internal error" line; an exit code outside the documented ones;
- a Plan the tool wrote that its own preflight rejects for a reason the tool created (a plan.* or
  rule error), as opposed to a fact of this machine (checkpoint storage, datasets, the training
  entry, secrets: ENVIRONMENT_FACTS);
- an `estimate` of the written layout that refuses it, or disagrees with the Plan's own estimate;
- a `submit --dry-run` whose verdict (exit code) differs from preflight's;
- the same request giving a different Plan hash in another language;
- a recommendation that warns against its own layout (a layout pitfall it could have avoided).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXECUTORS = ("sbatch", "nemo-run", "submitit")
DOCUMENTED_EXITS = {0, 1, 2, 3}
# preflight error codes that state a fact of the machine the test runs on, not of the Plan
ENVIRONMENT_FACTS = ("path.", "data.", "entry.", "env.", "cluster.", "nodes.", "plan.dataset_required")
# warnings that say the recommended layout itself is a known pitfall (the search should avoid it)
LAYOUT_PITFALLS = ("FSDP_TP_H100",)


@dataclass
class Step:
    argv: list[str]
    rc: int
    out: str
    err: str
    crash: str | None = None  # the traceback, when an exception escaped main()

    def json(self) -> Any:
        try:
            return json.loads(self.out)
        except ValueError:
            return None


@dataclass
class Outcome:
    scenario: Any
    steps: dict[str, Step] = field(default_factory=dict)
    plan: dict | None = None
    answer: dict | None = None
    preflight: dict | None = None
    estimate: dict | None = None
    contradictions: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """recommend gave a clear refusal (bad input or no layout): the chain stops there."""
        step = self.steps.get("recommend")
        return step is not None and step.rc in (2, 3) and step.crash is None

    def verdicts(self) -> dict[str, str]:
        """A short verdict per step for the table: ok, rc=N, or '!' for a contradiction."""
        return {name: ("ok" if s.rc == 0 else f"rc={s.rc}") + ("!" if s.crash else "") for name, s in self.steps.items()}


def call(argv: list[str], cwd: Path) -> Step:
    """`mbridge-launch ARGV` in this process, in `cwd`, with its output captured."""
    from mbridge_launch.base import i18n
    from mbridge_launch.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    crash = None
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as exc:  # argparse's own errors
                rc = exc.code if isinstance(exc.code, int) else 2
            except BaseException:  # noqa: BLE001 - recorded as a contradiction, never raised
                rc, crash = -1, traceback.format_exc()
    finally:
        os.chdir(before)
        i18n.set_lang(None)
    return Step(list(argv), rc, out.getvalue(), err.getvalue(), crash)


def run_chain(scenario: Any, workdir: Path) -> Outcome:
    workdir.mkdir(parents=True, exist_ok=True)
    result = Outcome(scenario)
    plan_file = workdir / "plan.yaml"
    rec = _step(result, "recommend", call(["recommend", *scenario.args, *_job_flags(workdir), "-o", str(plan_file),
                                           "--format", "json"], workdir))
    if rec.rc != 0:
        if rec.rc not in (2, 3) or "error:" not in rec.err:
            result.contradictions.append(f"recommend exit {rec.rc} without a clear error: {rec.err.strip()[-300:]}")
        return result
    result.answer = rec.json()
    result.plan = yaml.safe_load(plan_file.read_text(encoding="utf-8"))
    _language_neutral(result, workdir)
    _own_pitfalls(result)
    _shipped_layout_kept(result)
    pre = _step(result, "preflight", call(["preflight", str(plan_file), "--no-cluster", "--format", "json"], workdir))
    result.preflight = pre.json()
    _preflight_agrees(result, pre)
    _estimate_agrees(result, workdir)
    for executor in EXECUTORS:
        dry = _step(result, f"dry-run:{executor}",
                    call(["submit", str(plan_file), "--dry-run", "--no-cluster-checks", "--executor", executor],
                         workdir))
        if dry.rc != pre.rc and dry.crash is None:
            result.contradictions.append(f"submit --dry-run --executor {executor} exits {dry.rc}, preflight {pre.rc}: "
                                         f"{dry.err.strip()[-300:]}")
    return result


def _job_flags(workdir: Path) -> list[str]:
    """Where the job starts and saves: a stand-in Megatron Bridge checkout (the training entry
    exists, as on a login node with a checkout) and a checkpoint folder of the test's own."""
    checkout = workdir / "Megatron-Bridge"
    entry = checkout / "scripts" / "training" / "run_recipe.py"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text("# stand-in: the scenario chain renders and checks, it never runs the trainer\n")
    return ["--workdir", str(checkout), "--save-dir", str(workdir / "ckpt")]


def _step(result: Outcome, name: str, step: Step) -> Step:
    result.steps[name] = step
    if step.crash:
        result.contradictions.append(f"{name}: traceback\n{step.crash}")
    elif "internal error" in step.err or "Traceback" in step.err:
        result.contradictions.append(f"{name}: {step.err.strip()[-500:]}")
    elif step.rc not in DOCUMENTED_EXITS:
        result.contradictions.append(f"{name}: undocumented exit {step.rc}")
    return step


def _language_neutral(result: Outcome, workdir: Path) -> None:
    other = workdir / "plan-zh.yaml"
    zh = _step(result, "recommend --lang zh", call(["recommend", *result.scenario.args, *_job_flags(workdir), "-o",
                                                     str(other), "--format", "json", "--lang", "zh"], workdir))
    if zh.rc != 0:
        result.contradictions.append(f"recommend --lang zh exits {zh.rc} where English exits 0")
        return
    theirs = (zh.json() or {}).get("plan_hash")
    ours = (result.answer or {}).get("plan_hash")
    if theirs != ours:
        result.contradictions.append(f"plan hash depends on the language: en {ours}, zh {theirs}")


def _own_pitfalls(result: Outcome) -> None:
    codes = {w["code"] for w in (result.answer or {}).get("warnings", [])}
    for code in LAYOUT_PITFALLS:
        if code in codes:
            result.contradictions.append(f"recommend warns {code} against the layout it chose")


SHIPPED = ("tp", "pp", "vp", "cp", "ep", "mbs", "gbs")


def _shipped_layout_kept(result: Outcome) -> None:
    """A library recipe asked for at its own GPU count and system (and sequence length) is
    recommended as NVIDIA ships it."""
    from mbridge_launch.knowledge.catalog import load_catalog

    plan = result.plan or {}
    recipe = load_catalog().get(plan["recipe"]["name"])
    cluster, p = plan["cluster"], plan["parallelism"]
    if recipe is None or recipe.kind != "library" or not recipe.gpus:
        return
    system = cluster["gpu_type"] if cluster["gpu_type"] != "h200" else "h100"
    same_seq = p["seq_length"] == (recipe.seq_length or recipe.dataset_seq_length)
    if cluster["nodes"] * cluster["gpus_per_node"] != recipe.gpus or system != recipe.hardware or not same_seq:
        return
    if "--smoke-test" in result.scenario.args:
        return  # the smoke test shortens the run on purpose (iterations, checkpoints), not the layout
    shipped = {"tp": recipe.tp or 1, "pp": recipe.pp or 1, "vp": recipe.vp or None, "cp": recipe.cp or 1,
               "ep": recipe.ep or 1, "mbs": recipe.mbs or 1, "gbs": recipe.gbs}
    moved = {k: (shipped[k], p[k]) for k in SHIPPED if shipped[k] != (p[k] or None if k == "vp" else p[k])}
    codes = {w["code"] for w in (result.answer or {}).get("warnings", [])}
    if moved and "SHIPPED_LAYOUT_INVALID" not in codes:  # a shipped layout Megatron itself would stop at
        result.contradictions.append(f"the recipe at its own count and system is not kept as shipped: {moved}")


def _preflight_agrees(result: Outcome, pre: Step) -> None:
    report = result.preflight
    if report is None:
        result.contradictions.append(f"preflight --format json printed no JSON (exit {pre.rc})")
        return
    checks = report.get("checks", [])
    for check in checks:
        if check.get("severity") == "error" and not check["code"].startswith(ENVIRONMENT_FACTS):
            result.contradictions.append(f"preflight rejects the tool's own Plan: {check['code']}: {check.get('message')}")
    errors = [c for c in checks if c.get("severity") == "error"]
    if bool(errors) != (pre.rc == 1):
        result.contradictions.append(f"preflight exit {pre.rc} with {len(errors)} errors")


def estimate_args(plan: dict) -> list[str]:
    """`estimate` flags for the layout a Plan holds (what a user would type to check it)."""
    p, c = plan["parallelism"], plan["cluster"]
    args = ["estimate", "--model", plan["recipe"]["model"], "--gpus", str(c["nodes"] * c["gpus_per_node"]),
            "--gpu-type", c["gpu_type"], "--tp", str(p["tp"]), "--pp", str(p["pp"]), "--cp", str(p["cp"]),
            "--ep", str(p["ep"]), "--mbs", str(p["mbs"]), "--gbs", str(p["gbs"]),
            "--seq-length", str(p["seq_length"]), "--goal", plan["mode"], "--recompute", p["recompute"],
            "--precision", recipe_precision(plan["recipe"]["name"]),
            # the Plan's recipe: its memory settings, as the planner estimated the Plan's layout with them
            "--recipe", plan["recipe"]["name"]]
    if p.get("vp"):
        args += ["--vp", str(p["vp"])]
    if p.get("etp"):
        args += ["--etp", str(p["etp"])]
    if p.get("fsdp"):
        args.append("--fsdp")
    if p.get("distributed_optimizer") is False and not p.get("fsdp"):
        args.append("--no-distributed-optimizer")  # e.g. Kimi-K2's recipe turns it off
    if not p.get("sp") and p["tp"] > 1:
        args.append("--no-sp")
    overrides = {o["key"]: o["value"] for o in plan.get("overrides", [])}
    if overrides.get("model.recompute_method") == "block" and overrides.get("model.recompute_num_layers"):
        args += ["--recompute-layers", overrides["model.recompute_num_layers"]]
    if overrides.get("model.cp_comm_type"):
        args += ["--cp-comm-type", overrides["model.cp_comm_type"]]
    return args + memory_setting_args(plan) + ["--format", "json"]


def memory_setting_args(plan: dict) -> list[str]:
    """The flags for the memory settings the run gets (the Plan's overrides over its recipe's:
    plan.layout.layout_of, as preflight reads them): recompute modules, fp8_param_gather and the
    MoE dispatcher, so that estimate charges what the Plan charges."""
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.plan.layout import layout_of
    from mbridge_launch.plan.model import Plan

    model = Plan.model_validate(plan)
    catalog = load_catalog(version=model.catalog.version)
    recipe = catalog.get(model.recipe.name, kind=model.recipe.kind) or catalog.get(model.recipe.name)
    layout = layout_of(model, recipe_features=getattr(recipe, "features", None))
    args: list[str] = []
    if layout.recompute_modules is not None:
        args += ["--recompute-modules", ",".join(layout.recompute_modules)]
    if layout.fp8_param_gather is not None:
        args.append("--fp8-param-gather" if layout.fp8_param_gather else "--no-fp8-param-gather")
    if layout.moe_dispatcher is not None:
        args += ["--moe-dispatcher", layout.moe_dispatcher]
    return args


PRECISIONS = ("bf16", "fp8cs", "fp8mx", "fp8ds", "fp8sc", "nvfp4")


def recipe_precision(name: str) -> str:
    """The precision in a canonical recipe name (<model>_<task>_<N>gpu_<hw>_<precision>[_variant]_config)."""
    parts = name.split("_")
    return next((p for p in parts if p in PRECISIONS), "bf16")


def _estimate_agrees(result: Outcome, workdir: Path) -> None:
    plan = result.plan or {}
    planned = (plan.get("estimates") or {}).get("memory_gb_per_gpu")
    if planned is None:  # no estimate to compare (benchmark recipes, unknown architectures): the Plan says why
        codes = {w["code"] for w in plan.get("warnings", [])}
        if not any(c.startswith("ESTIMATE_") or c == "ARCH_UNKNOWN" for c in codes):
            result.contradictions.append("the Plan has no estimate and no warning saying why")
        return
    est = _step(result, "estimate", call(estimate_args(plan), workdir))
    result.estimate = est.json()
    # MEMORY_OVER: the user's own overrides made a layout that does not fit (said by recommend too);
    # a shipped layout above HBM by the model (MEMORY_SHIPPED) is never refused by estimate
    warned_over = any(w["code"] == "MEMORY_OVER" for w in (result.answer or {}).get("warnings", []))
    if est.rc != 0 and not warned_over:
        result.contradictions.append(f"estimate refuses the written layout (exit {est.rc}): {est.err.strip()[-300:]}")
        return
    if result.estimate is None:
        return
    measured = _memory_of(result.estimate)
    if measured is not None and abs(measured - planned) > max(0.5, 0.01 * planned):
        result.contradictions.append(f"estimate of the written layout says {measured:.1f} GB per GPU, the Plan {planned:.1f} GB")


def _memory_of(data: dict) -> float | None:
    for key in ("memory_gb_per_gpu", "memory_total_gb"):
        if isinstance(data.get(key), (int, float)):
            return float(data[key])
    memory = data.get("memory_gb") or data.get("memory")
    if isinstance(memory, dict):
        for key in ("total", "total_gb"):
            if isinstance(memory.get(key), (int, float)):
                return float(memory[key])
    return None
