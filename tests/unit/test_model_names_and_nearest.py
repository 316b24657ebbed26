"""Finding a model (issue 33, item 6): a common name or HF id of a family the catalog lacks says
so and how to give a config (not a look-alike such as ministral3_* for Mixtral); an HF id outside
the catalog gets the --hf-config hint, with the config.json of the local Hugging Face cache when
it is there; with --hf-config the nearest recipe models share the config's modality first, then
its family, then its size."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.hf_config import arch_from_hf_config, cached_hf_config, hf_modality
from mbridge_launch.knowledge.models import resolve_model
from mbridge_launch.recommend.hf_config_check import nearest_recipe_models

MISTRAL_7B = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
              "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 32768,
              "_name_or_path": "mistralai/Mistral-7B-v0.3"}


def _refusal(text: str) -> UserError:
    with pytest.raises(UserError) as err:
        resolve_model(text)
    assert err.value.exit_code == 2
    return err.value


@pytest.mark.parametrize("text", ["mixtral 8x7b", "Mixtral-8x7B", "mistralai/Mixtral-8x7B-v0.1", "falcon-40b"])
@pytest.mark.parametrize(("lang", "words"), [("en", "is not in the Megatron Bridge 0.6.2 catalog"),
                                              ("zh", "不在 Megatron Bridge 0.6.2 的目录中")])
def test_a_family_the_catalog_lacks_is_said_with_the_way_to_give_a_config(text, lang, words, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    err = _refusal(text)
    assert err.key == "models.not_in_catalog"
    rendered = err.render(lang)
    assert words in rendered and "--hf-config PATH" in rendered and "catalog list" in rendered
    assert "ministral" not in rendered and "\n" not in rendered


def test_an_hf_id_of_a_known_family_outside_the_catalog_gets_the_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    err = _refusal("meta-llama/Llama-9-70B")
    assert err.key == "models.unknown_hf" and "llama3_70b" in err.params["closest"]
    assert "--hf-config PATH" in err.render("en") and "--hf-config PATH" in err.render("zh")


def test_the_hint_names_the_config_in_the_local_hugging_face_cache(monkeypatch, tmp_path):
    snapshot = tmp_path / "hub" / "models--mistralai--Mixtral-8x7B-v0.1" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(MISTRAL_7B))
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert cached_hf_config("mistralai/Mixtral-8x7B-v0.1") == snapshot / "config.json"
    assert cached_hf_config("mistralai/Other") is None and cached_hf_config("../x") is None
    err = _refusal("mistralai/Mixtral-8x7B-v0.1")
    for lang in ("en", "zh"):
        assert f"--hf-config {snapshot / 'config.json'}" in err.render(lang)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))  # the hub cache wins over HF_HOME
    assert cached_hf_config("mistralai/Mixtral-8x7B-v0.1") is None


def test_names_the_catalog_has_still_resolve():
    assert resolve_model("Ministral 3 8B") == "ministral3_8b"
    assert resolve_model("meta-llama/Meta-Llama-3-8B") == "llama3_8b"


def test_a_text_config_gets_text_recipe_models_first(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MISTRAL_7B))
    assert hf_modality(path) == "text"
    nearest = nearest_recipe_models(arch_from_hf_config(path), "mistral", modality="text")
    # before: qwen2_audio_7b (an audio-language model) came first by size
    assert nearest and not any(("audio" in t or "_vl" in t or "omni" in t or "ministral3" in t) for t in nearest)
    vlm = dict(MISTRAL_7B, model_type="llava", vision_config={"hidden_size": 1024})
    path.write_text(json.dumps(vlm))
    assert hf_modality(path) == "vision"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_recommend_with_a_text_config_names_text_recipe_models(lang, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MISTRAL_7B))
    assert main(["recommend", "--model", "mistral-7b", "--hf-config", str(path), "--lang", lang]) == 2
    err = capsys.readouterr().err
    assert "llama" in err and "qwen2_audio" not in err and "_vl" not in err and "Traceback" not in err
