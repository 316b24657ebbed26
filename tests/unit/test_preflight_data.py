"""Data checks on real files: Megatron .bin/.idx pairs broken in each way preflight knows,
blend weights, local JSONL records, the offline Hugging Face cache, and the 10,000-prefix speed."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from mbridge_launch.preflight.context import PreflightContext
from mbridge_launch.preflight.data_checks import run_data_checks, scan_prefixes
from mbridge_launch.preflight.megatron_index import HEADER, check_prefix, write_index
from mbridge_launch.preflight.runner import run_preflight
from preflight_fixtures import codes, edit, make_blend, preflight_json, valid_plan, write


def data_codes(plan, env=None) -> list[str]:
    ctx = PreflightContext(plan=plan, env=env if env is not None else {})
    return [c.code for c in run_data_checks(ctx)]


@pytest.fixture
def plan(tmp_path):
    return valid_plan(tmp_path)


def test_valid_blend_passes(plan):
    assert data_codes(plan) == ["data.blend_ok"]


def test_index_header_is_read_as_megatron_writes_it(tmp_path):
    prefix = str(tmp_path / "x")
    write_index(prefix, [4, 6], dtype_code=8)  # uint16 tokens
    result = check_prefix(prefix)
    assert result.problem is None
    assert (result.sequences, result.documents, result.bin_bytes) == (2, 3, (4 + 6) * 2)
    raw = Path(prefix + ".idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00" and struct.unpack("<Q", raw[9:17]) == (1,) and raw[17] == 8


# ---------------------------------------------------------------------- broken fixtures, exit 1
def _break_and_run(plan, tmp_path, breaker, code):
    breaker(plan.dataset.data_paths[1])
    assert code in data_codes(plan)
    rc, report = preflight_json(write(plan, tmp_path / "p"), "--no-cluster")
    assert rc == 1, report
    assert code in codes(report, "error")
    check = next(c for c in report["checks"] if c["code"] == code)
    assert plan.dataset.data_paths[1] in check["message"] and "1 of 2" in check["message"]
    return check


def test_missing_idx(plan, tmp_path):
    _break_and_run(plan, tmp_path, lambda p: os.unlink(p + ".idx"), "data.idx_missing")


def test_missing_bin(plan, tmp_path):
    _break_and_run(plan, tmp_path, lambda p: os.unlink(p + ".bin"), "data.bin_missing")


def test_truncated_idx(plan, tmp_path):
    def truncate(prefix):
        with open(prefix + ".idx", "r+b") as handle:
            handle.truncate(HEADER.size + 10)  # header intact, arrays cut short

    check = _break_and_run(plan, tmp_path, truncate, "data.idx_truncated")
    assert "header promises" in check["message"]


def test_idx_cut_inside_header(plan, tmp_path):
    def truncate(prefix):
        with open(prefix + ".idx", "r+b") as handle:
            handle.truncate(12)

    _break_and_run(plan, tmp_path, truncate, "data.idx_truncated")


def test_empty_bin(plan, tmp_path):
    _break_and_run(plan, tmp_path, lambda p: open(p + ".bin", "wb").close(), "data.bin_empty")


def test_empty_idx(plan, tmp_path):
    _break_and_run(plan, tmp_path, lambda p: open(p + ".idx", "wb").close(), "data.idx_empty")


def test_idx_that_is_not_a_megatron_index(plan, tmp_path):
    _break_and_run(plan, tmp_path, lambda p: Path(p + ".idx").write_bytes(b"PK\x03\x04 a zip, not an index" * 4), "data.idx_not_megatron")


def test_bin_shorter_than_its_index(plan, tmp_path):
    def truncate(prefix):
        with open(prefix + ".bin", "r+b") as handle:
            handle.truncate(8)

    _break_and_run(plan, tmp_path, truncate, "data.bin_truncated")


def test_unknown_index_version_and_dtype(tmp_path):
    prefix = str(tmp_path / "v")
    write_index(prefix, [3])
    raw = bytearray(Path(prefix + ".idx").read_bytes())
    raw[9:17] = struct.pack("<Q", 7)
    Path(prefix + ".idx").write_bytes(bytes(raw))
    assert check_prefix(prefix).problem == "idx_bad_version"
    raw[9:17] = struct.pack("<Q", 1)
    raw[17] = 42
    Path(prefix + ".idx").write_bytes(bytes(raw))
    assert check_prefix(prefix).problem == "idx_bad_dtype"


def test_idx_is_a_directory(tmp_path):
    prefix = str(tmp_path / "d")
    write_index(prefix, [3])
    os.unlink(prefix + ".idx")
    os.mkdir(prefix + ".idx")
    assert check_prefix(prefix).problem == "idx_unreadable"


def test_prefix_written_with_suffix(plan):
    plan = edit(plan, **{"dataset.data_paths": [plan.dataset.data_paths[0] + ".bin", plan.dataset.data_paths[1]]})
    assert "data.prefix_has_suffix" in data_codes(plan)


# ---------------------------------------------------------------------- weights
def test_weight_count_must_match():
    """A Plan's dataset.weights of another count is refused at load (test_plan_validation); the
    check itself still counts what it is given."""
    from mbridge_launch.preflight.data_checks import check_weights

    assert [c.code for c in check_weights(["/d/a", "/d/b"], ["1.0"])] == ["data.weights_count"]


def test_weights_must_be_positive(plan):
    a, b = plan.dataset.data_paths[:2]
    plan = edit(plan, **{"dataset.weights": None, "dataset.data_paths": ["0.5", a, "-0.5", b]})
    result = data_codes(plan)
    assert "data.weight_invalid" in result


def test_interleaved_weights_parse(plan):
    a, b = plan.dataset.data_paths
    good = edit(plan, **{"dataset.weights": None, "dataset.data_paths": ["0.3", a, "0.7", b]})
    assert data_codes(good) == ["data.blend_ok"]
    bad = edit(plan, **{"dataset.weights": None, "dataset.data_paths": ["0.3", a, "0", b]})
    assert "data.weight_invalid" in data_codes(bad)
    # a weight that does not parse as a number (Megatron would fail reading the blend)
    unparsable = edit(plan, **{"dataset.weights": None, "dataset.data_paths": ["0.3", a, "0.7x", b]})
    assert "data.weight_invalid" in data_codes(unparsable) and "data.weights_count" not in data_codes(unparsable)


def test_weights_that_do_not_parse_or_are_not_positive_exit_1(plan, tmp_path):
    a, b = plan.dataset.data_paths
    for i, weights in enumerate((["0.3", "abc"], ["0.3", "-1"], ["nan", "0.5"], ["0.3", "inf"])):
        bad = edit(plan, **{"dataset.weights": None, "dataset.data_paths": [weights[0], a, weights[1], b]})
        rc, report = preflight_json(write(bad, tmp_path / str(i)), "--no-cluster")
        assert rc == 1 and "data.weight_invalid" in codes(report, "error"), (weights, report)
        check = next(c for c in report["checks"] if c["code"] == "data.weight_invalid")
        assert check["subject"] in (a, b)


def test_no_prefixes(plan, tmp_path):
    empty = edit(plan, **{"dataset.data_paths": [], "dataset.weights": None})
    assert data_codes(empty) == []
    rc, report = preflight_json(write(empty, tmp_path / "p"), "--no-cluster")
    assert rc == 1 and "plan.dataset_required" in codes(report, "error")
    assert "dataset.data_path" in next(c["message"] for c in report["checks"] if c["code"] == "plan.dataset_required")


def test_relative_prefixes_resolve_against_workdir(plan, tmp_path):
    rel = [os.path.relpath(p, tmp_path) for p in plan.dataset.data_paths]
    plan = edit(plan, **{"dataset.data_paths": rel, "launch.workdir": str(tmp_path)})
    assert data_codes(plan) == ["data.blend_ok"]


def test_many_problems_make_one_check_each(tmp_path):
    prefixes = make_blend(tmp_path / "d", tuple(f"p{i}" for i in range(50)))
    for p in prefixes[:20]:
        os.unlink(p + ".idx")
    results = scan_prefixes(prefixes)
    assert [r.prefix for r in results] == prefixes  # order kept across the thread pool
    plan = edit(valid_plan(tmp_path), **{"dataset.data_paths": prefixes, "dataset.weights": None})
    checks = run_data_checks(PreflightContext(plan=plan, env={}))
    missing = [c for c in checks if c.code == "data.idx_missing"]
    assert len(missing) == 1 and missing[0].params["count"] == 20 and "+17" in missing[0].params["examples"]


# ---------------------------------------------------------------------- a large blend
def test_ten_thousand_prefixes_are_all_checked(tmp_path):
    """A 10,000-prefix blend passes the data checks (how long it takes: benchmarks/speed.py)."""
    prefixes = []
    for i in range(10_000):
        prefix = str(tmp_path / f"s{i // 1000}" / f"doc_{i:05d}")
        if i % 1000 == 0:
            os.mkdir(os.path.dirname(prefix))
        write_index(prefix, [3, 2])
        prefixes.append(prefix)
    plan = edit(valid_plan(tmp_path / "base"), **{"dataset.data_paths": prefixes, "dataset.weights": [1.0] * len(prefixes)})
    report = run_preflight(plan, cluster=False, env={})
    assert "data.blend_ok" in report.codes() and not [c for c in report.codes("error") if c.startswith("data.")]


# ---------------------------------------------------------------------- local JSONL
def jsonl_plan(tmp_path, records: list | None, *, validation: bool = True, raw: str | None = None):
    root = tmp_path / "sft"
    root.mkdir()
    if raw is not None:
        (root / "training.jsonl").write_text(raw)
    elif records is not None:
        (root / "training.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if validation:
        first = records[0] if records else {"input": "q", "output": "a"}
        (root / "validation.jsonl").write_text(json.dumps(first) + "\n")
    plan = valid_plan(tmp_path)
    return edit(plan, mode="sft", **{"dataset.selector": "local-jsonl", "dataset.data_paths": [], "dataset.weights": None,
                                     "dataset.fields": {"dataset_root": str(root)}})


def test_jsonl_prompt_completion_and_chat_records(tmp_path):
    plan = jsonl_plan(tmp_path, [{"input": "2+2?", "output": "4"}, {"messages": [{"role": "user", "content": "hi"}]}])
    assert data_codes(plan) == ["data.jsonl_ok", "data.jsonl_ok"]
    (tmp_path / "sft" / "validation.jsonl").write_text(json.dumps({"prompt": "x"}) + "\n")
    assert data_codes(plan) == ["data.jsonl_ok", "data.jsonl_keys"]


def test_jsonl_wrong_keys(tmp_path):
    plan = jsonl_plan(tmp_path, [{"question": "2+2?", "answer": "4"}])
    ctx = PreflightContext(plan=plan, env={})
    check = next(c for c in run_data_checks(ctx) if c.code == "data.jsonl_keys")
    assert check.severity == "error" and "answer, question" in check.message("en") and "input+output" in check.message("en")


def test_jsonl_custom_columns_from_overrides(tmp_path):
    from preflight_fixtures import override

    plan = jsonl_plan(tmp_path, [{"question": "2+2?", "answer": "4"}])
    plan = edit(plan, overrides=[override("dataset.preprocessing.prompt_column", "question", "convergence").model_dump(by_alias=True),
                                 override("dataset.preprocessing.completion_column", "answer", "convergence").model_dump(by_alias=True)])
    assert data_codes(plan) == ["data.jsonl_ok", "data.jsonl_ok"]


def test_jsonl_not_json(tmp_path):
    plan = jsonl_plan(tmp_path, None, raw='{"input": "a", "output": "b"}\n{"input": broken\n')
    rc, report = preflight_json(write(plan, tmp_path / "p"), "--no-cluster")
    assert rc == 1 and "data.jsonl_parse" in codes(report, "error")
    assert "line 2" in next(c["message"] for c in report["checks"] if c["code"] == "data.jsonl_parse")


def test_jsonl_missing_files(tmp_path):
    plan = jsonl_plan(tmp_path, None, validation=False)
    assert data_codes(plan) == ["data.jsonl_missing", "data.jsonl_validation_missing"]


def test_jsonl_empty_file(tmp_path):
    assert "data.jsonl_empty" in data_codes(jsonl_plan(tmp_path, None, raw="\n\n"))


# ---------------------------------------------------------------------- Hugging Face presets
def squad_plan(tmp_path, env_vars):
    plan = valid_plan(tmp_path)
    return edit(plan, mode="sft", env_vars=env_vars, **{"dataset.selector": "squad", "dataset.data_paths": [], "dataset.weights": None})


def test_hf_preset_online_warns_about_network(tmp_path):
    assert data_codes(squad_plan(tmp_path, {})) == ["data.hf_needs_network"]


def test_hf_preset_offline_without_cache_is_an_error(tmp_path):
    hf_home = tmp_path / "hf"
    plan = squad_plan(tmp_path, {"HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)})
    rc, report = preflight_json(write(plan, tmp_path / "p"), "--no-cluster")
    assert rc == 1 and "data.hf_not_cached" in codes(report, "error")


def test_hf_preset_offline_with_cache(tmp_path):
    hf_home = tmp_path / "hf"
    snapshot = hf_home / "hub" / "datasets--rajpurkar--squad" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "train.parquet").write_bytes(b"PAR1")
    plan = squad_plan(tmp_path, {"HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)})
    assert data_codes(plan) == ["data.hf_cached"]


def test_hf_home_forwarded_from_submitting_environment(tmp_path):
    hf_home = tmp_path / "hf"
    (hf_home / "datasets" / "rajpurkar___squad" / "plain_text").mkdir(parents=True)
    plan = edit(squad_plan(tmp_path, {"HF_HUB_OFFLINE": "1"}), **{"cluster.env": ["HF_HOME"]})
    assert data_codes(plan, env={"HF_HOME": str(hf_home)}) == ["data.hf_cached"]
    # not forwarded: the job would not see this HF_HOME
    plan = edit(plan, **{"cluster.env": []})
    assert data_codes(plan, env={"HF_HOME": str(hf_home), "HOME": str(tmp_path / "nohome")}) == ["data.hf_not_cached"]
