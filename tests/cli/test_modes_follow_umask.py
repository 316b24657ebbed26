"""Modes follow the umask (issue 32 item 7): every file the tool creates is created with 0666 (0777
for a script and a directory) less the umask, as `open()` creates any file, so that a project
folder shared by a group (umask 002) stays shared: Plans, calibration files and ROLLBACK.json came
out 0600 under umask 022 and 002 (mkstemp), and the claim file and scripts were forced to 0644.

Each umask runs in a fresh process (the umask is per process) that creates the files through the
tool's own paths: `recommend -o`, `tune`'s rewrite of that Plan (and its backup), `calibrate -o`,
a rollback (its ROLLBACK.json and stamp directory), the save directory's claim file, the gate's
review copy of the sbatch script, a new ledger and a lock file; the test reads their modes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_helpers import ROOT, cli_env

_SCRIPT = textwrap.dedent("""\
    import csv, json, os, stat, sys
    from pathlib import Path
    sys.path[:0] = [str(Path(sys.argv[2]) / "tests"), str(Path(sys.argv[2]) / "tests" / "unit")]
    out = Path(sys.argv[1])
    os.environ["MBRIDGE_LAUNCH_STATE_DIR"] = str(out / "state")
    from mbridge_launch.cli.main import main

    modes = {}
    def mode(name, path):
        modes[name] = stat.S_IMODE(os.lstat(path).st_mode)

    # recommend -o: a new Plan
    plan_path = out / "plan.yaml"
    assert main(["recommend", "--model", "llama32_1b", "--gpus", "2", "--gpu-type", "h100", "--dataset", "mock",
                 "--name", "modes", "--partition", "h100", "-o", str(plan_path)]) == 0
    mode("plan", plan_path)

    # tune's rewrite of that Plan: the file keeps its mode, its backup is the old file's
    from test_plan_round_trip import _winner_plan
    from mbridge_launch.plan.model import load_plan
    from mbridge_launch.tune.result import write_tuned
    plan = load_plan(plan_path)
    rewritten = write_tuned(plan, _winner_plan(plan, out / "tune"), plan_path)
    assert rewritten.backup is not None
    mode("tuned_plan", plan_path)
    mode("plan_backup", rewritten.backup)

    # calibrate -o: a calibration file
    from mbridge_launch.planner.calibration_rows import csv_path
    with open(csv_path(), newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["model"] in ("llama3_8b", "llama3_70b")][:10]
    with open(out / "rows.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["calibrate", "--no-shipped-rows", "--iters", "2", "--rows", str(out / "rows.csv"),
                 "-o", str(out / "cal.json")]) == 0
    mode("calibration", out / "cal.json")

    # a rollback: its journal ROLLBACK.json and the stamp directory
    from checkpoint_fixtures import make_save_dir
    from mbridge_launch.rollback import checkpoints as C
    from mbridge_launch.rollback import engine as R
    save = make_save_dir(out, (100, 200))
    result = R.rollback(save, 100)
    stamp_dir = save / C.ROLLED_BACK_DIR / result.stamp
    mode("rollback_json", stamp_dir / C.JOURNAL_NAME)
    mode("rollback_dir", stamp_dir)

    # the save directory's claim file, as the gate writes it
    from mbridge_launch.rollback.claims import Claim, claim_path, write_claim
    write_claim(save, Claim(run_id=1, name="modes", token="t" * 16, job_ids=[], ledger="l", user="u", host="h",
                            plan_hash="0" * 16, save_dir=str(save)))
    mode("claim", claim_path(save))

    # the gate's review copy of the sbatch script (the very file sbatch is given)
    from mbridge_launch.executors import launch
    from mbridge_launch.gate.submit import _write_review_copy
    scripts = out / "scripts"
    scripts.mkdir()
    script = _write_review_copy(plan, launch.render_plan(plan, "sbatch", scripts), scripts)
    mode("sbatch_script", script)

    # a new ledger and a lock file
    from mbridge_launch.runs.ledger import Ledger
    with Ledger.open(out / "ledger.sqlite3"):
        pass
    mode("ledger", out / "ledger.sqlite3")
    from mbridge_launch.base.locks import open_lock
    os.close(open_lock(out / "x.lock"))
    mode("lock", out / "x.lock")
    print(json.dumps(modes))
    """)

FILES = ("plan", "tuned_plan", "plan_backup", "calibration", "rollback_json", "claim", "ledger", "lock")


def _modes_under(umask: int, directory: Path) -> dict[str, int]:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(directory), str(ROOT)], capture_output=True,
                          text=True, env=cli_env(), cwd=directory, timeout=600,
                          preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_every_file_the_tool_creates_follows_the_umask(tmp_path, umask):
    modes = _modes_under(umask, tmp_path)
    expected = {name: 0o666 & ~umask for name in FILES}
    expected.update(rollback_dir=0o777 & ~umask, sbatch_script=0o777 & ~umask)
    assert {k: oct(v) for k, v in modes.items()} == {k: oct(v) for k, v in expected.items()}


def test_a_replaced_file_keeps_its_own_mode_and_the_rollback_restore_stays_exact(tmp_path):
    from mbridge_launch.base.atomic import atomic_write_text

    path = tmp_path / "plan.yaml"
    atomic_write_text(path, "a\n")
    os.chmod(path, 0o600)  # a user who made it private keeps it private
    atomic_write_text(path, "b\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    atomic_write_text(path, "c\n", mode=0o640, exact_mode=True)  # a tracker's recorded mode
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
