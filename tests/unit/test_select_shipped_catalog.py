"""Selection over the whole shipped catalog (issue 33, item 6): `recommend` at a library recipe's
own model, goal, GPU count, system, sequence length and precision picks that recipe (or an alias
of it) and its dataset selector.

The exceptions are the ones the request cannot tell apart or run_recipe.py cannot load, each
checked for what it gets instead:
- a twin with the same dimensions (a `_muon`, `_tp1`, `_energon`, `_hf_json` variant, or an
  unsized recipe): the general recipe of the same dimensions is picked;
- a deterministic/functional/low-precision variant: a general-purpose recipe is picked;
- a library recipe shadowed by a benchmark of the same name and without an alias
  (glm52_sft_416gpu_h100_bf16_config): a loadable recipe stands in, the card says so
  (SHIPPED_SHADOWED) and the dataset selector is the shadowed recipe's."""

from __future__ import annotations

import math

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.vocabulary import GPU_TYPES
from mbridge_launch.recommend import select
from mbridge_launch.recommend.build import recommend
from mbridge_launch.recommend.request import Request

pytestmark = pytest.mark.usefixtures("english")


def _dims(r):
    return (r.model, r.mode, r.gpus, r.hardware, select._variant_seq(r), r.precision)


def _request(r) -> Request:
    goal = {"peft": r.peft_scheme or "lora"}.get(r.mode, r.mode)
    return Request(model=r.model, gpus=r.gpus or _grid(r), gpu_type=r.hardware or "h100", goal=goal,
                   seq_length=select._variant_seq(r) or None, precision=r.precision)


def _grid(r) -> int | None:
    """A recipe that names no GPU count is asked at the smallest grid its own layout needs (with
    the model's architecture known, the default of 8 GPUs is a real "does not fit" for a 120B)."""
    tp, pp, cp = r.tp or 1, r.pp or 1, r.cp or 1
    etp, ep = r.etp or tp, r.ep or 1
    dense, expert = tp * pp * cp, etp * ep * pp
    return dense * expert // math.gcd(dense, expert) if r.model else None


def _in_scope(r) -> bool:
    return (r.kind == "library" and not r.raises_not_implemented and (r.hardware or "h100") in GPU_TYPES
            and get_hardware(r.hardware or "h100").supports(r.precision or "bf16"))


def _expected_dataset(r, goal):
    own = (r.dataset or {}).get("selector")
    return "mock" if goal == "pretrain" else own


def test_every_library_recipe_is_chosen_at_its_own_request():
    catalog = load_catalog("0.6.2")
    recipes = [r for r in catalog.recipes if _in_scope(r)]
    assert len(recipes) > 250
    exact, twins, special, shadowed, failures = 0, [], [], [], []
    for r in recipes:
        request = _request(r)
        try:
            rec = recommend(request)
        except UserError as exc:  # no layout fits at all: not a selection question, but say which
            failures.append((r.name, f"error {exc.key}"))
            continue
        got = rec.recipe
        codes = [code for code, _ in rec.warnings]
        if got.name == r.name or r.name in got.aliases:
            exact += 1
            if request.goal != "pretrain" and (r.dataset or {}).get("selector") in (None, "mock"):
                continue  # a fine-tuning recipe without a named selector takes the modality default
            if rec.dataset != _expected_dataset(r, request.goal):
                failures.append((r.name, f"dataset {rec.dataset}"))
            continue
        if catalog.run_recipe_name(r.name) is None:
            shadowed.append(r.name)
            if "SHIPPED_SHADOWED" not in codes or catalog.run_recipe_name(got.name) is None:
                failures.append((r.name, f"shadowed, stood in by {got.name} without saying so"))
            elif request.goal != "pretrain" and rec.dataset != (r.dataset or {}).get("selector"):
                failures.append((r.name, f"shadowed, dataset {rec.dataset}"))
        elif select._is_special(r):
            special.append(r.name)
            if select._is_special(got):
                failures.append((r.name, f"special variant answered by another one: {got.name}"))
        elif _dims(got)[:2] == _dims(r)[:2] and (
                _dims(got) == _dims(r) or (r.gpus is None and got.seq_length == r.seq_length and r.precision in (None, got.precision))):
            twins.append(r.name)
        else:
            failures.append((r.name, got.name))
    assert not failures, failures
    # the known exceptions of 0.6.2, so that a new one is looked at, not absorbed
    assert set(shadowed) == {"glm52_sft_192gpu_gb200_bf16_config", "glm52_sft_416gpu_h100_bf16_config",
                             "nemotron_3_super_pretrain_64gpu_gb200_bf16_config"}
    assert len(special) <= 4 and len(twins) <= 12, (special, twins)
    assert exact >= len(recipes) - 20


def test_glm52_sft_416_h100_at_2048_gets_the_shipped_recipes_stand_in_and_dataset():
    rec = recommend(Request(model="glm52", gpus=416, gpu_type="h100", goal="sft", seq_length=2048))
    codes = [code for code, _ in rec.warnings]
    assert rec.recipe.hardware == "h100" and "BLACKWELL_ONLY" not in codes and "HARDWARE_SUBSTITUTE" not in codes
    assert rec.dataset == "tulu3"  # the shipped glm52_sft_416gpu_h100_bf16_config's, not the 200k recipe's local-jsonl
    shadowed = dict(rec.warnings)["SHIPPED_SHADOWED"]
    assert "glm52_sft_416gpu_h100_bf16_config" in str(shadowed) and rec.recipe.name in str(shadowed)


def test_the_exact_recipe_outranks_a_closer_sequence_and_an_error_finding():
    # before: deepseek_v4_flash on 32 H100 in bf16 got the GB200 FP8 recipe (no error finding)
    # and step37 SFT on 64 H100 the 4-GPU smoke recipe
    rec = recommend(Request(model="deepseek_v4_flash", gpus=32, gpu_type="h100", goal="pretrain", seq_length=4096,
                            precision="bf16"))
    assert rec.recipe.name == "deepseek_v4_flash_pretrain_32gpu_h100_bf16_config"
    catalog = load_catalog("0.6.2")
    chosen = select.select_library(catalog, "step37", "sft", "sft", seq_length=2048, gpu_type="h100",
                                   precision="bf16", gpus=64)
    assert chosen.name == "step37_sft_64gpu_h100_bf16_flickr8k_config"


def test_without_a_shadowed_recipe_nothing_is_passed_over():
    catalog = load_catalog("0.6.2")
    chosen = select.select_library(catalog, "llama3_70b", "sft", "sft", seq_length=None, gpu_type="h100",
                                   precision=None, gpus=32)
    assert select.passed_over(catalog, chosen, seq_length=None, gpu_type="h100", precision=None, gpus=32) is None
