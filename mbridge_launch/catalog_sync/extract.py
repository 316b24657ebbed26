"""Turn the ConfigContainer a recipe builds (an interpreter Obj) into a catalog record.

Field names are Megatron's (`tensor_model_parallel_size`...). A value the interpreter could not
know is written as null and the field is listed in `unresolved`, which findings.py reports.
"""

from __future__ import annotations

from typing import Any

from mbridge_launch.catalog_sync.statements import InterpRaise, exception_name
from mbridge_launch.catalog_sync.values import ClassValue, External, FuncValue, Obj, Unknown, same
from mbridge_launch.knowledge.vocabulary import RECIPE_KEYS, catalog_field


def _layout_field(attr: str) -> tuple[str, str, str]:
    section, _, name = RECIPE_KEYS[attr].partition(".")
    return catalog_field(attr), section, name


# (catalog field name, ConfigContainer section, attribute) of the layout and the other recipe sizes
LAYOUT_FIELDS: tuple[tuple[str, str, str], ...] = tuple(_layout_field(attr) for attr in RECIPE_KEYS)
# fields that must be known for the layout checks; null ones are reported
REQUIRED_FIELDS = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "micro_batch_size", "global_batch_size", "seq_length",
)
FEATURE_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("cuda_graph_impl", "model", "cuda_graph_impl"),
    ("cuda_graph_scope", "model", "cuda_graph_scope"),
    ("use_te_rng_tracker", "model", "use_te_rng_tracker"),
    ("te_rng_tracker", "rng", "te_rng_tracker"),
    ("moe_token_dispatcher_type", "model", "moe_token_dispatcher_type"),
    ("moe_flex_dispatcher_backend", "model", "moe_flex_dispatcher_backend"),
    ("moe_router_force_load_balancing", "model", "moe_router_force_load_balancing"),
    ("moe_shared_expert_overlap", "model", "moe_shared_expert_overlap"),
    ("moe_a2a_overlap", "model", "moe_a2a_overlap"),
    ("use_megatron_fsdp", "ddp", "use_megatron_fsdp"),
    ("data_parallel_sharding_strategy", "ddp", "data_parallel_sharding_strategy"),
    ("use_distributed_optimizer", "ddp", "use_distributed_optimizer"),
    # Bridge turns the distributed optimizer on when either switch asks (plan/shipped.py reads both)
    ("optimizer_use_distributed_optimizer", "optimizer", "use_distributed_optimizer"),
    ("overlap_grad_reduce", "ddp", "overlap_grad_reduce"),
    ("overlap_param_gather", "ddp", "overlap_param_gather"),
    ("recompute_granularity", "model", "recompute_granularity"),
    ("recompute_method", "model", "recompute_method"),
    ("recompute_num_layers", "model", "recompute_num_layers"),
    ("recompute_modules", "model", "recompute_modules"),
    ("fine_grained_activation_offloading", "model", "fine_grained_activation_offloading"),
    ("offload_modules", "model", "offload_modules"),
    ("cp_comm_type", "model", "cp_comm_type"),
    ("pipeline_model_parallel_layout", "model", "pipeline_model_parallel_layout"),
    ("num_layers_in_first_pipeline_stage", "model", "num_layers_in_first_pipeline_stage"),
    ("num_layers_in_last_pipeline_stage", "model", "num_layers_in_last_pipeline_stage"),
    ("account_for_embedding_in_pipeline_split", "model", "account_for_embedding_in_pipeline_split"),
    ("account_for_loss_in_pipeline_split", "model", "account_for_loss_in_pipeline_split"),
    ("deterministic_mode", "model", "deterministic_mode"),
    # settings the memory model charges (planner.recipe_settings reads them): CPU activation
    # offloading, the optimizer's state dtypes and CPU offload, the gradient-reduction dtype
    # (mixed_precision's value wins where the recipe sets a precision object: _features),
    # the cross-entropy fusion and multi-token prediction
    ("cpu_offloading", "model", "cpu_offloading"),
    ("cpu_offloading_num_layers", "model", "cpu_offloading_num_layers"),
    ("cpu_offloading_activations", "model", "cpu_offloading_activations"),
    ("cpu_offloading_weights", "model", "cpu_offloading_weights"),
    ("use_precision_aware_optimizer", "optimizer", "use_precision_aware_optimizer"),
    ("main_params_dtype", "optimizer", "main_params_dtype"),
    ("main_grads_dtype", "optimizer", "main_grads_dtype"),
    ("exp_avg_dtype", "optimizer", "exp_avg_dtype"),
    ("exp_avg_sq_dtype", "optimizer", "exp_avg_sq_dtype"),
    ("optimizer_cpu_offload", "optimizer", "optimizer_cpu_offload"),
    ("optimizer_offload_fraction", "optimizer", "optimizer_offload_fraction"),
    ("grad_reduce_in_fp32", "ddp", "grad_reduce_in_fp32"),
    ("cross_entropy_loss_fusion", "model", "cross_entropy_loss_fusion"),
    ("cross_entropy_fusion_impl", "model", "cross_entropy_fusion_impl"),
    ("mtp_num_layers", "model", "mtp_num_layers"),
    ("freeze_language_model", "model", "freeze_language_model"),
    ("freeze_vision_model", "model", "freeze_vision_model"),
    # the vocabulary a run builds its embedding and output layer with: Bridge takes the
    # tokenizer's when use_tokenizer_vocab_size is set or the model has none (training/setup.py
    # _validate_and_set_vocab_size); 0.6.2's pretraining recipes set NullTokenizer(32000) so
    # (benchmarks/recipe_memory.py with_run_vocab)
    ("tokenizer_type", "tokenizer", "tokenizer_type"),
    ("tokenizer_vocab_size", "tokenizer", "vocab_size"),
    ("use_tokenizer_vocab_size", "tokenizer", "use_tokenizer_vocab_size"),
)
COMM_OVERLAP_FIELDS = ("tp_comm_overlap", "overlap_moe_expert_parallel_comm", "delay_wgrad_compute")
PRECISION_FIELDS = ("fp8", "fp8_recipe", "fp8_param_gather", "fp4", "fp4_recipe")

# dataset source preset name (HFDatasetSourceConfig.dataset_name) -> run_recipe.py --dataset selector
_PRESET_SELECTORS = {
    "squad": "squad", "tulu3": "tulu3", "openmathinstruct2": "openmathinstruct2",
    "openmathinstruct2_thinking": "openmathinstruct2-thinking", "gsm8k": "gsm8k", "cord_v2": "cord-v2",
    "medpix": "medpix", "raven": "raven", "rdr": "rdr", "llava_video_178k": "llava-video-178k",
}


def to_data(value: Any) -> Any:
    """Plain YAML data for a value (Unknown -> None; an external name -> its dotted name)."""
    if isinstance(value, Unknown):
        return None
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, External):
        parts = value.qualname.split(".")
        if len(parts) >= 2 and parts[-2][:1].isupper():  # an enum member: CudaGraphScope.attn
            return ".".join(parts[-2:])
        return value.qualname
    if isinstance(value, (list, tuple)):
        # a list with an unknown element (or one grown by an unknown amount) is unknown as a whole
        return None if _holds_unknown(value) else [to_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_data(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(to_data(k)): to_data(v) for k, v in value.items()}
    if isinstance(value, Obj):
        return value.origin or value.class_name
    if isinstance(value, (FuncValue, ClassValue)):
        return value.name
    return None


def _holds_unknown(value: list[Any] | tuple[Any, ...]) -> bool:
    return any(isinstance(v, Unknown) or (isinstance(v, (list, tuple)) and _holds_unknown(v)) for v in value)


class Extractor:
    def __init__(self, interp: Any) -> None:
        self.interp = interp
        mp_module = interp.load_module("megatron.bridge.training.mixed_precision")
        self._get_mp = interp.resolve(mp_module.namespace.get("get_mixed_precision_config")) if mp_module else None
        registry = interp.resolve(mp_module.namespace.get("MIXED_PRECISION_RECIPES")) if mp_module else None
        self._mp_factories = {k: v for k, v in registry.items() if "-" not in k} if isinstance(registry, dict) else {}
        self._mp_presets: dict[str, Any] | None = None
        hf_module = interp.load_module("megatron.bridge.data.sources.hf")
        presets = interp.resolve(hf_module.namespace.get("_HF_DATASET_PRESETS")) if hf_module else None
        self.hf_dataset_ids = {
            name: preset.attrs.get("path_or_dataset")
            for name, preset in (presets.items() if isinstance(presets, dict) else [])
            if isinstance(preset, Obj)
        }

    def get(self, value: Any, *path: str) -> Any:
        for name in path:
            if not isinstance(value, Obj):
                return Unknown("not an object") if value is not None else None
            value = self.interp.get_attr(value, name)
        return value

    def run(self, func: FuncValue) -> tuple[Any, str | None, str | None]:
        """(ConfigContainer or Unknown, raised exception name, where)."""
        try:
            return self.interp.call(func, [], {}), None, None
        except InterpRaise as raised:
            return Unknown("raised"), exception_name(raised.value), raised.where

    def record(self, cfg: Any) -> tuple[dict[str, Any], list[str]]:
        """Layout fields, hf id, peft, dataset, features, env vars; and the unresolved fields."""
        out: dict[str, Any] = {}
        unresolved: list[str] = []
        model = self.get(cfg, "model")
        out["hf_model_id"] = self._hf_model_id(cfg, model)
        for megatron_name, section, attr in LAYOUT_FIELDS:
            value = self.get(cfg, section, attr)
            if isinstance(value, Unknown) and megatron_name in REQUIRED_FIELDS:
                unresolved.append(megatron_name)
            out[megatron_name] = to_data(value)
        out["peft_scheme"] = self._peft(self.get(cfg, "peft"))
        out["dataset"] = self._dataset(self.get(cfg, "dataset"))
        out["features"] = self._features(cfg)
        layout = self.get(cfg, "model", "pipeline_model_parallel_layout")
        if isinstance(layout, Unknown) or (isinstance(layout, (list, tuple)) and _holds_unknown(layout)):
            # set by the recipe but computed from the HF config (DeepSeek-V4 splits num_layers):
            # null in the catalog, and said so, rather than a layout without its decoder layers
            unresolved.append("pipeline_model_parallel_layout")
        env = self.get(cfg, "env_vars")
        out["env_vars"] = {k: to_data(env[k]) for k in sorted(env)} if isinstance(env, dict) else {}
        return out, unresolved

    def _hf_model_id(self, cfg: Any, model: Any) -> str | None:
        # a recipe that reuses another's provider and then names its own checkpoint
        # (`cfg.model.hf_model_id = ...`, the Nemotron 3.5 Lightning SFT/PEFT recipes) means that one
        assigned = model.attrs.get("hf_model_id") if isinstance(model, Obj) else None
        if isinstance(assigned, str):
            return assigned
        if isinstance(model, Obj) and isinstance(model.hf_model_id, str):
            return model.hf_model_id
        for path in (("tokenizer", "tokenizer_model"), ("dataset", "hf_processor_path")):
            value = self.get(cfg, *path)
            if isinstance(value, str) and "/" in value and not value.startswith(("/", ".")):
                return value
        return None

    @staticmethod
    def _peft(peft: Any) -> str | None:
        if not isinstance(peft, Obj):
            return None
        lineage = peft.lineage()
        if any("DoRA" in name for name in lineage):
            return "dora"
        if any("LoRA" in name for name in lineage):
            return "lora"
        return peft.class_name.lower()

    def _dataset(self, dataset: Any) -> dict[str, Any]:
        if not isinstance(dataset, Obj):
            return {"selector": None, "class": None}
        lineage = dataset.lineage()
        info: dict[str, Any] = {"selector": None, "class": dataset.class_name, "modality": "text"}
        source = None
        for attr in ("hf_dataset", "source"):
            candidate = self.get(dataset, attr)
            if isinstance(candidate, Obj):
                source = candidate
                break
        preset = to_data(self.get(source, "dataset_name")) if source is not None else None
        hf_path = to_data(self.get(source, "path_or_dataset")) if source is not None else None
        if "MockGPTDatasetConfig" in lineage or ("GPTDatasetConfig" in lineage and "GPTSFTDatasetConfig" not in lineage):
            # mock data unless the recipe names data (a blend or data_path known to be set)
            blend = [self.get(dataset, a) for a in ("blend", "blend_per_split", "data_path")]
            info["selector"] = "megatron-indexed" if any(v is not None and not isinstance(v, Unknown) for v in blend) else "mock"
        elif "MockVLMSFTDatasetConfig" in lineage:
            info["selector"], info["modality"] = "mock", "vlm"
        elif "EnergonDatasetConfig" in lineage:
            info["selector"] = "energon"
            info["modality"] = "vlm"
        elif "DirectHFSFTDatasetConfig" in lineage:
            info["modality"] = "vlm"
            info["selector"] = "local-vlm" if hf_path == "json" else _PRESET_SELECTORS.get(preset or "")
        elif "GPTSFTDatasetConfig" in lineage:
            root = self.get(dataset, "dataset_root")
            info["selector"] = _PRESET_SELECTORS.get(preset or "") or ("local-jsonl" if isinstance(root, str) else None)
            if isinstance(root, str):
                info["dataset_root"] = root
        else:
            info["modality"] = None
        if preset is not None:
            info["hf_dataset"] = preset
        hf_id = hf_path if isinstance(hf_path, str) and hf_path != "json" else self.hf_dataset_ids.get(preset or "")
        if isinstance(hf_id, str):
            info["hf_dataset_id"] = hf_id
        info["seq_length"] = to_data(self.get(dataset, "seq_length"))
        packing = self.get(dataset, "enable_offline_packing")
        if isinstance(packing, bool):
            info["offline_packing"] = packing
            if packing:
                info["packed_sequence_size"] = to_data(self.get(dataset, "offline_packing_specs", "packed_sequence_size"))
        in_batch = self.get(dataset, "enable_in_batch_packing")
        if isinstance(in_batch, bool):
            info["in_batch_packing"] = in_batch
        return info

    def _preset_name(self, precision: Obj) -> str | None:
        """The registered preset a MixedPrecisionConfig object equals field for field. Its origin
        (the first function that returned it) is wrong for a preset built on another one:
        bf16_with_fp8_current_scaling_mixed() starts from bf16_mixed(). A recipe that edits the
        preset matches none: then the preset it started from."""
        if self._mp_presets is None:
            self._mp_presets = {}
            for name, factory in sorted(self._mp_factories.items()):
                try:
                    self._mp_presets[name] = self.interp.call(factory, [], {})
                except InterpRaise:
                    continue
        matches = [name for name, preset in self._mp_presets.items() if isinstance(preset, Obj)
                   and preset.attrs.keys() == precision.attrs.keys()
                   and all(same(preset.attrs[k], precision.attrs[k]) for k in preset.attrs)]
        if precision.origin in matches or not matches:
            return precision.origin
        return matches[0]

    def _features(self, cfg: Any) -> dict[str, Any]:
        features: dict[str, Any] = {}
        precision = self.get(cfg, "mixed_precision")
        if isinstance(precision, str):
            features["precision_recipe"] = precision
            if self._get_mp is not None:
                try:
                    precision = self.interp.call(self._get_mp, [precision], {})
                except InterpRaise:
                    precision = Unknown("precision")
        elif isinstance(precision, Obj):
            features["precision_recipe"] = self._preset_name(precision)
        if isinstance(precision, Obj):
            values = {name: to_data(self.get(precision, name)) for name in PRECISION_FIELDS}
            if values["fp8"] is None:  # the recipe names only matter when FP8 / FP4 is on
                values["fp8_recipe"] = values["fp8_param_gather"] = None
            if values["fp4"] is None:
                values["fp4_recipe"] = None
            features.update(values)
        for name, section, attr in FEATURE_FIELDS:
            features[name] = to_data(self.get(cfg, section, attr))
        if isinstance(precision, Obj):
            # MixedPrecisionConfig.setup copies its grad_reduce_in_fp32 onto the DDP config
            # (Bridge training/mixed_precision.py update_config_with_precision_overrides)
            reduce_fp32 = to_data(self.get(precision, "grad_reduce_in_fp32"))
            if reduce_fp32 is not None:
                features["grad_reduce_in_fp32"] = reduce_fp32
        overlap = self.get(cfg, "comm_overlap")
        for name in COMM_OVERLAP_FIELDS:
            features[name] = to_data(self.get(overlap, name)) if isinstance(overlap, Obj) else None
        return {k: v for k, v in features.items() if v is not None}
