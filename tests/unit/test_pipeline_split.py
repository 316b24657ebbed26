"""The pipeline split value object (planner.pipeline_split): Megatron's string grammar, its
validation rules, the planner's choice where layers do not divide PP x VP, and every catalog
recipe's own split accepted at its own layout."""

from dataclasses import replace

import pytest

from mbridge_launch.knowledge.catalog import load_catalog
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.pipeline_split import (
    ACCOUNT,
    EVEN,
    FIRST_LAST,
    LAYOUT,
    PipelineSplit,
    choose_split,
    format_layout,
    mtp_layers,
    parse_layout,
    recipe_split,
    shipped_splits,
)
from mbridge_launch.planner.rules import Layout, check_layout


def test_layout_string_grammar_is_megatrons():
    stages = parse_layout("Et*4|(t*4|)*14,tmL")
    assert len(stages) == 16 and stages[0] == "Etttt" and stages[-1] == "tmL"
    assert stages[1:15] == ("tttt",) * 14
    assert parse_layout("Et|t||tL") == ("Et", "t", "", "tL")  # empty stages are allowed
    with pytest.raises(ValueError):
        parse_layout("Ex*3|L")
    # written back with runs only: letters, digits, '*' and '|' (one unquoted Hydra value)
    assert format_layout(stages) == "Et*4|" + "t*4|" * 14 + "tmL"
    assert parse_layout(format_layout(stages)) == stages


def test_layout_list_form_reads_like_the_string_form():
    listed = PipelineSplit.from_settings({"pipeline_model_parallel_layout": [["embedding", "decoder"], ["decoder", "mtp", "loss"]]})
    written = PipelineSplit.from_settings({"pipeline_model_parallel_layout": "Et|tmL"})
    assert listed == written and listed.kind == LAYOUT


def test_layout_validation_follows_megatron():
    split = PipelineSplit.from_settings({"pipeline_model_parallel_layout": "Et*4|(t*4|)*14tmL"})
    assert split.problems(61, 16, None, 1) == [] and split.problems(61, 4, 4, 1) == []
    keys = lambda s, *a: [k for k, _ in s.problems(*a)]  # noqa: E731
    assert keys(split, 61, 8, 4, 1) == ["planner.split_problem.layout_stages"]  # 16 stages, 32 wanted
    assert keys(split, 60, 16, None, 1) == ["planner.split_problem.layout_decoders"]
    assert keys(split, 61, 16, None, 0) == ["planner.split_problem.layout_mtp"]
    early_mtp = PipelineSplit.from_settings({"pipeline_model_parallel_layout": "Etm|tL"})
    assert "planner.split_problem.layout_mtp_place" in keys(early_mtp, 2, 2, None, 1)
    no_embedding = PipelineSplit.from_settings({"pipeline_model_parallel_layout": "tt|ttL"})
    assert keys(no_embedding, 4, 2, None, 0) == ["planner.split_problem.layout_embedding"]
    both = PipelineSplit.from_settings({"pipeline_model_parallel_layout": "Et|tL", "account_for_loss_in_pipeline_split": True})
    assert "planner.split_problem.conflict" in keys(both, 2, 2, None, 0)


def test_first_last_and_account_rules_follow_megatron():
    # first/last counts: middle ranks share the rest evenly, every count by VP
    fl = PipelineSplit(FIRST_LAST, first=3, last=2)
    assert fl.problems(61, 16, None) == []
    assert [r.decoders for r in fl.rank_shares(61, 16)] == [3] + [4] * 14 + [2]
    assert PipelineSplit(FIRST_LAST, first=4, last=4).problems(61, 16, None)
    assert PipelineSplit(FIRST_LAST, first=3, last=2).problems(61, 16, 2)  # 3 is not a multiple of VP=2
    only_first = PipelineSplit(FIRST_LAST, first=10)  # the last rank is a middle one then
    assert only_first.problems(94, 8, None) == [] and only_first.rank_shares(94, 8)[-1].decoders == 12
    # account_for_*: embedding and loss count as a layer each, (layers + 2) / (PP x VP) whole
    account = PipelineSplit(ACCOUNT, embedding=True, loss=True)
    assert account.problems(126, 8, 8) == [] and account.problems(126, 8, 4) == []
    assert account.problems(126, 8, 3)
    shares = account.virtual_stages(126, 8, 8)
    assert shares[0].decoders == 1 and shares[0].embedding and shares[-1].decoders == 1 and shares[-1].loss
    assert sum(s.decoders for s in shares) == 126


def test_overrides_round_trip_through_the_settings():
    recipe = PipelineSplit.from_settings({"pipeline_model_parallel_layout": "Et*4|(t*4|)*14tmL"})
    chosen = choose_split(61, 8, 4, 1, shipped=())
    overrides = dict(chosen.to_overrides(relative_to=recipe))
    assert set(overrides) == {"model.pipeline_model_parallel_layout"}
    assert PipelineSplit.from_overrides(recipe, overrides.get) == chosen
    # switching a recipe's account_for_* off when another mechanism replaces it
    account = PipelineSplit(ACCOUNT, embedding=True, loss=True)
    switched = dict(PipelineSplit(FIRST_LAST, first=3, last=2).to_overrides(relative_to=account))
    assert switched["model.account_for_embedding_in_pipeline_split"] == "false"
    assert switched["model.num_layers_in_first_pipeline_stage"] == "3"
    assert PipelineSplit.from_overrides(account, switched.get).kind == FIRST_LAST
    # the recipe's split kept: nothing to write
    assert recipe.to_overrides(relative_to=recipe) == []


def test_the_planner_chooses_splits_the_way_the_recipes_do():
    assert choose_split(32, 4, 2) == PipelineSplit()  # even
    # Llama 3.1 405B TP8 PP8 VP8 and Qwen3 235B PP8 VP3 / PP16: embedding and loss counted
    assert choose_split(126, 8, 8).kind == ACCOUNT
    assert choose_split(94, 8, 3).kind == ACCOUNT and choose_split(94, 16, 1).kind == ACCOUNT
    # DeepSeek-V3 (61 layers + 1 MTP) on PP8 x VP4: the layout NVIDIA's benchmark recipe ships
    dsv3 = choose_split(61, 8, 4, 1, shipped=())
    assert dsv3.kind == LAYOUT and format_layout(dsv3.stages) == "Et|" + "t*2|" * 30 + "mL"
    assert dsv3.problems(61, 8, 4, 1) == []
    # on PP16 first/last counts balance as well as a layout: 3 + embedding, 14 x 4, 2 + MTP + loss
    fl = choose_split(61, 16, 1, 1, shipped=())
    assert (fl.kind, fl.first, fl.last) == (FIRST_LAST, 3, 2)
    # a layout the model's recipes ship for this PP x VP comes first
    shipped = choose_split(61, 16, 1, 1, shipped=shipped_splits("deepseek_v3"))
    assert shipped.kind == LAYOUT and shipped.stages[0] == "Etttt" and shipped.stages[-1] == "tmL"
    # the recipe's own split is kept where Megatron accepts it
    own = PipelineSplit(FIRST_LAST, first=10, last=12)
    assert choose_split(94, 8, 1, keep=own) == own


@pytest.mark.parametrize("layers,pp,vp,mtp", [(61, 8, 4, 1), (61, 16, 1, 1), (61, 4, 4, 1), (46, 4, 1, 1),
                                              (94, 32, 1, 0), (80, 3, 1, 0), (5, 4, 1, 0), (61, 16, 2, 1)])
def test_every_chosen_split_is_valid(layers, pp, vp, mtp):
    split = choose_split(layers, pp, vp, mtp, shipped=())
    assert split.problems(layers, pp, vp, mtp) == []
    assert sum(r.decoders for r in split.rank_shares(layers, pp, vp, mtp)) == layers


def test_split_description_names_embedding_mtp_and_loss():
    text = PipelineSplit(FIRST_LAST, first=3, last=2).describe(61, 16, 1, 1, lang="en")
    assert "3 + embedding" in text and "2 + 1 MTP + loss" in text and "1-14 4" in text


def _recipe_layout(recipe, arch):
    return Layout(tp=recipe.tp or 1, pp=recipe.pp or 1, vp=recipe.vp, cp=recipe.cp or 1, ep=recipe.ep or 1,
                  sp=bool(recipe.sp), mbs=recipe.mbs or 1, gbs=recipe.gbs or 1, split=recipe_split(recipe),
                  uneven_pp=recipe_split(recipe).uneven)


# catalog/models.yaml gives GLM-4.5V the 1 MTP layer of GLM-4.5 Air; Bridge's GLM-4.5V bridge sets
# mtp_num_layers=0 (models/glm_vl/glm_45v_bridge.py) and its recipes' layouts hold no MTP: the
# rules judge the layouts with Bridge's count
MTP_AS_BRIDGE_SETS = {"glm_45v": 0}


def test_every_catalog_recipe_split_is_parsed_and_accepted_at_its_own_layout():
    """All 737 recipes: each split parses; at a library recipe's own PP x VP the rules accept it, except
    the recipes whose even split Megatron refuses and which the catalog already records so
    (a RULE_PP_LAYERS finding: GLM-4.5 PP8 on 92 layers, ...)."""
    catalog = load_catalog()
    assert len(catalog.recipes) == 737
    checked = refused = 0
    for recipe in catalog.recipes:
        split = recipe_split(recipe)
        assert split.error is None and not split.conflict, recipe.name
        arch = load_arch(recipe.model) if recipe.model else None
        if recipe.kind != "library" or (recipe.pp or 1) <= 1 or arch is None or arch.missing:
            continue  # benchmark recipes: parsed above (some set VP or MTP after the layout)
        if any(f.code == "unresolved" and "pipeline_model_parallel_layout" in f.text(lang="en") for f in recipe.findings):
            continue  # a layout the recipe builds at run time (DeepSeek-V4): no static split to judge
        if recipe.model in MTP_AS_BRIDGE_SETS:
            arch = replace(arch, mtp_num_layers=MTP_AS_BRIDGE_SETS[recipe.model])
        codes = [v.code for v in check_layout(_recipe_layout(recipe, arch), arch) if v.code.startswith("RULE_PP")
                 or v.code == "RULE_VP_LAYERS"]
        recorded = {f.code for f in recipe.findings}
        checked += 1
        if codes:
            refused += 1
            assert split.kind == EVEN and "RULE_PP_LAYERS" in recorded, (recipe.name, codes)
    assert checked > 40 and refused < 10


def test_mtp_layers_of_hybrid_models_stay_in_their_pattern():
    assert mtp_layers(load_arch("deepseek_v3")) == 1 and mtp_layers(load_arch("llama3_8b")) == 0


def test_written_layouts_use_only_what_hydra_reads_unquoted():
    """run_recipe.py parses trailing KEY=VALUE overrides with Hydra's override grammar: a bare
    value may hold letters, digits, '*' and '|' (checked against hydra-core 1.3: 'Et|t*2|mL' is a
    string) but not Megatron's '(...)*n' or ',' shorthands ("mismatched input '('"). Every layout
    the planner writes keeps to the first set, and reads back as the same stages."""
    import re

    from mbridge_launch.planner.pipeline_split import balanced_layout, format_layout, parse_layout

    for layers, pp, vp, mtp in ((61, 8, 4, 1), (61, 16, 1, 1), (126, 8, 8, 0), (94, 8, 3, 0), (46, 4, 1, 1), (92, 8, 1, 1)):
        split = balanced_layout(layers, pp, vp, mtp)
        text = format_layout(split.stages)
        assert re.fullmatch(r"[A-Za-z0-9*|]+", text), text
        assert parse_layout(text) == split.stages
