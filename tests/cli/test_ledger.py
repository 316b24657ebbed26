"""The run ledger: location, schema/migrations, write-before/after submission, reconciliation
against a (fake) Slurm after a crash, concurrent writers, and the runs/status/logs commands."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from cli_helpers import popen_cli
from mbridge_launch.base.errors import SubmissionError, UserError
from mbridge_launch.runs import ledger as L
from mbridge_launch.runs.reconcile import (
    JobInfo,
    SacctQuery,
    SlurmUnavailable,
    reconcile_submitting,
    refresh_runs,
    run_state_for,
)
from mbridge_launch.runs.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ledger(tmp_path):
    with L.Ledger.open(tmp_path / "ledger.sqlite3") as opened:
        yield opened


def _begin(ledger: L.Ledger, name: str = "llama-run", **extra) -> L.RunRecord:
    fields = dict(name=name, plan_hash="0123456789abcdef", plan_yaml=f"name: {name}\n", executor="sbatch",
                  plan_path="/plans/p.yaml", cluster={"partition": "h100", "nodes": 2}, save_dir="/ckpt/run")
    fields.update(extra)
    return ledger.begin_submission(**fields)


class FakeSlurm:
    def __init__(self, jobs: list[JobInfo] = ()) -> None:
        self.jobs = list(jobs)
        self.finds = 0

    def job_states(self, job_ids):
        return {j.job_id: j for j in self.jobs if j.job_id in job_ids}

    def find_jobs(self, *, name, token, since):
        self.finds += 1
        return [j for j in self.jobs if j.name == name or (token and token in j.comment)]


# ---------------------------------------------------------------------- location and schema
def test_default_location(monkeypatch, tmp_path):
    for var in ("MBRIDGE_LAUNCH_LEDGER", "MBRIDGE_LAUNCH_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert L.default_ledger_path() == tmp_path / "home/.local/state/mbridge-launch/ledger.sqlite3"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert L.default_ledger_path() == tmp_path / "xdg/mbridge-launch/ledger.sqlite3"
    monkeypatch.setenv("MBRIDGE_LAUNCH_STATE_DIR", str(tmp_path / "st"))
    assert L.default_ledger_path() == tmp_path / "st/ledger.sqlite3"
    monkeypatch.setenv("MBRIDGE_LAUNCH_LEDGER", str(tmp_path / "x.db"))
    assert L.default_ledger_path() == tmp_path / "x.db"


def test_schema_version_wal_and_busy_timeout(ledger):
    conn = ledger.conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert ledger.journal_mode == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == L.BUSY_TIMEOUT_MS
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "events", "confirmations", "overrides", "rollbacks"} <= tables


def test_reopen_keeps_data_and_newer_schema_is_refused(tmp_path):
    path = tmp_path / "l.db"
    with L.Ledger.open(path) as first:
        run = _begin(first)
    with L.Ledger.open(path) as again:
        assert again.get_run(run.id).name == "llama-run"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(UserError) as err:
        L.Ledger.open(path)
    assert err.value.key == "ledger.schema_too_new"


def test_an_old_version_database_is_migrated_with_its_data(tmp_path, monkeypatch):
    """A ledger written by the v1 schema (before the watcher job column) opens, is migrated to the
    current version in place, and keeps every row; a migration that fails leaves it as it was."""
    from mbridge_launch.runs import schema as S

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in S._statements(S.MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO runs(name, plan_hash, plan_yaml, executor, job_token, job_ids, state, created_at,"
                 " updated_at) VALUES ('old-run', 'h1', 'name: old-run\n', 'sbatch', 'mbl-1', '[\"12\"]',"
                 " 'completed', 1.0, 2.0)")
    conn.execute("INSERT INTO events(run_id, at, kind, new_state) VALUES (1, 1.0, 'state', 'completed')")
    conn.close()
    assert SCHEMA_VERSION >= 2
    with L.Ledger.open(path) as ledger:
        assert ledger.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        old = ledger.get_run("old-run")
        assert (old.job_ids, old.state, old.watcher_job_id) == (["12"], "completed", None)
        assert [e["new_state"] for e in ledger.events(old.id)] == ["completed"]
        ledger.set_watcher_job(old.id, "13")  # the v2 column works on a migrated row
        assert ledger.get_run(old.id).watcher_job_id == "13"
        # v3: an old row never had the scheduler called by this code: nothing to look for
        assert (old.scheduler_called_at, old.may_have_job) == (None, 0) and ledger.reconcile_candidates() == []
    # a later migration that breaks half-way is rolled back as a whole: version and schema unchanged
    broken = "ALTER TABLE runs ADD COLUMN extra TEXT;\nTHIS IS NOT SQL;"
    monkeypatch.setattr(S, "MIGRATIONS", [*S.MIGRATIONS, broken])
    monkeypatch.setattr(S, "SCHEMA_VERSION", len(S.MIGRATIONS))
    with pytest.raises(UserError) as err:
        L.Ledger.open(path)
    assert err.value.key == "ledger.cannot_open"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert "extra" not in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    conn.close()


def test_each_state_change_is_one_transaction(ledger, monkeypatch):
    """A state change and its event are written together or not at all: a failure after the
    UPDATE (here, the event insert) leaves neither."""
    run = _begin(ledger)
    before_events = len(ledger.events(run.id))

    def broken_event(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error (injected)")

    monkeypatch.setattr(ledger, "_event", broken_event)
    with pytest.raises(sqlite3.OperationalError):
        ledger.mark_submitted(run.id, ["99"])
    monkeypatch.undo()
    again = ledger.get_run(run.id)
    assert (again.state, again.job_ids) == (L.SUBMITTING, []) and len(ledger.events(run.id)) == before_events


def test_not_a_database(tmp_path):
    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError) as err:
        L.Ledger.open(bad)
    assert err.value.key == "ledger.cannot_open" and str(bad) in str(err.value)


# ---------------------------------------------------------------------- records
def test_write_before_and_after_the_scheduler(ledger):
    run = _begin(ledger, script_text="#!/bin/bash\n", work_dir="/w")
    assert run.state == L.SUBMITTING and run.job_ids == [] and run.job_token.startswith("mbl-")
    assert run.submitter.endswith(f":{os.getpid()}")
    done = ledger.mark_submitted(run.id, ["1234"], log_paths=["/w/logs/a-1234.out"], raw_output="1234")
    assert (done.state, done.job_ids, done.log_paths) == (L.SUBMITTED, ["1234"], ["/w/logs/a-1234.out"])
    assert done.submitted_at >= done.created_at
    states = [(e["old_state"], e["new_state"]) for e in ledger.events(run.id)]
    assert states == [(None, L.SUBMITTING), (L.SUBMITTING, L.SUBMITTED)]
    assert ledger.active_runs_with_plan_hash("0123456789abcdef")[0].id == run.id
    ledger.set_state(run.id, L.COMPLETED, slurm_state="COMPLETED")
    assert ledger.active_runs_with_plan_hash("0123456789abcdef") == []


def test_submission_context_marks_a_refusal(ledger):
    with pytest.raises(SubmissionError):
        with ledger.submission(name="r", plan_hash="h", plan_yaml="name: r\n", executor="sbatch") as sub:
            assert sub.token.startswith("mbl-")
            raise SubmissionError("executors.submit_refused", raw_output="sbatch: error: Requested node configuration is not available", reason="x")
    run = ledger.get_run("r")
    assert run.state == L.SUBMIT_FAILED and "Requested node configuration" in run.error


def test_submission_context_records_job(ledger):
    class Submitted:
        job_ids = ["77"]
        script_path = Path("/w/r.sbatch")
        log_paths = [Path("/w/logs/r-77.out")]
        raw_output = "77"

    with ledger.submission(name="r", plan_hash="h", plan_yaml="name: r\n", executor="sbatch") as sub:
        sub.done(Submitted())
    run = ledger.get_run("r")
    assert (run.state, run.job_ids, run.script_path) == (L.SUBMITTED, ["77"], "/w/r.sbatch")


def test_lookup_by_id_and_name(ledger):
    a = _begin(ledger, "alpha")
    b = _begin(ledger, "alpha")
    c = _begin(ledger, "beta")
    assert ledger.get_run("alpha").id == b.id  # newest with that name
    assert ledger.get_run(str(a.id)).id == a.id and ledger.get_run(f"#{c.id}").name == "beta"
    with pytest.raises(UserError) as err:
        ledger.get_run("gamma")
    assert "alpha" in str(err.value) and "beta" in str(err.value)
    assert [r.id for r in ledger.runs_for_save_dir("/ckpt/run")] == [c.id, b.id, a.id]


def test_confirmations_overrides_and_chain(ledger):
    first = _begin(ledger)
    second = _begin(ledger, parent_run_id=first.id)
    ledger.record_confirmation(second.id, "submit", "typed-name", {"gpu_hours": 1234})
    ledger.record_override(second.id, "force", "preflight data check is wrong on this site", {"checks": ["data.exists"]})
    assert ledger.confirmations(second.id)[0]["detail"]["gpu_hours"] == 1234
    assert ledger.overrides(second.id)[0]["reason"].startswith("preflight")
    assert [r.id for r in ledger.run_chain(second.id)] == [first.id, second.id]


# ---------------------------------------------------------------------- reconciliation
def _crashing_submitter(ledger_path: Path) -> dict:
    """A process that writes the `submitting` row and dies as kill -9 would (before or after the
    scheduler accepted the job). Returns the row's id and token."""
    code = textwrap.dedent(f"""
        import json, os, sys
        from mbridge_launch.runs.ledger import Ledger
        ledger = Ledger.open({str(ledger_path)!r})
        run = ledger.begin_submission(name="crashy", plan_hash="h", plan_yaml="name: crashy\\n", executor="sbatch")
        print(json.dumps({{"id": run.id, "token": run.job_token}}), flush=True)
        os._exit(9)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 9, out.stderr
    return json.loads(out.stdout)


def test_crash_before_scheduler_is_reconciled_as_lost(tmp_path):
    path = tmp_path / "l.db"
    info = _crashing_submitter(path)
    with L.Ledger.open(path) as ledger:
        results = reconcile_submitting(ledger, FakeSlurm([JobInfo("5", "other", "RUNNING", time.time())]))
        assert [(r.run_id, r.outcome) for r in results] == [(info["id"], "lost")]
        assert ledger.get_run(info["id"]).state == L.LOST


def test_crash_after_scheduler_is_reconciled_by_token(tmp_path):
    path = tmp_path / "l.db"
    info = _crashing_submitter(path)
    slurm = FakeSlurm([JobInfo("900", "renamed-by-executor", "RUNNING", time.time(), comment=info["token"]),
                       JobInfo("901", "crashy", "PENDING", time.time())])
    with L.Ledger.open(path) as ledger:
        [result] = reconcile_submitting(ledger, slurm)
        assert (result.outcome, result.job_ids) == ("submitted", ["900"])
        run = ledger.get_run(info["id"])
        assert (run.state, run.job_ids, run.slurm_state) == (L.RUNNING, ["900"], "RUNNING")
        assert any(e["kind"] == "reconcile" and e["detail"]["found_by"] == "token" for e in ledger.events(run.id))
        assert reconcile_submitting(ledger, slurm) == []  # nothing left to do


def test_reconcile_by_name_and_window_skips_claimed_jobs(ledger):
    # name+time matching is the fallback of an executor that does not take the token (a plugin)
    old = _begin(ledger, "same", executor="plugin-without-token")
    ledger.mark_submitted(old.id, ["10"])
    stuck = _begin(ledger, "same", executor="plugin-without-token")
    ledger.conn.execute("UPDATE runs SET submitter='elsewhere:1' WHERE id=?", (stuck.id,))
    now = stuck.created_at + 1000
    slurm = FakeSlurm([JobInfo("10", "same", "RUNNING", stuck.created_at - 50),
                       JobInfo("11", "same", "PENDING", stuck.created_at + 1)])
    [result] = reconcile_submitting(ledger, slurm, now=now)
    assert (result.outcome, result.job_ids) == ("submitted", ["11"])
    assert ledger.get_run(stuck.id).state == L.PENDING


def test_reconcile_waits_for_a_live_submitter_and_flags_ambiguity(ledger):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        run = _begin(ledger, "busy", executor="plugin-without-token")  # matched by name: may be ambiguous
        ledger.conn.execute("UPDATE runs SET submitter=? WHERE id=?", (f"{os.uname().nodename}:{sleeper.pid}", run.id))
        slurm = FakeSlurm([JobInfo("1", "busy", "PENDING", run.created_at), JobInfo("2", "busy", "PENDING", run.created_at)])
        assert [r.outcome for r in reconcile_submitting(ledger, slurm, now=run.created_at + 1)] == ["waiting"]
        assert slurm.finds == 0 and ledger.get_run(run.id).state == L.SUBMITTING
        [late] = reconcile_submitting(ledger, slurm, now=run.created_at + 10_000)
        assert (late.outcome, sorted(late.job_ids)) == ("ambiguous", ["1", "2"])
        assert ledger.get_run(run.id).state == L.SUBMITTING
    finally:
        sleeper.kill()
        sleeper.wait()


def test_refresh_maps_slurm_states(ledger):
    runs = []
    for job, name in (("1", "a"), ("2", "b"), ("3", "c"), ("4", "d")):
        r = _begin(ledger, name)
        runs.append(ledger.mark_submitted(r.id, [job]))
    slurm = FakeSlurm([JobInfo("1", "a", "RUNNING", None), JobInfo("2", "b", "CANCELLED by 0", None),
                       JobInfo("3", "c", "COMPLETING", None)])
    after = {r.name: r for r in refresh_runs(ledger, slurm, runs)}
    assert (after["a"].state, after["b"].state, after["c"].state, after["d"].state) == \
        (L.RUNNING, L.CANCELLED, L.RUNNING, L.SUBMITTED)
    assert run_state_for("OUT_OF_MEMORY") == L.FAILED and run_state_for("REQUEUED") == L.PENDING
    assert run_state_for("TIMEOUT") == L.TIMEOUT and run_state_for("WHATEVER") is None


def test_concurrent_writers(tmp_path):
    path = tmp_path / "l.db"
    L.Ledger.open(path).close()
    code = textwrap.dedent(f"""
        from mbridge_launch.runs.ledger import Ledger
        ledger = Ledger.open({str(path)!r})
        for i in range(25):
            run = ledger.begin_submission(name="w", plan_hash="h", plan_yaml="x", executor="sbatch")
            ledger.mark_submitted(run.id, [str(run.id)])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    with L.Ledger.open(path) as ledger:
        runs = ledger.list_runs(limit=None)
        assert len(runs) == 75 and all(r.state == L.SUBMITTED for r in runs)
        assert len({r.job_token for r in runs}) == 75


# ---------------------------------------------------------------------- the real query, on fake binaries
@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "squeue").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "squeue $*" >> {calls}
        printf '301\\037RUNNING\\0372026-11-29T20:00:00\\037None\\037train-a\\037mbl-abc\\n'
        """))
    (bin_dir / "sacct").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "sacct $*" >> {calls}
        printf '300\\037CANCELLED by 0\\0372026-11-29T19:00:00\\037None\\037train-a\\037\\n'
        printf '301\\037PENDING\\0372026-11-29T20:00:00\\037None\\037train-a\\037\\n'
        """))
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return calls


def test_sacct_query_parses_and_prefers_squeue(fake_bin):
    query = SacctQuery(user="someone")
    states = query.job_states(["300", "301", "999"])
    assert states["300"].state == "CANCELLED by 0" and run_state_for(states["300"].state) == L.CANCELLED
    assert states["301"].state == "RUNNING" and "999" not in states  # squeue is fresher than sacct
    found = query.find_jobs(name="nope", token="mbl-abc", since=0)
    assert [j.job_id for j in found] == ["301"] and found[0].submit_time is not None
    log = fake_bin.read_text()
    assert "-u someone" in log and "--format=JobIDRaw,State,Submit,Reason,JobName,Comment" in log
    assert "--json" in log  # asked first; this fake answers text, so the delimited form was used


def test_without_slurm_nothing_is_concluded(monkeypatch, tmp_path, mbl):
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue/sacct at all
    with pytest.raises(SlurmUnavailable):
        SacctQuery().job_states(["1"])
    with pytest.raises(SlurmUnavailable):
        SacctQuery().find_jobs(name="x", token="mbl-1", since=0)
    with L.Ledger.open(tmp_path / "l.db") as ledger:
        run = _begin(ledger)
        ledger.conn.execute("UPDATE runs SET submitter='elsewhere:1' WHERE id=?", (run.id,))
        [result] = reconcile_submitting(ledger, SacctQuery(), now=run.created_at + 10_000)
        assert result.outcome == "unknown" and ledger.get_run(run.id).state == L.SUBMITTING  # not "lost"
        submitted = ledger.mark_submitted(run.id, ["5"])
        assert refresh_runs(ledger, SacctQuery(), [submitted])[0].state == L.SUBMITTED
    out = mbl.run("status", str(run.id), "--ledger", str(tmp_path / "l.db"), env={"PATH": str(tmp_path)})
    assert out.returncode == 0 and "Slurm could not be asked" in out.stderr


# ---------------------------------------------------------------------- commands
def test_commands_reconcile_a_killed_submission(tmp_path, fake_bin, mbl):
    db = tmp_path / "l.db"
    info = _crashing_submitter(db)
    with L.Ledger.open(db) as ledger:  # make the fake Slurm's job carry this run's token
        ledger.conn.execute("UPDATE runs SET job_token='mbl-abc', job_name='train-a' WHERE id=?", (info["id"],))
    out = mbl.run("runs", "--ledger", str(db), "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "interrupted during submission" in out.stderr and "301" in out.stderr
    [row] = json.loads(out.stdout)
    assert (row["state"], row["job_ids"]) == ("running", ["301"])
    status = mbl.run("status", "crashy", "--ledger", str(db))
    assert status.returncode == 0 and "running" in status.stdout and "301" in status.stdout
    status_json = json.loads(mbl.run("status", str(info["id"]), "--ledger", str(db), "--format", "json").stdout)
    # found and recorded in one transaction: one event saying how (was two: submitted, then running)
    assert [(e["kind"], e["new_state"]) for e in status_json["events"]][:2] == [("state", "submitting"), ("reconcile", "running")]
    assert status_json["events"][1]["detail"]["found_by"] == "token"


def test_runs_empty_and_logs(tmp_path, fake_bin, mbl):
    db = tmp_path / "l.db"
    empty = mbl.run("runs", "--ledger", str(db))
    assert empty.returncode == 0 and "no runs recorded" in empty.stdout
    log = tmp_path / "train-a-300.out"
    log.write_text("line one\nline two\n")
    with L.Ledger.open(db) as ledger:
        run = _begin(ledger, "train-a", executor="no-such-executor")
        ledger.mark_submitted(run.id, ["300"], log_paths=[str(log)])
    out = mbl.run("logs", "train-a", "--ledger", str(db))
    assert out.returncode == 0 and out.stdout == "line one\nline two\n"
    follow = mbl.run("logs", "train-a", "-f", "--ledger", str(db))  # the job is CANCELLED: prints and ends
    assert follow.returncode == 0 and "line two" in follow.stdout
    missing = mbl.run("logs", "nope", "--ledger", str(db), "--lang", "zh")
    assert missing.returncode == 2 and "台账中没有运行" in missing.stderr


@pytest.fixture
def job_state_bin(tmp_path):
    """squeue/sacct whose answer for job 300 is the content of the file `state` (RUNNING, then
    whatever the test writes), like a job that runs and then ends."""
    bin_dir = tmp_path / "sbin"
    bin_dir.mkdir()
    state = tmp_path / "state"
    state.write_text("RUNNING")
    row = "300\\037%s\\0372026-11-29T20:00:00\\037None\\037train-a\\037\\n"
    (bin_dir / "squeue").write_text(f"#!/bin/sh\ns=$(cat {state}); [ \"$s\" = RUNNING ] && printf '{row}' \"$s\"\nexit 0\n")
    (bin_dir / "sacct").write_text(f"#!/bin/sh\nprintf '{row}' \"$(cat {state})\"\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, state


def _default_sigint() -> None:
    # A test run started in the background of a shell (`bash tests/run-all.sh &`) inherits SIGINT
    # ignored, and so would this child: Ctrl-C must reach it as it does in a terminal.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _submitted_run(tmp_path: Path, first_line: str) -> tuple[Path, Path, L.RunRecord]:
    """(ledger, log, run): run train-a submitted as job 300, its log holding `first_line`."""
    db = tmp_path / "l.db"
    log = tmp_path / "train-a-300.out"
    log.write_text(first_line)
    with L.Ledger.open(db) as ledger:
        run = _begin(ledger, "train-a", executor="no-such-executor")
        ledger.mark_submitted(run.id, ["300"], log_paths=[str(log)])
    return db, log, run


@contextlib.contextmanager
def _following(db: Path, env: dict) -> Iterator[subprocess.Popen]:
    """`logs train-a -f` running; killed on the way out if it still is."""
    proc = popen_cli("logs", "train-a", "-f", "--poll", "0.05", "--ledger", db, env=env, preexec_fn=_default_sigint)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def _read_line(proc: subprocess.Popen, timeout: float = 20) -> str:
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), "no output from logs -f"
        return proc.stdout.readline()


def test_logs_follow_a_growing_log_until_the_job_ends(tmp_path, job_state_bin):
    env, state = job_state_bin
    db, log, run = _submitted_run(tmp_path, "first\n")
    with _following(db, env) as proc:
        assert _read_line(proc) == "first\n"
        for text in ("second", "third"):  # lines appear as the job writes them
            with open(log, "a") as handle:
                handle.write(text + "\n")
            assert _read_line(proc) == text + "\n"
        with open(log, "a") as handle:
            handle.write("last line without newline")
        time.sleep(0.3)
        assert proc.poll() is None  # still following: the job runs
        state.write_text("COMPLETED")
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == "last line without newline"  # printed once the job ended
    with L.Ledger.open(db) as ledger:
        assert ledger.get_run(run.id).state == L.COMPLETED  # reconciled while following


def test_logs_follow_stops_on_ctrl_c(tmp_path, job_state_bin):
    import signal

    env, _state = job_state_bin
    db, _log, _run = _submitted_run(tmp_path, "running\n")
    with _following(db, env) as proc:
        assert _read_line(proc) == "running\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err


def test_plan_save_dir_resolution(tmp_path):
    from plan_fixtures import single_node_h100, with_changes

    plan = single_node_h100()
    assert L.plan_save_dir(plan, "/submit") == "/lustre/ckpt/llama3-8b-sft"
    rel = with_changes(plan, checkpoint={"save": "ckpt/run"}, launch={"workdir": "work"})
    assert L.plan_save_dir(rel, "/submit") == "/submit/work/ckpt/run"
    no_workdir = with_changes(rel, launch={"workdir": None})
    assert L.plan_save_dir(no_workdir, "/submit") == "/submit/ckpt/run"
    assert L.plan_save_dir(with_changes(plan, checkpoint={"save": None}), "/submit") is None


# ---------------------------------------------------------------------- on the real local Slurm
@pytest.mark.slurm
@pytest.mark.parametrize("killed", ["before_sbatch", "after_sbatch"])
def test_e2e_kill_between_ledger_write_and_sbatch(slurm_env, slurm_cluster, shared_dir, tmp_path, killed, mbl):
    """kill -9 of the submitting process right after the `submitting` row (before sbatch) or right
    after sbatch (before the job id is written): the next command reconciles with squeue/sacct."""
    from mbridge_launch.plan.model import save_plan
    from watch_fixtures import e2e_plan

    name = f"reconcile-{killed}-{os.getpid()}-{int(time.time())}"
    plan, _save = e2e_plan(shared_dir, name, train_iters=3, save_interval=10, env={}, auto=False)
    plan_path = save_plan(plan, tmp_path / "plan.yaml")
    db = tmp_path / "l.db"
    code = textwrap.dedent(f"""
        import os
        from mbridge_launch.executors.launch import render_plan, schedule
        from mbridge_launch.runs.ledger import Ledger, plan_save_dir
        from mbridge_launch.plan.model import load_plan
        plan = load_plan({str(plan_path)!r})
        ledger = Ledger.open({str(db)!r})
        run = ledger.begin_submission(name=plan.name, plan_hash=plan.plan_hash(), plan_yaml=plan.to_yaml(),
                                      executor="sbatch", work_dir={str(shared_dir)!r},
                                      save_dir=plan_save_dir(plan, {str(shared_dir)!r}))
        if {killed!r} == "after_sbatch":  # with the token in the job's comment, as the gate passes it
            schedule(render_plan(plan, "sbatch", {str(shared_dir)!r}), run.job_token)
        os.kill(os.getpid(), 9)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == -9, proc.stderr
    out = mbl.run("runs", "--ledger", str(db), "--format", "json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    if killed == "before_sbatch":
        assert row["state"] == "lost" and row["job_ids"] == [] and "marked lost" in out.stderr
        return
    assert row["state"] in ("pending", "running", "completed") and len(row["job_ids"]) == 1, (row, out.stderr)
    job = row["job_ids"][0]
    assert slurm_cluster.scontrol_job(job)["JobName"] == name
    assert slurm_cluster.wait(job, timeout=120) == "COMPLETED"
    status = json.loads(mbl.run("status", name, "--ledger", str(db), "--format", "json").stdout)
    assert status["state"] == "completed" and any(e["kind"] == "reconcile" for e in status["events"])


@pytest.mark.parametrize("ref", ["²", "#99999999999999999999", "#٣"])
def test_odd_run_references_are_not_found_not_internal_errors(ledger, ref):
    # '²' passes str.isdigit but not int(); 20 digits overflow SQLite's integer
    _begin(ledger)
    with pytest.raises(UserError) as err:
        ledger.get_run(ref)
    assert err.value.key == "ledger.run_not_found"


# ---------------------------------------------------------------------- parsing Slurm's answers (issue 13)
def test_json_answers_of_22_05_and_newer_slurm_read_the_same():
    from mbridge_launch.runs import slurm_jobs as S

    old = {"jobs": [{"job_id": 7, "name": "a|b", "job_state": "PENDING", "submit_time": 1700000000,
                     "comment": "mbl-1", "state_reason": "BeginTime", "restart_cnt": 2, "user_name": "u"},
                    {"job_id": 8, "name": "theirs", "job_state": "RUNNING", "user_name": "someone-else"}]}
    new = {"jobs": [{"job_id": 7, "name": "a|b", "job_state": ["PENDING", "REQUEUED"],
                     "submit_time": {"set": True, "infinite": False, "number": 1700000000}, "comment": "mbl-1",
                     "state_reason": "BeginTime", "restart_cnt": {"set": True, "number": 2}, "user_name": "u"}]}
    for answer in (old, new):
        [job] = S._json_jobs(json.dumps(answer), S._squeue_job, user_key="user_name", user="u")
        assert job == S.JobInfo("7", "a|b", "PENDING", 1700000000.0, "mbl-1", "BeginTime", 2)
    sacct = {"jobs": [{"job_id": 9, "name": "x|y", "user": "u", "state": {"current": ["CANCELLED"], "reason": "None"},
                       "time": {"submission": {"number": 1700000001}}, "comment": {"job": "mbl-2"}}]}
    [job] = S._json_jobs(json.dumps(sacct), S._sacct_job, user_key="user", user="u")
    assert (job.job_id, job.name, job.state, job.submit_time, job.comment) == ("9", "x|y", "CANCELLED", 1700000001.0, "mbl-2")
    assert S._json_jobs("squeue: unrecognized option '--json'", S._squeue_job, user_key="user_name", user="u") is None


def test_delimited_rows_keep_free_text_last():
    from mbridge_launch.runs.slurm_jobs import FIELD_SEP, _delimited_jobs

    row = FIELD_SEP.join(["12", "RUNNING", "2026-11-29T20:00:00", "None", "x|RUNNING|2020-01-01T00:00:00|", "c|d"])
    [job] = _delimited_jobs(row + "\nnot a row\n")
    assert (job.job_id, job.state, job.name, job.comment) == ("12", "RUNNING", "x|RUNNING|2020-01-01T00:00:00|", "c|d")
    assert job.submit_time is not None


def test_submit_failed_after_the_call_is_reconciled_and_a_refusal_is_not(ledger):
    from mbridge_launch.base.errors import SubmissionError

    slurm = FakeSlurm()
    for error, definite in ((TimeoutError("sbatch hung"), False),
                            (SubmissionError("executors.submit_refused", reason="bad partition"), True)):
        with pytest.raises(type(error)), ledger.submission(name="w", plan_hash=f"h{definite}", plan_yaml="x",
                                                           executor="sbatch") as sub:
            def fail(error=error):
                raise error
            sub.call_scheduler(fail)
        run = ledger.get_run(sub.record.id)
        assert (run.state, run.may_have_job) == (L.SUBMIT_FAILED, 0 if definite else 1)
        slurm.jobs.append(JobInfo(f"7{int(definite)}", "w", "RUNNING", time.time(), comment=run.job_token))
    [result] = reconcile_submitting(ledger, slurm)  # only the one that may have a job is looked for
    found = ledger.get_run(result.run_id)
    assert (result.outcome, found.state, found.job_ids, found.error) == ("submitted", L.RUNNING, ["70"], None)
    assert reconcile_submitting(ledger, slurm) == []
