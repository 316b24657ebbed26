"""Round-trip rewrites of a user's Plan (issue 32 item 6): `tune` writing the winning layout back
keeps every comment and the key order of the user's file, changes only the values that changed,
leaves the previous file beside it as PLAN.~N~ (never overwriting an older backup), and the file
it writes reads back as the tuned Plan with the hash the tool computed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gate_fixtures import recommend_base_plan
from mbridge_launch.base.atomic import backup_name, replace_keeping_backup
from mbridge_launch.base.yaml_edit import edit_yaml_text
from mbridge_launch.plan.model import load_plan, plan_from_dict, save_plan
from mbridge_launch.tune import result as R
from mbridge_launch.tune import session as S
from mbridge_launch.tune import trials as T

TOP_COMMENT = "# team notes: the 1B smoke Plan, reviewed by Ana (do not drop this line)"
BETWEEN_COMMENT = "# --- the cluster part: ask ops before changing the partition ---"
INLINE_COMMENT = "# inline: the run's name in the ledger"
NESTED_COMMENT = "  # keep the checkpoint beside the data"


@pytest.fixture(scope="module")
def base_data(tmp_path_factory) -> dict:
    return recommend_base_plan(tmp_path_factory.mktemp("roundtrip"))


def _commented_plan(base_data: dict, directory: Path) -> Path:
    """The tool's Plan file with the comments a user adds: at the top, between top-level keys,
    inline after a value, and inside a nested mapping."""
    path = save_plan(plan_from_dict(base_data), directory / "plan.yaml")
    lines = path.read_text().splitlines()
    out = [TOP_COMMENT]
    for line in lines:
        if line.startswith("cluster:"):
            out.append(BETWEEN_COMMENT)
        if line.startswith("name: "):
            line = f"{line}  {INLINE_COMMENT}"
        out.append(line)
        if line.startswith("checkpoint:"):
            out.append(NESTED_COMMENT)
    path.write_text("\n".join(out) + "\n")
    return path


def _winner_plan(plan, tmp_path):
    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=4), tmp_path / "trials")
    outcomes = [S.Outcome(t, run_id=t.index, job_id=str(100 + t.index), state="completed",
                          step_time_s=0.05 if t.layout.own else 0.04 - 0.005 * t.index,
                          tokens_per_sec_per_gpu=1000.0, peak_memory_gb=10.0)
                for t in trials]
    winner = S.fastest(outcomes)
    assert not winner.trial.layout.own  # the premise: the rewrite changes the layout, not only the record
    return R.tuned_plan(plan, winner, R.tune_record(outcomes, winner, 30))


def _comments(text: str) -> list[str]:
    """Every comment of a file, full-line and inline, in order (the text from '#' on)."""
    return [line[line.index("#"):].strip() for line in text.splitlines() if "#" in line
            and not line.startswith("# mbridge-launch plan ")]


def _key_paths(text: str) -> list[str]:
    """The mapping keys of a file in file order, as dotted paths (list items by index)."""
    found: list[str] = []

    def walk(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                found.append(prefix + str(key))
                walk(value, prefix + str(key) + ".")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{prefix}{i}.")

    walk(yaml.safe_load(text), "")
    return found


def test_tune_rewrite_keeps_every_comment_and_the_key_order_and_leaves_a_backup(base_data, tmp_path):
    path = _commented_plan(base_data, tmp_path)
    old_bytes = path.read_bytes()
    old_text = old_bytes.decode()
    plan = load_plan(path)
    new = _winner_plan(plan, tmp_path)

    rewritten = R.write_tuned(plan, new, path)

    text = path.read_text()
    assert rewritten.kept_layout and rewritten.path == path
    assert _comments(text) == _comments(old_text)  # every comment, in its order
    assert text.splitlines()[0] == TOP_COMMENT
    assert any(line.startswith("name: ") and line.endswith(INLINE_COMMENT) for line in text.splitlines())
    assert text.index(BETWEEN_COMMENT) < text.index("\ncluster:")
    assert text.index("\ncheckpoint:") < text.index(NESTED_COMMENT) < text.index("\n  save: ")
    old_keys, new_keys = _key_paths(old_text), _key_paths(text)
    assert [k for k in new_keys if k in set(old_keys)] == [k for k in old_keys if k in set(new_keys)]
    assert new_keys[:len(old_keys)] != [] and "tune" in new_keys  # the record was added
    # the rewritten file is the tuned Plan: it validates, and its hash is the one the tool computed
    again = load_plan(path)
    assert again == new and again.plan_hash() == new.plan_hash()
    assert f"# mbridge-launch plan {new.plan_hash()} " in text
    # the previous file is beside it, byte for byte
    assert rewritten.backup == backup_name(path, 1) == path.with_name("plan.yaml.~1~")
    assert rewritten.backup.read_bytes() == old_bytes


def test_only_the_changed_lines_change(base_data, tmp_path):
    """Lines of values that did not change are the user's own, spelling included."""
    path = _commented_plan(base_data, tmp_path)
    old_text = path.read_text().replace("  partition: h100\n", '  partition: "h100"  # quoted my way\n')
    assert "quoted my way" in old_text
    path.write_text(old_text)
    plan = load_plan(path)
    new = _winner_plan(plan, tmp_path)
    R.write_tuned(plan, new, path)
    text = path.read_text()
    assert '  partition: "h100"  # quoted my way\n' in text
    unchanged_sections = ("cluster:", "checkpoint:", "dataset:")
    for section in unchanged_sections:
        assert _section(text, section) == _section(old_text, section), section


def _section(text: str, head: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()
                and not lines[i].startswith("#") and not lines[i].startswith("- ")), len(lines))
    return "\n".join(lines[start:end])


def test_a_second_rewrite_keeps_the_first_backup_and_numbers_the_next(base_data, tmp_path):
    path = _commented_plan(base_data, tmp_path)
    first = path.read_bytes()
    plan = load_plan(path)
    new = _winner_plan(plan, tmp_path)
    R.write_tuned(plan, new, path)
    second = path.read_bytes()
    again = R.tuned_plan(new, *_record_only(new, tmp_path))
    rewritten = R.write_tuned(new, again, path)
    assert backup_name(path, 1).read_bytes() == first
    assert rewritten.backup == backup_name(path, 2) and rewritten.backup.read_bytes() == second
    assert _comments(path.read_text()) == _comments(first.decode())


def _record_only(plan, tmp_path):
    trials = T.trial_plans(plan, T.near_tie_layouts(plan, max_layouts=2), tmp_path / "again")
    own = next(t for t in trials if t.layout.own)
    outcome = S.Outcome(own, run_id=1, job_id="201", state="completed", step_time_s=0.01,
                        tokens_per_sec_per_gpu=1000.0, peak_memory_gb=10.0)
    return outcome, R.tune_record([outcome], outcome, 10)


def test_a_backup_number_taken_is_never_overwritten(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_bytes(b"a: 1\n")
    backup_name(path, 1).write_bytes(b"older\n")
    backup_name(path, 7).write_bytes(b"oldest kept by hand\n")
    backup = replace_keeping_backup(path, b"a: 2\n", "plan", 1 << 20)
    assert backup == backup_name(path, 8) and backup.read_bytes() == b"a: 1\n"
    assert backup_name(path, 1).read_bytes() == b"older\n" and path.read_bytes() == b"a: 2\n"
    assert replace_keeping_backup(path, b"a: 2\n", "plan", 1 << 20) is None  # nothing changed: no backup
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml", "plan.yaml.~1~", "plan.yaml.~7~",
                                                          "plan.yaml.~8~"]


def test_recommend_output_over_an_existing_file_keeps_it(tmp_path):
    from cli_helpers import run_cli

    target = tmp_path / "plan.yaml"
    target.write_text("# my own notes\nold: plan\n")
    proc = run_cli("recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    assert backup_name(target, 1).read_text() == "# my own notes\nold: plan\n"
    assert target.read_text().startswith("# mbridge-launch plan ")


# ---------------------------------------------------------------------- the edit itself
@pytest.mark.parametrize("value", ["yes", "on", "1e-05", "null", "", "0x10", 1e-05, 3.0, True, None, [1, "no"],
                                   {"deep": {"x": "off"}}])
def test_a_replaced_value_reads_back_as_pyyaml_reads_it(value):
    """ruamel writes YAML 1.2; the tool reads with PyYAML (1.1), where a plain `yes` is a boolean
    and `1e-05` a string: a replaced value must mean the same to the reader."""
    text = "# keep\nfirst: 1  # one\nvalue: old\nlast: 3\n"
    edited = edit_yaml_text(text, "x.yaml", {"first": 1, "value": "old", "last": 3},
                            {"first": 1, "value": value, "last": 3})
    got = yaml.safe_load(edited)
    assert got == {"first": 1, "value": value, "last": 3} and type(got["value"]) is type(value)
    assert edited.startswith("# keep\nfirst: 1  # one\n") and edited.endswith("last: 3\n")


def test_new_keys_follow_their_predecessor_removed_keys_go_defaults_left_out_stay_out():
    text = "a: 1  # a\n# before c\nc: 3\nd: 4\n"
    before = {"a": 1, "b": 2, "c": 3, "d": 4}  # b: a default the file leaves out
    after = {"a": 1, "b": 2, "c": 3, "n": {"k": [1, 2]}, "e": 5}
    edited = edit_yaml_text(text, "x.yaml", before, after)
    assert edited == "a: 1  # a\n# before c\nc: 3\nn:\n  k:\n  - 1\n  - 2\ne: 5\n"
    assert list(yaml.safe_load(edited)) == ["a", "c", "n", "e"]


def test_an_edit_of_one_list_item_keeps_the_comments_of_the_others():
    text = "items:\n- key: a  # first\n  value: '1'\n# the second one matters\n- key: b\n  value: '2'\n"
    before = {"items": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]}
    after = {"items": [{"key": "a", "value": "1"}, {"key": "b", "value": "4"}]}
    edited = edit_yaml_text(text, "x.yaml", before, after)
    assert edited == text.replace("value: '2'", "value: '4'")


def test_a_file_with_anchors_is_refused_before_it_is_edited():
    from mbridge_launch.base.errors import UserError

    with pytest.raises(UserError) as err:
        edit_yaml_text("a: &x 1\nb: *x\n", "p.yaml", {"a": 1, "b": 1}, {"a": 2, "b": 1})
    assert err.value.key == "yaml.alias"


def test_the_header_names_the_new_hash(base_data, tmp_path):
    path = save_plan(plan_from_dict(base_data), tmp_path / "plan.yaml")
    plan = load_plan(path)
    new = _winner_plan(plan, tmp_path)
    R.write_tuned(plan, new, path)
    first = path.read_text().splitlines()[0]
    assert re.fullmatch(r"# mbridge-launch plan [0-9a-f]{16} \(edit freely; validated on load\)", first)
    assert new.plan_hash() in first and plan.plan_hash() not in first


@pytest.mark.parametrize(("after", "expected"), [
    ({"a": [1, 2], "b": "x"}, "a:\n- 1\n- 2  # two\n# before b\nb: x\n"),  # a list shrinks
    ({"a": [1, 2, 3, 4], "b": "x"}, "a:\n- 1\n- 2  # two\n- 3\n- 4\n# before b\nb: x\n"),  # a list grows
    ({"a": "one", "b": "x"}, "a: one\n# before b\nb: x\n"),  # a list becomes a scalar
    ({"b": "x"}, "# before b\nb: x\n"),  # the first key goes
])
def test_the_comment_lines_before_a_key_stay_before_it(after, expected):
    """ruamel files the lines between two keys under the last value before them: a value that
    grows, shrinks, is replaced or removed must not carry them off."""
    text = "a:\n- 1\n- 2  # two\n- 3\n# before b\nb: x\n"
    assert edit_yaml_text(text, "x.yaml", {"a": [1, 2, 3], "b": "x"}, after) == expected
