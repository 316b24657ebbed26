"""The committed catalog at run time: loading (JSON), lookups, versions, the
`catalog list/show` commands, dataset selectors, and defaults checked by hand against the
megatron-bridge 0.6.2 sources (file:line quoted next to each value)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.catalog import available_versions, load_catalog
from mbridge_launch.knowledge.datasets import (
    allowed_modes,
    check_dataset_mode,
    get_dataset,
    load_datasets,
    selectors_for,
)

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "catalog" / "megatron-bridge-0.6.2.json"


@pytest.fixture(scope="module")
def cat():
    return load_catalog("0.6.2")


# --- defaults read by hand from the 0.6.2 wheel -----------------------------------------------------
def test_llama3_8b_pretrain_defaults(cat):
    r = cat.get("llama3_8b_pretrain_config")  # legacy alias: recipes/llama/llama3.py:22-24
    assert r.name == "llama3_8b_pretrain_2gpu_h100_bf16_config" and r.kind == "library"
    assert r.tp == 1  # recipes/llama/h100/llama3.py:252  tensor_model_parallel_size = 1
    assert r.pp == 1  # recipes/llama/h100/llama3.py:253  pipeline_model_parallel_size = 1
    assert r.cp == 2  # recipes/llama/h100/llama3.py:257  context_parallel_size = 2
    assert r.seq_length == 8192 and r.dataset_seq_length == 8192  # llama3.py:259 and :250
    assert r.gbs == 512 and r.mbs == 1  # llama3.py:262-263
    assert r.ep == 1 and r.vp is None  # EP never set: Megatron Core default 1
    assert r.hf_model_id == "meta-llama/Meta-Llama-3-8B"
    assert r.dataset["selector"] == "mock"  # _pretrain_common: blend=None (recipes/common.py:97)
    assert r.findings == []


def test_qwen3_moe_sft_expert_parallel(cat):
    r = cat.get("qwen3_30b_a3b_sft_config")
    assert r.name == "qwen3_30b_a3b_sft_16gpu_h100_bf16_config"
    assert r.ep == 16  # recipes/qwen/h100/qwen3_moe.py:512  expert_model_parallel_size = 16
    assert r.etp == 1  # qwen3_moe.py:513
    assert r.gbs == 32  # qwen3_moe.py:518
    assert r.dataset["selector"] == "squad"  # _sft_common -> default_squad_config (recipes/common.py:199)
    assert r.dataset["hf_dataset_id"] == "rajpurkar/squad"  # data/sources/hf.py:199
    assert r.features["moe_token_dispatcher_type"] == "alltoall"  # qwen3_moe.py:524


def test_llama3_8b_128k_context_parallel(cat):
    r = cat.get("llama3_8b_128k_pretrain_config")
    assert r.name == "llama3_8b_pretrain_64gpu_h100_bf16_128k_config" and r.variant == "128k"
    assert (r.tp, r.pp, r.cp, r.sp) == (4, 2, 8, True)  # recipes/llama/h100/llama3.py:507-513
    assert r.seq_length == 131072  # llama3.py:514  SEQUENCE_LENGTH_128K


def test_peft_scheme_and_layout(cat):
    r = cat.get("llama3_70b_peft_config")
    assert r.name == "llama3_70b_peft_8gpu_h100_bf16_config" and r.mode == "peft"
    assert r.peft_scheme == "lora"  # llama3.py:2607 default_peft_config(peft_scheme="lora")
    assert r.tp == 8 and r.gbs == 8 and r.seq_length == 4096  # llama3.py:2619, :2633, :2601


def test_benchmark_recipe_values(cat):
    r = cat.get("qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config", kind="benchmark")
    assert r.kind == "benchmark" and r.module == "megatron.bridge.perf_recipes.qwen.h100.qwen3_moe"
    # perf_recipes/qwen/h100/qwen3_moe.py:131-138
    assert (r.tp, r.pp, r.vp, r.cp, r.ep, r.sp, r.gbs, r.mbs) == (2, 8, 4, 1, 32, True, 8192, 1)
    assert r.seq_length == 4096  # qwen3_moe.py:127
    assert r.train_iters == 50  # perf_recipes/_common.py:43 (_benchmark_common)
    assert r.features["moe_router_force_load_balancing"] is True
    library = cat.get("qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config")
    assert library.kind == "library" and library is not r  # same name, library function preferred


def test_irregular_recipes_carry_findings(cat):
    # perf_recipes/deepseek/h100/deepseek_v3.py:160-163: "64x H100 (1024-GPU layout with legacy-scaled GBS)"
    r = cat.get("deepseek_v3_pretrain_64gpu_h100_bf16_config", kind="benchmark")
    assert (r.pp, r.ep) == (8, 64)  # deepseek_v3.py:34, :37
    assert "expert_grid_exceeds_gpus" in [f.code for f in r.errors]
    # recipes/qwen/h100/qwen3_next.py:310 raises NotImplementedError
    raising = cat.get("qwen3_next_80b_a3b_peft_config")
    assert raising.raises_not_implemented and raising.tp is None
    assert [f.code for f in raising.findings] == ["raises_not_implemented"]


def test_counts_match_the_release(cat):
    library = [r for r in cat.recipes if r.kind == "library"]
    benchmark = [r for r in cat.recipes if r.kind == "benchmark"]
    assert 280 <= len(library) <= 310 and 430 <= len(benchmark) <= 460
    assert 250 <= sum(len(r.aliases) for r in library) <= 280
    assert cat.meta["counts"]["library"] == len(library)


# --- loading ----------------------------------------------------------------------------------------
def test_committed_catalog_is_the_loaded_data(cat):
    data = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert cat.meta == {k: v for k, v in data.items() if k != "recipes"}
    assert [(r.kind, r.name, r.tp, len(r.findings)) for r in cat.recipes] == [
        (r["kind"], r["name"], r["tensor_model_parallel_size"], len(r["findings"])) for r in data["recipes"]]
    assert not list(COMMITTED.parent.glob("megatron-bridge-*.yaml"))  # the recipe catalog is JSON only


def test_recipe_api(cat):
    r = cat.get("llama3_8b_pretrain_2gpu_h100_bf16_config")
    fields = r.megatron_fields()
    assert fields["tensor_model_parallel_size"] == r.tp and fields["context_parallel_size"] == 2
    assert fields["global_batch_size"] == 512 and fields["sequence_parallel"] is False
    assert r in cat.by_model("llama3_8b") and all(x.model == "llama3_8b" for x in cat.by_model("llama3_8b"))
    assert cat.get("no_such_recipe") is None
    with pytest.raises(UserError) as info:
        cat.require("llama3_8b_pretrain_cofig")
    assert "llama3_8b_pretrain_config" in str(info.value)
    data = r.to_dict()
    assert data["tensor_model_parallel_size"] == 1 and data["aliases"] == ["llama3_8b_pretrain_config"]


def test_versions_side_by_side(tmp_path):
    shutil.copy(COMMITTED, tmp_path / "megatron-bridge-0.6.2.json")
    newer = COMMITTED.read_text(encoding="utf-8").replace('"megatron_bridge_version": "0.6.2"', '"megatron_bridge_version": "0.10.0"')
    (tmp_path / "megatron-bridge-0.10.0.json").write_text(newer, encoding="utf-8")
    assert available_versions(tmp_path) == ["0.6.2", "0.10.0"]
    assert load_catalog(directory=tmp_path).version == "0.10.0"  # newest by default
    assert load_catalog("0.6.2", directory=tmp_path).version == "0.6.2"
    with pytest.raises(UserError) as info:
        load_catalog("0.5.0", directory=tmp_path)
    assert info.value.key == "catalog.unknown_version" and "0.6.2" in str(info.value)
    with pytest.raises(UserError):
        load_catalog(directory=tmp_path / "none")


def test_hand_edited_file(tmp_path):
    text = '{"megatron_bridge_version": "1.0", "recipes": [{"name": "x_pretrain_1gpu_h100_bf16_config", "kind": "library"}]}'
    (tmp_path / "megatron-bridge-1.0.json").write_text(text, encoding="utf-8")
    (tmp_path / "megatron-bridge-2.0.yaml").write_text("megatron_bridge_version: '2.0'\nrecipes: []\n", encoding="utf-8")
    assert available_versions(tmp_path) == ["1.0"]  # only .json files are catalogs
    loaded = load_catalog(directory=tmp_path)
    assert loaded.version == "1.0" and loaded.get("x_pretrain_1gpu_h100_bf16_config").kind == "library"
    for broken in ('{"megatron_bridge_version": "1.1", "recipes": [', '["not", "an", "object"]', '{"recipes": []}'):
        (tmp_path / "megatron-bridge-1.1.json").write_text(broken, encoding="utf-8")
        with pytest.raises(UserError) as info:
            load_catalog("1.1", directory=tmp_path)
        assert info.value.key == "catalog.invalid" and "megatron-bridge-1.1.json" in str(info.value)


# --- commands -----------------------------------------------------------------------------------------
def test_list_json_uses_megatron_names(capsys):
    assert main(["catalog", "list", "--format", "json", "--family", "llama", "--mode", "peft", "--kind", "library"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["catalog"] == {"source": "megatron-bridge-0.6.2.json", "version": "0.6.2", "origin": "package",
                               "path": str(COMMITTED)}
    names = {r["name"] for r in data["recipes"]}
    assert "llama3_8b_peft_1gpu_h100_bf16_config" in names
    assert all(r["mode"] == "peft" and r["kind"] == "library" for r in data["recipes"])
    assert {"tensor_model_parallel_size", "global_batch_size", "aliases", "findings"} <= set(data["recipes"][0])


def test_list_text_and_filters(capsys):
    assert main(["catalog", "list", "--all", "--family", "qwen", "--kind", "benchmark"]) == 0
    out = capsys.readouterr().out
    assert "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config" in out and "llama3" not in out
    assert main(["catalog", "list", "--family", "nope"]) == 0


def test_show_alias_text_and_json(capsys):
    assert main(["catalog", "show", "llama3_8b_128k_pretrain_config", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "llama3_8b_pretrain_64gpu_h100_bf16_128k_config" and data["context_parallel_size"] == 8
    assert main(["catalog", "show", "qwen3_next_80b_a3b_peft_config", "--lang", "zh"]) == 0
    assert "NotImplementedError" in capsys.readouterr().out


def test_show_unknown_name_exits_2_with_closest(capsys):
    assert main(["catalog", "show", "llama3_8b_pretrain_cfg"]) == 2
    err = capsys.readouterr().err
    assert "llama3_8b_pretrain_config" in err and "Traceback" not in err
    assert main(["catalog", "list", "--catalog-version", "0.0.1"]) == 2


# --- dataset selectors -----------------------------------------------------------------------------------
def test_dataset_selectors():
    selectors = load_datasets()
    assert {"mock", "megatron-indexed", "energon", "local-jsonl", "local-vlm", "squad", "tulu3", "openmathinstruct2",
            "openmathinstruct2-thinking", "gsm8k", "cord-v2", "medpix", "raven", "rdr", "llava-video-178k"} == set(selectors)
    assert allowed_modes("mock") == ("pretrain",)
    assert get_dataset("megatron-indexed").required == ("dataset.data_path",)
    assert get_dataset("local-jsonl").required == ("dataset.dataset_root",)
    assert get_dataset("energon").required == ("dataset.path",) and get_dataset("energon").allows("dora")
    assert get_dataset("cord-v2").modality == "vlm" and get_dataset("squad").hf_dataset_id == "rajpurkar/squad"
    assert get_dataset("squad").allows("peft")  # peft means lora
    assert "mock" not in {s.name for s in selectors_for("sft")}
    assert {s.name for s in selectors_for("lora", "text")} >= {"squad", "tulu3", "gsm8k", "local-jsonl"}
    with pytest.raises(UserError) as info:
        check_dataset_mode("mock", "sft")
    assert info.value.key == "catalog.dataset.mode" and "squad" in str(info.value)
    with pytest.raises(UserError):
        get_dataset("squadd")


def test_recipe_dataset_selectors_are_known(cat):
    known = set(load_datasets())
    used = {r.dataset.get("selector") for r in cat.recipes} - {None}
    assert used <= known
