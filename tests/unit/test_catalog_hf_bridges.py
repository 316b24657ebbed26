"""catalog sync, the extractor fixes the conformance tier asked for (tests/bridge/compare_catalog.py),
on a miniature Megatron Bridge tree: what a model's bridge fixes on the provider
`AutoBridge...to_megatron_provider()` returns (catalog_sync/hf_bridges.py), a recipe that renames
the checkpoint, the precision preset an object equals, a layout grown from the HF config, and the
HF id -> architecture table against the tier's HF facts (tests/bridge/data/hf_models.json)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mbridge_launch.catalog_sync import hf_bridges
from mbridge_launch.catalog_sync.extract import Extractor
from mbridge_launch.catalog_sync.interp import Interpreter
from mbridge_launch.catalog_sync.objects import hf_provider
from mbridge_launch.catalog_sync.source import open_source
from mbridge_launch.catalog_sync.values import Unknown

REPO = Path(__file__).resolve().parents[2]

TREE = {
    "megatron/bridge/__init__.py": "",
    "megatron/bridge/models/__init__.py": "",
    "megatron/bridge/models/gpt_provider.py": """
        from dataclasses import dataclass
        from megatron.core.transformer.transformer_config import TransformerConfig

        @dataclass
        class GPTModelProvider(TransformerConfig):
            seq_length: int = 1024
        """,
    "megatron/bridge/models/conversion/__init__.py": "",
    "megatron/bridge/models/conversion/model_bridge.py": """
        from megatron.bridge.models.gpt_provider import GPTModelProvider

        class MegatronModelBridge:
            PROVIDER_CLASS = None

            @classmethod
            def register_bridge(cls, source, target, provider=None, model_type=None):
                def decorator(bridge):
                    return bridge
                return decorator

            def provider_bridge(self, hf_pretrained):
                return GPTModelProvider(num_layers=hf_pretrained.config.num_hidden_layers)
        """,
    "megatron/bridge/models/toy/__init__.py": "",
    "megatron/bridge/models/toy/toy_bridge.py": """
        from dataclasses import dataclass
        from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge
        from megatron.bridge.models.gpt_provider import GPTModelProvider

        _MOE_NAME = "ToyMoeForCausalLM"

        @dataclass
        class ToyMoEProvider(GPTModelProvider):
            cp_comm_type: str = "p2p"

        @dataclass
        class ToyVLProvider(GPTModelProvider):
            moe_token_dispatcher_type: str = "alltoall"

        @MegatronModelBridge.register_bridge(source="ToyForCausalLM", target=None)
        class ToyBridge(MegatronModelBridge):
            def provider_bridge(self, hf_pretrained):
                provider = super().provider_bridge(hf_pretrained)
                provider.normalization = "RMSNorm"
                return provider

        @MegatronModelBridge.register_bridge(source=_MOE_NAME, target=None, provider=ToyMoEProvider)
        class ToyMoEBridge(MegatronModelBridge):
            def provider_bridge(self, hf_pretrained):
                provider = super().provider_bridge(hf_pretrained)
                provider.moe_token_dispatcher_type = "alltoall"
                if hasattr(hf_pretrained.config, "shared_overlap"):
                    provider.moe_shared_expert_overlap = hf_pretrained.config.shared_overlap
                return provider

        class ToyVLBridge(MegatronModelBridge):
            def provider_bridge(self, hf_pretrained):
                return ToyVLProvider(cp_comm_type=hf_pretrained.config.cp, moe_flex_dispatcher_backend="hybridep")

        ToyVLBridge = MegatronModelBridge.register_bridge(source=ToyVLForConditionalGeneration, target=None)(ToyVLBridge)
        """,
}
TREE.update({
    "megatron/bridge/training/__init__.py": "",
    "megatron/bridge/training/mixed_precision.py": """
        from dataclasses import dataclass

        MIXED_PRECISION_RECIPES = {}

        def register(func):
            MIXED_PRECISION_RECIPES[func.__name__] = func
            return func

        @dataclass
        class MixedPrecisionConfig:
            bf16: bool = False
            fp8: str = None
            fp8_recipe: str = "delayed"

        @register
        def bf16_mixed():
            return MixedPrecisionConfig(bf16=True)

        @register
        def bf16_with_fp8_current_scaling_mixed():
            cfg = bf16_mixed()
            cfg.fp8 = "hybrid"
            cfg.fp8_recipe = "tensorwise"
            return cfg
        """,
})
IDS = {"toy/dense": "ToyForCausalLM", "toy/moe": "ToyMoeForCausalLM", "toy/vl": "ToyVLForConditionalGeneration",
       "toy/unregistered": "NotABridgeForCausalLM"}


@pytest.fixture()
def interp(tmp_path, monkeypatch):
    for relative, text in TREE.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    monkeypatch.setattr(hf_bridges, "HF_ARCHITECTURES", IDS)
    return Interpreter(open_source(tmp_path))


def test_registrations_by_decorator_constant_and_call(interp):
    found = interp.bridges.registrations()
    assert found["ToyForCausalLM"] == ("megatron.bridge.models.toy.toy_bridge", "ToyBridge", None)
    assert found["ToyMoeForCausalLM"][1:] == ("ToyMoEBridge", "ToyMoEProvider")  # source named by a module constant
    assert found["ToyVLForConditionalGeneration"][1] == "ToyVLBridge"  # register_bridge(...)(ToyVLBridge)


def test_dense_bridge_keeps_megatron_core_defaults(interp):
    fields = interp.bridges.fields_for("toy/dense")
    # megatron-core 0.19.2 TransformerConfig defaults, which a dense model's bridge never touches
    assert fields["moe_token_dispatcher_type"] == "allgather"
    assert fields["moe_flex_dispatcher_backend"] == "deepep"
    assert fields["moe_shared_expert_overlap"] is False
    assert fields["cp_comm_type"] is None and fields["cuda_graph_scope"] is None
    assert "normalization" not in fields  # an architecture field: the HF config decides


def test_moe_bridge_literals_provider_defaults_and_branches(interp):
    fields = interp.bridges.fields_for("toy/moe")
    assert fields["moe_token_dispatcher_type"] == "alltoall"  # a top-level literal assignment
    assert fields["cp_comm_type"] == "p2p"  # the registered provider class's default
    assert isinstance(fields["moe_shared_expert_overlap"], Unknown)  # assigned under a branch


def test_bridge_that_builds_its_own_provider(interp):
    fields = interp.bridges.fields_for("toy/vl")
    assert fields["moe_token_dispatcher_type"] == "alltoall"  # ToyVLProvider's default, not GPTModelProvider's
    assert fields["moe_flex_dispatcher_backend"] == "hybridep"  # a literal keyword
    assert isinstance(fields["cp_comm_type"], Unknown)  # a keyword from the HF config


def test_unknown_architecture_or_bridge_changes_nothing(interp):
    assert interp.bridges.fields_for("toy/unregistered") is None
    assert interp.bridges.fields_for("org/not-in-the-table") is None
    provider = hf_provider(interp, "org/not-in-the-table")
    assert isinstance(interp.get_attr(provider, "moe_token_dispatcher_type"), Unknown)


def test_provider_answers_with_the_bridge_fields(interp):
    provider = hf_provider(interp, "toy/moe")
    assert interp.get_attr(provider, "moe_token_dispatcher_type") == "alltoall"
    assert interp.get_attr(provider, "cp_comm_type") == "p2p"
    assert isinstance(interp.get_attr(provider, "num_layers"), Unknown)  # from the HF config


def test_recipe_that_renames_the_checkpoint_keeps_its_own_id(interp):
    # nemotron_3_5_lightning_sft_config reuses the Nano recipe's provider, then sets hf_model_id
    provider = hf_provider(interp, "toy/dense")
    interp.set_attr(provider, "hf_model_id", "toy/renamed")
    assert Extractor(interp)._hf_model_id(None, provider) == "toy/renamed"


def test_architecture_table_agrees_with_the_tier_hf_facts():
    facts = json.loads((REPO / "tests" / "bridge" / "data" / "hf_models.json").read_text())["models"]
    disagree = {hf_id: (hf_bridges.HF_ARCHITECTURES[hf_id], entry["architectures"][0])
                for hf_id, entry in facts.items()
                if entry.get("architectures") and hf_id in hf_bridges.HF_ARCHITECTURES
                and hf_bridges.HF_ARCHITECTURES[hf_id] != entry["architectures"][0]}
    assert not disagree
    missing = sorted(hf_id for hf_id, entry in facts.items() if entry.get("architectures") and hf_id not in hf_bridges.HF_ARCHITECTURES)
    assert not missing, f"HF ids the tier writes a config for but hf_bridges.HF_ARCHITECTURES lacks: {missing}"


def test_precision_preset_built_on_another_is_named_by_its_fields(interp):
    module = interp.load_module("megatron.bridge.training.mixed_precision")
    fp8 = interp.call(interp.resolve(module.namespace["bf16_with_fp8_current_scaling_mixed"]), [], {})
    assert fp8.origin == "bf16_mixed"  # the first function that returned the object
    extractor = Extractor(interp)
    assert extractor._preset_name(fp8) == "bf16_with_fp8_current_scaling_mixed"
    interp.set_attr(fp8, "fp8_recipe", "blockwise")  # edited by a recipe: no preset equals it
    assert extractor._preset_name(fp8) == "bf16_mixed"


def test_list_grown_by_an_unknown_amount_is_unknown():
    from mbridge_launch.catalog_sync.extract import to_data
    from mbridge_launch.catalog_sync.objects import call_plain_method

    stage = ["embedding"]
    call_plain_method(stage.extend, [Unknown("num_layers")], {})  # stage.extend(["decoder"] * num_layers)
    assert to_data([stage, ["loss"]]) is None
    assert to_data([["embedding", "decoder"], ["loss"]]) == [["embedding", "decoder"], ["loss"]]


def test_text_provider_keeps_the_execution_settings(interp):
    provider = hf_provider(interp, "toy/moe")
    interp.set_attr(provider, "moe_shared_expert_overlap", False)  # as a bridge or recipe would
    text = interp.call(interp.get_attr(provider, "to_text_provider"), [], {})
    assert interp.get_attr(text, "moe_token_dispatcher_type") == "alltoall"
    assert interp.get_attr(text, "moe_shared_expert_overlap") is False
    assert interp.get_attr(text, "cp_comm_type") == "p2p"
