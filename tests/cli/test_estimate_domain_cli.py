"""`estimate` and `plan` say whether the request is inside the calibrated domain, with the
leave-one-out error band, and `plan` answers with the near-tie set (in process, shipped table)."""

from __future__ import annotations

import json

import pytest

from mbridge_launch.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


INSIDE = ("--model", "llama3_8b", "--gpus", "8", "--gpu-type", "gb200", "--precision", "fp8cs", "--seq-length", "8192")
OUTSIDE = ("--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h200", "--precision", "bf16", "--seq-length", "32768",
           "--cp", "2")


def test_estimate_text_inside_the_domain(capsys):
    code, out, err = run(capsys, "--lang", "en", "estimate", *INSIDE, "--mbs", "2")
    assert code == 0, err
    line = next(x for x in out.splitlines() if "calibrated domain" in x)
    assert line.startswith("Inside the calibrated domain (error ±") and "nearest rows: gb200 fp8cs llama dense" in line


def test_estimate_text_outside_says_extrapolated_and_why(capsys):
    code, out, err = run(capsys, "--lang", "en", "estimate", *OUTSIDE)
    line = next(x for x in out.splitlines() if x.startswith("Extrapolated: "))
    assert "no h200 row" in line and "bf16 is calibrated only on moe models" in line
    assert "sequence length 32768 is outside the calibrated" in line and "error band ±" in line
    assert "leave-one-system-out" in line and "widened x2.25 for precision, seq_length" in line


def test_estimate_json_is_the_same_in_every_language(capsys):
    _, english, _ = run(capsys, "--lang", "en", "estimate", *OUTSIDE, "--format", "json")
    _, chinese, _ = run(capsys, "--lang", "zh", "estimate", *OUTSIDE, "--format", "json")
    en, zh = json.loads(english), json.loads(chinese)
    assert en["domain"] == zh["domain"] and en["error_band"] == zh["error_band"]
    assert en["domain"]["inside"] is False and set(en["domain"]["outside"]) == {"system", "precision", "seq_length"}
    assert en["error_band"]["held_out"] == "system"


def test_estimate_text_in_chinese(capsys):
    _, out, _ = run(capsys, "--lang", "zh", "estimate", *OUTSIDE)
    assert any(x.startswith("外推：") and "h200" in x for x in out.splitlines())


def test_plan_text_says_the_domain_once_and_the_near_tie_set(capsys):
    # NVIDIA published two grids of this configuration in different releases (TP2 CP2, TP4 CP1)
    argv = ("plan", "--model", "llama31_405b", "--gpus", "256", "--gpu-type", "gb300", "--precision", "fp8cs",
            "--gbs", "1536", "--seq-length", "8192", "--top", "5")
    code, out, _ = run(capsys, "--lang", "en", *argv, "--format", "json")
    assert code == 0
    data = json.loads(out)
    ties = data["near_tie_set"]
    ranks = [x["rank"] for x in ties["layouts"]]
    # NVIDIA published this configuration: the tolerance is the 90% quantile of the tie distances
    # of corrected estimates of the nearest rows (gap_measured of the shipped table), and every
    # layout a row ran is in the set
    from mbridge_launch.planner import domain as dm

    nearest = [r for r in dm.load_table().rows
               if (r.system, r.precision, r.family, r.kind) == ("gb300", "fp8cs", "llama", "dense")
               and r.gap_measured is not None]
    assert len(nearest) >= dm.MIN_ROWS  # the first tier holds: the quantile is over these rows
    distances = sorted(r.gap_measured for r in nearest)
    assert ties["within"] == pytest.approx(distances[-(-9 * len(distances) // 10) - 1], abs=1e-4)
    assert "90% of the nearest rows" in ties["basis"] and f"(n={len(nearest)})" in ties["basis"]
    measured = [i + 1 for i, c in enumerate(data["candidates"]) if c["measured"] is not None]
    assert measured[:1] == [1] and len(measured) >= 2
    assert ranks[0] == 1 and "every layout measured on this configuration" in ties["basis"]
    assert set(measured) <= set(ranks) and len(ranks) > 1
    for tie in ties["layouts"]:
        cand = data["candidates"][tie["rank"] - 1]
        assert (tie["tp"], tie["pp"], tie["ep"], tie["tokens_per_sec_per_gpu"]) == \
            (cand["tp"], cand["pp"], cand["ep"], cand["tokens_per_sec_per_gpu"])
    code, text, _ = run(capsys, "--lang", "en", *argv)
    assert code == 0
    assert sum("calibrated domain" in x or x.startswith("Extrapolated: ") for x in text.splitlines()) == 1
    quoted = f"Layouts {', '.join(str(r) for r in ranks)} cannot be told apart: each was measured on this configuration"
    assert quoted in text
    assert f"within {ties['within']:.1%} of the first, a gap measured-corrected estimates have got wrong" in text
    code, zh, _ = run(capsys, "--lang", "zh", *argv)
    assert code == 0 and f"布局 {', '.join(str(r) for r in ranks)} 无法区分" in zh
    assert "6% of the first, about the model's median error" not in text


@pytest.mark.parametrize("top", ["1", "2"])
def test_a_set_cut_by_top_says_it_may_go_on(capsys, top):
    argv = ("plan", "--model", "qwen3_235b_a22b", "--gpus", "256", "--gpu-type", "gb200", "--precision", "fp8mx",
            "--gbs", "8192", "--top", top, "--format", "json")
    code, out, _ = run(capsys, *argv)
    data = json.loads(out)
    ties = data["near_tie_set"]
    cut = len(ties["layouts"]) == len(data["candidates"]) == int(top)
    assert ties["complete"] is (not cut)


def test_recommend_card_and_plan_carry_the_domain_and_error_band(capsys, tmp_path):
    plan_file = tmp_path / "plan.yaml"
    code, out, err = run(capsys, "--lang", "en", "recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type",
                         "h200", "-o", str(plan_file), "--verbose")  # the basis of the band is behind --verbose
    assert code == 0, err
    assert any(x.strip().startswith("Extrapolated: ") and "no h200 row" in x for x in out.splitlines())
    import yaml

    est = yaml.safe_load(plan_file.read_text())["estimates"]
    assert est["domain"]["inside"] is False and "system" in est["domain"]["outside"]
    assert 0 < est["error_band"]["median"] <= est["error_band"]["p90"] and est["error_band"]["rows"] >= 3
    code, out, _ = run(capsys, "--lang", "zh", "recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h200",
                       "--verbose")
    assert code == 0 and any(x.strip().startswith("外推：") for x in out.splitlines())
