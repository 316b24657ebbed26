"""Turn `plan` / `estimate` arguments into planner inputs (model, architecture, system,
precision, goal, default batch and sequence), with one clear UserError for each bad input."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.hardware import Hardware, get_hardware
from mbridge_launch.knowledge.models import (
    ModelArch,
    cached_config_for,
    load_arch,
    local_model_path,
    require_planning_arch,
    resolve_model,
)
from mbridge_launch.knowledge.vocabulary import normalize_goal, normalize_precision, recipe_task


@dataclass(frozen=True)
class Inputs:
    model: str
    arch: ModelArch
    hardware: Hardware
    precision: str
    goal: str


def positive(flag: str, value: Any) -> int | None:
    """A positive integer flag, no larger than the rules accept for that size."""
    if value is None:
        return None
    if not isinstance(value, int) or value <= 0:
        raise UserError("planner.bad_number", flag=flag, value=value)
    return within_size_limit(flag, value, "world" if flag == "--gpus" else flag.lstrip("-").replace("-", "_"))


def within_size_limit(flag: str, value: int, size: str) -> int:
    """`value` of `flag`, or one clear error when it is beyond rules.size_limit(size): the rules
    would otherwise spend hours listing the divisors of a 20-digit number."""
    from mbridge_launch.planner.rules import size_limit

    if value > size_limit(size):
        raise UserError("planner.rule.size_limit", name=flag, value=value, limit=size_limit(size))
    return value


_TOKEN_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def token_count(flag: str, text: Any) -> float | None:
    """A token budget: a positive number, optionally with a K/M/B/T suffix ('15T', '1e12')."""
    if text is None:
        return None
    raw = str(text).strip().lower()
    scale = _TOKEN_SUFFIXES.get(raw[-1:], 1.0)
    try:
        value = float(raw[:-1] if raw[-1:] in _TOKEN_SUFFIXES else raw) * scale
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise UserError("planner.bad_tokens", flag=flag, value=text)
    return value


def resolve(model_text: str, gpu_type: str, precision: str | None, goal: str | None,
            hf_config: str | None = None) -> Inputs:
    hardware = get_hardware(gpu_type)
    prec = normalize_precision(precision or "bf16", flag="--precision")
    hardware.check_precision(prec)
    if not hf_config and local_model_path(model_text):
        hf_config, model_text = model_text, ""  # --model /path/to/checkpoint, like from_pretrained
    elif not hf_config:
        hf_config = cached_config_for(model_text)  # an HF id the catalog cannot plan, cached locally
    if hf_config:
        from mbridge_launch.knowledge.hf_config import arch_from_hf_config

        arch = arch_from_hf_config(hf_config)
        model = arch.name
        if model_text:
            try:
                model = resolve_model(model_text)
            except UserError:
                model = model_text
    else:
        if not model_text:
            raise UserError("arg.invalid", flag="--model", reason="required (or --hf-config PATH)")
        model = resolve_model(model_text)
        arch = load_arch(model)
    arch = require_planning_arch(arch, model)
    return Inputs(model, arch, hardware, prec, normalize_goal(goal))


def recipe_defaults(model: str, goal: str) -> dict[str, int]:
    """GBS and sequence length of the model's library recipe for the goal, when the recipe
    catalog is available (a user who does not say keeps the recipe's convergence settings)."""
    try:
        from mbridge_launch.knowledge.catalog import load_catalog

        catalog = load_catalog()
    except (ImportError, UserError, OSError):
        return {}
    mode = recipe_task(goal)
    recipes = [r for r in getattr(catalog, "recipes", []) if getattr(r, "kind", None) == "library"
               and getattr(r, "model", None) == model and getattr(r, "mode", None) == mode
               and not getattr(r, "raises_not_implemented", False)]
    plain = [r for r in recipes if not getattr(r, "variant", None)] or recipes
    for recipe in plain:
        out = {}
        if getattr(recipe, "gbs", None):
            out["gbs"] = int(recipe.gbs)
        seq = getattr(recipe, "seq_length", None) or getattr(recipe, "dataset_seq_length", None)
        if seq:
            out["seq_length"] = int(seq)
        if out:
            return out
    return {}


def default_gbs(gpus: int) -> int:
    """Without a recipe: the smallest power of two that is at least 512 and at least the GPU count."""
    gbs = 512
    while gbs < gpus:
        gbs *= 2
    return gbs
