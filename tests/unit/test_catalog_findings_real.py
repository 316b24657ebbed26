"""catalog_sync.findings: the checks of Megatron Bridge's ConfigContainer validation that the
conformance tier (issue 15) saw rejecting recipes the catalog did not flag. Each check runs on a small
record / facts dict; validation_facts() runs on a tiny interpreted source tree (assigned value vs
Megatron Core default vs unknowable Hugging Face value)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mbridge_launch.catalog_sync import findings as checks
from mbridge_launch.catalog_sync.extract import Extractor
from mbridge_launch.catalog_sync.interp import Interpreter
from mbridge_launch.catalog_sync.source import open_source


def _codes(found):
    return [f["code"] for f in found]


# --- in-batch packing needs two sequences per micro-batch (config.py validate)
def test_in_batch_packing_with_mbs1_is_an_error():
    found = checks.in_batch_packing_findings({"micro_batch_size": 1, "dataset": {"in_batch_packing": True}})
    assert _codes(found) == ["in_batch_packing_mbs1"] and found[0]["severity"] == "error"
    assert "micro_batch_size" in found[0]["message"] and found[0]["message_zh"]


@pytest.mark.parametrize("record", [
    {"micro_batch_size": 2, "dataset": {"in_batch_packing": True}},
    {"micro_batch_size": 1, "dataset": {"in_batch_packing": False}},
    {"micro_batch_size": 1, "dataset": {}},
    {"micro_batch_size": None, "dataset": {"in_batch_packing": True}},  # unknown MBS: no claim
])
def test_in_batch_packing_otherwise_silent(record):
    assert checks.in_batch_packing_findings(record) == []


# --- a bare provider: num_attention_heads 0, kv_channels None -> ZeroDivisionError
def test_architecture_left_at_defaults_is_an_error():
    facts = {"model.num_layers": 0, "model.hidden_size": 0, "model.num_attention_heads": 0, "model.kv_channels": None}
    found = checks.architecture_unset_findings(facts)
    assert _codes(found) == ["architecture_unset"] and "num_attention_heads 0" in found[0]["message"]


@pytest.mark.parametrize("facts", [
    {"model.num_attention_heads": 32, "model.kv_channels": None},
    {"model.num_attention_heads": 0, "model.kv_channels": 128},  # no division when kv_channels is given
    {"model.kv_channels": None},  # heads from a Hugging Face config: unknown
    {"model.num_attention_heads": checks.UNKNOWN, "model.kv_channels": None},
])
def test_architecture_known_or_unknowable_is_silent(facts):
    assert checks.architecture_unset_findings(facts) == []


# --- fast cache load / deferred index mmap read caches under path_to_cache
@pytest.mark.parametrize("flags, shown", [
    ({"dataset.fast_cache_load": True}, "dataset.fast_cache_load"),
    ({"dataset.defer_npy_index_mmap": True}, "dataset.defer_npy_index_mmap"),
    ({"dataset.fast_cache_load": True, "dataset.defer_npy_index_mmap": True}, "dataset.fast_cache_load, dataset.defer_npy_index_mmap"),
])
def test_cache_options_without_cache_path(flags, shown):
    found = checks.data_cache_findings({"dataset.path_to_cache": None, **flags})
    assert _codes(found) == ["data_cache_path_missing"] and found[0]["message"].startswith(shown + " is on")


@pytest.mark.parametrize("facts", [
    {"dataset.path_to_cache": "/cache", "dataset.fast_cache_load": True},
    {"dataset.path_to_cache": checks.UNKNOWN, "dataset.fast_cache_load": True},
    {"dataset.fast_cache_load": True},  # path unknown
    {"dataset.path_to_cache": None, "dataset.fast_cache_load": False, "dataset.defer_npy_index_mmap": False},
])
def test_cache_options_otherwise_silent(facts):
    assert checks.data_cache_findings(facts) == []


# --- the pipeline layout fixes the VP size
@pytest.mark.parametrize("layout, stages", [
    ("Et*4|(tttt|)*14tmL", 16),  # deepseek_v3 partial_cg_dev: Etttt| + 14 x tttt| + tmL
    ("Et|(tt|)*30mL", 32),
    ("Ettt|(tt|)*29,m|L", 32),  # Megatron Core's docstring example; commas are cosmetic
    ("E|t*3|L", 3),
    ([["embedding", "decoder"], ["decoder", "loss"]], 2),
])
def test_layout_stage_count(layout, stages):
    assert checks.layout_stage_count(layout) == stages


def _layout_record(layout, pp, vp):
    return {"pipeline_model_parallel_size": pp, "virtual_pipeline_model_parallel_size": vp,
            "features": {"pipeline_model_parallel_layout": layout}}


def test_vp_conflicting_with_layout():
    found = checks.pipeline_layout_findings(_layout_record("Et*4|(tttt|)*14tmL", 4, 2))
    assert _codes(found) == ["vp_conflicts_with_layout"] and "VP 4" in found[0]["message"]


def test_layout_not_divisible_by_pp():
    assert _codes(checks.pipeline_layout_findings(_layout_record("Et|tt|tL", 2, None))) == ["layout_not_divisible_by_pp"]


@pytest.mark.parametrize("record", [
    _layout_record("Et*4|(tttt|)*14tmL", 4, 4),
    _layout_record("Et*4|(tttt|)*14tmL", 4, None),  # Megatron Core derives VP from the layout
    _layout_record(None, 4, 2),
])
def test_layout_consistent_is_silent(record):
    assert checks.pipeline_layout_findings(record) == []


# --- two deprecated SM-count knobs with different values (megatron-core 0.19.2)
def test_conflicting_sm_knobs():
    facts = {"model.moe_deepep_num_sms": 20, "model.moe_hybridep_num_sms": 16, "model.moe_flex_dispatcher_num_sms": None}
    assert _codes(checks.dispatcher_sms_findings(facts)) == ["dispatcher_sms_conflict"]


@pytest.mark.parametrize("facts", [
    {"model.moe_deepep_num_sms": 20, "model.moe_hybridep_num_sms": 20, "model.moe_flex_dispatcher_num_sms": None},
    {"model.moe_deepep_num_sms": 20, "model.moe_hybridep_num_sms": 16, "model.moe_flex_dispatcher_num_sms": 32},
    {"model.moe_deepep_num_sms": None, "model.moe_hybridep_num_sms": 16, "model.moe_flex_dispatcher_num_sms": None},
    {"model.moe_deepep_num_sms": 20, "model.moe_hybridep_num_sms": 16},  # flex unknown
])
def test_sm_knobs_otherwise_silent(facts):
    assert checks.dispatcher_sms_findings(facts) == []


# --- model vs dataset sequence length: validate() asserts it for its own dataset classes
def _seq_record(dataset_class):
    return {"seq_length": 8192, "dataset_seq_length": 4096, "dataset": {"class": dataset_class}}


def test_seq_mismatch_is_an_error_for_checked_dataset_classes():
    found = [f for f in checks.layout_findings(_seq_record("GPTDatasetConfig")) if f["code"] == "seq_length_mismatch"]
    assert [f["severity"] for f in found] == ["error"]
    # a subclass of a checked class, by the lineage validation_facts() reads
    sub = checks.layout_findings(_seq_record("MyDataset"), {"dataset_lineage": ["MyDataset", "GPTSFTDatasetConfig"]})
    assert [f["severity"] for f in sub if f["code"] == "seq_length_mismatch"] == ["error"]


def test_seq_mismatch_stays_a_warning_for_other_datasets():
    found = [f for f in checks.layout_findings(_seq_record("WanDatasetConfig"), {"dataset_lineage": ["WanDatasetConfig"]})
             if f["code"] == "seq_length_mismatch"]
    assert [f["severity"] for f in found] == ["warning"]


# --- validation_facts on an interpreted tree
TREE: dict[str, str] = {
    "megatron/bridge/__init__.py": "",
    "megatron/bridge/package_info.py": 'MAJOR = 1\nMINOR = 2\nPATCH = 3\nPRE_RELEASE = ""\n',
    "megatron/bridge/models/__init__.py": "",
    "megatron/bridge/models/conversion/__init__.py": "",
    "megatron/bridge/models/conversion/auto_bridge.py": """
        import transformers

        class AutoBridge:
            @classmethod
            def from_hf_pretrained(cls, path, **kwargs):
                return cls(transformers.AutoConfig.from_pretrained(path))
        """,
    "megatron/bridge/models/gpt_provider.py": """
        from dataclasses import dataclass
        from megatron.core.transformer.transformer_config import TransformerConfig

        @dataclass
        class GPTModelProvider(TransformerConfig):
            seq_length: int = 1024
        """,
    "megatron/bridge/training/__init__.py": "",
    "megatron/bridge/training/config.py": """
        from dataclasses import dataclass
        from typing import Optional
        from megatron.core.datasets.gpt_dataset import GPTDatasetConfig as MCoreGPTDatasetConfig

        @dataclass
        class GPTDatasetConfig(MCoreGPTDatasetConfig):
            seq_length: int = 1024

        @dataclass
        class CheckpointConfig:
            save: Optional[str] = None
            load: Optional[str] = None
            ckpt_format: str = "torch_dist"

        @dataclass(kw_only=True)
        class ConfigContainer:
            model: object
            dataset: object
            checkpoint: object = None
        """,
    "megatron/bridge/recipes/__init__.py": "",
    "megatron/bridge/recipes/r.py": """
        import os
        from megatron.bridge.models.conversion.auto_bridge import AutoBridge
        from megatron.bridge.models.gpt_provider import GPTModelProvider
        from megatron.bridge.training.config import CheckpointConfig, ConfigContainer, GPTDatasetConfig

        def bare_config():
            return ConfigContainer(model=GPTModelProvider(), dataset=GPTDatasetConfig())

        def hf_config():
            cfg = ConfigContainer(model=AutoBridge.from_hf_pretrained("org/M").to_megatron_provider(),
                                  dataset=GPTDatasetConfig())
            cfg.model.moe_deepep_num_sms = 20
            cfg.model.moe_hybridep_num_sms = 16
            cfg.dataset.fast_cache_load = True
            cfg.checkpoint = CheckpointConfig(save=os.path.join(os.getcwd(), "ckpt"))
            return cfg
        """,
}


@pytest.fixture(scope="module")
def tree_facts(tmp_path_factory):
    root = tmp_path_factory.mktemp("facts-tree")
    for relative, text in TREE.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    interp = Interpreter(open_source(Path(root)))
    extractor = Extractor(interp)
    module = interp.load_module("megatron.bridge.recipes.r")
    out = {}
    for name in ("bare_config", "hf_config"):
        cfg, exception, _ = extractor.run(interp.resolve(module.namespace[name]))
        assert exception is None
        out[name] = checks.validation_facts(extractor, cfg)
    return out


def test_facts_of_a_bare_provider_are_megatron_core_0_19_defaults(tree_facts):
    facts = tree_facts["bare_config"]
    assert facts["model.num_attention_heads"] == 0 and facts["model.kv_channels"] is None
    # 0.19.2 defaults (None), not the 0.16.1 table's 20 / 16: no SM-knob conflict on a bare provider
    assert facts["model.moe_deepep_num_sms"] is None and facts["model.moe_hybridep_num_sms"] is None
    assert facts["dataset.fast_cache_load"] is False and facts["dataset.path_to_cache"] is None
    assert facts["dataset_lineage"][0] == "GPTDatasetConfig"
    assert _codes(checks.validation_findings({"dataset": {}}, facts)) == ["architecture_unset"]


def test_facts_of_a_hugging_face_provider(tree_facts):
    facts = tree_facts["hf_config"]
    assert "model.num_attention_heads" not in facts  # from the HF config.json: unknown statically
    assert (facts["model.moe_deepep_num_sms"], facts["model.moe_hybridep_num_sms"]) == (20, 16)
    assert facts["model.moe_flex_dispatcher_num_sms"] is None  # an execution setting no HF conversion sets
    codes = _codes(checks.validation_findings({"dataset": {}}, facts))
    assert codes == ["data_cache_path_missing", "dispatcher_sms_conflict"]
    # a run-time path is not None; the wheel dataclass's defaults are read as they are
    assert facts["checkpoint.save"] == checks.A_PATH
    assert (facts["checkpoint.load"], facts["checkpoint.ckpt_format"]) == (None, "torch_dist")
    assert not any(k.startswith("checkpoint.") for k in tree_facts["bare_config"])  # no CheckpointConfig


# --- selective recompute of a module megatron-core 0.19.2 does not know
def test_unknown_recompute_module():
    record = {"features": {"recompute_granularity": "selective", "recompute_modules": ["moe_act", "mhc"]}}
    found = checks.recompute_modules_findings(record)
    assert _codes(found) == ["recompute_modules_unknown"] and "mhc" in found[0]["message"]


@pytest.mark.parametrize("features", [
    {"recompute_granularity": "selective", "recompute_modules": ["moe_act", "mla_up_proj"]},
    {"recompute_granularity": "full", "recompute_modules": ["mhc"]},  # only selective recompute checks
    {"recompute_granularity": "selective"},
])
def test_known_recompute_modules_are_silent(features):
    assert checks.recompute_modules_findings({"features": features}) == []


# --- Megatron-FSDP saving or loading needs the fsdp_dtensor format
def _fsdp_facts(**over):
    return {"checkpoint.ckpt_format": "torch_dist", "checkpoint.save": checks.A_PATH, "checkpoint.load": None, **over}


def test_fsdp_with_torch_dist_checkpoints():
    found = checks.fsdp_checkpoint_findings({"features": {"use_megatron_fsdp": True}}, _fsdp_facts())
    assert _codes(found) == ["fsdp_ckpt_format"] and "torch_dist" in found[0]["message"]
    by_dist = checks.fsdp_checkpoint_findings({"features": {}}, _fsdp_facts(**{"dist.use_megatron_fsdp": True}))
    assert _codes(by_dist) == ["fsdp_ckpt_format"]


@pytest.mark.parametrize("features, facts", [
    ({"use_megatron_fsdp": True}, _fsdp_facts(**{"checkpoint.ckpt_format": "fsdp_dtensor"})),
    ({"use_megatron_fsdp": True}, _fsdp_facts(**{"checkpoint.save": None})),  # neither saves nor loads
    ({"use_megatron_fsdp": False}, _fsdp_facts()),
    ({"use_megatron_fsdp": True}, {"checkpoint.ckpt_format": "torch_dist"}),  # save/load unknown
])
def test_fsdp_checkpoints_otherwise_silent(features, facts):
    assert checks.fsdp_checkpoint_findings({"features": features}, facts) == []


# --- model seq_length left to the Hugging Face config
class _Arch:
    def __init__(self, max_pos):
        self.max_position_embeddings = max_pos


def _hf_seq_record():
    return {"model": "m", "seq_length": None, "dataset_seq_length": 4096, "dataset": {"class": "GPTDatasetConfig"}}


@pytest.mark.parametrize("max_pos, expected", [
    (None, [("seq_length_from_hf", "warning")]),  # models.yaml does not know it
    (131072, [("seq_length_mismatch", "error")]),
    (4096, []),
])
def test_seq_length_from_the_hf_config(max_pos, expected):
    found = checks.hf_seq_length_findings(_hf_seq_record(), lambda model: _Arch(max_pos))
    assert [(f["code"], f["severity"]) for f in found] == expected


def test_seq_length_from_hf_only_when_the_recipe_leaves_it():
    record = {**_hf_seq_record(), "seq_length": 8192}
    assert checks.hf_seq_length_findings(record, lambda model: _Arch(None)) == []
    other = {**_hf_seq_record(), "dataset": {"class": "WanDatasetConfig"}}
    assert checks.hf_seq_length_findings(other, lambda model: _Arch(None)) == []
