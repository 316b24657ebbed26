"""`estimate`'s recipe memory settings: --recipe NAME, the recipe that ships the given layout, and
one flag per setting (planner.recipe_settings: CPU activation offloading, fine-grained offload
modules, the precision-aware optimizer, optimizer CPU offload, per-layer CUDA graphs, fused cross
entropy). A flag the user gives wins over the recipe's value; each setting used is said on one line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

# Megatron Core transformer_config.py (fine_grained_activation_offloading's allowed_modules)
OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act",
                   "fused_group_mlp")
# the Megatron setting each Layout field stands for (shown to the user)
SETTING_NAMES = {
    "cpu_offload_layers": "model.cpu_offloading_num_layers",
    "offload_modules": "model.offload_modules",
    "optimizer_bytes": "optimizer.use_precision_aware_optimizer",
    "optimizer_offload_fraction": "optimizer.optimizer_offload_fraction",
    "grad_bytes": "ddp.grad_reduce_in_fp32",
    "cuda_graph_scope": "model.cuda_graph_scope",
    "ce_fusion": "model.cross_entropy_loss_fusion",
    "mtp_layers": "model.mtp_num_layers",
    "frozen_language": "model.freeze_language_model",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.options import int_arg

    parser.add_argument("--recipe", metavar="NAME", help=t("help.estimate.recipe"))
    parser.add_argument("--cpu-offloading-num-layers", type=int_arg(1), metavar="N",
                        help=t("help.estimate.cpu_offloading_num_layers"))
    parser.add_argument("--offload-modules", metavar="M1,M2", help=t("help.estimate.offload_modules"))
    parser.add_argument("--precision-aware-optimizer", action=argparse.BooleanOptionalAction, default=None,
                        help=t("help.estimate.precision_aware_optimizer"))
    parser.add_argument("--optimizer-offload-fraction", metavar="F", help=t("help.estimate.optimizer_offload_fraction"))
    parser.add_argument("--cuda-graph-scope", metavar="S1,S2", help=t("help.estimate.cuda_graph_scope"))
    parser.add_argument("--cross-entropy-fusion", action=argparse.BooleanOptionalAction, default=None,
                        help=t("help.estimate.cross_entropy_fusion"))


@dataclass
class Chosen:
    """The settings to estimate with, where each comes from: the recipe (named or matched) or a flag."""

    changes: dict[str, Any] = field(default_factory=dict)  # Layout field -> value
    recipe: str | None = None
    from_recipe: list[str] = field(default_factory=list)  # Layout fields the recipe set

    def lines(self) -> list[Any]:
        """One message per setting taken from the recipe (base.i18n.Msg)."""
        from mbridge_launch.base.i18n import Msg

        return [Msg("planner.recipe_setting", recipe=self.recipe, setting=SETTING_NAMES[name],
                    value=_shown(name, self.changes[name])) for name in self.from_recipe]

    def as_json(self) -> dict[str, Any]:
        return {"recipe": self.recipe,
                "settings": {SETTING_NAMES[name]: _shown(name, value) for name, value in self.changes.items()},
                "from_recipe": [SETTING_NAMES[name] for name in self.from_recipe]}


def _shown(name: str, value: Any) -> str:
    if name == "grad_bytes":
        return "true" if value >= 4 else "false"
    if name == "optimizer_bytes":
        return f"true ({value:g} B/param)"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def choose(args: argparse.Namespace, model: str, hardware: Any, precision: str, goal: str, layout: Any,
           num_layers: int) -> Chosen:
    """The recipe's settings (--recipe, else the library or benchmark recipe that ships exactly this
    layout at this count and system) under the user's flags."""
    from mbridge_launch.planner.recipe_settings import SWITCH_OFF, memory_settings, rejected_beside

    recipe = _named(args.recipe, model) if args.recipe else _matching(model, hardware, precision, goal, layout)
    chosen = Chosen(recipe=recipe.name if recipe is not None else None)
    if recipe is not None:
        for name, value in memory_settings(recipe.features, precision).items():
            if name == "cpu_offload_layers" and not _offload_allowed(layout, value, num_layers):
                continue  # Megatron rejects offloading at this layout: the recipe's layout differs
            if name in SWITCH_OFF and rejected_beside(name, layout):
                continue  # e.g. per-layer CUDA graphs beside full recompute: a Plan switches them off
            chosen.changes[name] = value
            chosen.from_recipe.append(name)
    flags = _flags(args, precision)
    chosen.changes.update(flags)
    chosen.from_recipe = [n for n in chosen.from_recipe if n not in flags]
    offload = chosen.changes.get("cpu_offload_layers")
    if offload is not None and "cpu_offload_layers" in flags and not _offload_allowed(layout, offload, num_layers):
        from mbridge_launch.base.errors import UserError

        raise UserError("planner.cpu_offloading_refused", pp=layout.pp, recompute=layout.recompute, layers=offload,
                        num_layers=num_layers)
    if chosen.changes.get("cuda_graph_scope") and "cuda_graph_scope" in flags and rejected_beside("cuda_graph_scope", layout):
        from mbridge_launch.base.errors import UserError

        raise UserError("planner.cuda_graphs_refused", scope=",".join(chosen.changes["cuda_graph_scope"]))
    return chosen


def _offload_allowed(layout: Any, layers: int, num_layers: int) -> bool:
    """Megatron Core transformer_config.py __post_init__: CPU offloading needs PP 1, no recompute
    and fewer offloaded layers than the model has."""
    return layout.pp == 1 and layout.recompute == "none" and 0 < layers < num_layers


def _named(name: str, model: str) -> Any:
    """The recipe `name`, which must train `model`: another model's settings (its MTP depth, its
    optimizer) would be charged to this one."""
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.knowledge.models import resolve_model

    recipe = load_catalog().require(name)  # an unknown name: UserError with the closest names
    try:
        same = resolve_model(recipe.model or "") == resolve_model(model)
    except UserError:
        same = recipe.model == model
    if not same:
        raise UserError("estimate.recipe_other_model", recipe=recipe.name, recipe_model=recipe.model, model=model)
    return recipe


def _matching(model: str, hardware: Any, precision: str, goal: str, layout: Any) -> Any:
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.plan.shipped import shipped_recipe_for_layout
    from mbridge_launch.planner.nvidia_layout import benchmark_recipe, recipe_layout

    catalog = load_catalog()
    name = shipped_recipe_for_layout(model, hardware.name, layout)
    if name is not None:
        return catalog.get(name)
    bench = benchmark_recipe(catalog.recipes, model, hardware.name, layout.world or 0, precision, goal,
                             layout.seq_length)
    if bench is None:
        return None
    own = recipe_layout(bench)
    grid = lambda L: (L.tp, L.pp, L.vp_size, L.cp, L.ep, L.mbs, bool(L.fsdp))  # noqa: E731
    return bench if grid(own) == grid(layout) else None


def _flags(args: argparse.Namespace, precision: str) -> dict[str, Any]:
    from mbridge_launch.base.errors import UserError
    from mbridge_launch.planner.recipe_settings import FP32_ADAM_BYTES, LAYER_SCOPES, optimizer_bytes

    out: dict[str, Any] = {}
    if args.cpu_offloading_num_layers is not None:
        out["cpu_offload_layers"] = args.cpu_offloading_num_layers
    if args.offload_modules is not None:
        modules = tuple(m.strip() for m in args.offload_modules.split(",") if m.strip())
        bad = [m for m in modules if m not in OFFLOAD_MODULES]
        if bad or not modules:
            raise UserError("arg.choice", flag="--offload-modules", value=",".join(bad) or args.offload_modules,
                            choices=", ".join(OFFLOAD_MODULES))
        out["offload_modules"] = modules
    if args.precision_aware_optimizer is not None:
        # the recipes' precision-aware optimizer: bf16 Adam moments, fp32 master weights
        features = {"use_precision_aware_optimizer": args.precision_aware_optimizer, "exp_avg_dtype": "torch.bfloat16",
                    "exp_avg_sq_dtype": "torch.bfloat16"}
        out["optimizer_bytes"] = optimizer_bytes(features, precision) or FP32_ADAM_BYTES
    if args.optimizer_offload_fraction is not None:
        try:
            fraction = float(args.optimizer_offload_fraction)
        except ValueError:
            fraction = -1.0
        if not 0.0 <= fraction <= 1.0:
            raise UserError("planner.bad_fraction", flag="--optimizer-offload-fraction",
                            value=args.optimizer_offload_fraction)
        out["optimizer_offload_fraction"] = fraction
    if args.bf16_grads:
        out["grad_bytes"] = 2.0
    if args.cuda_graph_scope is not None:
        scopes = tuple(s.strip() for s in args.cuda_graph_scope.split(",") if s.strip())
        valid = (*LAYER_SCOPES, "full")
        bad = [s for s in scopes if s not in valid]
        if bad or not scopes:
            raise UserError("arg.choice", flag="--cuda-graph-scope", value=",".join(bad) or args.cuda_graph_scope,
                            choices=", ".join(valid))
        out["cuda_graph_scope"] = scopes
    if args.cross_entropy_fusion is not None:
        out["ce_fusion"] = args.cross_entropy_fusion
    if args.mtp_layers is not None:  # estimate's own --mtp-layers (the step model reads it too)
        out["mtp_layers"] = args.mtp_layers
    return out
