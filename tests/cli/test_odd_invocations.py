"""Odd invocations are refused, never answered with exit 0 (issue 32: "21 invocations that exit 0
where a refusal was due").

One table: each row is an invocation a user can type by mistake (empty names and paths,
contradicting flags, unknown run references, out-of-range numbers, missing files, options given to
the wrong command, `--yes` with nothing to confirm) and the exit code it must get, with one error
line and no traceback. Rows marked FIXED exited 0 before this change (found by this table).
No Slurm is needed: PATH holds no Slurm command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from mbridge_launch.runs import ledger as L

NO_SLURM = {"PATH": "/usr/bin:/bin"}
LEDGER = "{ledger}"
PLAN = "{plan}"
SAVE = "{save}"

# (invocation, expected exit code); FIXED: exited 0 before
TABLE = [
    # empty names and paths
    (("runs", "--name", "", "--ledger", LEDGER), 2),  # FIXED: matched nothing, exit 0
    (("runs", "--name", "   ", "--ledger", LEDGER), 2),  # FIXED
    (("runs", "--ledger", ""), 2),  # FIXED: read the default ledger
    (("status", "1", "--ledger", " "), 2),
    (("recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "-o", " "), 2),  # FIXED: wrote a file named ' '
    (("recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "-o", ""), 2),  # FIXED: -o ignored
    (("plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "-o", ""), 2),
    (("status", "", "--ledger", LEDGER), 2),
    (("logs", "", "--ledger", LEDGER), 2),
    (("cancel", "", "--ledger", LEDGER), 2),
    (("checkpoints", ""), 2),
    (("rollback", "", "--to", "5"), 2),
    (("preflight", "", "--no-cluster"), 2),
    (("submit", "", "--dry-run"), 2),
    (("plan", "--model", "", "--gpus", "8", "--gpu-type", "h100"), 2),
    # unknown run references, malformed ones
    (("status", "nosuch", "--ledger", LEDGER), 2),
    (("status", "0", "--ledger", LEDGER), 2),
    (("status", "999999999999999999999", "--ledger", LEDGER), 2),
    (("status", "job:1", "--ledger", LEDGER), 2),
    (("status", "job:x", "--ledger", LEDGER), 2),
    (("diagnose", "job:", "--ledger", LEDGER), 2),
    (("logs", "nosuch", "--ledger", LEDGER), 2),
    (("cancel", "nosuch", "--yes", "--ledger", LEDGER), 2),
    # contradicting flags, out-of-range numbers
    (("rollback", SAVE, "--undo", "--to", "5"), 2),
    (("runs", "--limit", "-1", "--ledger", LEDGER), 2),
    (("plan", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--seq-length", "0"), 2),
    (("logs", "run", "--poll", "nan", "--ledger", LEDGER), 2),
    # missing files, options given to the wrong command, --yes with nothing to confirm
    (("checkpoints", "/nonexistent/ckpt"), 2),
    (("preflight", "/nonexistent/plan.yaml", "--no-cluster"), 2),
    (("diagnose", "/nonexistent/x.log"), 2),
    (("estimate", PLAN, "--gpus", "0"), 2),
    (("recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "--yes"), 2),
    (("preflight", PLAN, "--no-cluster", "--yes"), 2),
    (("status", "1", "--yes", "--ledger", LEDGER), 2),
    (("runs", "--yes", "--ledger", LEDGER), 2),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("odd")
    db = root / "l.db"
    with L.Ledger.open(db, create=True) as ledger:
        ledger.begin_submission(name="run", plan_hash="0123456789abcdef", plan_yaml="name: run\n", executor="sbatch")
    save = root / "save"
    save.mkdir()
    plan = root / "p.yaml"
    out = run_cli("recommend", "--model", "llama3_8b", "--gpus", "8", "--gpu-type", "h100", "-o", plan,
                  env={**NO_SLURM, "MBRIDGE_LAUNCH_STATE_DIR": str(root / "state")}, cwd=root)
    assert out.rc == 0, out.stderr
    return {LEDGER: str(db), PLAN: str(plan), SAVE: str(save), "cwd": str(root)}


@pytest.mark.parametrize("args,code", TABLE, ids=[" ".join(a) or "-" for a, _ in TABLE])
def test_an_odd_invocation_is_refused(args, code, places):
    argv = [places.get(a, a) for a in args]
    out = run_cli(*argv, env={**NO_SLURM, "MBRIDGE_LAUNCH_STATE_DIR": str(Path(places["cwd"]) / "state")},
                  cwd=places["cwd"])
    assert out.rc == code, (argv, out.rc, out.stdout[-300:], out.stderr)
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (Path(places["cwd"]) / " ").exists()  # `-o " "` wrote nothing
