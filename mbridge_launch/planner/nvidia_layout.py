"""NVIDIA's tuned layout for a `plan` request: the Megatron Bridge benchmark (perf) recipe of the
same model, system (GPU type), GPU count, precision and task, when the shipped catalog has one.

`plan` shows it apart from its ranked candidates, with our estimate of it and whether our rules or
our memory model reject it, so a user sees both what NVIDIA runs and what the planner predicts;
the accuracy benchmarks score the ranked candidates only (benchmarks/accuracy.py uses search()).

`benchmark_recipe` and `recipe_layout` are pure (the caller passes the recipes); `nvidia_option`
adds the estimate. The layout is estimated at the request's GBS and sequence length (the ranked
candidates' batch, so the figures compare); the recipe's own are carried beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from mbridge_launch.knowledge.vocabulary import recipe_task
from mbridge_launch.planner.pipeline_split import recipe_split, settle
from mbridge_launch.planner.recipe_settings import memory_settings
from mbridge_launch.planner.recompute import MEGATRON_DEFAULT, parse_modules
from mbridge_launch.planner.rules import Layout, check_layout, divisors, evolve

# the catalog whose benchmark recipes are NVIDIA's published tuning (catalog/megatron-bridge-<v>.json)
CATALOG_VERSION = "0.6.2"


def _on(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


def benchmark_recipe(recipes: Iterable[Any], model: str, system: str, gpus: int, precision: str, goal: str,
                     seq_length: Optional[int] = None) -> Any:
    """The benchmark recipe for exactly this model, system, GPU count, precision and task (the
    goal's recipe task: lora/dora -> peft), or None. Several (sequence-length or other variants):
    the one at `seq_length`, then the one without a variant, then by name."""
    task = recipe_task(goal)
    found = [r for r in recipes if getattr(r, "kind", None) == "benchmark" and r.model == model
             and r.hardware == system and r.gpus == gpus and r.precision == precision and r.mode == task
             and not r.raises_not_implemented]
    if not found:
        return None

    def key(r: Any) -> tuple:
        seq = r.seq_length or r.dataset_seq_length
        return (seq_length is not None and seq != seq_length, bool(r.variant), r.name)

    return min(found, key=key)


def recipe_layout(recipe: Any, arch: Any = None, *, gbs: Optional[int] = None, seq_length: Optional[int] = None,
                  gpus_per_node: Optional[int] = None) -> Layout:
    """The recipe's layout as the planner reads it: TP/PP/VP/CP/EP/ETP/SP/MBS, its recompute,
    Megatron-FSDP, FP8 weight gather, MoE dispatcher and pipeline split (from its stored
    settings), at `gbs` / `seq_length` when given (else the recipe's own)."""
    f = recipe.features or {}
    granularity = str(f.get("recompute_granularity") or "none").strip().lower()
    recompute = granularity if granularity in ("selective", "full") else "none"
    layers = None
    if recompute == "full" and str(f.get("recompute_method") or "").strip().lower() == "block":
        text = str(f.get("recompute_num_layers") or "").strip()
        layers = int(text) or None if text.isdigit() else None  # unset or unreadable: every layer
    modules = None
    if recompute == "selective":
        modules = parse_modules(f.get("recompute_modules")) or MEGATRON_DEFAULT
    dispatcher = f.get("moe_token_dispatcher_type")
    if dispatcher is not None:
        dispatcher = str(dispatcher).strip().lower()
        if dispatcher == "flex":
            dispatcher = str(f.get("moe_flex_dispatcher_backend") or "deepep").strip().lower()
    gather = f.get("fp8_param_gather")
    cp = recipe.cp or 1
    layout = Layout(
        tp=recipe.tp or 1, pp=recipe.pp or 1, vp=recipe.vp if (recipe.vp or 1) > 1 else None, cp=cp,
        ep=recipe.ep or 1, etp=recipe.etp,  # None: Bridge's default (Layout.etp_size)
        sp=bool(recipe.sp) if recipe.sp is not None else (recipe.tp or 1) > 1,
        mbs=recipe.mbs or 1, gbs=gbs or recipe.gbs or 1,
        seq_length=seq_length or recipe.seq_length or recipe.dataset_seq_length or 4096,
        world=recipe.gpus, gpus_per_node=gpus_per_node, recompute=recompute, recompute_layers=layers,
        recompute_modules=modules, fsdp=_on(f.get("use_megatron_fsdp")),
        fp8_param_gather=None if gather is None else _on(gather), moe_dispatcher=dispatcher,
        cp_comm_type=f.get("cp_comm_type") or ("p2p" if cp > 1 else None),
    )
    # the recipe's memory settings (offloading, optimizer dtypes, gradient dtype, CUDA graphs, fused
    # cross entropy): estimated as NVIDIA runs it
    layout = evolve(layout, **memory_settings(f, recipe.precision or "bf16"))
    split = recipe_split(recipe)
    keep = split if split.uneven and "pipeline_model_parallel_layout" not in (recipe.unresolved or ()) else None
    return settle(layout, arch, keep=keep) if arch is not None else layout


@dataclass(frozen=True)
class NvidiaOption:
    """NVIDIA's layout for the request, our estimate of it and what our rules say."""

    recipe: Any
    layout: Layout
    estimate: Any  # search.Candidate, or None when the architecture lacks what the estimate needs
    rule_errors: tuple[Any, ...]  # rules.Violation (errors only)
    rank: Optional[int]  # its grid's rank in the ranked candidates (1-based), None when absent

    @property
    def fits(self) -> bool:
        return bool(self.estimate is not None and self.estimate.fits)

    @property
    def accepted(self) -> bool:
        """Our rules and memory model both accept it."""
        return self.fits and not self.rule_errors


def _grid(layout: Layout) -> tuple:
    return (layout.tp, layout.pp, layout.cp, layout.ep, layout.etp_size, layout.fsdp)


def ranked_position(layout: Layout, candidates: Iterable[Any]) -> Optional[int]:
    """Where the layout's grid (TP, PP, CP, EP, ETP, FSDP) comes in the ranked list (one entry
    per grid, each with its best MBS/VP/recompute), or None."""
    want = _grid(layout)
    return next((i for i, c in enumerate(candidates, 1) if _grid(c.layout) == want), None)


def nvidia_option(recipes: Iterable[Any], model: str, arch: Any, hardware: Any, gpus: int, *, precision: str,
                  goal: str, gbs: int, seq_length: int, candidates: Iterable[Any] = (), grad_bytes: float = 4.0,
                  cal: Any = None) -> Optional[NvidiaOption]:
    """NVIDIA's tuned layout for the request with our estimate (None when no benchmark recipe matches)."""
    from mbridge_launch.planner.search import estimate_layout

    recipe = benchmark_recipe(recipes, model, hardware.name, gpus, precision, goal, seq_length)
    if recipe is None:
        return None
    layout = recipe_layout(recipe, arch, gbs=gbs, seq_length=seq_length, gpus_per_node=hardware.gpus_per_node)
    layout = evolve(layout, world=gpus)
    errors = [v for v in check_layout(layout, arch, hardware) if v.severity == "error"]
    if layout.tp > hardware.nvlink_domain:  # the search's own rule (search.RULE_TP_NVLINK)
        from mbridge_launch.planner.rules import Violation

        errors.append(Violation(code="RULE_TP_NVLINK", key="planner.rule.tp_nvlink", field="tp",
                                params={"tp": layout.tp, "domain": hardware.nvlink_domain, "gpu": hardware.label,
                                        "valid": ", ".join(str(d) for d in divisors(hardware.nvlink_domain))}))
    from mbridge_launch.planner.measured import shipped_for

    estimate = estimate_layout(layout, arch, hardware, precision=precision, goal=goal, grad_bytes=grad_bytes, cal=cal,
                               measured=shipped_for(arch.name, hardware.name, gpus, precision))
    return NvidiaOption(recipe, layout, estimate, tuple(errors), ranked_position(layout, candidates))


def shipped_recipes() -> list[Any]:
    """The recipes of the shipped 0.6.2 catalog ([] when it is not there)."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.catalog import load_catalog

    try:
        return list(load_catalog(CATALOG_VERSION).recipes)
    except (UserError, OSError):
        return []
