"""One validation for every value (issue 14, "Accepted but wrong"): run names that are safe path
components, empty targets, Pyxis mounts, data path blends, Slurm times, overrides that contradict
the Plan's own layout, control characters in any Plan string, option clashes in sbatch_args and
srun_args, and preflight never claiming memory fits from the Plan's editable estimate.

Every refusal goes through the command line: exit 2 (bad input) with ONE line naming the field or
flag, no traceback, and nothing written (no Plan file, nothing under the state directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_helpers import one_line_error
from mbridge_launch.base import slurm_time
from plan_fixtures import PLANS_DIR

pytestmark = pytest.mark.usefixtures("english")

RECOMMEND = ("recommend", "--model", "llama3_8b", "--gpus", "8")


def env_of(tmp_path: Path) -> dict[str, str]:
    return {"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state"), "MBRIDGE_LAUNCH_CACHE_DIR": str(tmp_path / "cache")}


def plan_file(tmp_path: Path, **changes: Any) -> Path:
    """tests/golden/plans/two_node_h100.yaml with dotted-path changes (`cluster.time`,
    `overrides.0.value`), written as a hand-edited Plan."""
    data = yaml.safe_load((PLANS_DIR / "two_node_h100.yaml").read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[int(last) if last.isdigit() else last] = value
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path




def nothing_written(tmp_path: Path, *outputs: Path) -> None:
    state = tmp_path / "state"
    assert not state.exists() or not [p for p in state.rglob("*") if p.is_file()], list(state.rglob("*"))
    for output in outputs:
        assert not output.exists(), output


def refused_by_recommend(mbl, tmp_path: Path, *flags: str, named: str) -> str:
    out = tmp_path / "out.yaml"
    result = mbl.run(*RECOMMEND, *flags, "-o", out, env=env_of(tmp_path))
    line = one_line_error(result)
    assert named in line, line
    nothing_written(tmp_path, out)
    return line


def refused_plan(mbl, tmp_path: Path, field: str, **changes: Any) -> str:
    """The Plan with `changes`, loaded by preflight --no-cluster: refused at load, naming `field`."""
    path = plan_file(tmp_path, **changes)
    before = path.read_bytes()
    line = one_line_error(mbl.run("preflight", path, "--no-cluster", env=env_of(tmp_path)))
    assert line.startswith("error: invalid plan ") and f"{field}:" in line, line
    assert path.read_bytes() == before
    nothing_written(tmp_path)
    return line


# ------------------------------------------------------------------ run names
def test_run_name_dot_dot_refused(mbl, tmp_path):
    line = refused_by_recommend(mbl, tmp_path, "--name", "..", named="--name")
    assert "'..'" in line and "parent" in line
    assert not (tmp_path / "checkpoints").exists()
    refused_plan(mbl, tmp_path, "name", name="..")


@pytest.mark.parametrize("name,why", [(".", "parent"), ("-x", "option"), ("a" * 129, "128"), ("", "empty"),
                                      ("run\n", "only contain")])
def test_run_name_unsafe_forms_refused(mbl, tmp_path, name, why):
    line = refused_plan(mbl, tmp_path, "name", name=name)
    assert why in line, line


def test_run_name_with_leading_dash_refused_by_recommend(mbl, tmp_path):
    refused_by_recommend(mbl, tmp_path, "--name=-x", named="--name")


def test_checkpoints_empty_target_refused(mbl, tmp_path):
    (tmp_path / "iter_0000100").mkdir()  # the current directory holds a checkpoint: '' must not mean it
    for target in ("", "  "):
        result = mbl.run("checkpoints", target, "--ledger", tmp_path / "ledger.db", cwd=tmp_path, env=env_of(tmp_path))
        line = one_line_error(result)
        assert "target is empty" in line and "iter_0000100" not in result.stdout
    nothing_written(tmp_path, tmp_path / "ledger.db")


def test_rollback_empty_target_refused(mbl, tmp_path):
    (tmp_path / "iter_0000100").mkdir()
    for target in ("", "  "):
        result = mbl.run("rollback", target, "--to", "100", "--dry-run", "--ledger", tmp_path / "ledger.db",
                         cwd=tmp_path, env=env_of(tmp_path))
        assert "target is empty" in one_line_error(result)
    nothing_written(tmp_path, tmp_path / "ledger.db")


RUN_COMMANDS = [("status",), ("logs",), ("cancel",), ("watch",), ("runs", "forget"), ("runs", "mark-lost")]


@pytest.mark.parametrize("command", RUN_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("run", ["..", ".", "a\nb", "a\x1b[2Jb", "x" * 129])
def test_run_argument_follows_the_run_name_rule(mbl, tmp_path, command, run):
    """Every command taking a RUN refuses what could never be a run name with the rule's one line
    (not a ledger search for '..'), escaped, before opening the ledger."""
    run = run.encode().decode("unicode_escape")
    extra = ("--reason", "r") if command[0] == "runs" else ()
    result = mbl.run(*command, run, *extra, "--ledger", tmp_path / "ledger.db", cwd=tmp_path, env=env_of(tmp_path))
    line = one_line_error(result)
    assert "argument RUN" in line and "\x1b" not in line, line
    nothing_written(tmp_path, tmp_path / "ledger.db")


def test_data_path_double_dash_refused(mbl, tmp_path):
    """`--data-path=--` (a flag typed where the prefix belongs) was a relative prefix named '--'."""
    for value in ("--", "0.5:-x"):
        line = refused_by_recommend(mbl, tmp_path, "--dataset", "megatron-indexed", f"--data-path={value}",
                                    named="--data-path")
        assert "starts with '-'" in line, line


# ------------------------------------------------------------------ mounts
def test_mount_comma_refused(mbl, tmp_path):
    line = refused_by_recommend(mbl, tmp_path, "--mount", "/x,/y:/z", named="--mount")
    assert "','" in line and "Pyxis" in line
    refused_plan(mbl, tmp_path, "cluster.container_mounts[0].source",
                 **{"cluster.container_mounts": [{"source": "/x,/y", "target": "/z"}]})


def test_mount_relative_source_refused(mbl, tmp_path):
    line = refused_by_recommend(mbl, tmp_path, "--mount", "rel:/z", named="--mount")
    assert "'rel' is not an absolute path" in line
    refused_plan(mbl, tmp_path, "cluster.container_mounts[0].source",
                 **{"cluster.container_mounts": [{"source": "rel", "target": "/z"}]})


def test_mount_flags_refused(mbl, tmp_path):
    """Pyxis reads SRC:DST:FLAGS; no executor renders flags, so `ro` would land in the target."""
    line = refused_by_recommend(mbl, tmp_path, "--mount", "/x:/y:ro", named="--mount")
    assert "flags" in line and "SRC[:DST]" in line
    line = refused_by_recommend(mbl, tmp_path, "--mount", "a:b:c", named="--mount")  # the example
    assert "SRC[:DST]" in line
    refused_plan(mbl, tmp_path, "cluster.container_mounts[0].target",
                 **{"cluster.container_mounts": [{"source": "/x", "target": "/y:ro"}]})


@pytest.mark.parametrize("source", ["/x\x00y", "/x\ny"])
def test_mount_nul_and_newline_refused(mbl, tmp_path, source):
    line = refused_plan(mbl, tmp_path, "cluster.container_mounts[0].source",
                        **{"cluster.container_mounts": [{"source": source, "target": "/z"}]})
    assert "control character" in line and "\x00" not in line


# ------------------------------------------------------------------ data paths
def test_data_path_empty_prefix_refused(mbl, tmp_path):
    line = refused_by_recommend(mbl, tmp_path, "--dataset", "megatron-indexed", "--data-path", "0.5:", named="--data-path")
    assert "prefix is empty" in line
    refused_plan(mbl, tmp_path, "dataset.data_paths[0]", **{"dataset.data_paths": ["", "/lustre/b"]})


@pytest.mark.parametrize("item", ["inf:/x", "1e400:/x", "nan:/x", ":/x"])
def test_data_path_weight_inf_refused(mbl, tmp_path, item):
    line = refused_by_recommend(mbl, tmp_path, "--dataset", "megatron-indexed", f"--data-path={item}", named="--data-path")
    assert "finite number above 0" in line


@pytest.mark.parametrize("weight", [float("inf"), float("nan")])
def test_plan_weight_inf_refused(mbl, tmp_path, weight):
    line = refused_plan(mbl, tmp_path, "dataset.weights[0]", **{"dataset.weights": [weight, 0.3]})
    assert "not a finite number" in line


@pytest.mark.parametrize("prefix", ["/a,/b", "/a[0]", " /a"])
def test_data_path_hydra_syntax_refused(mbl, tmp_path, prefix):
    line = refused_plan(mbl, tmp_path, "dataset.data_paths[0]", **{"dataset.data_paths": [prefix, "/lustre/b"]})
    assert "Hydra" in line


# ------------------------------------------------------------------ Slurm times
@pytest.mark.parametrize("time", ["99:99:99", "1-99"])
def test_slurm_time_99_99_99_refused(mbl, tmp_path, time):
    line = refused_by_recommend(mbl, tmp_path, "--time", time, named="--time")
    assert "out of range" in line
    assert "out of range" in refused_plan(mbl, tmp_path, "cluster.time", **{"cluster.time": time})


def test_slurm_times_slurm_prints_still_parse():
    """Partition limits as sinfo prints them (and sbatch forms users write) keep parsing."""
    assert slurm_time.parse_seconds("30:00") == 1800  # M:S
    assert slurm_time.parse_seconds("1-00:00:00") == 86400
    assert slurm_time.parse_seconds("48:00:00") == 48 * 3600  # the leading field has no bound
    assert slurm_time.parse_seconds("90") == 5400
    assert slurm_time.parse_seconds("infinite") is None and slurm_time.parse_seconds("UNLIMITED") is None
    assert slurm_time.parse_seconds("2982616-00:00:00") == 2982616 * 86400  # Slurm's largest days
    for bad in ("٣", "1" * 5000, "99999999999-00:00:00"):
        with pytest.raises(ValueError):
            slurm_time.parse_seconds(bad)


# ------------------------------------------------------------------ overrides vs the layout
def test_override_contradicting_layout_tp_refused(mbl, tmp_path):
    line = refused_plan(mbl, tmp_path, "overrides", **{"overrides.0.value": "8"})
    assert "model.tensor_model_parallel_size=8" in line and "parallelism.tp: 4" in line


@pytest.mark.parametrize("key,value,field", [
    ("model.recompute_granularity", "full", "parallelism.recompute"),
    ("ddp.use_megatron_fsdp", "true", "parallelism.fsdp"),
    ("+model.sequence_parallel", "false", "parallelism.sp"),
    ("train.micro_batch_size", "two", "parallelism.mbs"),
])
def test_override_contradicting_layout_switches_refused(mbl, tmp_path, key, value, field):
    line = refused_plan(mbl, tmp_path, "overrides",
                        **{"overrides.2": {"key": key, "value": value, "class": "execution"}})
    assert field in line and key.lstrip("+") in line


def test_override_equal_to_layout_is_accepted(mbl, tmp_path):
    """The golden Plan writes tp=4 and pp=2 as overrides too; sp true said twice is fine."""
    path = plan_file(tmp_path, **{"overrides.2": {"key": "model.sequence_parallel", "value": "true", "class": "execution"}})
    result = mbl.run("preflight", path, "--no-cluster", "--format", "json", env=env_of(tmp_path))
    assert result.rc in (0, 1) and "invalid plan" not in result.stderr, result.stderr


# ------------------------------------------------------------------ control characters
def test_nul_in_checkpoint_save_refused(mbl, tmp_path):
    line = refused_plan(mbl, tmp_path, "checkpoint.save", **{"checkpoint.save": "/lustre/ckpt/a\x00b"})
    assert "control character" in line and "embedded null" not in line


@pytest.mark.parametrize("field,value", [
    ("checkpoint.load", "/lustre/a\nb"), ("launch.workdir", "/src\x1b[2J"), ("cluster.partition", "h100\n#SBATCH --qos=x"),
    ("dataset.selector", "mock\t"), ("overrides.2.value", "64\n"),
])
def test_control_character_in_any_plan_string_refused(mbl, tmp_path, field, value):
    shown = field.replace(".2.", "[2].")
    assert "control character" in refused_plan(mbl, tmp_path, shown, **{field: value})


def test_line_breaks_allowed_in_free_text_only(mbl, tmp_path):
    """launch.setup (shell commands), env_vars values and accepted_checks reasons are text that may span lines."""
    path = plan_file(tmp_path, **{"launch.setup": ["for m in cuda; do\n  module load $m\ndone"],
                                  "env_vars.MBL_NOTE": "two\nlines",
                                  "accepted_checks": [{"code": "plan.memory_oom", "reason": "ran before\non this system"}]})
    result = mbl.run("preflight", path, "--no-cluster", "--format", "json", env=env_of(tmp_path))
    assert "invalid plan" not in result.stderr, result.stderr


# ------------------------------------------------------------------ Slurm options and numbers
@pytest.mark.parametrize("field,args,option,edit", [
    ("cluster.sbatch_args", ["--nodes=4"], "--nodes", "cluster.nodes"),
    ("cluster.sbatch_args", ["-t", "1:00:00"], "-t", "cluster.time"),
    ("cluster.sbatch_args", ["--job-name=other"], "--job-name", "name"),
    ("cluster.srun_args", ["-N4"], "-N", "cluster.nodes"),
    ("cluster.srun_args", ["--container-mounts=/a:/b"], "--container-mounts", "cluster.container_mounts"),
])
def test_sbatch_arg_contradicting_the_plan_refused(mbl, tmp_path, field, args, option, edit):
    line = refused_plan(mbl, tmp_path, field, **{field: args})
    assert f"{option} is set by the tool from {edit}" in line


def test_signal_lead_time_beyond_slurm_refused(mbl, tmp_path):
    """sbatch refuses --signal=TERM@65536 ("Invalid --signal specification", Slurm 22.05)."""
    refused_plan(mbl, tmp_path, "cluster.signal", **{"cluster.signal": "TERM@65536"})


@pytest.mark.parametrize("field,value,expected", [
    ("estimates.memory_gb_per_gpu", float("nan"), "finite"), ("estimates.step_time_s", -1.0, "at least 0"),
    ("parallelism.tp", 10**12, "at most 1048576"), ("checkpoint.save_interval", 10**18, "at most"),
    ("auto_rollback.max_rollbacks", 10**6, "at most 1000"),
])
def test_numbers_beyond_any_job_refused(mbl, tmp_path, field, value, expected):
    assert expected in refused_plan(mbl, tmp_path, field, **{field: value})


# ------------------------------------------------------------------ preflight: recipe and memory
def _preflight_json(mbl, tmp_path: Path, **changes: Any) -> tuple[int, dict[str, dict]]:
    path = plan_file(tmp_path, **changes)
    result = mbl.run("preflight", path, "--no-cluster", "--format", "json", env=env_of(tmp_path))
    assert "Traceback" not in result.stderr, result.stderr
    return result.rc, {c["code"]: c for c in result.json()["checks"]}


def test_unknown_recipe_is_an_error(mbl, tmp_path):
    rc, checks = _preflight_json(mbl, tmp_path, **{"recipe.name": "llama3_70b_pretrain_no_such_config"})
    assert rc == 1
    unknown = checks["plan.recipe_unknown"]
    assert unknown["severity"] == "error" and "catalog list" in unknown["hint"] and "catalog sync" in unknown["hint"]


def test_unknown_model_memory_not_claimed_fitting(mbl, tmp_path):
    """An unknown architecture with a hand-edited 'fitting' estimate: memory is unchecked, never 'fits'."""
    rc, checks = _preflight_json(mbl, tmp_path, **{"recipe.model": "not_a_model", "estimates.memory_gb_per_gpu": 1.0,
                                                   "estimates.hbm_gb": 80.0})
    assert "plan.memory_ok" not in checks and "plan.memory_oom" not in checks
    unchecked = checks["plan.memory_unchecked"]
    assert unchecked["severity"] == "warning" and "not checked" in unchecked["message"]
    assert "RULE_MEMORY" in unchecked["message"] and "RULE_TP_HEADS" in unchecked["message"]
    assert "fits" not in " ".join(c["message"] for c in checks.values())


# ------------------------------------------------------------------ paths beyond the file system's limits
@pytest.mark.parametrize("field", ["launch.workdir", "launch.log_dir", "checkpoint.save", "checkpoint.pretrained_checkpoint"])
@pytest.mark.parametrize("value", ["/x/" + "a" * 256, "/" + "/".join(["d" * 200] * 21)], ids=["name-256", "path-4221"])
def test_path_longer_than_the_file_system_allows_refused(mbl, tmp_path, field, value):
    """A 3,000-byte launch.workdir crashed two preflight groups (ENAMETOOLONG, 'a bug in
    mbridge-launch'); a path no file system can hold is refused at load, naming the field."""
    line = refused_plan(mbl, tmp_path, field, **{field: value})
    assert "at most 4095 bytes and 255 per part" in line, line
