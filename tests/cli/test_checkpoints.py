"""Checkpoint inspection: completeness, trackers, Bridge's resume order, losses from the log.

The checkpoint directories come from tests/checkpoint_fixtures.py.
"""

from __future__ import annotations

import json
import os

import pytest

from checkpoint_fixtures import log_line, make_save_dir
from mbridge_launch.rollback import checkpoints as C


def test_complete_checkpoints_and_trackers(tmp_path):
    save = make_save_dir(tmp_path)
    report = C.list_checkpoints(save)
    assert [c.iteration for c in report.checkpoints] == [100, 200, 300]
    assert all(c.complete and not c.missing for c in report.checkpoints)
    assert set(report.checkpoints[-1].tracked_by) == {C.PT_TRACKER, C.TXT_TRACKER}
    assert report.checkpoints[0].tracked_by == []
    assert report.trackers.pt_matched_by == "bytes" and report.trackers.pt_iteration == 300
    assert report.checkpoints[1].size_bytes == sum(f.stat().st_size for f in (save / "iter_0000200").iterdir())
    assert report.checkpoints[1].mtime == pytest.approx(1_700_000_060)
    assert report.resume.loadable and report.resume.iteration == 300 and report.resume.source == C.PT_TRACKER


@pytest.mark.parametrize("damage, missing", [
    (lambda d: (d / "common.pt").unlink(), ["common.pt"]),
    (lambda d: (d / ".metadata").unlink(), [".metadata"]),
    (lambda d: (d / "train_state.pt").write_bytes(b""), ["train_state.pt"]),
    (lambda d: [p.unlink() for p in d.glob("*.distcp")], ["*.distcp"]),
    (lambda d: [p.write_bytes(b"") for p in d.glob("*.distcp")], ["*.distcp"]),
    (lambda d: (d / "metadata.json").unlink(), ["metadata.json"]),
])
def test_incomplete_checkpoint_names_missing_files(tmp_path, damage, missing):
    save = make_save_dir(tmp_path)
    damage(save / "iter_0000300")
    info = C.inspect_iter_dir(save / "iter_0000300")
    assert not info.complete and info.missing == missing
    # the trackers point at it: Bridge could not resume
    res = C.resolve_resume(save)
    assert not res.loadable and "incomplete" in res.reason
    assert C.latest_complete(save) == 200


def test_run_config_is_optional(tmp_path):
    save = make_save_dir(tmp_path)
    (save / "iter_0000200" / "run_config.yaml").unlink()
    info = C.inspect_iter_dir(save / "iter_0000200")
    assert info.complete and info.notes == ["run_config.yaml"]


def test_resume_order_pt_before_txt(tmp_path):
    save = make_save_dir(tmp_path)
    (save / C.TXT_TRACKER).write_text("100")  # editing the .txt alone does not roll back
    res = C.resolve_resume(save)
    assert (res.source, res.iteration) == (C.PT_TRACKER, 300)
    (save / C.PT_TRACKER).unlink()
    res = C.resolve_resume(save)
    assert (res.source, res.iteration, res.loadable) == (C.TXT_TRACKER, 100, True)
    (save / C.TXT_TRACKER).write_text("release")
    assert not C.resolve_resume(save).loadable


def test_resume_ckpt_step_and_load_dir(tmp_path):
    save = make_save_dir(tmp_path)
    assert C.resolve_resume(save, ckpt_step=200).iteration == 200
    missing = C.resolve_resume(save, ckpt_step=250)
    assert not missing.loadable and missing.reason == "directory missing"
    direct = C.resolve_resume(save, load=save / "iter_0000100", ckpt_step=200)
    assert (direct.source, direct.iteration, direct.loadable) == ("load_iter_dir", 100, True)


def test_resume_without_trackers(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert C.resolve_resume(empty).loadable  # fresh start
    save = make_save_dir(tmp_path)
    (save / C.PT_TRACKER).unlink()
    (save / C.TXT_TRACKER).unlink()
    res = C.resolve_resume(save)
    assert res.source == "none" and not res.loadable


def test_pt_tracker_pointing_into_rolled_back(tmp_path):
    save = make_save_dir(tmp_path)
    aside = save / C.ROLLED_BACK_DIR / "20260101T000000Z"
    aside.mkdir(parents=True)
    os.rename(save / "iter_0000300", aside / "iter_0000300")
    trackers = C.read_trackers(save)
    assert trackers.pt_iteration == 300 and trackers.pt_match_location == "rolled_back/20260101T000000Z"
    res = C.resolve_resume(save)
    assert not res.loadable and res.reason == "directory missing"
    report = C.list_checkpoints(save)
    assert [s.iterations for s in report.rolled_back] == [[300]]
    assert report.rolled_back[0].journal_state is None


def test_unknown_pt_tracker_content(tmp_path):
    save = make_save_dir(tmp_path)
    (save / C.PT_TRACKER).write_bytes(b"PK\x03\x04 torch zip that matches nothing")
    res = C.resolve_resume(save)
    assert not res.loadable and "matches no iteration" in res.reason


def test_losses_from_log(tmp_path):
    save = make_save_dir(tmp_path)
    log = tmp_path / "train.log"
    lines = [log_line(i, f"{10 - i / 100:.6E}") for i in range(50, 301, 50)]
    lines.insert(3, " successfully saved checkpoint from iteration     200 to /x [ t 1/1, p 1/1 ]\n")
    lines.append(log_line(250, "nan"))  # a later timeline logged 250 again, as NaN
    log.write_text("".join(lines))
    report = C.list_checkpoints(save, log)
    by_iter = {c.iteration: c for c in report.checkpoints}
    assert by_iter[100].loss == pytest.approx(9.0) and by_iter[100].loss_iteration == 100
    assert by_iter[300].loss == pytest.approx(7.0)
    data = report.as_dict()
    assert json.dumps(data)  # serialisable (nan turned into text)


def test_checkpoints_command_json_and_text(tmp_path, mbl):
    save = make_save_dir(tmp_path)
    (save / "iter_0000200" / "common.pt").unlink()
    env = {"MBRIDGE_LAUNCH_STATE_DIR": str(tmp_path / "state")}
    out = mbl.run("checkpoints", save, "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [c["complete"] for c in data["checkpoints"]] == [True, False, True]
    assert data["checkpoints"][1]["missing"] == ["common.pt"]
    assert data["resume"]["iteration"] == 300
    text = mbl.run("checkpoints", save, "--lang", "zh", env=env)
    assert text.returncode == 0 and "缺少 common.pt" in text.stdout and "恢复训练" in text.stdout
    bad = mbl.run("checkpoints", "no-such-run", env=env)
    assert bad.returncode == 2 and "no-such-run" in bad.stderr and "Traceback" not in bad.stderr


def test_checkpoints_of_a_recorded_run_show_the_loss_from_its_logs(tmp_path, mbl):
    """`checkpoints RUN` reads the losses from the run's own logs (and its parents' after a
    rollback and resubmission: the newest timeline wins), without --log."""
    from mbridge_launch.runs import ledger as L

    save = make_save_dir(tmp_path)  # iterations 100, 200, 300
    first, second = tmp_path / "job-1.out", tmp_path / "job-2.out"
    first.write_text("".join(log_line(i, f"{10 - i / 100:.6E}") for i in range(50, 301, 50)))
    second.write_text(" loading checkpoint from x at iteration 200\n" + log_line(250, "6.5E+00") + log_line(300, "6.0E+00"))
    db = tmp_path / "l.db"
    with L.Ledger.open(db) as ledger:
        parent = ledger.begin_submission(name="lossy", plan_hash="h", plan_yaml="name: lossy\n", executor="no-such",
                                         save_dir=str(save))
        ledger.mark_submitted(parent.id, ["1"], log_paths=[str(first)])
        ledger.set_state(parent.id, L.CANCELLED)
        child = ledger.begin_submission(name="lossy", plan_hash="h2", plan_yaml="name: lossy\n", executor="no-such",
                                        save_dir=str(save), parent_run_id=parent.id)
        ledger.mark_submitted(child.id, ["2"], log_paths=[str(second)])
        ledger.set_state(child.id, L.COMPLETED)
    out = mbl.run("checkpoints", "lossy", "--ledger", db, "--format", "json")
    assert out.returncode == 0, out.stderr
    losses = {c["iteration"]: (c["loss"], c["loss_iteration"]) for c in json.loads(out.stdout)["checkpoints"]}
    assert losses[100] == (pytest.approx(9.0), 100) and losses[200] == (pytest.approx(8.0), 200)
    assert losses[300] == (pytest.approx(6.0), 300)  # the resubmitted timeline, not the first one's 7.0
    text = mbl.run("checkpoints", "lossy", "--ledger", db)
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith("300 "))
    assert row.rstrip().endswith("6.0000"), text.stdout
