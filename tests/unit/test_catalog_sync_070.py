"""catalog sync on the committed Megatron Bridge 0.7.0 tree (tests/fixtures/megatron-bridge-0.7.0-tree:
NVIDIA-NeMo/Megatron-Bridge main at 2026-08-22, package_info 0.7.0, trimmed by
tests/tooling/trim_bridge_tree.py), synced as a user would: into a temporary data folder, then
read back by version.

The values are checked against two readings made without the interpreter: a table read by hand
from the recipe source (file and line named), and a plain ast reader that takes each recipe's
own top-level `cfg.model.X = ...` / `cfg.train.X = ...` statements (literals and module constants).
Before the builder path was read (AutoBridge.get_model_config, 0.7's Llama recipes), 36 library
recipes had TP/PP/CP/EP/seq length None; every test here failed on that sync.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from mbridge_launch.cli.main import main

TREE = Path(__file__).resolve().parents[1] / "fixtures" / "megatron-bridge-0.7.0-tree"
SRC = TREE / "src"
LAYOUT = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
          "expert_model_parallel_size", "seq_length", "global_batch_size", "micro_batch_size")

pytestmark = pytest.mark.usefixtures("english")


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """(the data folder's catalog file, its JSON): `catalog sync --from TREE` with XDG_DATA_HOME
    pointing at a temporary folder and no site folder, as a user's shell would have it."""
    data_home = tmp_path_factory.mktemp("xdg-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(data_home))
        mp.delenv("MBRIDGE_LAUNCH_CATALOGS", raising=False)
        assert main(["catalog", "sync", "--from", str(TREE)]) == 0
    written = data_home / "mbridge-launch" / "catalogs" / "megatron-bridge-0.7.0.json"
    return data_home, written, json.loads(written.read_text())


def _recipes(catalog, kind="library"):
    return {r["name"]: r for r in catalog["recipes"] if r["kind"] == kind}


def test_the_fixture_is_small():
    size = sum(p.stat().st_size for p in TREE.rglob("*") if p.is_file())
    assert size < 6 << 20, f"the 0.7.0 fixture grew to {size / 2**20:.1f} MiB: re-trim it"


def test_sync_writes_into_the_data_folder_and_list_reads_it_back(synced, capsys, monkeypatch):
    data_home, written, catalog = synced
    assert catalog["megatron_bridge_version"] == "0.7.0"  # from the tree's package_info.py
    assert written.is_file()
    capsys.readouterr()
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    monkeypatch.delenv("MBRIDGE_LAUNCH_CATALOGS", raising=False)
    assert main(["catalog", "list", "--catalog-version", "0.7.0", "--family", "llama", "--all",
                 "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    rows = listed["recipes"] if isinstance(listed, dict) else listed
    names = {row["name"] for row in rows}
    assert "llama31_405b_pretrain_256gpu_h100_bf16_config" in names
    assert names <= set(_recipes(catalog)) | set(_recipes(catalog, "benchmark"))


def test_every_library_recipe_has_its_layout_or_says_why_not(synced):
    _, _, catalog = synced
    library = _recipes(catalog)
    assert len(library) > 300
    missing = {}
    for name, record in library.items():
        unknown = [f for f in LAYOUT if record[f] is None]
        if not unknown:
            continue
        reasons = [f for f in record["findings"] if f["code"] in ("unresolved", "raises_not_implemented")]
        # an `unresolved` finding names each field it could not read; a recipe that raises says where
        named = all(any(field in f["message"] for f in reasons) for field in unknown if record.get("unresolved"))
        if not reasons or not named or not all(f["message"] for f in reasons):
            missing[name] = unknown
    assert missing == {}
    without_layout = [n for n, r in library.items() if any(r[f] is None for f in LAYOUT)]
    # measured on the fixture: 2 Kimi recipes take seq_length from the HF config, 1 Qwen3-Next PEFT
    # raises NotImplementedError; the Llama family is no longer among them
    assert not [n for n in without_layout if n.startswith("llama")]


# Read by hand from the 0.7.0 source (src/megatron/bridge/recipes/...); EP 1 and ETP None where the
# recipe leaves them: Megatron Core's TransformerConfig defaults.
HAND_READ = {
    # llama/h100/llama3.py:1020-1106: TP 1, PP 1, CP 2, seq 8192, GBS 512, MBS 1
    "llama31_8b_pretrain_2gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1, virtual_pipeline_model_parallel_size=None,
        context_parallel_size=2, expert_model_parallel_size=1, sequence_parallel=False, seq_length=8192,
        global_batch_size=512, micro_batch_size=1, hf_model_id="meta-llama/Meta-Llama-3.1-8B"),
    # llama3.py:1107-1199: TP 4, PP 4, VP 5, CP 2, SP on, SEQUENCE_LENGTH_128K
    "llama31_70b_pretrain_32gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=4, pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=5,
        context_parallel_size=2, expert_model_parallel_size=1, sequence_parallel=True, seq_length=131072,
        global_batch_size=512, micro_batch_size=1),
    # llama3.py:1200-1296: TP 8, PP 8, VP 2, CP 4, SP on, 128K
    "llama31_405b_pretrain_256gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=8, pipeline_model_parallel_size=8, virtual_pipeline_model_parallel_size=2,
        context_parallel_size=4, sequence_parallel=True, seq_length=131072, global_batch_size=512,
        micro_batch_size=1),
    # SFT: llama3.py llama31_8b_sft_2gpu_h100_bf16_config: seq_length = 4096, TP 2, GBS 8
    "llama31_8b_sft_2gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=2, pipeline_model_parallel_size=1, context_parallel_size=1, seq_length=4096,
        global_batch_size=8, micro_batch_size=1, peft_scheme=None, mode="sft"),
    # PEFT: llama31_70b_peft_8gpu_h100_bf16_config: LoRA (default_peft_config("lora")), TP 8, GBS 8
    "llama31_70b_peft_8gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=8, pipeline_model_parallel_size=1, context_parallel_size=1, seq_length=4096,
        global_batch_size=8, micro_batch_size=1, peft_scheme="lora", mode="peft"),
    # deepseek/h100/deepseek_v4.py:61-153: PP 4, EP 8, ETP 1, seq 4096, GBS 128; the layout is
    # computed from the HF config's num_layers (set_deepseek_v4_pipeline_model_parallel_layout)
    "deepseek_v4_flash_pretrain_32gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=4, context_parallel_size=1,
        expert_model_parallel_size=8, expert_tensor_parallel_size=1, seq_length=4096, global_batch_size=128,
        micro_batch_size=1, hf_model_id="deepseek-ai/DeepSeek-V4-Flash"),
    # qwen/h100/qwen3_moe.py:228-349: TP 4, PP 16, CP 2, EP 8, SP on; GBS 32 and MBS from
    # _pretrain_common (recipes/common.py: global_batch_size=32) and the recipe's micro_batch_size = 1
    "qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config": dict(
        tensor_model_parallel_size=4, pipeline_model_parallel_size=16, context_parallel_size=2,
        expert_model_parallel_size=8, expert_tensor_parallel_size=1, sequence_parallel=True, seq_length=4096,
        global_batch_size=32, micro_batch_size=1),
    # qwen_omni/h100/qwen3_omni.py:43-: os.environ.get("QWEN3_OMNI_HF_PATH", _QWEN3_OMNI_HF_PATH), the
    # public id where the variable is unset; TP 1, PP 1, EP 8, ETP 1, seq 4096
    "qwen3_omni_30b_a3b_sft_8gpu_h100_bf16_config": dict(
        hf_model_id="Qwen/Qwen3-Omni-30B-A3B-Instruct", tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
        expert_model_parallel_size=8, expert_tensor_parallel_size=1, seq_length=4096),
}


@pytest.mark.parametrize("name", sorted(HAND_READ))
def test_values_read_by_hand(synced, name):
    record = _recipes(synced[2])[name]
    assert {k: record[k] for k in HAND_READ[name]} == HAND_READ[name]


def test_the_deepseek_v4_layout_is_unresolved_with_its_reason(synced):
    record = _recipes(synced[2])["deepseek_v4_flash_pretrain_32gpu_h100_bf16_config"]
    assert record["unresolved"] == ["pipeline_model_parallel_layout"]
    assert any(f["code"] == "unresolved" and "pipeline_model_parallel_layout" in f["message"]
               for f in record["findings"])


# --- an independent reader: the recipe's own top-level statements ----------------------------------
_DIRECT = {("model", "tensor_model_parallel_size"), ("model", "pipeline_model_parallel_size"),
           ("model", "virtual_pipeline_model_parallel_size"), ("model", "context_parallel_size"),
           ("model", "expert_model_parallel_size"), ("model", "sequence_parallel"), ("model", "seq_length"),
           ("train", "global_batch_size"), ("train", "micro_batch_size")}
_UNREADABLE = object()


def _module_constants(tree: ast.Module) -> dict[str, object]:
    out: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
            out[target.id] = node.value.value
    return out


def direct_assignments(module: str, function: str) -> dict[str, object]:
    """field -> value of the last top-level `cfg.<section>.<field> = literal | NAME` in the function."""
    tree = ast.parse((SRC / (module.replace(".", "/") + ".py")).read_text())
    constants = _module_constants(tree)
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    out: dict[str, object] = {}
    local: dict[str, object] = {}
    for stmt in func.body if func else []:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(value, ast.Constant):
            read = value.value
        elif isinstance(value, ast.Name):
            read = local.get(value.id, constants.get(value.id, _UNREADABLE))
        else:
            read = _UNREADABLE
        if isinstance(target, ast.Name):
            local[target.id] = read
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
              and isinstance(target.value.value, ast.Name) and target.value.value.id == "cfg"
              and (target.value.attr, target.attr) in _DIRECT):
            out[target.attr] = read
    return {k: v for k, v in out.items() if v is not _UNREADABLE}


def test_every_value_a_recipe_sets_itself_is_the_catalogs(synced):
    compared, disagree, llama = 0, [], 0
    for name, record in _recipes(synced[2]).items():
        if record["raises_not_implemented"]:
            continue
        for field, value in direct_assignments(record["module"], name).items():
            compared += 1
            llama += name.startswith("llama")
            if record[field] != value:
                disagree.append((name, field, value, record[field]))
    assert disagree == []
    assert compared > 1000 and llama > 200  # not vacuous: 1,772 values, 36 Llama recipes, on the fixture


# --- catalog diff 0.6.2 -> 0.7.0 -----------------------------------------------------------------
def test_catalog_diff_from_the_shipped_release_reads_well(synced, capsys, monkeypatch):
    data_home, _, catalog = synced
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    monkeypatch.delenv("MBRIDGE_LAUNCH_CATALOGS", raising=False)
    capsys.readouterr()
    # both by version: 0.6.2 from the package, 0.7.0 from the user's data folder
    assert main(["catalog", "diff", "0.6.2", "0.7.0"]) == 1  # 1: differences found
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("catalog diff: Megatron Bridge 0.6.2") and "0.7.0" in lines[0]
    library = _recipes(catalog)
    assert lines[1].startswith(f"library recipes: 297 -> {len(library)}")
    assert any(line.startswith("benchmark recipes: ") for line in lines)
    assert any(line.startswith("defaults changed: ") for line in lines)
    # the Llama recipes keep their 0.6.2 layouts: none of them is reported with a layout field gone
    for line_no, line in enumerate(lines):
        if line.startswith("  library llama"):
            block = []
            for later in lines[line_no + 1:]:
                if not later.startswith("    "):
                    break
                block.append(later)
            assert not [b for b in block if b.strip().startswith(LAYOUT) and b.endswith("-> null")], line
    assert lines[-1] == "differences found"


def test_a_bridge_hook_that_fills_a_kwargs_dict_is_read():
    """0.7's builder path: `hf_config_to_model_config_kwargs` fills a dict (`kw["x"] = ...`,
    `kw.update(x=...)`) rather than setting attributes on a provider."""
    from mbridge_launch.catalog_sync.hf_bridges import provider_bridge_assignments
    from mbridge_launch.catalog_sync.values import Unknown

    source = (
        "def hf_config_to_model_config_kwargs(self, hf_config):\n"
        "    kw = super().hf_config_to_model_config_kwargs(hf_config)\n"
        "    kw['cp_comm_type'] = 'p2p'\n"
        "    kw.update(moe_token_dispatcher_type='flex', normalization='RMSNorm')\n"
        "    if hf_config.x:\n"
        "        kw['recompute_granularity'] = 'full'\n"
        "    return kw\n"
    )
    found = provider_bridge_assignments(ast.parse(source).body[0])
    assert found["cp_comm_type"] == "p2p" and found["moe_token_dispatcher_type"] == "flex"
    assert isinstance(found["recompute_granularity"], Unknown)  # under a branch: the run decides
    assert "normalization" not in found  # architecture, not an execution setting


def test_the_07_dataset_selectors_are_the_ones_plans_name():
    """0.7's run_recipe.py takes `--dataset` from DATASET_PRESETS (recipes/utils/dataset_utils.py):
    every selector a Plan may name (catalog/datasets.yaml, `energon` included) is one of them."""
    from mbridge_launch.knowledge.datasets import load_datasets

    tree = ast.parse((SRC / "megatron/bridge/recipes/utils/dataset_utils.py").read_text())
    presets = next(n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                   and getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "") == "DATASET_PRESETS")
    keys = {k.value for k in presets.keys if isinstance(k, ast.Constant)}
    assert "energon" in keys
    assert set(load_datasets()) == keys
