"""Read a Hugging Face config.json into a ModelArch (models the catalog does not know).

Understands Llama / Mistral / Qwen2 / Qwen3 / Qwen3-MoE / Mixtral / DeepSeek-V3 / GPT-OSS /
Gemma / Nemotron-H style keys, and nested `text_config` of vision-language models. An unknown
model_type works as long as the basic keys are there; missing keys are named in the error.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.hf_cache import cached_hf_config  # noqa: F401 - re-exported
from mbridge_launch.knowledge.models import ModelArch

# Our field -> the config.json keys that carry it, first match wins.
_KEYS: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "num_layers", "n_layer", "n_layers"),
    "hidden_size": ("hidden_size", "d_model", "n_embd", "dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads"),
    "num_query_groups": ("num_key_value_heads", "num_query_groups", "n_kv_heads"),
    "ffn_hidden_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "kv_channels": ("head_dim", "kv_channels"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "seq_length"),
    "rope_theta": ("rope_theta",),
    "num_moe_experts": ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"),
    "moe_router_topk": ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k"),
    "moe_ffn_hidden_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "moe_first_dense_layers": ("first_k_dense_replace",),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_head_dim": ("qk_nope_head_dim",),
    "qk_pos_emb_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "mtp_num_layers": ("num_nextn_predict_layers", "mtp_num_layers"),
    "hybrid_layer_pattern": ("hybrid_override_pattern",),
    "mamba_state_dim": ("ssm_state_size", "mamba_state_dim"),
    "mamba_head_dim": ("mamba_head_dim",),
    "mamba_num_groups": ("n_groups", "mamba_n_groups"),
    "mamba_num_heads": ("mamba_num_heads",),
    "sliding_window": ("sliding_window",),
    "moe_latent_size": ("moe_latent_size",),  # Nemotron 3 Super/Ultra LatentMoE
    "o_lora_rank": ("o_lora_rank",),  # DeepSeek-V4's grouped low-rank output projection
    "o_groups": ("o_groups",),
    "hyper_connection_streams": ("hc_mult",),
}
_BASIC = ("num_layers", "hidden_size", "num_attention_heads", "vocab_size")
# Fields whose 0 means "none" (dense, no MLA, no MTP, no window); every other size is at least 1:
# a 0 head count or group count was a ZeroDivisionError further on.
_MAY_BE_ZERO = frozenset({"num_moe_experts", "moe_router_topk", "moe_first_dense_layers", "q_lora_rank",
                          "kv_lora_rank", "qk_pos_emb_head_dim", "mtp_num_layers", "sliding_window"})
_LAYER_COUNTS = frozenset({"num_layers", "moe_first_dense_layers", "mtp_num_layers"})
MAX_LAYERS = 100_000
MAX_SIZE = 2**31  # beyond any real width, vocabulary or context
_TEXT_FIELDS = frozenset({"hybrid_layer_pattern"})
_NON_GATED_ACTS = ("relu2", "gelu_new", "gelu_pytorch_tanh_nongated", "squared_relu", "relu")


def _config_file(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise UserError("models.hf_config_missing", path=str(p))
    return p


def _first(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    """(the config key that carries the field, its value); (keys[0], None) when none does."""
    for key in keys:
        value = config.get(key)
        if value is not None:
            return key, value
    return keys[0], None


HF_CONFIG_MAX_BYTES = 4 * 1024 * 1024  # config.json files are a few KB


def _read_config(file: Path) -> str:
    """config.json's text: a bounded read (a FIFO or /dev/zero is one line, never a hang)."""
    from mbridge_launch.base.files import read_bounded_text

    return read_bounded_text(file, HF_CONFIG_MAX_BYTES, "hf_config")


def _refuse_constant(literal: str) -> None:
    from mbridge_launch.base.i18n import t

    raise ValueError(t("models.hf_config_constant", literal=literal))


def _load_json(file: Path) -> Any:
    """config.json parsed; NaN / Infinity literals (which Python's json accepts) refused."""
    return json.loads(_read_config(file), parse_constant=_refuse_constant)


def _bad_value(file: Path, key: str, value: Any, expected: str, **params: Any) -> UserError:
    """One line naming the file, the key, what it must be (a models.hf_expected.* key) and the value."""
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.numbers import shown

    return UserError("models.hf_config_bad_value", path=str(file), field=key,
                     expected=t(f"models.hf_expected.{expected}", **params),
                     value=shown(json.dumps(value) if not isinstance(value, str) else value))


def _checked_size(file: Path, key: str, value: Any, low: int, high: int) -> int:
    """A count or a size: a JSON integer (or an integral float such as 4096.0) in [low, high]."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad_value(file, key, value, "whole", low=f"{low:,}", high=f"{high:,}")
    return value


def _checked(file: Path, name: str, key: str, value: Any) -> Any:
    """One field of config.json as ModelArch takes it, or one line naming the file and key."""
    if name in _TEXT_FIELDS:
        if not isinstance(value, str):
            raise _bad_value(file, key, value, "string")
        return value
    if name == "rope_theta":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise _bad_value(file, key, value, "positive_number")
        return value
    high = MAX_LAYERS if name in _LAYER_COUNTS else MAX_SIZE
    return _checked_size(file, key, value, 0 if name in _MAY_BE_ZERO else 1, high)


def _field_values(config: dict[str, Any], file: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, keys in _KEYS.items():
        key, value = _first(config, keys)
        if value is not None:
            values[name] = _checked(file, name, key, value)
    return values


def _optional_size(config: dict[str, Any], file: Path, key: str, low: int = 0) -> int | None:
    value = config.get(key)
    return None if value is None else _checked_size(file, key, value, low, MAX_SIZE)


def arch_from_hf_config(path: str | Path) -> ModelArch:
    file = _config_file(path)
    try:
        raw = _load_json(file)
    except (ValueError, RecursionError) as exc:
        raise UserError("models.hf_config_invalid", path=str(file), reason=str(exc).splitlines()[0]) from None
    if not isinstance(raw, dict):
        raise UserError("models.hf_config_invalid", path=str(file), reason="not a JSON object")
    # Vision-language models keep the language model under text_config (llm_config for some).
    config = dict(raw)
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(raw.get(nested), dict):
            config = {**raw, **raw[nested]}
            break
    values = _field_values(config, file)
    missing = [k for k in _BASIC if k not in values]
    if "ffn_hidden_size" not in values and "moe_ffn_hidden_size" not in values:
        missing.append("ffn_hidden_size")
    if missing:
        wanted = ", ".join(f"{name} ({' / '.join(_KEYS[name][:2])})" for name in missing)
        raise UserError("models.hf_config_keys", path=str(file), keys=wanted)

    model_type = str(config.get("model_type") or "")
    _fill_moe(values, config, file)
    _fill_attention(values, config, model_type, file)
    act = str(config.get("hidden_act") or config.get("hidden_activation") or config.get("mlp_hidden_act") or "silu")
    values["gated_linear_unit"] = act not in _NON_GATED_ACTS and model_type not in ("gpt2", "gpt_bigcode", "opt")
    values["share_embeddings_and_output_weights"] = bool(config.get("tie_word_embeddings", False))
    if values.get("hybrid_layer_pattern") and "num_layers" in values:
        values["num_layers"] = len(values["hybrid_layer_pattern"])
    name = _model_name(raw, file)
    hf_id = raw.get("_name_or_path") if isinstance(raw.get("_name_or_path"), str) and "/" in raw.get("_name_or_path", "") else None
    ints = {k: int(v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "rope_theta"}
    values.update(ints)
    return ModelArch.from_flat(name=name, hf_model_id=hf_id, sources=(f"hf-config:{file}",), **values)


def _fill_moe(values: dict[str, Any], config: dict[str, Any], file: Path) -> None:
    experts = values.get("num_moe_experts")
    if not experts:
        values.pop("moe_router_topk", None)
        return
    if "moe_ffn_hidden_size" not in values:
        # Mixtral / GPT-OSS: intermediate_size is the expert size and every layer is MoE.
        values["moe_ffn_hidden_size"] = values.get("ffn_hidden_size")
    shared = (_optional_size(config, file, "shared_expert_intermediate_size")
              or _optional_size(config, file, "moe_shared_expert_intermediate_size"))
    shared_experts = _optional_size(config, file, "n_shared_experts")
    if shared is None and shared_experts and values.get("moe_ffn_hidden_size"):
        shared = shared_experts * int(values["moe_ffn_hidden_size"])
    if shared:
        values["moe_shared_expert_intermediate_size"] = int(shared)
    # Qwen-MoE: decoder_sparse_step / mlp_only_layers; only a leading dense block is modelled.
    mlp_only = config.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in mlp_only):
        raise _bad_value(file, "mlp_only_layers", mlp_only, "layer_list")
    if mlp_only and "moe_first_dense_layers" not in values:
        leading = 0
        while leading in mlp_only:
            leading += 1
        values["moe_first_dense_layers"] = leading


def _fill_attention(values: dict[str, Any], config: dict[str, Any], model_type: str, file: Path) -> None:
    if "q_lora_rank" in values and values["q_lora_rank"] is None:
        values.pop("q_lora_rank")
    if values.get("kv_lora_rank"):
        values["num_query_groups"] = values["num_attention_heads"]  # MLA has no GQA
    if model_type.startswith("deepseek_v4"):
        values["multi_latent_attention"] = True  # the V4 provider builds its attention on Megatron's MLA path
    window = values.get("sliding_window")
    if window is not None and config.get("use_sliding_window") is False:
        values.pop("sliding_window")
    elif window is not None:
        layer_types = config.get("layer_types")
        if isinstance(layer_types, list) and "full_attention" in layer_types:
            period = layer_types.index("full_attention") + 1
            values["sliding_window_pattern"] = period
        elif config.get("sliding_window_pattern"):
            values["sliding_window_pattern"] = _optional_size(config, file, "sliding_window_pattern", low=1)
        elif model_type.startswith("gemma2"):
            values["sliding_window_pattern"] = 2


def _model_name(raw: dict[str, Any], file: Path) -> str:
    name = raw.get("_name_or_path")
    if isinstance(name, str) and name.strip():
        return "hf:" + name.strip().rstrip("/").split("/")[-1]
    return "hf:" + (file.parent.name or "config")


def hf_model_type(path: str | Path) -> str:
    """The config's model_type ('llama', 'qwen3_moe', ...; a VLM's text model's), '' when absent."""
    try:
        raw = _load_json(_config_file(path))
    except (ValueError, RecursionError, UserError):
        return ""
    if not isinstance(raw, dict):
        return ""
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(raw.get(nested), dict) and raw[nested].get("model_type"):
            return str(raw[nested]["model_type"])
    return str(raw.get("model_type") or "")


# what a config's model takes in besides text: the keys Hugging Face configs use for the encoder
_VISION_KEYS = ("vision_config", "vision_tower", "mm_vision_tower", "image_token_id", "image_token_index",
                "vision_start_token_id")
_AUDIO_KEYS = ("audio_config", "audio_token_index", "audio_token_id")


def hf_modality(path: str | Path) -> str:
    """'text', 'vision', 'audio' or 'omni' (both): what the config's model reads (a VLM config nests a vision
    encoder's config; a text model has none), so that the nearest recipe models of a text model
    are text models, not vision-language ones of a similar size."""
    try:
        raw = _load_json(_config_file(path))
    except (ValueError, RecursionError, UserError):
        return "text"
    if not isinstance(raw, dict):
        return "text"
    model_type = str(raw.get("model_type") or "").lower()
    audio = any(key in raw for key in _AUDIO_KEYS) or "audio" in model_type
    vision = any(key in raw for key in _VISION_KEYS) or "_vl" in model_type or "llava" in model_type
    if "omni" in model_type or (audio and vision):
        return "omni"
    return "audio" if audio else "vision" if vision else "text"
