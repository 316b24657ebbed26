"""`--seq-length 128k` / `32K` / `4k` (issue 33, item 6): one parser (knowledge/vocabulary.py) for
every command that takes a sequence length; k is 1,024 tokens, as in the recipe names."""

from __future__ import annotations

import pytest

from cli_helpers import recommend_answer as answer
from mbridge_launch.base.i18n import set_lang
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.vocabulary import BadSeqLength, parse_seq_length


@pytest.mark.parametrize(("text", "tokens"), [("4096", 4096), ("4k", 4096), ("32K", 32768), ("128k", 131072),
                                              (" 8k ", 8192), ("1m", 1048576), (2048, 2048)])
def test_forms(text, tokens):
    assert parse_seq_length(text) == tokens


@pytest.mark.parametrize("text", ["", "k", "1.5k", "128kb", "12 8k", "١٢٨k", "128kk", "0x80"])
def test_bad_forms(text):
    with pytest.raises(BadSeqLength):
        parse_seq_length(text)


@pytest.mark.usefixtures("english")
def test_recommend_takes_128k_as_the_128k_recipe(capsys):
    data = answer(capsys, "--model", "qwen3_600m", "--goal", "sft", "--gpus", "8", "--seq-length", "128k")
    assert data["recipe"] == "qwen3_600m_sft_8gpu_h100_bf16_128k_config"
    assert data["parallelism"]["seq_length"] == 131072


@pytest.mark.parametrize("command", [["plan", "--model", "llama3_8b", "--gpus", "8"],
                                     ["estimate", "--model", "llama3_8b", "--gpus", "8"]])
def test_plan_and_estimate_take_32K(command, capsys):
    """The same answer (and exit status: estimate exits 3 when nothing fits) as for 32768."""
    set_lang("en")
    try:
        rc = main([*command, "--seq-length", "32K", "--format", "json"])
        out = capsys.readouterr().out
        assert main([*command, "--seq-length", "32768", "--format", "json"]) == rc
        assert capsys.readouterr().out == out and '"seq_length": 32768' in out
    finally:
        set_lang(None)


@pytest.mark.parametrize(("lang", "words"), [("en", "invalid sequence length"), ("zh", "无效的序列长度")])
def test_a_bad_value_is_one_line_naming_the_flag_and_the_forms(lang, words, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["recommend", "--model", "llama3_8b", "--seq-length", "128kb", "--lang", lang])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and "Traceback" not in "\n".join(err)  # argparse: usage line + the error
    assert "--seq-length" in err[-1] and words in err[-1] and "128k" in err[-1] and "131072" in err[-1]
