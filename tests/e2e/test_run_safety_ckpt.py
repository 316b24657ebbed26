"""Issue 13 item 2: a checkpoint directory belongs to one run at a time, on the local cluster.

- (a) while a run writes its save directory, the same Plan with only cluster.time edited (another
  plan hash) and a Plan of another name with the same checkpoint.save (and one pointed inside it)
  are refused at the gate naming that run, and `preflight` reports it as an error (also with
  --no-cluster, from the ledger's recorded states, saying Slurm was not asked); once the run has
  ended the other Plan is accepted and claims the directory.
- (b) the claim file catches a run of another ledger: its job still runs, so the submission
  through a second --ledger is refused naming the claimant; after its job ended the claim is stale
  and replaced (said).
- (c) a mixed directory (shards of world sizes 16 and 8 in one iteration, the index naming 8, as
  the stand-in trainer's writer leaves it when two jobs save the same iteration) is incomplete
  in `checkpoints` (text and JSON) and never a rollback target.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from gate_fixtures import unique, write_plan
from mbridge_launch.plan.model import plan_from_dict, save_plan
from mbridge_launch.rollback import checkpoints as C
from mbridge_launch.rollback.claims import CLAIM_NAME
from mbridge_launch.rollback.lossmon import pick_rollback_target
from mbridge_launch.runs import ledger as L
from run_safety_checks import assert_nothing_lost

# the first run (120 iterations: a minute) still writes while the refusals run; it is cancelled then
SLOW = {"MBL_STANDIN_ITER_SECONDS": "0.5"}


def _submit(mbl, plan: Path, ledger: Path, script_dir: Path, *extra: str):
    return mbl.run("submit", str(plan), "--yes", "--ledger", str(ledger), "--script-dir", str(script_dir),
                   "--format", "json", *extra)


def _variant(plan: Path, out: Path, **changes) -> Path:
    """A copy of the Plan file with dotted fields changed (cluster.time=..., checkpoint.save=...)."""
    data = yaml.safe_load(plan.read_text())
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        data[section][key] = value
    return save_plan(plan_from_dict(data), out)


def _claim(save: Path) -> dict:
    return json.loads((save / CLAIM_NAME).read_text())


def _first_job(mbl, plan: Path, ledger: Path, shared: Path) -> str:
    """Submitted and active (pending or running: either way it owns the directory)."""
    first = _submit(mbl, plan, ledger, shared)
    assert first.returncode == 0, first.stderr
    return first.json()["job_ids"][0]


def _stop(slurm_cluster, job: str) -> None:
    """Tests leave no job behind; how it ends is not what they check."""
    slurm_cluster.cancel(job)
    slurm_cluster.wait(job, timeout=60)


@pytest.mark.slurm
def test_two_plans_on_one_save_dir_refused_while_the_first_runs(base_plan, shared_dir, slurm_cluster, slurm_env, mbl,
                                                                tmp_path):
    db, since = tmp_path / "ledger.sqlite3", time.time()
    name_a, name_b = unique("ckpt-own-a"), unique("ckpt-own-b")
    plan_a = write_plan(base_plan, shared_dir, name_a, iters=120, save_interval=5, env=SLOW)
    job_a = _first_job(mbl, plan_a, db, shared_dir)
    save = shared_dir / "ckpt"
    assert _claim(save)["job_ids"] == [job_a] and _claim(save)["name"] == name_a

    retimed = _variant(plan_a, shared_dir / "retimed.yaml", cluster__time="00:09:00")
    other = write_plan(base_plan, shared_dir, name_b, iters=60, save_interval=5)  # resumes, then runs fast
    nested = _variant(other, shared_dir / "nested.yaml", checkpoint__save=str(save / "sub"))
    for plan in (retimed, other, nested):
        refused = _submit(mbl, plan, db, shared_dir)
        assert refused.returncode == 1, refused.stderr
        assert f"belongs to run {name_a} (id 1, " in refused.stderr and job_a in refused.stderr, refused.stderr
    assert f"inside {save}" in refused.stderr  # the nested one says how it overlaps
    with L.Ledger.open(db) as ledger:
        assert [r.name for r in ledger.list_runs(limit=None)] == [name_a]  # nothing else reached the ledger

    checked = mbl.run("preflight", str(other), "--ledger", str(db))
    assert checked.returncode == 1 and f"belongs to run {name_a}" in checked.stdout, checked.stdout
    offline = mbl.run("preflight", str(other), "--ledger", str(db), "--no-cluster", "--format", "json")
    assert offline.returncode == 1, offline.stdout
    codes = {c["code"]: c for c in offline.json()["checks"]}
    assert codes["path.save_owned"]["severity"] == "error"
    assert "Slurm was not asked" in codes["path.save_owner_basis"]["message"]

    assert mbl.run("cancel", "1", "--yes", "--wait", "--ledger", str(db)).returncode == 0
    accepted = _submit(mbl, other, db, shared_dir)
    assert accepted.returncode == 0, accepted.stderr
    job_b = accepted.json()["job_ids"][0]
    assert _claim(save)["name"] == name_b and _claim(save)["job_ids"] == [job_b]
    _stop(slurm_cluster, job_b)
    assert mbl.run("runs", "--ledger", str(db)).returncode == 0  # refreshes the states
    for name in (name_a, name_b):  # the refused submissions started no job; the accepted ones are recorded
        assert_nothing_lost(slurm_cluster, db, name, since)


@pytest.mark.slurm
def test_claim_of_another_ledger_refuses_until_its_job_ended(base_plan, shared_dir, slurm_cluster, slurm_env, mbl,
                                                            tmp_path):
    ledger_1, ledger_2 = tmp_path / "one.sqlite3", tmp_path / "two.sqlite3"
    name_a, name_b = unique("ckpt-claim-a"), unique("ckpt-claim-b")
    plan_a = write_plan(base_plan, shared_dir, name_a, iters=120, save_interval=5, env=SLOW)
    job_a = _first_job(mbl, plan_a, ledger_1, shared_dir)

    other = write_plan(base_plan, shared_dir, name_b, iters=60, save_interval=5)  # resumes, then runs fast
    refused = _submit(mbl, other, ledger_2, shared_dir)
    assert refused.returncode == 1, refused.stderr
    assert f"claimed by run {name_a} (id 1) of ledger {ledger_1}" in refused.stderr, refused.stderr
    assert f"its job {job_a} is PENDING" in refused.stderr or f"its job {job_a} is RUNNING" in refused.stderr
    checked = mbl.run("preflight", str(other), "--ledger", str(ledger_2), "--format", "json")
    assert checked.returncode == 1 and "path.save_claimed" in {c["code"] for c in checked.json()["checks"]}

    slurm_cluster.cancel(job_a)
    assert slurm_cluster.wait(job_a, timeout=60) == "CANCELLED"
    accepted = _submit(mbl, other, ledger_2, shared_dir)
    assert accepted.returncode == 0, accepted.stderr
    assert f"replacing the stale claim of run {name_a}" in accepted.stderr
    claim = _claim(shared_dir / "ckpt")
    assert claim["name"] == name_b and claim["ledger"] == str(ledger_2)
    _stop(slurm_cluster, accepted.json()["job_ids"][0])


def _mixed_save_dir(root: Path) -> Path:
    """Iterations 10 and 20 saved by one job of 8 ranks; iteration 30 saved by a job of 16 ranks
    and then by one of 8 into the same directory (the issue's iter_0000030: 16 shards, index of 8),
    written by the stand-in trainer's own checkpoint writer."""
    from standin import checkpoint as standin_ckpt

    save = root / "ckpt"
    for iteration, world in ((10, 8), (20, 8), (30, 16), (30, 8)):
        standin_ckpt.save(save, iteration, iteration * 16, world, {}, poisoned=False, initial_seed=1234)
    return save


def test_mixed_directory_is_incomplete_and_never_a_rollback_target(tmp_path, mbl):
    save = _mixed_save_dir(tmp_path)
    assert len(list((save / "iter_0000030").glob("*.distcp"))) == 16

    text = mbl.run("checkpoints", str(save))
    assert text.returncode == 0, text.stderr
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith("30 "))
    assert "NO (mixed shards)" in row, text.stdout
    assert "16 shard files but .metadata names 8" in text.stdout and "__8_0.distcp" in text.stdout
    assert "Bridge could NOT resume" in text.stdout  # the trackers point at the mixed iteration

    data = mbl.run("checkpoints", str(save), "--format", "json").json()
    by_iter = {c["iteration"]: c for c in data["checkpoints"]}
    assert by_iter[30]["complete"] is False and by_iter[30]["mixed"] is True
    assert (by_iter[30]["shards"], by_iter[30]["indexed_shards"]) == (16, 8)
    assert "mixed" in by_iter[30]["shard_reason"] and by_iter[20]["complete"] is True

    refused = mbl.run("rollback", str(save), "--to", "30", "--yes")
    assert refused.returncode == 1 and "not loadable" in refused.stderr and "complete checkpoints: 10, 20" in refused.stderr
    assert pick_rollback_target(C.list_checkpoints(save).checkpoints, 40) == 20  # the watcher's choice
    assert mbl.run("rollback", str(save), "--to", "20", "--yes").returncode == 0
    assert C.resolve_resume(save).iteration == 20 and C.resolve_resume(save).loadable


# ---------------------------------------------------------------------- the files are untrusted
def test_metadata_is_walked_never_unpickled(tmp_path):
    """A `.metadata` whose pickle would run a command when loaded: its shard names are still read
    (pickletools.genops, no code runs) and the command never runs."""
    import pickle

    from checkpoint_fixtures import write_iter

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    save = tmp_path / "ckpt"
    d = write_iter(save, 10, shards=2)
    (d / ".metadata").write_bytes(pickle.dumps({"storage_data": {"a": "__0_0.distcp", "b": "__1_0.distcp"},
                                                "hook": Evil()}))
    info = C.inspect_iter_dir(d)
    assert info.complete and info.indexed_shards == 2 and not marker.exists()
    (d / ".metadata").write_bytes(b"not a pickle at all")
    broken = C.inspect_iter_dir(d)
    assert not broken.complete and "not a torch_dist index" in broken.shard_reason


def test_claim_file_is_not_followed_bounded_and_escaped(tmp_path, english):
    from mbridge_launch.rollback.claims import ClaimUnreadable, read_claim

    save = tmp_path / "ckpt"
    save.mkdir()
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"name": "from-a-link", "job_ids": ["1"]}))
    (save / CLAIM_NAME).symlink_to(secret)
    with pytest.raises(ClaimUnreadable, match="symbolic link"):
        read_claim(save)
    (save / CLAIM_NAME).unlink()
    (save / CLAIM_NAME).write_text(json.dumps({"name": "x" * 70_000}))
    with pytest.raises(ClaimUnreadable, match="larger than"):
        read_claim(save)
    (save / CLAIM_NAME).write_text(json.dumps({"name": "a\x1b[2Jb" + "y" * 500, "job_ids": ["12", "1; rm -rf /"],
                                               "run_id": "7"}))
    claim = read_claim(save)
    assert claim is not None and claim.job_ids == ["12"] and claim.run_id is None and len(claim.name) < 210
    from mbridge_launch.base.errors import CheckFailed
    from mbridge_launch.rollback.claims import Ownership, claim_owner, owner_params

    shown = CheckFailed("ownership.claimed", **owner_params(Ownership(str(save)), claim_owner(claim))).render("en")
    assert "\x1b" not in shown and "\\x1b[2J" in shown  # the terminal escape is shown, not obeyed


def test_shards_the_index_names_but_are_missing_are_reported(tmp_path):
    from checkpoint_fixtures import write_iter

    d = write_iter(tmp_path / "ckpt", 10, shards=6, indexed=8)  # the index of 8 ranks, 2 shards lost
    info = C.inspect_iter_dir(d)
    assert not info.complete and info.mixed and (info.shards, info.indexed_shards) == (6, 8)
    assert "missing: __6_0.distcp, __7_0.distcp" in info.shard_reason
