"""Issue 33 items 1 and 7: the README's first command works on a fresh machine and says little;
`recommend`'s first screen is the answer, in one memory unit, with no placeholder for a fact."""

from __future__ import annotations

import re

import pytest

README_LIMIT = 40  # lines the README's first command may print after pip
ANSWER_LIMIT = 25  # lines of recommend's default answer


def test_readme_first_command_exits_0_within_40_lines(mbl, tmp_path):
    """recommend --smoke-test -o, preflight --no-cluster, submit --dry-run --no-cluster-checks with
    the script sent to a file, as the README runs them in an empty directory: exit 0 each, and at
    most README_LIMIT lines on the terminal; the script file is the whole script."""
    steps = [("recommend", "--smoke-test", "-o", "smoke-plan.yaml"),
             ("preflight", "smoke-plan.yaml", "--no-cluster"),
             ("submit", "smoke-plan.yaml", "--executor", "sbatch", "--dry-run", "--no-cluster-checks")]
    shown = 0
    for step in steps:
        proc = mbl.run(*step, cwd=tmp_path)
        assert proc.rc == 0, (step, proc.stdout, proc.stderr)
        script_to_file = step[0] == "submit"  # `> smoke-plan.sbatch` in the README
        shown += len(proc.stderr.splitlines()) + (0 if script_to_file else len(proc.stdout.splitlines()))
        if script_to_file:
            assert "#!/bin/bash" in proc.stdout and "/opt/Megatron-Bridge/scripts/training/run_recipe.py" in proc.stdout
    assert shown <= README_LIMIT, shown


def test_readme_shows_the_first_command_and_its_transcript():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "--dry-run --no-cluster-checks > smoke-plan.sbatch" in readme
    assert "dry run: preflight passed" in readme  # the transcript, not a refusal


REQUESTS = [
    ("--model", "Qwen3 30B-A3B", "--goal", "sft", "--gpus", "16", "--gpu-type", "h100", "--from-scratch"),
    ("--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h200"),
    ("--model", "llama3_70b", "--gpus", "64", "--gpu-type", "b200", "--precision", "fp8"),
    ("--model", "llama3_70b", "--gpus", "64", "--gpu-type", "gb200", "--benchmark", "--precision", "fp8mx"),
    ("--smoke-test",),
]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("request_args", REQUESTS, ids=lambda r: r[1] if len(r) > 1 else r[0])
def test_recommend_default_answer_is_short_and_has_no_placeholders(mbl, tmp_path, lang, request_args):
    proc = mbl.run("recommend", *request_args, cwd=tmp_path, lang=lang)
    assert proc.rc == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= ANSWER_LIMIT, proc.stdout
    for line in lines:
        if line.strip().startswith("srun "):
            continue  # the command's own Hydra values (KEY=null unsets a setting) are not placeholders
        assert not re.search(r"(?<![\w/])\?(?![\w])|\bnull\b| GB |VP=-|VP=1\b|±100%", line), line
    assert "srun " in proc.stdout  # the script's own command
    assert "GiB" in proc.stdout or "ESTIMATE_BENCHMARK" in proc.stdout  # one memory unit where there is an estimate
    verbose = mbl.run("recommend", *request_args, "--verbose", cwd=tmp_path, lang=lang)
    assert len(verbose.stdout.splitlines()) > len(lines)  # the rest is behind --verbose


def test_mfu_names_its_peak(mbl, tmp_path):
    fp8 = mbl.run("recommend", "--model", "llama3_70b", "--gpus", "64", "--gpu-type", "b200", "--precision", "fp8",
                  cwd=tmp_path)
    assert "of the FP8 peak" in fp8.stdout or "no reliable estimate" in fp8.stdout, fp8.stdout
    bf16 = mbl.run("recommend", "--smoke-test", cwd=tmp_path)
    assert "of the BF16 peak" in bf16.stdout


def test_the_card_command_is_the_script_s_command(mbl, tmp_path):
    mbl.run("recommend", "--smoke-test", "-o", "p.yaml", cwd=tmp_path)
    card = mbl.run("recommend", "--smoke-test", cwd=tmp_path).stdout.splitlines()
    command = card[card.index(next(line for line in card if line.startswith("Command"))) + 1].strip()
    script = mbl.run("submit", "p.yaml", "--dry-run", "--no-cluster-checks", cwd=tmp_path).stdout
    assert command in script.splitlines() and "torch.distributed.run" not in command


def test_preflight_never_says_recipe_default_question_mark(mbl, tmp_path):
    mbl.run("recommend", "--smoke-test", "-o", "p.yaml", cwd=tmp_path)
    proc = mbl.run("preflight", "p.yaml", "--no-cluster", "--verbose", cwd=tmp_path)
    assert "recipe default ?" not in proc.stdout and "not set in the recipe" in proc.stdout
    short = mbl.run("preflight", "p.yaml", "--no-cluster", cwd=tmp_path)
    assert "plan.convergence_override" not in short.stdout and "--verbose" in short.stdout
