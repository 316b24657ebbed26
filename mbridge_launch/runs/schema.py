"""The ledger's SQLite schema and its migrations.

The schema version lives in `PRAGMA user_version`. MIGRATIONS[i] takes a database at version i to
version i + 1; each runs in one transaction together with the version bump, so a crash during a
migration leaves the database at the old version, never half-migrated. Never edit a migration
that has shipped: append a new one.
"""

from __future__ import annotations

import sqlite3

_V1 = """
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL,
    plan_hash     TEXT NOT NULL,
    plan_path     TEXT,
    plan_yaml     TEXT NOT NULL,             -- a copy: the plan file may be edited later
    executor      TEXT NOT NULL,
    cluster       TEXT NOT NULL DEFAULT '{}', -- JSON: the plan's cluster section
    job_name      TEXT,                      -- the Slurm job name the executor used
    job_token     TEXT NOT NULL UNIQUE,      -- unique per submission; reconcile matches it in a job's comment or name
    job_ids       TEXT NOT NULL DEFAULT '[]', -- JSON list, first = main job
    script_path   TEXT,
    script_text   TEXT,
    work_dir      TEXT,
    save_dir      TEXT,
    log_paths     TEXT NOT NULL DEFAULT '[]', -- JSON list
    state         TEXT NOT NULL,
    slurm_state   TEXT,                      -- the raw Slurm state last seen
    submitter     TEXT,                      -- "host:pid" of the process that called the scheduler
    parent_run_id INTEGER REFERENCES runs(id), -- set on a resubmission (after a rollback)
    created_at    REAL NOT NULL,
    submitted_at  REAL,
    updated_at    REAL NOT NULL,
    error         TEXT
);
CREATE INDEX runs_name ON runs(name);
CREATE INDEX runs_state ON runs(state);
CREATE INDEX runs_plan_hash ON runs(plan_hash);

CREATE TABLE events (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id    INTEGER REFERENCES runs(id),
    at        REAL NOT NULL,
    kind      TEXT NOT NULL,                 -- state, reconcile, reconcile_ambiguous, cancel, rollback, watch_trigger, watcher_job, watcher_job_failed
    old_state TEXT,
    new_state TEXT,
    detail    TEXT NOT NULL DEFAULT '{}'     -- JSON
);
CREATE INDEX events_run ON events(run_id);

CREATE TABLE confirmations (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  INTEGER REFERENCES runs(id),
    at      REAL NOT NULL,
    action  TEXT NOT NULL,                   -- submit, cancel, rollback, undo, resubmit
    method  TEXT NOT NULL,                   -- typed-name, typed-yes, flag-yes, auto-rollback (the watcher, by the plan's consent)
    user    TEXT,
    detail  TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE overrides (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  INTEGER REFERENCES runs(id),
    at      REAL NOT NULL,
    kind    TEXT NOT NULL,                   -- preflight (--force past errors), accepted (a plan's accepted check), convergence (a convergence change)
    reason  TEXT NOT NULL,
    user    TEXT,
    detail  TEXT NOT NULL DEFAULT '{}'       -- JSON: the checks overridden, or the change
);

CREATE TABLE rollbacks (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     INTEGER REFERENCES runs(id),  -- NULL for a bare checkpoint directory
    save_dir   TEXT NOT NULL,
    stamp      TEXT NOT NULL,                -- rolled_back/<stamp>/ under save_dir
    to_iter    INTEGER NOT NULL,
    from_iter  INTEGER,
    state      TEXT NOT NULL,                -- started, done, undoing, undone
    journal    TEXT NOT NULL,                -- JSON copy of ROLLBACK.json: everything undo needs
    trigger    TEXT,                         -- JSON: what the watcher saw (NULL when by hand)
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (save_dir, stamp)
);
"""

# v2: the auto-rollback watcher job that follows a run (gate.watcher_job.submit_watcher_job), so that
# `cancel` can stop it and `status` can show it. NULL for runs without one (all v1 rows).
_V2 = """
ALTER TABLE runs ADD COLUMN watcher_job_id TEXT;
"""

# v3: the submission window (issue 13). `scheduler_called_at`: when the scheduler was called, so a
# run that failed after that (Ctrl-C, a timeout, kill -9) is known to maybe have a job;
# `may_have_job` (0/1): reconcile still has to look for its job by token (cleared once the job is
# recorded, Slurm definitely refused it, or reconcile found none). v2 rows read as 0: never called.
_V3 = """
ALTER TABLE runs ADD COLUMN scheduler_called_at REAL;
ALTER TABLE runs ADD COLUMN may_have_job INTEGER NOT NULL DEFAULT 0;
"""

MIGRATIONS: list[str] = [_V1, _V2, _V3]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database up to SCHEMA_VERSION; returns the version found before. A database
    written by a newer mbridge-launch is refused rather than guessed at."""
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        from mbridge_launch.base.errors import UserError

        raise UserError("ledger.schema_too_new", found=found, supported=SCHEMA_VERSION)
    for version in range(found, SCHEMA_VERSION):
        # executescript would COMMIT implicitly; run statement by statement inside one transaction.
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current > version:
                conn.execute("COMMIT")
                continue
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return found


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
