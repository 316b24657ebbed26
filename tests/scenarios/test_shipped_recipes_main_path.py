"""NVIDIA's shipped layouts are never refused: every 0.6.2 library recipe with a GPU count and a
system the tool knows, asked for at that count and system, is recommended as it ships (or, where
Megatron Core itself would stop at its layout, refitted with a warning naming the rule), and
preflight accepts the Plan while it is unchanged (a memory estimate above HBM is a warning)."""

from __future__ import annotations

import pytest
from shipped_check import REFUSED, check, rejected_by_megatron_itself

from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.vocabulary import GPU_TYPES

CATALOG = load_catalog()
RECIPES = [r for r in CATALOG.recipes if r.kind == "library" and r.gpus and r.hardware in GPU_TYPES]


def test_the_catalog_has_the_shipped_recipes_this_test_walks():
    assert len(RECIPES) >= 250


# Known, with their cause (issue 15 follow-up). (Issue 33 took two off: the muon twin's request now
# selects the general recipe, a named variant being out of a request's reach; qwen35_vl_35b_a3b's
# 2-GPU FSDP SFT is kept as shipped with MEMORY_SHIPPED.)
KNOWN_REFUSED = {
    # Issue 34: the recipe settings are modelled now (planner.recipe_settings); what is left is
    # physics plus a catalog finding, no setting the memory model lacks. The 0.6.2 bf16 recipe
    # (its docstring: "Blackwell baseline") keeps fp32 Adam state (optimizer.use_precision_aware_optimizer
    # false, unlike its fp8mx twin) and full-size fp32 gradients (grad_reduce_in_fp32 true) for
    # DeepSeek-V4-Flash on 32 H100 at PP4 EP8, expert DP 1: weights 23.6 + gradients 47.2 +
    # optimizer 104.3 = 175 GiB of static memory on the first stage of an 80 GB GPU; and the real
    # 0.6.2 validation rejects the recipe (recompute module 'mhc': plan.recipe_finding).
    "deepseek_v4_flash_pretrain_32gpu_h100_bf16_config": "static memory 175 GiB/GPU by physics (fp32 Adam state and "
    "fp32 gradients at expert DP 1 on 80 GB; no unmodelled setting) and an error finding (recompute module 'mhc')",
    "deepseek_v4_flash_sft_32gpu_h100_bf16_config": "as deepseek_v4_flash_pretrain_32gpu_h100_bf16_config (kept as "
    "shipped, but a Plan with the SFT changes is held to the memory estimate: plan.memory_oom)",
    "deepseek_v4_flash_no_mtp_sft_32gpu_h100_bf16_config": "as deepseek_v4_flash_sft_32gpu_h100_bf16_config (the "
    "architecture is plannable since issue 34: the same 175 GiB of static memory)",
    # DeepSeek-V4-Pro (about 1.6T parameters) at PP4 EP8 on 32 GPUs holds a 32nd of the model per
    # GPU: bf16 weights 126.5 + fp32 gradients 253.0 + Adam state 591.0 GiB (the bf16 recipe keeps fp32
    # state; the fp8mx one bf16 moments, still far above) against 288 GB of GB300 HBM
    "deepseek_v4_pro_pretrain_32gpu_gb300_bf16_config": "static memory about 970 GiB/GPU by physics (a 32nd of a "
    "1.6T-parameter model with fp32 gradients and Adam state; no unmodelled setting) and an error finding "
    "(recompute module 'mhc')",
    "deepseek_v4_pro_pretrain_32gpu_gb300_fp8mx_config": "as deepseek_v4_pro_pretrain_32gpu_gb300_bf16_config (bf16 "
    "Adam moments modelled: still several times the 288 GB of HBM)",
}


@pytest.mark.parametrize("recipe", [pytest.param(r, marks=pytest.mark.xfail(reason=KNOWN_REFUSED[r.name], strict=True))
                                    if r.name in KNOWN_REFUSED else r for r in RECIPES], ids=[r.name for r in RECIPES])
def test_shipped_recipe_at_its_own_count_and_system_is_not_refused(recipe, tmp_path):
    verdict, detail = check(recipe, tmp_path)
    assert verdict not in REFUSED, f"{verdict}: {detail}"
    if verdict == "another recipe selected":
        # only a named variant (muon, deterministic, energon, ...) is out of a request's reach:
        # recommend has no flag that names a recipe (said in benchmarks/RESULTS.md); and a recipe
        # that run_recipe.py cannot load (a benchmark function of the same name shadows it, no
        # alias) or that Megatron Bridge itself rejects as shipped (tests/bridge) is passed over
        assert recipe.variant or CATALOG.run_recipe_name(recipe.name) is None or rejected_by_megatron_itself(recipe), \
            f"{recipe.name} is not a variant, yet {detail} was selected for its request"
