"""Issue 14's "What was seen", every concrete example, and the test named after it. The table is
checked by test_index_names_only_tests_that_exist (each file::name is found by parsing the file,
nothing imported), so it cannot rot: every example names at least one test. The tests after the
table cover the examples no other file did.

| # | class | example | test |
|---|---|---|---|
| 1 | destructive writes | lock `.mbridge-launch.lock -> victim.txt`, `rollback save --to 100 --yes` | tests/cli/test_hostile_writes.py::test_lock_symlink_to_victim_is_refused_and_victim_untouched |
| 2 | destructive writes | the same lock, `rollback --dry-run save --recover` | tests/cli/test_hostile_writes.py::test_lock_symlink_dry_run_recover_leaves_victim_untouched |
| 3 | destructive writes | journal `moved` entry `"../victim"` | tests/cli/test_hostile_writes.py::test_journal_moved_entry_outside_save_dir_refused |
| 4 | destructive writes | crafted journal: `--undo` writes tracker bytes with mode 6777 | tests/cli/test_hostile_writes.py::test_journal_undo_mode_6777_refused |
| 5 | destructive writes | `rollback --recover` ignores `--dry-run` | tests/cli/test_hostile_writes.py::test_recover_dry_run_writes_nothing |
| 6 | destructive writes | `recommend -o` onto a character device (root) | tests/cli/test_hostile_writes.py::test_output_onto_char_device_refused |
| 7 | destructive writes | `-o` onto a symlink to `/proc/self/fd/1` | tests/cli/test_hostile_writes.py::test_output_symlink_refused |
| 8 | destructive writes | `-o` onto an existing file loses its mode and owner | tests/cli/test_hostile_writes.py::test_output_overwrite_keeps_mode |
| 9 | secrets echoed | tracker -> `/proc/self/environ`, `preflight --no-cluster` (text) | tests/cli/test_hostile_reads.py::test_tracker_symlink_to_proc_self_environ_is_not_echoed |
| 10 | secrets echoed | the same, `preflight --no-cluster --format json` | tests/cli/test_hostile_reads.py::test_tracker_symlink_to_proc_self_environ_is_not_echoed |
| 11 | secrets echoed | the same, `checkpoints` | tests/cli/test_hostile_reads.py::test_tracker_symlink_to_proc_self_environ_is_not_echoed, tests/cli/test_hostile_reads.py::test_tracker_holding_a_secret_is_described_by_size_and_kind |
| 12 | hangs and memory | a Plan pointing at `/dev/zero` | tests/cli/test_hostile_reads.py::test_plan_pointing_at_dev_zero_is_one_line |
| 13 | hangs and memory | a tracker pointing at `/dev/zero` | tests/cli/test_hostile_reads.py::test_hostile_symlink_directory_prints_nothing_and_changes_nothing |
| 14 | hangs and memory | a log pointing at `/dev/zero` or `/dev/urandom` | tests/cli/test_hostile_index.py::test_log_dev_zero_dev_urandom_is_one_line |
| 15 | hangs and memory | a ledger's log path pointing at `/dev/zero` (`logs`, `watch`) | tests/cli/test_hostile_index.py::test_ledger_log_path_dev_zero_urandom_fifo_not_read |
| 16 | hangs and memory | a FIFO with no writer: the Plan (`preflight`) | tests/cli/test_hostile_reads.py::test_fifo_plan_does_not_hang |
| 17 | hangs and memory | a FIFO: `checkpoints --log` | tests/cli/test_hostile_reads.py::test_fifo_plan_does_not_hang |
| 18 | hangs and memory | a FIFO: trackers, an `iter_*`, a journal, a `.metadata` (`preflight`, `checkpoints`, `rollback --dry-run`) | tests/cli/test_hostile_reads.py::test_hostile_symlink_directory_prints_nothing_and_changes_nothing |
| 19 | hangs and memory | a FIFO: a data prefix's `.idx` (`preflight`) | tests/cli/test_hostile_reads.py::test_fifo_data_index_does_not_hang |
| 20 | hangs and memory | a FIFO: JSONL data, rollback journal, claim file, node-check output, `catalog sync` sources | tests/cli/test_hostile_bounded_reads.py::test_jsonl_data_file_fifo_dev_zero_directory_oversized_is_one_check, tests/cli/test_hostile_bounded_reads.py::test_rollback_journal_fifo_dev_zero_directory_oversized_is_one_line, tests/cli/test_hostile_bounded_reads.py::test_claim_file_fifo_dev_zero_directory_oversized_is_one_line, tests/cli/test_hostile_bounded_reads.py::test_node_check_output_fifo_dev_zero_directory_oversized_reads_as_nothing, tests/cli/test_hostile_bounded_reads.py::test_catalog_sync_source_file_fifo_dev_zero_directory_oversized_is_one_line, tests/cli/test_hostile_bounded_reads.py::test_catalog_sync_wheel_fifo_is_one_line |
| 21 | hangs and memory | a FIFO: a ledger's log path (`logs -f`) | tests/cli/test_hostile_index.py::test_ledger_log_path_dev_zero_urandom_fifo_not_read |
| 22 | hangs and memory | tracker -> `iter_0000500 -> /` walks the whole file system | tests/cli/test_hostile_reads.py::test_tracker_iter_symlink_to_root_is_not_walked |
| 23 | hangs and memory | an 8 MB Plan takes 67 s (pure-Python YAML) | tests/cli/test_hostile_reads.py::test_large_plan_uses_libyaml |
| 24 | hangs and memory | a 30 MB Plan takes 78 s | tests/cli/test_hostile_reads.py::test_oversized_plan_is_refused_before_parsing |
| 25 | hangs and memory | `logs -f --poll 0` calls squeue and sacct ~21 times a second | tests/cli/test_hostile_reads.py::test_logs_poll_zero_negative_nan_inf_refused |
| 26 | internal errors | `--to ²` | tests/cli/test_hostile_errors.py::test_rollback_to_superscript_two_is_one_line |
| 27 | internal errors | `--seed ²` | tests/cli/test_hostile_errors.py::test_seed_superscript_two |
| 28 | internal errors | `--skip-iters ²` | tests/cli/test_hostile_errors.py::test_skip_iters_superscript_two |
| 29 | internal errors | a tracker holding `²` | tests/cli/test_hostile_reads.py::test_tracker_holding_a_secret_is_described_by_size_and_kind, tests/cli/test_hostile_errors.py::test_whole_number_of_file_values_is_bounded |
| 30 | internal errors | integers over 4,300 digits | tests/cli/test_hostile_errors.py::test_int_over_4300_digits |
| 31 | internal errors | HF `config.json` value NaN | tests/cli/test_hostile_errors.py::test_hf_config_nan_infinity_string_list_zero |
| 32 | internal errors | HF `config.json` value Infinity | tests/cli/test_hostile_errors.py::test_hf_config_nan_infinity_string_list_zero |
| 33 | internal errors | HF `config.json` value a string | tests/cli/test_hostile_errors.py::test_hf_config_nan_infinity_string_list_zero |
| 34 | internal errors | HF `config.json` value a list | tests/cli/test_hostile_errors.py::test_hf_config_nan_infinity_string_list_zero |
| 35 | internal errors | HF `config.json` value zero | tests/cli/test_hostile_errors.py::test_hf_config_nan_infinity_string_list_zero |
| 36 | internal errors | HF `config.json` value of a wrong type (bool, 1e400, 4096.5, negative) | tests/cli/test_hostile_errors.py::test_hf_config_nan_infinity_string_list_zero |
| 37 | internal errors | 20,000-deep YAML (Plan; ledger's Plan copy) | tests/cli/test_hostile_reads.py::test_plan_yaml_deep_nesting_refused, tests/cli/test_hostile_bounded_reads.py::test_ledger_plan_copy_read_as_a_plan_file |
| 38 | internal errors | `runs --limit 2**63` | tests/cli/test_hostile_errors.py::test_runs_limit_2_pow_63 |
| 39 | internal errors | a corrupt ledger | tests/cli/test_hostile_errors.py::test_corrupt_ledger_one_line |
| 40 | internal errors | a wrong-schema ledger | tests/cli/test_hostile_errors.py::test_wrong_schema_ledger_one_line, tests/cli/test_hostile_errors.py::test_newer_schema_ledger_names_the_file |
| 41 | internal errors | a write-locked ledger | tests/cli/test_hostile_errors.py::test_locked_ledger_one_line |
| 42 | internal errors | malformed rollback journals (KeyError, TypeError) | tests/cli/test_hostile_writes.py::test_malformed_journal_is_one_line_naming_file_and_field |
| 43 | internal errors | `logs -f --poll -1` | tests/cli/test_hostile_reads.py::test_logs_poll_zero_negative_nan_inf_refused |
| 44 | internal errors | `logs -f --poll nan` | tests/cli/test_hostile_reads.py::test_logs_poll_zero_negative_nan_inf_refused |
| 45 | internal errors | `logs -f --poll inf` | tests/cli/test_hostile_reads.py::test_logs_poll_zero_negative_nan_inf_refused |
| 46 | internal errors | an ASCII-only terminal with `--lang zh` (UnicodeEncodeError) | tests/cli/test_hostile_errors.py::test_ascii_terminal_lang_zh_falls_back |
| 47 | internal errors | stdout on a full device (exit 120, "Exception ignored") | tests/cli/test_hostile_errors.py::test_stdout_dev_full_is_one_line_exit_1 |
| 48 | internal errors | stdout a closed pipe | tests/cli/test_hostile_errors.py::test_stdout_closed_pipe_is_quiet_exit_1 |
| 49 | internal errors | Ctrl-C in the first 0.2 s (a traceback) | tests/cli/test_hostile_interrupt.py::test_ctrl_c_in_the_first_moments_is_interrupted_or_the_result, tests/cli/test_hostile_interrupt.py::test_ctrl_c_while_the_cli_is_imported_speaks_the_lang_flag, tests/cli/test_hostile_interrupt.py::test_second_ctrl_c_while_interrupted_is_printed_is_ignored, tests/cli/test_hostile_interrupt.py::test_ctrl_c_while_python_exits_after_the_result_is_ignored, tests/cli/test_hostile_interrupt.py::test_ctrl_c_inside_a_weakref_callback_is_interrupted_not_ignored |
| 50 | raw control characters | the preflight title: plan name and path | tests/cli/test_hostile_control_chars.py::test_preflight_title_plan_path_with_esc_cr_nul_bidi |
| 51 | raw control characters | argparse's "unrecognized arguments" | tests/cli/test_hostile_control_chars.py::test_argparse_unrecognized_arguments_escaped |
| 52 | raw control characters | the recommend card | tests/cli/test_hostile_control_chars.py::test_recommend_card_values_escaped |
| 53 | raw control characters | "plan written to ..." | tests/cli/test_hostile_control_chars.py::test_plan_written_to_path_with_esc_and_newline |
| 54 | raw control characters | `runs` / `status` tables | tests/cli/test_hostile_control_chars.py::test_runs_and_status_tables_escape_ledger_values, tests/cli/test_hostile_control_chars.py::test_runs_json_with_controls_is_valid_json |
| 55 | raw control characters | `checkpoints`: tracker contents, directory names | tests/cli/test_hostile_control_chars.py::test_checkpoints_directory_names_and_tracker_with_esc, tests/cli/test_hostile_control_chars.py::test_rollback_dry_run_save_dir_with_esc_and_newline |
| 56 | raw control characters | dry-run scripts | tests/cli/test_hostile_control_chars.py::test_submit_dry_run_script_value_with_controls, tests/cli/test_hostile_control_chars.py::test_sh_ansi_c_form_round_trips_through_bash |
| 57 | raw control characters | a newline inside a value splits an error over two lines | tests/cli/test_hostile_control_chars.py::test_error_value_with_newline_is_one_line, tests/cli/test_hostile_control_chars.py::test_preflight_plan_path_with_newline_is_one_line |
| 58 | accepted but wrong | run names `.` and `..` (`checkpoint.save: /x/ckroot/..`) | tests/cli/test_hostile_validation.py::test_run_name_dot_dot_refused, tests/cli/test_hostile_validation.py::test_run_argument_follows_the_run_name_rule |
| 59 | accepted but wrong | an empty target (`checkpoints ''` meant the current directory) | tests/cli/test_hostile_validation.py::test_checkpoints_empty_target_refused, tests/cli/test_hostile_validation.py::test_rollback_empty_target_refused |
| 60 | accepted but wrong | mount `a:b:c` | tests/cli/test_hostile_validation.py::test_mount_flags_refused |
| 61 | accepted but wrong | mount `/x,/y:/z` | tests/cli/test_hostile_validation.py::test_mount_comma_refused |
| 62 | accepted but wrong | mount with relative paths | tests/cli/test_hostile_validation.py::test_mount_relative_source_refused |
| 63 | accepted but wrong | data path `0.5:` | tests/cli/test_hostile_validation.py::test_data_path_empty_prefix_refused |
| 64 | accepted but wrong | data path `nan:/x` | tests/cli/test_hostile_validation.py::test_data_path_weight_inf_refused |
| 65 | accepted but wrong | data path `1e400:/x` | tests/cli/test_hostile_validation.py::test_data_path_weight_inf_refused, tests/cli/test_hostile_validation.py::test_plan_weight_inf_refused |
| 66 | accepted but wrong | time `99:99:99` | tests/cli/test_hostile_validation.py::test_slurm_time_99_99_99_refused |
| 67 | accepted but wrong | override `model.tensor_model_parallel_size=8` with `parallelism.tp: 1` | tests/cli/test_hostile_validation.py::test_override_contradicting_layout_tp_refused |
| 68 | accepted but wrong | `schema_version: 99` | tests/cli/test_hostile_index.py::test_plan_schema_version_99_refused |
| 69 | accepted but wrong | an unknown recipe only warns | tests/cli/test_hostile_validation.py::test_unknown_recipe_is_an_error |
| 70 | accepted but wrong | an unknown GPU type only warns | tests/cli/test_hostile_index.py::test_plan_unknown_gpu_type_refused |
| 71 | accepted but wrong | an unknown model only warns; "memory fits" then uses the Plan's own estimate | tests/cli/test_hostile_validation.py::test_unknown_model_memory_not_claimed_fitting |
| 72 | accepted but wrong | a NUL byte in `checkpoint.save` skips the save checks | tests/cli/test_hostile_validation.py::test_nul_in_checkpoint_save_refused |
| 73 | accepted but wrong | negative `segment` | tests/cli/test_hostile_index.py::test_plan_negative_segment_save_interval_window_factor_refused |
| 74 | accepted but wrong | negative `save_interval` | tests/cli/test_hostile_index.py::test_plan_negative_segment_save_interval_window_factor_refused |
| 75 | accepted but wrong | negative rollback window | tests/cli/test_hostile_index.py::test_plan_negative_segment_save_interval_window_factor_refused |
| 76 | accepted but wrong | negative rollback factor | tests/cli/test_hostile_index.py::test_plan_negative_segment_save_interval_window_factor_refused |
| 77 | accepted but wrong | contradictory flags `--undo --to` | tests/cli/test_hostile_writes.py::test_undo_with_to_refused |
| 78 | accepted but wrong | contradictory flags `--recover --to` | tests/cli/test_hostile_writes.py::test_undo_with_to_refused |
| 79 | accepted but wrong | contradictory flags `--smoke-test --goal` | tests/cli/test_hostile_errors.py::test_smoke_test_with_goal_refused |
| 80 | accepted but wrong | `estimate --mtp-layers 10^20` exits 0 with a step of 2e18 s | tests/cli/test_hostile_errors.py::test_estimate_mtp_layers_10e20_refused |
| 81 | accepted but wrong | `preflight --no-cluster --on-nodes` still calls `sbatch` | tests/cli/test_hostile_errors.py::test_preflight_no_cluster_with_on_nodes_refused |
| 82 | accepted but wrong | duplicate YAML keys accepted silently (last wins) | tests/cli/test_hostile_reads.py::test_plan_yaml_duplicate_keys_refused, tests/cli/test_hostile_bounded_reads.py::test_ledger_plan_copy_read_as_a_plan_file |
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
import yaml

from mbridge_launch.base.errors import UserError

REPO = Path(__file__).resolve().parents[2]
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
TIMEOUT = 30


def index_rows() -> list[list[str]]:
    """The table's rows (number, class, example, tests), header and rule left out."""
    rows = []
    for line in (__doc__ or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0].isdigit():
            rows.append(cells)
    return rows


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_index_names_only_tests_that_exist():
    rows = index_rows()
    assert len(rows) >= 60 and [int(r[0]) for r in rows] == list(range(1, len(rows) + 1)), len(rows)
    missing, untested = [], []
    cache: dict[str, set[str]] = {}
    for number, _cls, example, tests in rows:
        refs = TEST_REF.findall(tests)
        if not refs:
            untested.append((number, example))
        for file, name in refs:
            if file not in cache:
                path = REPO / file
                cache[file] = defined_tests(path) if path.exists() else set()
            if name not in cache[file]:
                missing.append((number, f"{file}::{name}"))
    assert not untested, untested
    assert not missing, missing


# ---------------------------------------------------------------- examples no other file covered
@pytest.fixture
def plan_data(tmp_path):
    """A valid Plan as data (preflight_fixtures.valid_plan), to be spoiled by one field."""
    from preflight_fixtures import valid_plan, write

    return yaml.safe_load(write(valid_plan(tmp_path), tmp_path / "good").read_text())


def _load(tmp_path: Path, data: dict) -> None:
    from mbridge_launch.plan.model import load_plan

    path = tmp_path / "spoiled.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_plan(path)


def _refused_naming(tmp_path: Path, data: dict, *words: str) -> str:
    with pytest.raises(UserError) as caught:
        _load(tmp_path, data)
    text = caught.value.render()
    for word in words:
        assert word in text, (word, text)
    return text


def test_plan_schema_version_99_refused(tmp_path, plan_data):
    plan_data["schema_version"] = 99
    _refused_naming(tmp_path, plan_data, "schema_version")


def test_plan_unknown_gpu_type_refused(tmp_path, plan_data):
    plan_data["cluster"]["gpu_type"] = "h900"
    _refused_naming(tmp_path, plan_data, "cluster.gpu_type", "h900")


@pytest.mark.parametrize("section, field, value", [
    ("cluster", "segment", -2),
    ("checkpoint", "save_interval", -50),
    ("auto_rollback", "window", -10),
    ("auto_rollback", "spike_factor", -3.0),
])
def test_plan_negative_segment_save_interval_window_factor_refused(tmp_path, plan_data, section, field, value):
    plan_data.setdefault(section, {})
    if section == "auto_rollback":
        plan_data[section]["enabled"] = True
    plan_data[section][field] = value
    _refused_naming(tmp_path, plan_data, f"{section}.{field}")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_log_dev_zero_dev_urandom_is_one_line(tmp_path, mbl, device):
    """`checkpoints --log` read the log without limit: MemoryError, or all RAM."""
    from checkpoint_fixtures import make_save_dir

    save = make_save_dir(tmp_path, iterations=(100,))
    log = tmp_path / "train.log"
    log.symlink_to(device)
    result = mbl.run("checkpoints", str(save), "--log", str(log), timeout=TIMEOUT)
    assert result.rc == 2 and "Traceback" not in result.stderr, (result.rc, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "a device, not a regular file" in lines[0], lines


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("kind", ["/dev/zero", "/dev/urandom", "fifo"])
def test_ledger_log_path_dev_zero_urandom_fifo_not_read(tmp_path, kind):
    """The log paths a ledger names are followed by `logs -f` and `watch` (LogFollower): a device
    was read without end, a FIFO blocked the open."""
    from mbridge_launch.rollback.lossmon import LogFollower

    log = tmp_path / "run.log"
    if kind == "fifo":
        os.mkfifo(log)
    else:
        log.symlink_to(kind)
    follower = LogFollower(log)
    assert follower.read_new() == [] and follower.read_new() == []
    follower.close()
