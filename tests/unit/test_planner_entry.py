"""The planner's one entry point (issue 33, item 2): planner.entry is the only module that builds
the search's options or calls the search; its PlanResult holds the near-tie set, domain, band and
NVIDIA's layout that `plan`, `estimate`, `tune` and `recommend` render."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mbridge_launch
from mbridge_launch.knowledge.hardware import get_hardware
from mbridge_launch.knowledge.models import load_arch
from mbridge_launch.planner.entry import PlanRequest, estimate_request, plan_request, shipped_calibration
from mbridge_launch.planner.near_tie import near_tie_set

PACKAGE = Path(mbridge_launch.__file__).parent
SEARCH_MODULE = "mbridge_launch.planner.search"
# the search module itself (its helpers call each other) and the entry point
ALLOWED = {PACKAGE / "planner" / "search.py", PACKAGE / "planner" / "entry.py"}
GUARDED = {"Options", "search"}  # the search options class and the search function


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _resolve(node: ast.ImportFrom, module: str) -> str:
    """The absolute module of a `from X import ...` in `module` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")[:-node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def offenders(path: Path, module: str | None = None) -> list[str]:
    """`module:line what` for each construction of search.Options and each call of search.search,
    by any name or module alias, in one module (`module`: its dotted name, else from its path)."""
    module = module or _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()  # local names bound to Options or search()
    modules: set[str] = set()  # local names bound to the search module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(node, module)
            for alias in node.names:
                if source == SEARCH_MODULE and alias.name in GUARDED:
                    names.add(alias.asname or alias.name)
                if source == "mbridge_launch.planner" and alias.name == "search":
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == SEARCH_MODULE and alias.asname:
                    modules.add(alias.asname)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in names:
            found.append(f"{module}:{node.lineno} {f.id}(...)")
        elif isinstance(f, ast.Attribute) and f.attr in GUARDED:
            base = ast.unparse(f.value)
            if base in modules or base == SEARCH_MODULE:
                found.append(f"{module}:{node.lineno} {base}.{f.attr}(...)")
    return found


def test_no_module_but_the_entry_point_builds_search_options_or_calls_the_search():
    roots = [PACKAGE, PACKAGE.parent / "executors"]
    found = [hit for root in roots if root.is_dir() for path in sorted(root.rglob("*.py")) if path not in ALLOWED
             for hit in offenders(path)]
    assert found == [], "only planner/entry.py may build search.Options or call search.search:\n" + "\n".join(found)


def test_the_checker_sees_each_way_of_reaching_the_search(tmp_path):
    """The ast check above finds what it looks for (a test that passes on an empty tree proves nothing)."""
    samples = {
        "plain.py": "from mbridge_launch.planner.search import Options, search\nsearch(a, b, 8, options=Options())\n",
        "aliased.py": "from mbridge_launch.planner.search import search as s\ns(a, b, 8)\n",
        "module.py": "from mbridge_launch.planner import search as S\nS.search(a, b, 8, options=S.Options())\n",
        "relative.py": "from .search import Options\nOptions(cal=None)\n",
        "regex.py": "import re\nre.compile('x').search('y')\n",  # not the planner's search
    }
    hits = {}
    for name, text in samples.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        hits[name] = len(offenders(path, "mbridge_launch.planner._probe"))
    assert hits == {"plain.py": 2, "aliased.py": 1, "module.py": 2, "relative.py": 1, "regex.py": 0}


def _request(**kw):
    arch = load_arch(kw.pop("model", "llama3_8b"))
    defaults = dict(model=arch.name, arch=arch, hardware=get_hardware(kw.pop("gpu", "h100")), gpus=8, gbs=128,
                    seq_length=8192, precision="bf16", goal="pretrain", top=5)
    defaults.update(kw)
    return PlanRequest(**defaults)


def test_plan_result_holds_the_near_tie_set_domain_band_and_evidence():
    result = plan_request(_request(), shipped_calibration())
    assert result.candidates and result.best is result.candidates[0]
    assert result.near_tie == near_tie_set(result.candidates, result.tie.within)
    assert result.near_tie[0] == (1, result.best)
    assert result.domain is result.assessment.domain and result.band is result.assessment.band
    # issue 34: no reliable estimate where the band's p90 is wider than planner.domain.RELIABLE_BAND
    assert result.reliable == (result.band.p90 <= 0.5 and result.band.median < 1.0)
    assert all(t.row is not None for t in result.evidence)


def test_nvidia_layout_is_part_of_the_answer_when_nvidia_publishes_one():
    from mbridge_launch.planner.nvidia_layout import benchmark_recipe, shipped_recipes

    recipes = shipped_recipes()
    bench = next(r for r in recipes if r.kind == "benchmark" and r.model == "llama3_8b" and r.gpus and r.hardware
                 and r.precision == "bf16" and r.mode == "pretrain" and not r.raises_not_implemented)
    req = _request(gpu=bench.hardware, gpus=bench.gpus, gbs=bench.gbs or 128,
                   seq_length=bench.seq_length or bench.dataset_seq_length or 8192)
    assert benchmark_recipe(recipes, "llama3_8b", bench.hardware, bench.gpus, "bf16", "pretrain") is not None
    result = plan_request(req, shipped_calibration())
    assert result.nvidia is not None and result.nvidia.recipe.model == "llama3_8b"
    assert plan_request(req, shipped_calibration(), nvidia=False).nvidia is None


def test_the_first_does_not_depend_on_how_many_are_listed():
    """recommend asks for top=1, plan for top=5: the same first (the search's pruning keeps it)."""
    for model, gpu, gpus in (("qwen3_30b_a3b", "h200", 8), ("llama3_70b", "h200", 32)):
        one = plan_request(_request(model=model, gpu=gpu, gpus=gpus, gbs=256, seq_length=4096, top=1),
                           shipped_calibration(), nvidia=False).best
        five = plan_request(_request(model=model, gpu=gpu, gpus=gpus, gbs=256, seq_length=4096, top=5),
                            shipped_calibration(), nvidia=False).best
        assert one is not None and five is not None
        assert one.layout == five.layout and one.tokens_per_sec_per_gpu == pytest.approx(five.tokens_per_sec_per_gpu)


def test_estimate_request_of_the_first_gives_the_first_figures():
    result = plan_request(_request(), shipped_calibration(), nvidia=False)
    again = estimate_request(result.request, result.best.layout, shipped_calibration())
    assert again.candidate.tokens_per_sec_per_gpu == pytest.approx(result.best.tokens_per_sec_per_gpu)
    assert again.assessment.band == result.band


def test_packing_recipe_gets_the_planners_first_at_mbs_1_and_says_so():
    """Sequence packing needs MBS=1: recommend takes the planner's first among MBS=1 layouts and
    its LayoutChoice carries the unconstrained first with both figures."""
    from mbridge_launch.planner.rules import Layout
    from mbridge_launch.recommend.resize import choice_of, resize_layout

    arch = load_arch("qwen3_30b_a3b")
    h200 = get_hardware("h200")
    recipe = Layout(tp=4, pp=1, cp=1, ep=4, sp=True, mbs=1, gbs=64, seq_length=2048, world=4, packing=True)
    resized = resize_layout(recipe, world=8, seq_length=2048, arch=arch, hardware=h200, precision="bf16", goal="lora",
                            model="qwen3_30b_a3b")
    assert resized.layout.mbs == 1 and resized.layout.packing
    first = resized.planned.best
    choice = choice_of(resized, resized.layout, resized.estimate, benchmark=False, user_layout=False)
    if first.layout.mbs == 1:
        assert choice.source == "planner"
    else:
        assert (choice.source, choice.reason) == ("adjusted", "packing")
        assert choice.as_json()["planner_first"]["tokens_per_sec_per_gpu"] == round(first.tokens_per_sec_per_gpu, 1)
        assert choice.tokens_per_sec_per_gpu == resized.estimate.tokens_per_sec_per_gpu
