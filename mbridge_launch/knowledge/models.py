"""Model architectures: the catalog (catalog/models.yaml), name resolution and HF config.json.

`load_arch(token)` gives a frozen `ModelArch`; `resolve_model(text)` maps what a user types (recipe
token, loose name such as "Llama 3 8B", Hugging Face id) to a recipe model token;
`knowledge.hf_config.arch_from_hf_config(path)` reads a local Hugging Face config.json for models the catalog lacks.
Fields absent from the catalog stay None: the planner reports them instead of guessing.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from typing import Any, Iterable

from mbridge_launch.base.errors import UserError
from mbridge_launch.base.resources import catalog_yaml

# Fields the memory and FLOPs models cannot do without.
PLANNING_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size")


@dataclass(frozen=True)
class MLA:
    """Multi-latent attention (DeepSeek-V3 style): keys and values (and queries, with a
    q_lora_rank) pass through a low-rank latent. Megatron-Core field names."""

    kv_lora_rank: int
    q_lora_rank: int | None = None  # None: queries are projected directly
    qk_head_dim: int | None = None
    qk_pos_emb_head_dim: int | None = None
    v_head_dim: int | None = None


@dataclass(frozen=True)
class Mamba:
    """The Mamba mixer of hybrid models; Megatron-Core calls the fields mamba_<name>.
    None: the planner's default."""

    state_dim: int | None = None
    head_dim: int | None = None
    num_groups: int | None = None
    num_heads: int | None = None


@dataclass(frozen=True)
class ModelArch:
    """A decoder architecture with Megatron-Core field names. None means unknown."""

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    ffn_hidden_size: int | None = None
    num_query_groups: int | None = None  # KV heads; None = same as attention heads (MHA)
    kv_channels: int | None = None  # head dim; None = hidden_size / num_attention_heads
    vocab_size: int | None = None
    make_vocab_size_divisible_by: int = 128
    gated_linear_unit: bool = True  # SwiGLU / GeGLU: three MLP matrices instead of two
    share_embeddings_and_output_weights: bool = False
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    sliding_window_pattern: int | None = None  # N: (N-1) windowed layers then 1 full layer
    # MoE
    num_moe_experts: int | None = None
    moe_router_topk: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_first_dense_layers: int = 0
    # LatentMoE (Nemotron 3 Super/Ultra): routed experts run in a narrower latent space, entered and
    # left through one hidden<->latent projection pair per MoE layer; None: experts run at hidden_size
    moe_latent_size: int | None = None
    mla: MLA | None = None  # None: ordinary multi-head / grouped-query attention
    # Megatron's multi_latent_attention flag where the catalog models the attention without MLA
    # ranks (DeepSeek-V4's compressed attention runs on Megatron's MLA path: the provider sets it,
    # so recompute module mla_up_proj applies); None: it follows `mla`
    multi_latent_attention: bool | None = None
    # Manifold-constrained hyper-connections (DeepSeek-V4 mHC): residual streams per layer, 0 = none
    hyper_connection_streams: int = 0
    # DeepSeek-V4's attention (Megatron's dsv4_hybrid): queries through a q_lora_rank latent, one
    # shared K=V head of kv_channels, and the output through o_groups grouped projections to
    # o_lora_rank then back to hidden_size (Megatron Bridge 0.6.2 flop_utils' dsv4 terms). None:
    # ordinary projections. (An MLA model's q_lora_rank is its MLA record's.)
    q_lora_rank: int | None = None
    o_lora_rank: int | None = None
    o_groups: int | None = None
    # Multi-token prediction (DeepSeek-V3, GLM): extra decoder layers that predict later tokens
    mtp_num_layers: int = 0
    # DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5.x), Megatron Core's dsa_indexer_* fields:
    # the indexer's heads and head width, the keys each query keeps, and index sharing (a layer
    # runs the indexer when (max(layer - offset, 0) % freq) == 0, 1-indexed; the others reuse its
    # top-k). None: no DSA (planner.dsa reads them)
    dsa_indexer_n_heads: int | None = None
    dsa_indexer_head_dim: int | None = None
    dsa_indexer_topk: int | None = None
    dsa_indexer_topk_freq: int = 1
    dsa_indexer_skip_topk_offset: int = 0
    # Per-layer embeddings (Gemma 4 E2B/E4B, Megatron Bridge's per_layer_embed_*): a second token
    # table of num_layers x per_layer_embed_dim columns, looked up beside the word embeddings; None: none
    per_layer_embed_dim: int | None = None
    per_layer_embed_vocab_size: int | None = None
    # Hybrid Mamba (Nemotron-H): M = Mamba, * = attention, - = MLP, E = MoE
    hybrid_layer_pattern: str | None = None
    mamba: Mamba = Mamba()
    hf_model_id: str | None = None
    aliases: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    notes: str | None = None
    total_params_reference: int | None = None
    rope_theta: float | None = None
    position_embedding_type: str | None = None

    def __hash__(self) -> int:  # hashed often by the planner's caches: compute once
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    @classmethod
    def from_flat(cls, **values: Any) -> ModelArch:
        """Build from flat Megatron-Core keys, as catalog/models.yaml and config.json readers
        give them: the MLA keys and the mamba_* keys go into their records (MLA only when
        kv_lora_rank is given: the other MLA keys mean nothing without it)."""
        mla = {key: values.pop(key) for key in _MLA_KEYS if key in values}
        mamba = {name: values.pop(key) for key, name in _MAMBA_KEYS.items() if key in values}
        if mla.get("kv_lora_rank") is not None:
            values["mla"] = MLA(**mla)
        elif mla.get("q_lora_rank") is not None:
            values["q_lora_rank"] = mla["q_lora_rank"]  # DeepSeek-V4: low-rank queries without MLA's KV latent
        return cls(**values, mamba=Mamba(**mamba))

    # ------------------------------------------------------------------ shape helpers
    @property
    def kv_groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return bool(self.num_moe_experts) and self.num_moe_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.mla is not None

    @property
    def uses_mla_path(self) -> bool:
        """Whether Megatron builds the attention with multi_latent_attention (what makes the
        recompute module mla_up_proj valid), whether or not the catalog models its ranks."""
        return self.mla is not None if self.multi_latent_attention is None else self.multi_latent_attention

    @property
    def expert_width(self) -> int:
        """The width routed experts compute in: the latent size of a LatentMoE, else hidden_size."""
        return self.moe_latent_size or self.hidden_size

    @property
    def is_hybrid(self) -> bool:
        return bool(self.hybrid_layer_pattern)

    @property
    def expert_ffn(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn_hidden_size or 0

    @property
    def missing(self) -> tuple[str, ...]:
        """Planning fields the catalog does not know for this model."""
        gone = [f for f in PLANNING_FIELDS if getattr(self, f) is None]
        if "ffn_hidden_size" in gone and self.is_moe and self.moe_ffn_hidden_size and self.layer_counts()["mlp"] == 0:
            gone.remove("ffn_hidden_size")
        if self.is_moe and not self.moe_router_topk:
            gone.append("moe_router_topk")
        return tuple(gone)

    @property
    def complete(self) -> bool:
        return not self.missing

    def padded_vocab(self, tp: int = 1) -> int:
        """Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by x TP."""
        multiple = self.make_vocab_size_divisible_by * max(tp, 1)
        vocab = self.vocab_size or 0
        return -(-vocab // multiple) * multiple

    def layer_counts(self) -> dict[str, int]:
        """Decoder layers by kind: attention, mamba, mlp (dense), moe (without MTP)."""
        return dict(self._layer_counts)

    @cached_property
    def _layer_counts(self) -> dict[str, int]:
        if self.is_hybrid:
            p = self.hybrid_layer_pattern or ""
            return {"attention": p.count("*"), "mamba": p.count("M"), "mlp": p.count("-"), "moe": p.count("E")}
        moe = max(self.num_layers - self.moe_first_dense_layers, 0) if self.is_moe else 0
        return {"attention": self.num_layers, "mamba": 0, "mlp": self.num_layers - moe, "moe": moe}

    def layer_kinds(self) -> tuple[str, ...]:
        """One letter per decoder layer in order (M, *, -, E); a transformer layer is '*-' or '*E',
        written as its MLP kind ('-' or 'E') with attention implied."""
        return self._layer_kinds

    @cached_property
    def _layer_kinds(self) -> tuple[str, ...]:
        if self.is_hybrid:
            return tuple(self.hybrid_layer_pattern or "")
        dense = self.moe_first_dense_layers if self.is_moe else self.num_layers
        return tuple("-" * min(dense, self.num_layers) + "E" * (self.num_layers - min(dense, self.num_layers)))

    # ------------------------------------------------------------------ parameter counts
    def attention_params(self) -> int:
        return self._cached_attention_params

    @cached_property
    def _cached_attention_params(self) -> int:
        h = self.hidden_size
        n = self.num_attention_heads
        mla = self.mla
        if mla is not None:
            qk = (mla.qk_head_dim or 0) + (mla.qk_pos_emb_head_dim or 0)
            v = mla.v_head_dim or 0
            if mla.q_lora_rank:
                q = h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * n * qk
            else:
                q = h * n * qk
            kv = h * (mla.kv_lora_rank + (mla.qk_pos_emb_head_dim or 0)) + mla.kv_lora_rank
            kv += mla.kv_lora_rank * n * ((mla.qk_head_dim or 0) + v)
            return q + kv + n * v * h + h  # + input layernorm
        d = self.head_dim
        if self.o_lora_rank:  # DeepSeek-V4: q latent, one K=V head, grouped low-rank output
            q = (self.q_lora_rank or 0) * (h + n * d + 1) if self.q_lora_rank else h * n * d
            kv = self.kv_groups * (h * d + d)
            out = n * d * self.o_lora_rank + (self.o_groups or 1) * self.o_lora_rank * h
            return q + kv + out + h
        return h * d * (2 * n + 2 * self.kv_groups) + h

    def mlp_params(self) -> int:
        return self._cached_mlp_params

    @cached_property
    def _cached_mlp_params(self) -> int:
        mats = 3 if self.gated_linear_unit else 2
        return mats * self.hidden_size * (self.ffn_hidden_size or 0) + self.hidden_size

    def expert_params(self) -> int:
        return self._cached_expert_params

    @cached_property
    def _cached_expert_params(self) -> int:
        """One routed expert (in the latent space of a LatentMoE)."""
        mats = 3 if self.gated_linear_unit else 2
        return mats * self.expert_width * self.expert_ffn

    def moe_layer_params(self) -> tuple[int, int]:
        return self._cached_moe_layer_params

    @cached_property
    def _cached_moe_layer_params(self) -> tuple[int, int]:
        """(parameters that every EP rank holds: router, shared expert, norm, a LatentMoE's
        hidden<->latent projections; routed experts)."""
        mats = 3 if self.gated_linear_unit else 2
        h = self.hidden_size
        shared = mats * h * (self.moe_shared_expert_intermediate_size or 0)
        latent = 2 * h * self.moe_latent_size if self.moe_latent_size else 0
        return shared + latent + h * (self.num_moe_experts or 0) + h, self.expert_params() * (self.num_moe_experts or 0)

    def mamba_params(self) -> int:
        return self._cached_mamba_params

    @cached_property
    def _cached_mamba_params(self) -> int:
        h = self.hidden_size
        heads = self.mamba.num_heads or (2 * h // (self.mamba.head_dim or 64))
        d_inner = heads * (self.mamba.head_dim or 64)
        gn = (self.mamba.num_groups or 1) * (self.mamba.state_dim or 128)
        in_proj = h * (2 * d_inner + 2 * gn + heads)
        conv = (d_inner + 2 * gn) * 5  # kernel 4 + bias
        return in_proj + conv + 3 * heads + d_inner + d_inner * h + h

    def embedding_params(self, tp: int = 1) -> int:
        return self.padded_vocab(tp) * self.hidden_size

    def per_layer_embedding_params(self, tp: int = 1) -> int:
        """The per-layer embedding table (Gemma 4 E4B: 262144 x 42 x 256, about 2.8B), held where
        the word embeddings are (the first pipeline stage); 0 without one."""
        if not self.per_layer_embed_dim:
            return 0
        multiple = self.make_vocab_size_divisible_by * max(tp, 1)
        vocab = -(-(self.per_layer_embed_vocab_size or self.vocab_size or 0) // multiple) * multiple
        return vocab * self.num_layers * self.per_layer_embed_dim

    def mtp_params(self) -> int:
        return self._cached_mtp_params

    @cached_property
    def _cached_mtp_params(self) -> int:
        """Each MTP layer: two norms, the 2h x h projection, one decoder layer (its MLP kind is the
        last decoder layer's), a final norm; it shares the embedding and output head."""
        if not self.mtp_num_layers:
            return 0
        h = self.hidden_size
        last_moe = self.layer_kinds()[-1] == "E" if self.num_layers else False
        mlp = sum(self.moe_layer_params()) if last_moe else self.mlp_params()
        return self.mtp_num_layers * (3 * h + 2 * h * h + self.attention_params() + mlp)

    @cached_property
    def _param_split(self) -> tuple[int, int]:
        """(non-expert parameters, routed expert parameters), decoder + MTP + embeddings."""
        counts = self.layer_counts()
        shared_moe, routed_moe = self.moe_layer_params() if self.is_moe else (0, 0)
        dense = counts["attention"] * self.attention_params() + counts["mlp"] * self.mlp_params()
        dense += counts["mamba"] * self.mamba_params() + counts["moe"] * shared_moe + self.hidden_size
        routed = counts["moe"] * routed_moe
        mtp = self.mtp_params()
        if mtp and self.is_moe and self.layer_kinds()[-1] == "E":
            routed += self.mtp_num_layers * routed_moe
            mtp -= self.mtp_num_layers * routed_moe
        dense += mtp
        emb = self.embedding_params()
        dense += emb if self.share_embeddings_and_output_weights else 2 * emb
        dense += self.per_layer_embedding_params()
        return dense, routed

    @property
    def total_params(self) -> int:
        dense, routed = self._param_split
        return dense + routed

    @property
    def expert_total_params(self) -> int:
        return self._param_split[1]

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (top-k of the routed experts)."""
        dense, routed = self._param_split
        if not self.is_moe:
            return dense
        return dense + routed * (self.moe_router_topk or 0) // (self.num_moe_experts or 1)


_MLA_KEYS = tuple(f.name for f in fields(MLA))
_MAMBA_KEYS = {f"mamba_{f.name}": f.name for f in fields(Mamba)}
# The keys of a catalog/models.yaml entry that ModelArch.from_flat takes.
_FLAT_KEYS = {f.name for f in fields(ModelArch)} - {"mla", "mamba"} | set(_MLA_KEYS) | set(_MAMBA_KEYS)


def _arch_from_entry(token: str, entry: dict[str, Any]) -> ModelArch:
    values: dict[str, Any] = {k: v for k, v in entry.items() if k in _FLAT_KEYS}
    values["aliases"] = tuple(entry.get("aliases") or ())
    values["sources"] = tuple(entry.get("sources") or ())
    return ModelArch.from_flat(name=token, **values)


def known_models() -> list[str]:
    """Recipe model tokens whose architecture is in catalog/models.yaml."""
    return sorted(catalog_yaml("models.yaml"))


@lru_cache(maxsize=None)
def load_arch(token: str) -> ModelArch | None:
    entry = catalog_yaml("models.yaml").get(token)
    return None if entry is None else _arch_from_entry(token, entry)


# ---------------------------------------------------------------------- name resolution
# the UserError keys of a name the catalog does not resolve (any other failure is not 'unknown')
UNKNOWN_MODEL_KEYS = ("models.unknown", "models.unknown_none", "models.unknown_hf", "models.not_in_catalog")
_SUFFIXES = ("instruct", "base", "hf", "it", "pt", "chat", "bf16", "fp8", "8k")


def _norm(text: str) -> str:
    """Loose key: lower case, letters and digits only ("LLaMA-3-8B" -> "llama38b")."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _strip_suffixes(text: str) -> str:
    parts = re.split(r"[-_ ]", text.lower())
    while len(parts) > 1 and parts[-1] in _SUFFIXES:
        parts.pop()
    return _norm("-".join(parts))


def _recipe_models() -> list[tuple[str, str | None]]:
    """(model token, HF id) pairs from the recipe catalog, when that module is available."""
    try:
        from mbridge_launch.knowledge import catalog as catalog_module  # written by the catalog work

        load = getattr(catalog_module, "load_catalog", None)
        if load is None:
            return []
        cat = load()
    except (ImportError, UserError, OSError):
        return []
    recipes: Iterable[Any] = getattr(cat, "recipes", cat)
    if isinstance(recipes, dict):
        recipes = recipes.values()
    pairs = []
    for recipe in recipes:
        model = getattr(recipe, "model", None)
        if model:
            pairs.append((model, getattr(recipe, "hf_model_id", None)))
    return pairs


def _index(pairs: Iterable[tuple[str, str | None]], aliases: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Loose key -> token, from tokens, aliases, HF ids and HF id tails."""
    index: dict[str, str] = {}
    for token, hf_id in pairs:
        names = [token, *aliases.get(token, ())]
        if hf_id:
            names += [hf_id, hf_id.split("/")[-1]]
        for name in names:
            for key in (_norm(name), _strip_suffixes(name)):
                index.setdefault(key, token)
    return index


def resolve_model(text: str) -> str:
    """Map a recipe token, loose name or HF id to a recipe model token; unknown -> UserError."""
    query = (text or "").strip()
    if not query:
        raise UserError("models.unknown", model=text, closest="-")
    cat = catalog_yaml("models.yaml")
    if query in cat:
        return query
    aliases = {tok: tuple(e.get("aliases") or ()) for tok, e in cat.items()}
    pairs = [(tok, e.get("hf_model_id")) for tok, e in cat.items()]
    lowered = query.lower()
    for tok, hf_id in pairs:
        if hf_id and hf_id.lower() == lowered:
            return tok
    index = _index(pairs, aliases)
    for key in (_norm(query), _strip_suffixes(query), _norm(query.split("/")[-1])):
        if key in index:
            return index[key]
    # Models that only the recipe catalog knows (no architecture): still valid recipe tokens.
    recipe_pairs = _recipe_models()
    for tok, hf_id in recipe_pairs:
        if tok == query or (hf_id and hf_id.lower() == lowered):
            return tok
    index.update({k: v for k, v in _index(recipe_pairs, {}).items() if k not in index})
    for key in (_norm(query), _strip_suffixes(query), _norm(query.split("/")[-1])):
        if key in index:
            return index[key]
    if _is_local_path(query):
        raise UserError("models.local_path", path=query)
    if _written_as_path(query):
        raise UserError("models.hf_config_missing", path=query)  # meant a path, and nothing is there
    tokens = sorted({*cat, *(tok for tok, _ in recipe_pairs)})
    if not _family_known(query, tokens):
        raise _not_in_catalog(query)  # no model of that family: name matches would only mislead
    by_key = {_norm(tok): tok for tok in tokens}
    close = difflib.get_close_matches(_norm(query), list(by_key), n=5, cutoff=0.5)
    if not close:
        close = difflib.get_close_matches(_norm(query), list(index), n=5, cutoff=0.5)
        names = list(dict.fromkeys(index[k] for k in close))
    else:
        names = [by_key[k] for k in close]
    if not names:
        raise UserError("models.unknown_none", model=query)
    if "/" in query:  # an HF id: its config.json plans it even where no recipe model is meant
        raise UserError("models.unknown_hf", model=query, closest=", ".join(names), hint=_config_hint(query))
    raise UserError("models.unknown", model=query, closest=", ".join(names))


def _family_word(text: str) -> str:
    """The leading letters of a model name or of an HF id's name part ('mistralai/Mixtral-8x7B'
    -> 'mixtral', 'llama3_8b' -> 'llama')."""
    match = re.match(r"[a-z]+", text.strip().split("/")[-1].lower())
    return match.group(0) if match else ""


def _family_known(query: str, tokens: Iterable[str]) -> bool:
    """Whether some catalog model shares the query's family word (or the query has none)."""
    word = _family_word(query)
    if len(word) < 3:
        return True  # '8b', 'v3': too little to say the family is missing
    return any(_family_word(tok).startswith(word) or word.startswith(_family_word(tok) or "-") for tok in tokens)


def _not_in_catalog(query: str) -> UserError:
    from mbridge_launch.knowledge.catalog import load_catalog

    version = load_catalog().version
    return UserError("models.not_in_catalog", model=query, family=_family_word(query), version=version,
                     hint=_config_hint(query))


def _config_hint(query: str) -> Any:
    """How to give the model's architecture: the config.json in the local Hugging Face cache when
    it is there (an HF id downloaded before), else --hf-config PATH."""
    from mbridge_launch.base.i18n import msg
    from mbridge_launch.knowledge.hf_cache import cached_hf_config

    cached = cached_hf_config(query) if "/" in query else None
    if cached is not None:
        return msg("models.hint.cached_config", path=str(cached))
    return msg("models.hint.hf_config")


def local_model_path(text: str | None) -> bool:
    """True when what the user gave as the model is a config.json on disk, or a checkpoint
    directory holding one: plan and estimate then read the architecture from it, as --hf-config
    would (a folder named like an HF id without a config.json still resolves as the id)."""
    from pathlib import Path

    if not text or not _is_local_path(str(text).strip()):
        return False
    path = Path(str(text).strip()).expanduser()
    return path.is_file() or (path / "config.json").is_file()


def _written_as_path(text: str) -> bool:
    """Unmistakably a path (absolute, relative with ./ or ../, home-relative, a .json file)."""
    return text.startswith(("/", "./", "../", "~")) or text.endswith(".json")


def _is_local_path(text: str) -> bool:
    """A path to something on disk (a checkpoint directory or a config.json), not a model name."""
    from pathlib import Path

    if "/" not in text and not _written_as_path(text):
        return False  # a bare name; an HF id such as org/name has a slash but rarely exists on disk
    try:
        return Path(text).expanduser().exists()
    except OSError:
        return False


# Megatron Bridge's diffusion recipe families (recipes/flux, recipes/wan): image and video
# generators whose DiT blocks, text encoders and VAE the planner's decoder model does not describe.
DIFFUSION_FAMILIES = ("flux", "wan")


# Recipe models with no architecture of their own: the recipe builds a bare GPTModelProvider
# (num_layers=0 ...) whose sizes the user sets with overrides.
TEMPLATE_MODELS = ("vanilla_gpt",)


def is_diffusion(model: str) -> bool:
    """Whether `model` is a recipe model of a diffusion family (flux_12b, wan_1_3b_text2video)."""
    token = (model or "").strip().lower()
    return any(token == family or token.startswith(family + "_") for family in DIFFUSION_FAMILIES)


def cached_config_for(text: str | None) -> str | None:
    """The local Hugging Face cache's config.json for what the user typed, when the catalog cannot
    plan it: an HF id ('org/name') outside the catalog, or one whose catalog architecture is
    missing or incomplete (the model's own config.json then says what the catalog lacks).
    None when the catalog plans it, when the text is no HF id, or when nothing is cached
    (nothing is downloaded)."""
    from mbridge_launch.knowledge.hf_cache import cached_hf_config

    query = (text or "").strip()
    if query.count("/") != 1 or _written_as_path(query) or _is_local_path(query):
        return None
    try:
        token = resolve_model(query)
    except UserError as exc:
        if exc.key not in UNKNOWN_MODEL_KEYS:
            return None
    else:
        arch = load_arch(token)
        if (arch is not None and arch.complete) or is_diffusion(token) or token in TEMPLATE_MODELS:
            return None  # planned from the catalog, or refused with its own reason whatever the cache holds
    cached = cached_hf_config(query)
    return None if cached is None else str(cached)


def require_planning_arch(arch: ModelArch | None, model: str) -> ModelArch:
    """The architecture, complete enough for memory and FLOPs, else a UserError that says why."""
    if is_diffusion(model):  # before any missing field: the planner does not lay these out at all
        raise UserError("models.diffusion", model=model)
    if arch is None and model in TEMPLATE_MODELS:
        raise UserError("models.template", model=model)
    if arch is None:
        raise UserError("models.no_arch", model=model)
    if arch.missing:
        raise UserError("models.incomplete", model=model, fields=", ".join(arch.missing))
    return arch

