"""What a model's bridge fixes when `AutoBridge.from_hf_pretrained(ID).to_megatron_provider()` runs
(the provider path) or `.get_model_config()` runs (the builder path, new in 0.7: the Llama recipes
use it).

The real call picks the bridge registered for the HF config's architecture
(`@MegatronModelBridge.register_bridge(source=Qwen3MoeForCausalLM, provider=..., ...)`), builds
the bridge's provider class from the HF config and then runs the bridge's `provider_bridge`, which
sets execution settings as literals (`provider.moe_token_dispatcher_type = "alltoall"`). Without
this, a static reader sees a bare TransformerConfig and misses them: Qwen3-VL's provider class
defaults `cp_comm_type` to "p2p", MoE bridges choose their dispatcher, dense bridges leave the
dispatcher fields at Megatron Core's defaults.

Only the settings of `BRIDGE_FIELDS` are taken (the architecture itself still comes from the HF
config, which the wheel does not contain). A field that a bridge assigns from a non-literal value
or inside a branch or loop is unknown; an assignment inside a helper the bridge calls is not seen
(the conformance tier, tests/bridge/test_catalog_conformance.py, checks the result). The HF id -> architecture table is the one fact from outside
the wheel: the `architectures` entry of each model's published config.json.

The builder path (`get_model_config`) does not run `provider_bridge`: the bridge's
`hf_config_to_model_config_kwargs` chain fills a flat dict that `hf_config_to_model_config`
splits between the bridge's MODEL_CONFIG_CLASS and TRANSFORMER_CONFIG_CLASS; the model config then
forwards flat assignments (`cfg.model.tensor_model_parallel_size = 2`) to the field's owner, so a
static reader can treat it as one flat object, as it does the provider.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

# execution settings a bridge may fix; the MoE dispatcher trio is not an execution field for a
# bare HF provider (MoE bridges set it), but it is one once the bridge is known
from mbridge_launch.catalog_sync.mcore_defaults import (
    BRIDGE_FIELDS,  # noqa: E402,F401  (objects.py reads it too)
    )
from mbridge_launch.catalog_sync.values import ClassValue, FuncValue, Unknown

GPT_PROVIDER = ("megatron.bridge.models.gpt_provider", "GPTModelProvider")
BRIDGE_PACKAGE = "megatron/bridge/models/"

_ARCHITECTURE_IDS = {
    "LlamaForCausalLM": (
        "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B",
        "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B", "meta-llama/Meta-Llama-3.1-8B",
        "meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-405B",
    ),
    "Qwen2ForCausalLM": (
        "Qwen/Qwen2-0.5B", "Qwen/Qwen2-1.5B", "Qwen/Qwen2-7B", "Qwen/Qwen2-72B", "Qwen/Qwen2.5-0.5B",
        "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-72B",
    ),
    "Qwen3ForCausalLM": (
        "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B",
    ),
    "Qwen3MoeForCausalLM": ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B"),
    "Qwen3NextForCausalLM": ("Qwen/Qwen3-Next-80B-A3B-Instruct",),
    "Qwen2_5_VLForConditionalGeneration": (
        "Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-32B-Instruct",
        "Qwen/Qwen2.5-VL-72B-Instruct",
    ),
    "Qwen3VLForConditionalGeneration": ("Qwen/Qwen3-VL-8B-Instruct",),
    "Qwen3VLMoeForConditionalGeneration": ("Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Instruct"),
    "Qwen3_5ForConditionalGeneration": (
        "Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-2B", "Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-9B-Base",
        "Qwen/Qwen3.5-27B",
    ),
    "Qwen3_5MoeForConditionalGeneration": (
        "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B-Base", "Qwen/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-397B-A17B",
    ),
    "Exaone4ForCausalLM": ("LGAI-EXAONE/EXAONE-4.0-1.2B",),
    "OlmoeForCausalLM": ("allenai/OLMoE-1B-7B-0924",),
    "DeepseekV2ForCausalLM": ("deepseek-ai/DeepSeek-V2", "deepseek-ai/DeepSeek-V2-Lite"),
    "DeepseekV3ForCausalLM": ("deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct", "moonshotai/Moonlight-16B-A3B"),
    "DeepseekV4ForCausalLM": ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro"),
    "Gemma2ForCausalLM": ("google/gemma-2-2b", "google/gemma-2-9b", "google/gemma-2-27b"),
    "Gemma3ForCausalLM": ("google/gemma-3-1b-pt",),
    "Gemma3ForConditionalGeneration": ("google/gemma-3-4b-it", "google/gemma-3-12b-it", "google/gemma-3-27b-it"),
    "Mistral3ForConditionalGeneration": (
        "mistralai/Ministral-3-3B-Instruct-2512", "mistralai/Ministral-3-8B-Instruct-2512",
        "mistralai/Ministral-3-14B-Instruct-2512",
    ),
    "NemotronHForCausalLM": (
        "nvidia/NVIDIA-Nemotron-3-Nano-4B-BF16", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
        "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-Nano-9B-v2-Base",
        "nvidia/NVIDIA-Nemotron-Nano-12B-v2-Base", "nvidia/Nemotron-H-4B-Base-8K", "nvidia/Nemotron-H-8B-Base-8K",
        "nvidia/Nemotron-H-47B-Base-8K", "nvidia/Nemotron-H-56B-Base-8K",
    ),
    "GptOssForCausalLM": ("openai/gpt-oss-20b", "openai/gpt-oss-120b"),
    "Glm4MoeForCausalLM": ("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air"),
    "Glm4vMoeForConditionalGeneration": ("zai-org/GLM-4.5V",),
    "GlmMoeDsaForCausalLM": ("zai-org/GLM-5.1", "zai-org/GLM-5.2"),
    "Exaone4_5_ForConditionalGeneration": ("LGAI-EXAONE/EXAONE-4.5-33B",),
    "ExaoneMoeForCausalLM": ("LGAI-EXAONE/K-EXAONE-236B-A23B",),
    "MiniMaxM3SparseForConditionalGeneration": ("MiniMaxAI/MiniMax-M3",),
    "Qwen2AudioForConditionalGeneration": ("Qwen/Qwen2-Audio-7B-Instruct",),
    "Qwen3OmniMoeForConditionalGeneration": ("Qwen/Qwen3-Omni-30B-A3B-Instruct",),
    "Step3p5ForCausalLM": ("stepfun-ai/Step-3.5-Flash",),
    "Step3p7ForConditionalGeneration": ("stepfun-ai/Step-3.7-Flash",),
}
# HF id -> the first `architectures` entry of its published config.json (the ids the 0.6.2 recipes
# load; tests/bridge/data/hf_models.json holds the same facts for the tier's HF cache and
# tests/unit/test_catalog_hf_bridges.py checks that the two agree)
HF_ARCHITECTURES: dict[str, str] = {hf_id: arch for arch, ids in _ARCHITECTURE_IDS.items() for hf_id in ids}


class BridgeTable:
    """Bridge registrations of one wheel, read on first use; one answer per architecture."""

    def __init__(self, interp: Any) -> None:
        self.interp = interp
        self._registrations: dict[str, tuple[str, str, str | None]] | None = None
        self._fields: dict[str, dict[str, Any] | None] = {}
        self._builder_fields: dict[str, dict[str, Any] | None] = {}

    def fields_for(self, hf_model_id: Any) -> dict[str, Any] | None:
        """The BRIDGE_FIELDS values (Unknown where the bridge decides at run time) of the provider
        that this HF id converts to; None when the architecture or its bridge is not known."""
        arch = HF_ARCHITECTURES.get(hf_model_id) if isinstance(hf_model_id, str) else None
        if arch is None:
            return None
        if arch not in self._fields:
            self._fields[arch] = self._compute(arch)
        found = self._fields[arch]
        return copy.deepcopy(found) if found is not None else None  # a recipe may mutate a list

    def builder_fields_for(self, hf_model_id: Any) -> dict[str, Any] | None:
        """As fields_for, for the model config that `get_model_config()` builds (the builder path)."""
        arch = HF_ARCHITECTURES.get(hf_model_id) if isinstance(hf_model_id, str) else None
        if arch is None:
            return None
        if arch not in self._builder_fields:
            self._builder_fields[arch] = self._compute_builder(arch)
        found = self._builder_fields[arch]
        return copy.deepcopy(found) if found is not None else None

    def registrations(self) -> dict[str, tuple[str, str, str | None]]:
        """HF architecture name -> (bridge module, bridge class name, provider class name or None)."""
        if self._registrations is None:
            self._registrations = {}
            source = self.interp.source
            for path in source.paths_under(BRIDGE_PACKAGE):
                text = source.read(path)
                if "register_bridge(" in text:
                    self._registrations.update(_registrations_in(path, text))
        return self._registrations

    def _compute(self, arch: str) -> dict[str, Any] | None:
        found = self.registrations().get(arch)
        if found is None:
            return None
        module_name, class_name, provider_name = found
        module = self.interp.load_module(module_name)
        bridge = self.interp.resolve(module.namespace.get(class_name)) if module else None
        provider_cls = self._constructed_provider(bridge, module) or self._provider_class(module, provider_name)
        if not isinstance(bridge, ClassValue) or not isinstance(provider_cls, ClassValue):
            return None
        values = {name: self._class_default(provider_cls, name) for name in sorted(BRIDGE_FIELDS)}
        for node, _ in reversed(_provider_bridge_chain(bridge)):  # a parent's runs first (super())
            values.update(provider_bridge_assignments(node))
        return values

    def _compute_builder(self, arch: str) -> dict[str, Any] | None:
        from mbridge_launch.catalog_sync.objects import get_class_attr

        found = self.registrations().get(arch)
        if found is None:
            return None
        module_name, class_name, _ = found
        module = self.interp.load_module(module_name)
        bridge = self.interp.resolve(module.namespace.get(class_name)) if module else None
        if not isinstance(bridge, ClassValue):
            return None
        # the outer GPT config holds no execution field: they all live on the transformer config
        config_cls = self.interp.resolve(get_class_attr(self.interp, bridge, "TRANSFORMER_CONFIG_CLASS"))
        if not isinstance(config_cls, ClassValue):
            return None
        values = {name: self._class_default(config_cls, name) for name in sorted(BRIDGE_FIELDS)}
        for node, _ in reversed(_provider_bridge_chain(bridge, BUILDER_METHOD)):
            values.update(provider_bridge_assignments(node))
        return values

    def _constructed_provider(self, bridge: Any, module: Any) -> ClassValue | None:
        """A `provider_bridge` that builds its provider itself (`GLM45VModelProvider(...)`) rather
        than through `super().provider_bridge()`, which uses the registered provider class."""
        chain = _provider_bridge_chain(bridge) if isinstance(bridge, ClassValue) else []
        if not chain or module is None or _calls_super(chain[0][0]):
            return None
        node, defined_in = chain[0]
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Name):
                value = self.interp.resolve(defined_in.namespace.get(call.func.id))
                if isinstance(value, ClassValue) and "TransformerConfig" in value.lineage():
                    return value
        return None

    def _provider_class(self, module: Any, provider_name: str | None) -> Any:
        if provider_name is not None:
            return self.interp.resolve(module.namespace.get(provider_name)) if module else None
        gpt = self.interp.load_module(GPT_PROVIDER[0])
        return self.interp.resolve(gpt.namespace.get(GPT_PROVIDER[1])) if gpt else None

    def _class_default(self, cls: ClassValue, name: str) -> Any:
        from mbridge_launch.catalog_sync.objects import class_fields, external_default

        spec = class_fields(cls).get(name)
        if spec is not None and spec.factory is not None:
            return self.interp.call(spec.factory, [], {})
        if spec is not None and spec.has_default:
            return spec.default
        known, default = external_default(cls, name)
        return default if known else Unknown(f"{cls.name}.{name}")


PROVIDER_METHOD = "provider_bridge"
# the builder path's per-family hook (0.7): each bridge calls super() and adds its literals
BUILDER_METHOD = "hf_config_to_model_config_kwargs"


def _provider_bridge_chain(bridge: ClassValue, method_name: str = PROVIDER_METHOD) -> list[tuple[ast.FunctionDef, Any]]:
    """The `provider_bridge` (or other hook) methods that run (their node and module), most
    derived first: a parent's only through super()."""
    chain: list[tuple[ast.FunctionDef, Any]] = []
    for klass in bridge.mro():
        method = klass.namespace.get(method_name) if isinstance(klass, ClassValue) else None
        if isinstance(method, FuncValue) and isinstance(method.node, ast.FunctionDef):
            chain.append((method.node, method.module))
            if not _calls_super(method.node, method_name):
                break
    return chain


def _calls_super(node: ast.AST, method_name: str = PROVIDER_METHOD) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method_name
               for n in ast.walk(node))


def _registrations_in(path: str, text: str) -> dict[str, tuple[str, str, str | None]]:
    """`@register_bridge(source=..., provider=...)` on a class, or `register_bridge(...)(Cls)` in
    the module body (Ministral 3 registers only when transformers has the class)."""
    module = path[: -len("/__init__.py")] if path.endswith("/__init__.py") else path[: -len(".py")]
    tree = ast.parse(text, filename=path)
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                 for t in n.targets if isinstance(t, ast.Name)}
    out: dict[str, tuple[str, str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            pairs = [(deco, node.name) for deco in node.decorator_list]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            pairs = [(node.func, node.args[0].id)]
        else:
            continue
        for deco, class_name in pairs:
            if isinstance(deco, ast.Call) and _called_name(deco.func) == "register_bridge":
                kwargs = {k.arg: k.value for k in deco.keywords if k.arg}
                arch = _name_of(kwargs.get("source"))
                arch = constants.get(arch, arch) if arch is not None else None
                if arch is not None:
                    out[arch] = (module.replace("/", "."), class_name, _name_of(kwargs.get("provider")))
    return out


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _name_of(node: ast.expr | None) -> str | None:
    """A class named by its name (`Qwen3MoeForCausalLM`, `transformers.X`) or as a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _called_name(node)
    return None


def provider_bridge_assignments(func: ast.FunctionDef) -> dict[str, Any]:
    """BRIDGE_FIELDS a `provider_bridge` body sets: a literal assigned by a top-level statement
    is known; one assigned from an expression, under a branch or loop, or passed as a keyword of
    a call that is not a literal, is Unknown (the HF config or the run decides)."""
    out: dict[str, Any] = {}
    for stmt in func.body:
        top_level = not isinstance(stmt, _COMPOUND)
        for node in ast.walk(stmt):
            for name, value in _assigned_fields(node):
                literal = _literal(value) if top_level else _NOT_LITERAL
                out[name] = Unknown(f"bridge sets {name}") if literal is _NOT_LITERAL else literal
    return out


_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith, ast.Match)


_NOT_LITERAL = object()


def _assigned_fields(node: ast.AST) -> list[tuple[str, ast.expr | None]]:
    if isinstance(node, ast.Assign):
        # `provider.x = ...` (provider path) or `config_kwargs["x"] = ...` (builder path's kwargs dict)
        return [(name, node.value) for name in map(_target_field, node.targets) if name in BRIDGE_FIELDS]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        t = node.target
        value = node.value if isinstance(node, ast.AnnAssign) else None
        return [(t.attr, value)] if isinstance(t, ast.Attribute) and t.attr in BRIDGE_FIELDS else []
    if isinstance(node, ast.Call):
        return [(k.arg, k.value) for k in node.keywords if k.arg in BRIDGE_FIELDS]
    return []


def _target_field(target: ast.expr) -> str | None:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return target.attr
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and isinstance(
        target.slice, ast.Constant) and isinstance(target.slice.value, str):
        return target.slice.value
    return None


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return _NOT_LITERAL
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL
