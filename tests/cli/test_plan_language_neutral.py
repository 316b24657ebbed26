"""A Plan stores message keys and parameters, never rendered text: the same request gives the same
Plan, byte for byte, and the same hash in every language (the duplicate-submission check and the
ledger rely on the hash), and the text is made when it is shown, in the language of the reader."""

from __future__ import annotations

import pytest
import yaml

from mbridge_launch.cli.main import main

REQUESTS = [
    ("--model", "llama3_70b", "--gpus", "64", "--seq-length", "16384"),  # resize, SEQ_BEYOND_MODEL warning
    ("--model", "DeepSeek-V3", "--gpus", "256", "--gpu-type", "gb200"),  # hardware substitute, catalog findings
    ("--model", "qwen3_8b", "--gpus", "4", "--seq-length", "16384"),  # changes caused by the sequence length
    ("--model", "qwen25_vl_7b", "--gpus", "2", "--goal", "sft"),
]


def _written(capsys, tmp_path, lang: str, args: tuple[str, ...]) -> str:
    path = tmp_path / f"plan-{lang}.yaml"
    assert main(["--lang", lang, "recommend", *args, "-o", str(path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("args", REQUESTS, ids=[a[1] for a in REQUESTS])
def test_plan_hash_does_not_depend_on_lang(capsys, tmp_path, args):
    english, chinese = _written(capsys, tmp_path, "en", args), _written(capsys, tmp_path, "zh", args)
    assert english == chinese  # the whole file, hash line included


def test_plan_stores_message_keys_not_text(capsys, tmp_path):
    data = yaml.safe_load(_written(capsys, tmp_path, "zh", REQUESTS[1]))
    assert data["warnings"] and all(set(w["message"]) <= {"key", "params"} for w in data["warnings"])
    data = yaml.safe_load(_written(capsys, tmp_path, "zh", REQUESTS[2]))
    reasons = [o["reason"] for o in data["overrides"]]
    assert reasons and all(isinstance(r, dict) and r["key"].startswith("change.reason.") for r in reasons)


def test_stored_warnings_are_rendered_in_the_readers_language(capsys, tmp_path):
    _written(capsys, tmp_path, "en", REQUESTS[0])
    plan = str(tmp_path / "plan-en.yaml")
    main(["--lang", "zh", "preflight", plan, "--no-cluster"])
    chinese = capsys.readouterr().out
    main(["--lang", "en", "preflight", plan, "--no-cluster"])
    english = capsys.readouterr().out
    assert "max_position_embeddings" in english and "exceeds" in english
    assert "超过" in chinese and "exceeds" not in chinese


def test_plan_written_with_text_reasons_still_loads_and_keeps_its_text(capsys, tmp_path):
    """A hand-written reason (or a Plan from before messages were data) is literal text, kept as is."""
    _written(capsys, tmp_path, "en", REQUESTS[2])
    data = yaml.safe_load((tmp_path / "plan-en.yaml").read_text(encoding="utf-8"))
    data["overrides"][0]["reason"] = "fits our 64-GPU partition"
    data["warnings"] = [{"code": "MINE", "message": "checked by hand on 2026-11-30"}]
    path = tmp_path / "hand.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    main(["--lang", "zh", "preflight", str(path), "--no-cluster"])
    out = capsys.readouterr().out
    assert "checked by hand on 2026-11-30" in out
    from mbridge_launch.plan.model import load_plan

    plan = load_plan(path)
    assert str(plan.overrides[0].reason) == "fits our 64-GPU partition"
    assert yaml.safe_load(plan.to_yaml())["overrides"][0]["reason"] == "fits our 64-GPU partition"


def test_a_stored_message_that_cannot_render_is_refused_at_load(capsys, tmp_path):
    """A hand-edited message key or a missing parameter is a Plan error naming the field (exit 2),
    not an internal error when preflight shows the warning."""
    _written(capsys, tmp_path, "en", REQUESTS[2])
    data = yaml.safe_load((tmp_path / "plan-en.yaml").read_text(encoding="utf-8"))
    data["warnings"] = [{"code": "A", "message": {"key": "change.reason.resize", "params": {"from_gpus": 2}}},
                        {"code": "B", "message": {"key": "no.such.key"}}]
    data["overrides"][0]["reason"] = {"key": "change.reason.joined", "params": {"first": {"key": "nope"}, "second": "x"}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["preflight", str(path), "--no-cluster"]) == 2
    err = capsys.readouterr().err
    assert "warnings[0].message" in err and "to_gpus" in err
    assert "warnings[1].message" in err and "no.such.key" in err
    assert "overrides[0].reason" in err and "'nope'" in err and "internal error" not in err
