"""The tier's own offline Hugging Face cache: a config.json for every HF id the 0.6.2 recipes load.

Why: every recipe calls `AutoBridge.from_hf_pretrained(<hf id>[, revision=<sha>])`, which reads only
`config.json` (through `AutoConfig.from_pretrained`; `PreTrainedCausalLM` is lazy and loads no
weights or tokenizer while a recipe builds). With HF_HUB_OFFLINE=1 and the file missing it fails
(after retries); the tier must never reach the network and must not depend on a user's cache.

What it writes, into a tier-private HF_HOME (never ~/.cache/huggingface):
    <home>/hub/models--<org>--<name>/snapshots/<revision>/config.json
    <home>/hub/models--<org>--<name>/refs/main            (-> <revision>)
<revision> is the commit the recipe pins (`revision=` in the recipe module; data file "revision")
when it pins one, else a stable made-up one (sha1 of the config), which only refs/main names.

Where the numbers come from: the project's architecture catalog (catalog/models.yaml, Megatron
field names), translated to the Hugging Face key names of the model's transformers config class.
tests/bridge/data/hf_models.json adds what the project does not store: the HF model_type and
architectures (which select the transformers config class and the Megatron Bridge model bridge),
how a vision-language config nests its text part, pinned revisions, and a few HF-only keys, each
with its source. Keys neither gives take the transformers config class's defaults: see
not_verified.py. A repository that no models.yaml architecture describes (a diffusers pipeline:
FLUX.1-dev, whose recipe reads only transformer/config.json) has its files given whole in the data
file ("files", published content). A config whose published model_type exists only as remote code
but whose class is a transformers one (Kimi-K2: model_type kimi_k2, a DeepseekV3Config) is written
with the transformers model_type and no auto_map; the data file says so, and why the bridge is the same. An HF id with no architecture in models.yaml, or whose config needs remote code
(auto_map) that cannot be had offline, is not written: the recipes that need it fail to build with
"offline / no config.json", and the tier reports them as not checkable, with that reason.

Stdlib + PyYAML only: it runs in the tier's env and in the project's.

    python tests/bridge/hf_cache.py [--home DIR] [--list]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODELS_YAML = ROOT / "catalog" / "models.yaml"
DATA = HERE / "data" / "hf_models.json"

# Megatron field (models.yaml) -> HF key, shared by the decoder-only config classes used here
COMMON = {
    "num_layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "ffn_hidden_size": "intermediate_size",
    "num_attention_heads": "num_attention_heads",
    "num_query_groups": "num_key_value_heads",
    "kv_channels": "head_dim",
    "vocab_size": "vocab_size",
    "share_embeddings_and_output_weights": "tie_word_embeddings",
    "max_position_embeddings": "max_position_embeddings",
    "rope_theta": "rope_theta",
    "sliding_window": "sliding_window",
}
# MoE keys by naming style of the HF config class
MOE_STYLES: dict[str, dict[str, str]] = {
    "qwen": {  # Qwen2/3-MoE, Qwen3-Next, OLMoE, Qwen3-VL-MoE
        "num_moe_experts": "num_experts",
        "moe_router_topk": "num_experts_per_tok",
        "moe_ffn_hidden_size": "moe_intermediate_size",
        "moe_shared_expert_intermediate_size": "shared_expert_intermediate_size",
    },
    "deepseek": {  # DeepSeek-V2/V3, GLM-4.5 (glm4_moe), Kimi
        "num_moe_experts": "n_routed_experts",
        "moe_router_topk": "num_experts_per_tok",
        "moe_ffn_hidden_size": "moe_intermediate_size",
        "moe_first_dense_layers": "first_k_dense_replace",
        "q_lora_rank": "q_lora_rank",
        "kv_lora_rank": "kv_lora_rank",
        "qk_head_dim": "qk_nope_head_dim",
        "qk_pos_emb_head_dim": "qk_rope_head_dim",
        "v_head_dim": "v_head_dim",
        "mtp_num_layers": "num_nextn_predict_layers",
    },
    "gpt_oss": {"num_moe_experts": "num_local_experts", "moe_router_topk": "num_experts_per_tok"},
    "nemotron_h": {
        "num_moe_experts": "n_routed_experts",
        "moe_router_topk": "num_experts_per_tok",
        "moe_ffn_hidden_size": "moe_intermediate_size",
        "moe_shared_expert_intermediate_size": "moe_shared_expert_intermediate_size",
        "hybrid_layer_pattern": "hybrid_override_pattern",
        "mamba_state_dim": "ssm_state_size",
        "mamba_head_dim": "mamba_head_dim",
        "mamba_num_groups": "n_groups",
        "mamba_num_heads": "mamba_num_heads",
        "mtp_num_layers": "num_nextn_predict_layers",
    },
    "step": {  # StepFun Step-3.5 (step3p5, the bridge's own Step35Config; also Step-3.7's text_config)
        "num_query_groups": "num_attention_groups",
        "num_moe_experts": "moe_num_experts",
        "moe_router_topk": "moe_top_k",
        "moe_ffn_hidden_size": "moe_intermediate_size",
        "moe_shared_expert_intermediate_size": "share_expert_dim",
        "mtp_num_layers": "num_nextn_predict_layers",
    },
}


def cache_root() -> Path:
    return Path(os.environ.get("MBL_BRIDGE_CACHE") or Path.home() / ".cache" / "mbridge-launch")


def _key() -> str:
    h = hashlib.sha256()
    for p in (MODELS_YAML, DATA, Path(__file__)):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def default_home() -> Path:
    """HF_HOME of the tier, keyed by its inputs: a changed models.yaml writes a new cache."""
    return cache_root() / f"hf-home-{_key()}"


def load_archs() -> dict[str, dict[str, Any]]:
    import yaml

    return yaml.safe_load(MODELS_YAML.read_text())


# Keys whose explicit null in models.yaml is a published value, not "unknown": DeepSeek-V2-Lite and
# Moonlight publish q_lora_rank null (queries projected directly); the HF class default is 1536.
NULL_MEANS_NONE = {"q_lora_rank"}


def _rope_parameters(rope_theta: Any, scaling: dict[str, Any] | None) -> dict[str, Any]:
    """transformers 5's rope_parameters from the published rope_theta and legacy rope_scaling
    (a YaRN model such as DeepSeek-V2 or Kimi-K2 would otherwise read as plain RoPE)."""
    if not scaling:
        return {"rope_type": "default", "rope_theta": rope_theta}
    params = {k: v for k, v in scaling.items() if k != "type"}
    params["rope_type"] = scaling.get("rope_type") or scaling.get("type") or "default"
    params["rope_theta"] = rope_theta
    return params


def hf_config(entry: dict[str, Any], arch: dict[str, Any]) -> dict[str, Any]:
    """config.json for one HF id: models.yaml's numbers under the HF names of entry's style."""
    mapping = dict(COMMON)
    mapping.update(MOE_STYLES.get(entry.get("moe_style", ""), {}))
    text: dict[str, Any] = {}
    for megatron_name, hf_name in mapping.items():
        value = arch.get(megatron_name)
        if value is not None or (megatron_name in NULL_MEANS_NONE and megatron_name in arch):
            text[hf_name] = value
    if entry.get("moe_style") == "deepseek" and arch.get("moe_shared_expert_intermediate_size") and arch.get("moe_ffn_hidden_size"):
        # DeepSeek-style configs count shared experts instead of giving their width
        text["n_shared_experts"] = arch["moe_shared_expert_intermediate_size"] // arch["moe_ffn_hidden_size"]
    if entry.get("moe_style") == "gpt_oss" and arch.get("moe_ffn_hidden_size"):
        text["intermediate_size"] = arch["moe_ffn_hidden_size"]
    text.update(entry.get("hf", {}))
    if "rope_theta" in text:  # transformers 5 reads rope_parameters; keep the legacy key as hub files do
        text.setdefault("rope_parameters", _rope_parameters(text["rope_theta"], text.get("rope_scaling")))
    text["model_type"] = entry.get("text_model_type", entry["model_type"])
    nest = entry.get("nest_text_config")
    if not nest:
        config = text
    else:  # a vision-language config: the language model's keys under text_config
        config = _nest_text_config(text, entry)
        config["model_type"] = entry["model_type"]
    config["architectures"] = entry["architectures"]
    config["torch_dtype"] = config.get("torch_dtype", "bfloat16")
    config["_written_by"] = "mbridge-launch tests/bridge/hf_cache.py from catalog/models.yaml (not the real file)"
    return config


def _nest_text_config(text: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """The top of a multimodal config holding the language model's keys. nest_text_config true:
    under text_config (VLMs); a key name such as "thinker_config": under <key>.text_config, with
    that sub-config's model_type (Qwen3-Omni's thinker holds its text, vision and audio parts)."""
    nest = entry["nest_text_config"]
    if nest is True:
        return {"text_config": text, **entry.get("hf_top", {})}
    outer = {"text_config": text, "model_type": entry["nest_model_type"]}
    return {nest: outer, **entry.get("hf_top", {})}


def plan() -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(configs to write: hf_id, revision, config), (HF ids not written: hf_id, reason)."""
    data = json.loads(DATA.read_text())
    archs = load_archs()
    by_hf: dict[str, str] = {}
    for k, v in archs.items():  # the first token of an HF id describes its config.json (later ones are
        if isinstance(v, dict) and v.get("hf_model_id"):  # recipe variants of it: deepseek_v4_flash_no_mtp)
            by_hf.setdefault(v["hf_model_id"], k)
    write: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for hf_id, entry in sorted(data["models"].items()):
        if entry.get("skip"):
            skipped.append({"hf_id": hf_id, "reason": entry["skip"]})
            continue
        if entry.get("files"):
            write.append(_published_files(hf_id, entry))
            continue
        token = entry.get("token") or by_hf.get(hf_id)
        if token is None or token not in archs:
            skipped.append({"hf_id": hf_id, "reason": "no architecture in catalog/models.yaml"})
            continue
        config = hf_config(entry, archs[token])
        blob = json.dumps(config, indent=2, sort_keys=True) + "\n"
        revision = entry.get("revision") or hashlib.sha1(blob.encode()).hexdigest()
        write.append({"hf_id": hf_id, "token": token, "revision": revision, "config": blob,
                      "files": {"config.json": blob}})
    return write, skipped


def _published_files(hf_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A repository whose files the data file gives whole (their published content), because no
    models.yaml architecture describes them: a diffusers pipeline such as FLUX.1-dev, whose
    recipe reads only transformer/config.json."""
    files = {path: json.dumps(content, indent=2, sort_keys=True) + "\n" for path, content in sorted(entry["files"].items())}
    digest = hashlib.sha1("".join(p + b for p, b in files.items()).encode()).hexdigest()
    return {"hf_id": hf_id, "token": entry.get("token", "-"), "revision": entry.get("revision") or digest,
            "config": files.get("config.json", ""), "files": files}


def write_cache(home: Path) -> tuple[int, list[dict[str, str]]]:
    """Write every config atomically: a temp dir renamed to `home` (an interrupted run leaves none)."""
    write, skipped = plan()
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=home.name + ".tmp.", dir=home.parent))
    try:
        for item in write:
            repo = tmp / "hub" / ("models--" + item["hf_id"].replace("/", "--"))
            snap = repo / "snapshots" / item["revision"]
            for rel, blob in item["files"].items():
                (snap / rel).parent.mkdir(parents=True, exist_ok=True)
                (snap / rel).write_text(blob)
            (repo / "refs").mkdir()
            (repo / "refs" / "main").write_text(item["revision"])
        (tmp / "locks").mkdir()
        (tmp / "MANIFEST.json").write_text(json.dumps(
            {"written": [{k: i[k] for k in ("hf_id", "token", "revision")} for i in write], "not_written": skipped},
            indent=1) + "\n")
        try:
            tmp.rename(home)
        except OSError:  # a concurrent run finished first: its cache has the same key, keep it
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(write), skipped


def ensure(home: Path) -> Path:
    if not (home / "MANIFEST.json").exists():
        write_cache(home)
    return home


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write the tier's offline HF cache (config.json per HF id)")
    ap.add_argument("--home", type=Path, help="HF_HOME to write (default: keyed under $MBL_BRIDGE_CACHE)")
    ap.add_argument("--list", action="store_true", help="print what would be written and skipped, write nothing")
    args = ap.parse_args(argv)
    if args.list:
        write, skipped = plan()
        for item in write:
            print(f"write {item['hf_id']} @ {item['revision'][:12]} ({item['token']})")
        for s in skipped:
            print(f"skip  {s['hf_id']}: {s['reason']}")
        return 0
    home = args.home or default_home()
    if (home / "MANIFEST.json").exists():
        print(home)
        return 0
    n, skipped = write_cache(home)
    print(f"hf_cache: wrote {n} configs, skipped {len(skipped)} HF ids", file=sys.stderr)
    print(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
