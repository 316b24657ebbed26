"""A library recipe asked for at its own GPU count and system is recommended as NVIDIA ships it
(layout, batch, recompute, FSDP unchanged, exit 0), with a memory warning that gives the figures and
the smallest change that fits by the model; preflight warns about such a layout's estimate while it
is unchanged and refuses it once the user has changed it."""

from __future__ import annotations

import pytest

from mbridge_launch.base.errors import NoLayoutError
from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.plan import settings
from mbridge_launch.plan.shipped import distributed_optimizer, plan_is_shipped, with_recipe_settings
from mbridge_launch.planner.rules import check_layout, errors
from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.plan_checks import _LAYOUT_FINDINGS, run_plan_checks
from mbridge_launch.recommend.build import _recipe_layout, recommend
from mbridge_launch.recommend.request import Request
from mbridge_launch.recommend.select import select_library
from preflight_fixtures import edit, valid_plan

RECIPE = "llama3_8b_pretrain_2gpu_h100_bf16_config"


def _warnings(rec):
    return {code: str(text) for code, text in rec.warnings}


def test_shipped_recipe_at_own_count_is_kept_as_shipped():
    rec = recommend(Request(model="llama3_8b", gpus=2))
    L = rec.layout
    assert rec.recipe.name == RECIPE and rec.nodes * rec.gpus_per_node == 2
    assert (L.tp, L.pp, L.cp, L.ep, L.mbs, L.gbs, L.recompute, L.fsdp) == (1, 1, 2, 1, 1, 512, "none", False)
    assert not [c for c in rec.changes if c.source == "resize"]
    warning = _warnings(rec)["MEMORY_SHIPPED"]
    # issue 34: weights + fp32 gradients + optimizer alone are above HBM, so the card says the
    # layout cannot fit by arithmetic (8.0B x (2 + 4) + 8.0B x 12 / CP2 = 89.7 GiB + 3 fixed), with
    # the figures, the layout's own minimum count and the smallest change that fits
    for text in ("cannot fit by arithmetic", "weights 15.0 + gradients 29.9 + optimizer 44.9 + fixed allowance 3.0 = 92.7",
                 "above the whole 80 GB of HBM (usable 76.0 GB)", "needs at least 2", "--gpus 4"):
        assert text in warning, warning
    assert "MEMORY_OVER" not in _warnings(rec)


def test_no_gpus_keeps_the_recipes_own_count_without_a_silent_move():
    rec = recommend(Request(model="llama3_8b"))
    assert rec.nodes * rec.gpus_per_node == 2 and rec.layout.cp == 2
    assert "MEMORY_SHIPPED" in _warnings(rec) and "GPUS_RAISED" not in _warnings(rec)


def test_other_count_where_the_layout_cannot_fit_is_still_no_layout():
    with pytest.raises(NoLayoutError):
        recommend(Request(model="llama3_8b", gpus=1))


def test_h200_counts_as_the_h100_recipes_system_and_fits_there():
    rec = recommend(Request(model="llama3_8b", gpus=2, gpu_type="h200"))
    assert (rec.layout.tp, rec.layout.cp, rec.layout.recompute) == (1, 2, "none")
    assert "MEMORY_SHIPPED" not in _warnings(rec) and rec.estimate.fits


def test_sft_recipes_train_with_the_distributed_optimizer_that_bridge_turns_on():
    """The catalog records the DDP switch only; Bridge enables the distributed optimizer when the
    optimizer config asks for it, which every non-PEFT recipe's optimizer helper does."""
    catalog = load_catalog()
    sft = catalog.find("llama3_8b_sft_2gpu_h100_bf16_config") if hasattr(catalog, "find") else \
        next(r for r in catalog.recipes if r.name == "llama3_8b_sft_2gpu_h100_bf16_config")
    peft = next(r for r in catalog.recipes if r.name == "llama3_8b_peft_1gpu_h100_bf16_config")
    assert sft.features["use_distributed_optimizer"] is False and distributed_optimizer(sft) is True
    assert peft.features["use_distributed_optimizer"] is False and distributed_optimizer(peft) is False


def _library_recipes_with_arch():
    catalog = load_catalog()
    return [r for r in catalog.recipes if r.kind == "library" and r.gpus and not r.raises_not_implemented
            and r.model and load_arch(r.model) is not None]


def test_every_library_recipe_at_its_own_count_and_system_keeps_its_layout():
    recipes = _library_recipes_with_arch()
    assert len(recipes) >= 100
    kept, moved, broken = 0, [], []
    for r in recipes:
        if not get_hardware(r.hardware or "h100").supports(r.precision or "bf16"):
            continue  # an H100 recipe in MXFP8/NVFP4: the launcher refuses that precision there (exit 2)
        hw = get_hardware(r.hardware or "h100")
        violated = errors(check_layout(with_recipe_settings(_recipe_layout(r, r.gpus), r), load_arch(r.model), hw))
        if violated:
            # its own layout breaks a parallelism rule: resized; the catalog's findings must name that
            # rule (by its code, or as a static layout finding such as gbs_not_divisible)
            named = {f.code for f in r.findings or ()}
            broken.extend((r.name, v.code) for v in violated if v.code not in named and not named & _LAYOUT_FINDINGS)
            continue
        goal = {"peft": r.peft_scheme or "lora"}.get(r.mode, r.mode)
        seq = r.seq_length or r.dataset_seq_length
        if select_library(load_catalog(), r.model, goal, r.mode, seq_length=seq, gpu_type=r.hardware or "h100",
                          precision=r.precision, gpus=r.gpus).name != r.name:
            # another recipe of the same request is preferred (a variant, or one without an error
            # finding): the request never reaches this recipe, and the preferred one may not fit at
            # this count (Qwen3.5-35B-A3B full SFT on 2 GPUs: only its FSDP variant ships there)
            continue
        rec = recommend(Request(model=r.model, gpus=r.gpus, gpu_type=r.hardware or "h100", goal=goal,
                                seq_length=seq, precision=r.precision))
        if rec.recipe.name != r.name:
            continue  # another recipe of the same request is preferred (a variant): not this one's test
        L = rec.layout
        own = (r.tp or 1, r.pp or 1, r.cp or 1, r.ep or 1, r.mbs or 1, r.gbs or 1,
               settings.recompute(r, {}), settings.megatron_fsdp(r, {}))
        if (L.tp, L.pp, L.cp, L.ep, L.mbs, L.gbs, L.recompute, L.fsdp) != own or L.world != r.gpus:
            moved.append(r.name)
        kept += 1
    assert kept >= 100 and moved == [], moved
    assert broken == [], broken  # a rule break the catalog's findings do not name


def _shipped_plan(base):
    return edit(valid_plan(base), **{
        "recipe.name": RECIPE, "recipe.model": "llama3_8b", "recipe.family": "llama",
        "parallelism.tp": 1, "parallelism.cp": 2, "parallelism.dp": 1, "parallelism.mbs": 1,
        "parallelism.gbs": 512, "parallelism.seq_length": 8192, "cluster.gpus_per_node": 2})


def _memory(plan):
    return next(c for c in run_plan_checks(PreflightContext(plan=plan, env={})) if c.code.startswith("plan.memory"))


def test_preflight_memory_over_is_warning_while_shipped_layout_unchanged(shared_dir):
    plan = _shipped_plan(shared_dir)
    recipe = next(r for r in load_catalog().recipes if r.name == RECIPE)
    assert plan_is_shipped(plan, recipe)
    check = _memory(plan)
    assert check.code == "plan.memory_oom" and check.severity == "warning"
    text = check.message("en")
    assert "NVIDIA ships" in text and "--gpus 4" in text and "76.0" in text


def test_preflight_memory_over_is_error_once_layout_changed(shared_dir):
    changed = edit(_shipped_plan(shared_dir), **{"parallelism.mbs": 2})
    recipe = next(r for r in load_catalog().recipes if r.name == RECIPE)
    assert not plan_is_shipped(changed, recipe)
    check = _memory(changed)
    assert check.code == "plan.memory_oom" and check.severity == "error"
