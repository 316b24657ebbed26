"""Runs in the tier's env: the architecture values the real Megatron Bridge 0.6.2 states itself,
one JSON object {model token: {Megatron field: value}} on stdout.

Two kinds, both read from the installed package (nothing built, no HF config needed):
- provider dataclass defaults where a provider class carries a model's sizes (Gemma 2's
  vocabulary and head size, Gemma 4 E4B and 26B-A4B, Step-3.5's config class);
- the literal keyword arguments of the providers that recipes construct themselves
  (HybridModelProvider(...) of the Nemotron-H / Nano v2 / Nano 3 4B recipes, GPTModelProvider(...)
  of GPT-3 175B), read from the recipe function's source with ast.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import sys
from pathlib import Path

# the tier's Transformer Engine import shim (as build_recipe.py): recipe modules import TE
sys.path.insert(0, str(Path(__file__).resolve().parent / "shim"))

FIELDS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
          "vocab_size", "hybrid_layer_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_num_groups",
          "mamba_state_dim", "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
          "moe_shared_expert_intermediate_size", "share_embeddings_and_output_weights", "per_layer_embed_dim",
          "per_layer_embed_vocab_size")
DEFAULTS = {  # model token -> provider class whose dataclass defaults are that model
    "gemma4_e4b": ("megatron.bridge.models.gemma.gemma4_provider", "Gemma4DenseProvider", None),
    "gemma4_vl_26b": ("megatron.bridge.models.gemma.gemma4_provider", "Gemma4ModelProvider",
                      ("kv_channels", "num_query_groups", "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
                       "moe_shared_expert_intermediate_size", "share_embeddings_and_output_weights")),
    "gemma2_2b": ("megatron.bridge.models.gemma.gemma2_provider", "Gemma2ModelProvider", ("vocab_size", "kv_channels")),
    "gemma2_9b": ("megatron.bridge.models.gemma.gemma2_provider", "Gemma2ModelProvider", ("vocab_size", "kv_channels")),
}
RECIPES = {  # model token -> (recipe module, function) that constructs its provider with literals
    "nemotronh_4b": ("megatron.bridge.recipes.nemotronh.h100.nemotronh", "nemotronh_4b_pretrain_1gpu_h100_bf16_config"),
    "nemotronh_8b": ("megatron.bridge.recipes.nemotronh.h100.nemotronh", "nemotronh_8b_pretrain_2gpu_h100_bf16_config"),
    "nemotronh_47b": ("megatron.bridge.recipes.nemotronh.h100.nemotronh", "nemotronh_47b_pretrain_8gpu_h100_bf16_config"),
    "nemotronh_56b": ("megatron.bridge.recipes.nemotronh.h100.nemotronh", "nemotronh_56b_pretrain_8gpu_h100_bf16_config"),
    "nemotron_nano_9b_v2": ("megatron.bridge.recipes.nemotronh.h100.nemotron_nano_v2",
                            "nemotron_nano_9b_v2_pretrain_2gpu_h100_bf16_config"),
    "nemotron_nano_12b_v2": ("megatron.bridge.recipes.nemotronh.h100.nemotron_nano_v2",
                             "nemotron_nano_12b_v2_pretrain_4gpu_h100_bf16_config"),
    "gpt3_175b": ("megatron.bridge.recipes.gpt.h100.gpt3_175b", "gpt3_175b_pretrain_32gpu_h100_bf16_config"),
}
STEP35 = ("megatron.bridge.models.stepfun.configuration_step35", "Step35Config")
STEP35_KEYS = {"num_hidden_layers": "num_layers", "hidden_size": "hidden_size", "intermediate_size": "ffn_hidden_size",
               "num_attention_heads": "num_attention_heads", "vocab_size": "vocab_size",
               "moe_intermediate_size": "moe_ffn_hidden_size", "moe_num_experts": "num_moe_experts",
               "moe_top_k": "moe_router_topk", "head_dim": "kv_channels"}
RENAMED = {"hybrid_override_pattern": "hybrid_layer_pattern"}


def _defaults(module: str, cls: str, only) -> dict:
    klass = getattr(importlib.import_module(module), cls)
    out = {}
    for field in dataclasses.fields(klass):
        name = RENAMED.get(field.name, field.name)
        if name in FIELDS and (only is None or name in only) and field.default is not dataclasses.MISSING:
            out[name] = field.default
    return out


def _recipe_literals(module: str, function: str) -> dict:
    tree = ast.parse(inspect.getsource(getattr(importlib.import_module(module), function)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "").endswith("ModelProvider"):
            out = {}
            for kw in node.keywords:
                name = RENAMED.get(kw.arg, kw.arg)
                if name in FIELDS:
                    try:
                        out[name] = ast.literal_eval(kw.value)
                    except ValueError:
                        continue
            return out
    return {}


def main() -> None:
    values = {token: _defaults(*spec) for token, spec in DEFAULTS.items()}
    values.update({token: _recipe_literals(*spec) for token, spec in RECIPES.items()})
    params = inspect.signature(getattr(importlib.import_module(STEP35[0]), STEP35[1]).__init__).parameters
    values["step35_196b_a11b"] = {STEP35_KEYS[k]: p.default for k, p in params.items() if k in STEP35_KEYS}
    json.dump(values, sys.stdout)
    print()


if __name__ == "__main__":
    main()
