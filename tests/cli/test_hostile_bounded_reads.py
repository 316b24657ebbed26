"""Issue 14, "Bounded reads": every file another user could have written is read through the one
bounded reader (mbridge_launch/base/files.py: regular files only, non-blocking open, a size limit
per kind). Per read site, what stands at the path may be a FIFO with no writer (a plain open
blocks forever), a link to /dev/zero (a plain read never ends), a directory, or a file over the
site's limit: each is one line (or, where the caller only looks, nothing), never a hang.

Sites (see the report of this round for the full list, changed and left):
- preflight's JSONL data check (the SFT files a Plan points at), data_checks.check_jsonl_file;
- the rollback journal ROLLBACK.json (journal_check.read_bounded_stat);
- the checkpoint directory's claim file (claims.read_claim);
- the Plan copy in the ledger (RunRecord.plan: base/user_yaml.py, as a Plan file);
- the node-check job's output in the submit folder (node_checks._read);
- `catalog sync` of a Megatron Bridge checkout or wheel (catalog_sync.source).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from mbridge_launch.base.errors import UserError

KINDS = ("fifo", "dev_zero", "directory", "oversized")
pytestmark = pytest.mark.timeout(30)  # a hang (the old plain open of a FIFO) fails, never blocks CI


def make_kind(path: Path, kind: str, limit: int) -> Path:
    """What a hostile writer leaves at `path`: one of KINDS (oversized: one byte over `limit`)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"7" * (limit + 1))
    return path


def one_line(exc: BaseException) -> str:
    text = exc.render() if isinstance(exc, UserError) else str(exc)
    assert text and "\n" not in text, text
    return text


# ---------------------------------------------------------------- preflight: JSONL data files
@pytest.mark.parametrize("kind", KINDS)
def test_jsonl_data_file_fifo_dev_zero_directory_oversized_is_one_check(tmp_path, monkeypatch, kind):
    """A FIFO training.jsonl hung the data check (plain open); a single 'line' of /dev/zero or a
    file without newline was read whole."""
    from mbridge_launch.preflight import data_checks

    monkeypatch.setattr(data_checks, "JSONL_LINE_MAX", 1000)
    path = make_kind(tmp_path / "training.jsonl", kind, 1000)
    checks = data_checks.check_jsonl_file(path)
    assert len(checks) == 1 and checks[0].severity == "error", checks
    assert checks[0].code in ("data.jsonl_unreadable", "data.jsonl_parse"), checks[0].code
    assert "\n" not in str(checks[0].params.get("reason", "")), checks[0].params


def test_jsonl_data_file_regular_still_read(tmp_path):
    from mbridge_launch.preflight.data_checks import check_jsonl_file

    path = tmp_path / "training.jsonl"
    path.write_text('{"input": "a", "output": "b"}\n' * 3)
    assert [c.code for c in check_jsonl_file(path)] == ["data.jsonl_ok"]


# ---------------------------------------------------------------- rollback journal
@pytest.mark.parametrize("kind", KINDS)
def test_rollback_journal_fifo_dev_zero_directory_oversized_is_one_line(tmp_path, kind):
    from mbridge_launch.rollback import journal_check
    from mbridge_launch.rollback.checkpoints import JOURNAL_NAME

    stamp = tmp_path / "rolled_back" / "20260101-000000"
    stamp.mkdir(parents=True)
    make_kind(stamp / JOURNAL_NAME, kind, journal_check.JOURNAL_MAX_BYTES)
    with pytest.raises(UserError) as caught:
        journal_check.load_journal(stamp)
    line = one_line(caught.value)
    assert JOURNAL_NAME in line, line


# ---------------------------------------------------------------- the claim file
@pytest.mark.parametrize("kind", KINDS)
def test_claim_file_fifo_dev_zero_directory_oversized_is_one_line(tmp_path, kind):
    from mbridge_launch.rollback import claims

    make_kind(claims.claim_path(tmp_path), kind, claims.CLAIM_MAX_BYTES)
    with pytest.raises(claims.ClaimUnreadable) as caught:
        claims.read_claim(tmp_path)
    one_line(caught.value)


# ---------------------------------------------------------------- the Plan copy in the ledger
@pytest.mark.parametrize("text, needle", [
    ("name: a\nname: b\n", "appears twice"),
    ("x: " + "[" * 20_000 + "]" * 20_000 + "\n", "nest"),
], ids=["duplicate_key", "20000_deep"])
def test_ledger_plan_copy_read_as_a_plan_file(text, needle):
    """RunRecord.plan read the ledger's copy with yaml.safe_load: a duplicate key was taken
    silently (last wins), 20,000-deep nesting was a RecursionError (an internal error)."""
    from mbridge_launch.runs.records import RunRecord

    with pytest.raises(UserError) as caught:
        RunRecord.plan(SimpleNamespace(plan_yaml=text, id=7))  # type: ignore[arg-type]
    line = one_line(caught.value)
    assert "ledger run 7" in line and needle in line.lower(), line


# ---------------------------------------------------------------- node-check output
@pytest.mark.parametrize("kind", KINDS)
def test_node_check_output_fifo_dev_zero_directory_oversized_reads_as_nothing(tmp_path, kind):
    """The output file of the node-check job, in a folder others may write: a FIFO hung
    read_text, /dev/zero never ended, a directory raised IsADirectoryError."""
    from mbridge_launch.preflight import node_checks

    path = make_kind(tmp_path / "node-check-1.out", kind, node_checks.NODE_OUTPUT_MAX)
    assert node_checks._read(path) == ""


# ---------------------------------------------------------------- catalog sync sources
@pytest.mark.parametrize("kind", KINDS)
def test_catalog_sync_source_file_fifo_dev_zero_directory_oversized_is_one_line(tmp_path, monkeypatch, kind):
    from mbridge_launch.catalog_sync import source

    monkeypatch.setattr(source, "SOURCE_FILE_MAX", 1000)
    package = tmp_path / "megatron" / "bridge"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    make_kind(package / "recipes.py", kind, 1000)
    if kind == "directory":
        (package / "recipes.py" / "inner.py").write_text("")  # rglob lists the directory itself too
    with pytest.raises(UserError) as caught:
        source._from_tree(tmp_path, tmp_path)
    assert "recipes.py" in one_line(caught.value)


def test_catalog_sync_wheel_fifo_is_one_line(tmp_path):
    """zipfile.ZipFile(path) on a FIFO waited for a writer forever."""
    from mbridge_launch.catalog_sync import source

    wheel = make_kind(tmp_path / "megatron_bridge-0.9-py3-none-any.whl", "fifo", 0)
    with pytest.raises(UserError) as caught:
        source._from_wheel(wheel)
    assert "FIFO" in one_line(caught.value)
