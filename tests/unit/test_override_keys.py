"""Override keys are checked against the release's real ConfigContainer field tree
(catalog/config-fields-0.6.2.json, extracted from Megatron Bridge 0.6.2's classes): an unknown key
is refused with difflib's closest real keys; model.* keys against the recipe's own provider class
where its real build recorded it, else against every provider (and the message says so); Hydra's
`+key` adds a key on purpose."""

from __future__ import annotations

import pytest

from mbridge_launch.base.errors import EXIT_BAD_INPUT, UserError
from mbridge_launch.knowledge.config_fields import load_field_tree
from mbridge_launch.plan.changecontrol import CONVERGENCE, classify
from mbridge_launch.plan.overrides import check_override_keys, unknown_override

TREE = load_field_tree("0.6.2")
LLAMA = "llama3_8b_pretrain_8gpu_h100_bf16_config"
QWEN3_VL = "qwen3_vl_8b_pretrain_4gpu_h100_bf16_mock_config"


def test_the_catalog_records_the_field_tree_of_its_release():
    assert TREE is not None and TREE.version == "0.6.2"
    top = TREE.fields(TREE.root)
    for section in ("train", "model", "optimizer", "scheduler", "dataset", "logger", "tokenizer", "checkpoint",
                    "dist", "ddp", "rng", "profiling", "peft", "mixed_precision", "comm_overlap", "env_vars"):
        assert section in top, section
    # the model providers of the model families, and PEFT's methods, are all below their fields
    assert {"GPTModelProvider", "MLAModelProvider", "HybridModelProvider", "Qwen3VLModelProvider"} <= set(top["model"])
    assert {"LoRA", "DoRA"} <= set(top["peft"])
    for key in ("train.train_iters", "train.global_batch_size", "model.tensor_model_parallel_size", "optimizer.lr",
                "scheduler.lr_warmup_iters", "checkpoint.pretrained_checkpoint", "peft.dim", "mixed_precision",
                "mixed_precision.fp8", "dataset.seq_length", "ddp.use_megatron_fsdp", "rng.seed",
                "comm_overlap.tp_comm_overlap", "dataset.offline_packing_specs.packed_sequence_size"):
        assert TREE.lookup(key, recipe=LLAMA).known, key


def test_every_recipe_built_for_real_has_its_provider_recorded():
    assert TREE.provider_of(LLAMA) == "GPTModelProvider"
    assert TREE.provider_of(QWEN3_VL) == "Qwen3VLModelProvider"
    assert len(TREE.recipe_model_class) >= 700  # of 737: the ones the real build could build


@pytest.mark.parametrize(("lang", "line"), [
    ("en", "unknown setting train.trian_iters; did you mean train.train_iters?"),
    ("zh", "未知设置 train.trian_iters；您是否想写 train.train_iters？"),
])
def test_an_unknown_key_is_refused_with_did_you_mean(lang, line):
    error = unknown_override("train.trian_iters", "0.6.2", LLAMA)
    assert error is not None and error.exit_code == EXIT_BAD_INPUT
    assert error.render(lang) == line


def test_a_misspelt_section_gets_the_real_section():
    error = unknown_override("trian.train_iters", "0.6.2", LLAMA)
    assert error is not None and error.params["suggestion"] == "train.train_iters"


def test_a_key_with_nothing_close_says_how_to_add_one_on_purpose():
    error = unknown_override("train.zzzz_qqqq", "0.6.2", LLAMA)
    assert error is not None and error.key == "override.unknown_setting_none"
    assert "+train.zzzz_qqqq=VALUE" in error.render("en") and "0.6.2" in error.render("en")
    assert "+train.zzzz_qqqq=VALUE" in error.render("zh")


def test_a_value_has_no_fields_below_it():
    assert unknown_override("train.train_iters.extra", "0.6.2", LLAMA) is not None


def test_check_override_keys_raises_on_the_first_unknown_key():
    check_override_keys(["train.train_iters", "+brand.new", "env_vars.MY_FLAG"], "0.6.2", LLAMA)
    with pytest.raises(UserError) as caught:
        check_override_keys(["train.train_iters", "optimizer.lrr", "train.trian_iters"], "0.6.2", LLAMA)
    assert caught.value.params["setting"] == "optimizer.lrr"


def test_model_keys_follow_the_recipes_own_provider():
    # a field of the Qwen3-VL provider that the plain GPT provider does not have
    vl_only = sorted(set(TREE.fields("Qwen3VLModelProvider")) - set(TREE.fields("GPTModelProvider")))
    assert vl_only, "Qwen3VLModelProvider adds fields to GPTModelProvider"
    key = f"model.{vl_only[0]}"
    assert unknown_override(key, "0.6.2", QWEN3_VL) is None
    error = unknown_override(key, "0.6.2", LLAMA)
    assert error is not None and "(model provider GPTModelProvider)" in error.render("en")
    assert "模型提供类 GPTModelProvider" in error.render("zh")


def test_without_a_known_provider_model_keys_are_checked_against_every_provider_and_it_is_said():
    vl_only = sorted(set(TREE.fields("Qwen3VLModelProvider")) - set(TREE.fields("GPTModelProvider")))
    assert unknown_override(f"model.{vl_only[0]}", "0.6.2", recipe="no_such_recipe_config") is None
    error = unknown_override("model.seq_lenght", "0.6.2", recipe=None)
    assert error is not None
    assert error.render("en") == ("unknown setting model.seq_lenght (checked against every model provider: the "
                                  "recipe's own is not known); did you mean model.seq_length?")


def test_env_vars_take_any_name():
    assert unknown_override("env_vars.NCCL_DEBUG", "0.6.2", LLAMA) is None


def test_a_plus_key_is_an_explicit_addition():
    assert unknown_override("+my.new.key", "0.6.2", LLAMA) is None
    added = classify("+my.new.key")
    assert (added.change_class, added.reason_key) == (CONVERGENCE, "change.reason.added_key")
    # a + on a key a rule names keeps that rule's class
    assert classify("+train.micro_batch_size").reason_key == "change.reason.mbs"


def test_a_removal_names_a_real_key_too():
    assert unknown_override("~train.trian_iters", "0.6.2", LLAMA) is not None
    assert unknown_override("~train.train_iters", "0.6.2", LLAMA) is None


def test_a_catalog_without_a_field_tree_checks_nothing(tmp_path):
    assert load_field_tree("0.6.2", tmp_path) is None
