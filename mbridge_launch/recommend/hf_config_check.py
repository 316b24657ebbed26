"""--hf-config honesty: the config describes what the planner estimates, not what the recipe trains.

A recipe builds its own model (its model provider); Megatron Bridge's run_recipe.py has no flag
that points a recipe at another Hugging Face config, only `model.*` overrides of the provider's
fields. So `recommend --model llama3_8b --hf-config DIR` with a config that is not llama3_8b is
answered, not refused (it is the way to estimate a new architecture on an existing recipe), with
the warning HF_CONFIG_NOT_RECIPE_MODEL, recorded in the Plan: both architectures, and the `model.*`
overrides that would make the recipe train the config's shape. An unknown model name with a config
is refused with the recipe models nearest to the config's architecture and how to proceed.
"""

from __future__ import annotations

import math
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.i18n import Msg, msg

# ModelArch field -> the Megatron Core provider field a recipe override sets (model.<name>)
_COMPARED = (("num_layers", "num_layers"), ("hidden_size", "hidden_size"),
             ("num_attention_heads", "num_attention_heads"), ("kv_groups", "num_query_groups"),
             ("ffn_hidden_size", "ffn_hidden_size"), ("num_moe_experts", "num_moe_experts"))
NEAREST = 3


def arch_summary(arch: Any) -> Msg:
    """'32 layers, hidden size 4096, 32 attention heads (8 KV), FFN 14336' (with experts for MoE)."""
    params = {"layers": arch.num_layers, "hidden": arch.hidden_size, "heads": arch.num_attention_heads,
              "kv": arch.kv_groups, "ffn": arch.expert_ffn if arch.is_moe else (arch.ffn_hidden_size or "-")}
    if arch.is_moe:
        return msg("models.arch_summary_moe", experts=arch.num_moe_experts, **params)
    return msg("models.arch_summary", **params)


def differences(config_arch: Any, recipe_arch: Any) -> list[tuple[str, Any]]:
    """(Megatron field, the config's value) for each compared field where the two differ."""
    out = []
    for attr, field in _COMPARED:
        mine, theirs = getattr(config_arch, attr), getattr(recipe_arch, attr)
        if attr == "num_moe_experts":
            mine, theirs = mine or 0, theirs or 0
        if mine != theirs:
            out.append((field, mine if mine is not None else "null"))
    return out


def mismatch_warning(model: str, recipe: Any, config_arch: Any, hf_config: str | None) -> tuple[str, Msg] | None:
    """HF_CONFIG_NOT_RECIPE_MODEL when --hf-config describes another architecture than the
    recipe's model (as catalog/models.yaml knows it); None when they agree or there is nothing to
    compare with."""
    from mbridge_launch.knowledge.models import load_arch

    if not hf_config or config_arch is None:
        return None
    recipe_arch = load_arch(model)
    if recipe_arch is None:
        return None
    diff = differences(config_arch, recipe_arch)
    if not diff:
        return None
    overrides = " ".join(f"model.{field}={value}" for field, value in diff)
    return ("HF_CONFIG_NOT_RECIPE_MODEL",
            msg("pitfall.hf_config_not_recipe_model", path=hf_config, config=arch_summary(config_arch), model=model,
                model_arch=arch_summary(recipe_arch), recipe=recipe.name, overrides=overrides))


def _distance(a: Any, b: Any) -> float:
    """Architecture distance: log ratios of size, depth and width; dense and MoE far apart."""
    d = abs(math.log(max(a.total_params, 1) / max(b.total_params, 1)))
    d += 0.5 * abs(math.log(a.num_layers / b.num_layers)) + 0.5 * abs(math.log(a.hidden_size / b.hidden_size))
    return d + (3.0 if a.is_moe != b.is_moe else 0.0)


def recipe_model_modality(token: str, recipes: list[Any]) -> str:
    """What a recipe model reads, in hf_modality's words: 'omni', 'audio', 'vision' (its recipes
    are vision-language ones) or 'text' (diffusion models are not planned from a config)."""
    from mbridge_launch.recommend.pitfalls import is_vlm

    if "omni" in token:
        return "omni"
    if "audio" in token:
        return "audio"
    return "vision" if any(is_vlm(r) for r in recipes if r.model == token) else "text"


def nearest_recipe_models(config_arch: Any, family: str = "", limit: int = NEAREST,
                          modality: str = "text") -> list[str]:
    """Recipe models nearest to the config's architecture: the same modality first (a text model's
    nearest are text models, however close a vision-language one is in size), then the same
    family (the config's model_type, e.g. 'llama', 'qwen3', matched on the model token or the
    recipes' family), then by size, depth and width."""
    from mbridge_launch.knowledge.catalog import load_catalog
    from mbridge_launch.knowledge.models import load_arch

    recipes = load_catalog().recipes
    recipes = list(recipes.values() if isinstance(recipes, dict) else recipes)
    models = sorted({r.model for r in recipes if r.model})
    families = {r.model: (r.family or "").lower() for r in recipes if r.model}
    stem = "".join(ch for ch in family.lower().split("_")[0] if ch.isalpha())
    scored = []
    for token in models:
        arch = load_arch(token)
        if arch is None or arch.missing:
            continue
        same_family = bool(stem) and (token.startswith(stem) or families.get(token, "").startswith(stem))
        other_modality = recipe_model_modality(token, recipes) != modality
        scored.append((other_modality, not same_family, _distance(config_arch, arch), token))
    return [token for *_, token in sorted(scored)[:limit]]


def resolve_model_for(request: Any) -> str:
    """The recipe model the request names. With --hf-config, a name no recipe trains is refused
    with the recipe models nearest to the config's architecture (not 'pass --hf-config', which
    the user did)."""
    from mbridge_launch.knowledge.hf_config import arch_from_hf_config, hf_modality, hf_model_type
    from mbridge_launch.knowledge.models import UNKNOWN_MODEL_KEYS, resolve_model

    try:
        return resolve_model(request.model)
    except UserError as exc:
        if not request.hf_config or exc.key not in UNKNOWN_MODEL_KEYS:
            raise
    config_arch = arch_from_hf_config(request.hf_config)
    nearest = nearest_recipe_models(config_arch, hf_model_type(request.hf_config),
                                    modality=hf_modality(request.hf_config))
    raise UserError("recommend.hf_config_no_recipe", model=request.model, path=request.hf_config,
                    config=arch_summary(config_arch).render(), nearest=", ".join(nearest) or "-",
                    example=nearest[0] if nearest else "MODEL")
