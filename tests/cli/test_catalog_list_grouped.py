"""`catalog list` (issue 33, item 6): one line per model with its recipe counts by default,
`--all` for every recipe, and a legend line for every marker shown, in en and zh."""

from __future__ import annotations

import pytest

from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.catalog import load_catalog

LEGEND = {"en": {"!": "! a recipe with an error finding", "~": "~ a library recipe that run_recipe.py cannot load",
                 "x": "x a recipe that raises NotImplementedError"},
          "zh": {"!": "! 有错误级发现的配方", "~": "~ run_recipe.py 无法加载的库配方", "x": "x 在此版本中会抛出 NotImplementedError"}}


def _list(capsys, *args: str) -> list[str]:
    assert main(["catalog", "list", "--catalog-version", "0.6.2", *args]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_default_is_one_line_per_model_with_counts_and_a_legend(capsys, lang):
    catalog = load_catalog("0.6.2")
    models = {r.model for r in catalog.recipes}
    lines = _list(capsys, "--lang", lang)
    assert len(lines) <= len(models) + 2 + 3  # header, count line, legend
    rows = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert set(rows) == models
    glm = rows["glm52"]
    if lang == "en":
        assert "library 2 pretrain, 4 sft, 2 peft; benchmark 2" in glm
    else:
        assert "库配方 预训练 2、监督微调 4、参数高效微调 2；性能配方 2" in glm
    assert glm.endswith("~2")  # glm52_sft_192gpu_gb200_bf16_config and glm52_sft_416gpu_h100_bf16_config
    errors = sum(1 for r in catalog.recipes if r.errors)
    assert sum(int(part[1:]) for line in rows.values() for part in line.split() if part[:1] == "!" and part[1:].isdigit()) == errors
    for marker, text in LEGEND[lang].items():
        assert any(line.startswith(text) for line in lines), marker


def test_all_lists_every_recipe_with_its_layout_and_the_legend(capsys):
    catalog = load_catalog("0.6.2")
    lines = _list(capsys, "--all", "--lang", "en")
    rows = [line for line in lines[1:] if line[4:13].strip() in ("library", "benchmark")]
    names = [line[14:].split()[0] for line in rows]
    assert sorted(names) == sorted(r.name for r in catalog.recipes)
    assert len(lines) == 1 + 2 * len(rows) + 3  # header, two lines per recipe, the legend
    flagged = [line for line in rows if line[:1] == "!"]
    assert len(flagged) == sum(1 for r in catalog.recipes if r.errors)
    assert any(line.startswith(LEGEND["en"]["!"]) for line in lines)


def test_a_filter_without_markers_prints_no_legend(capsys):
    lines = _list(capsys, "--family", "llama", "--mode", "peft", "--kind", "library")
    assert not any(line[:2] in ("! ", "~ ", "x ") for line in lines)
