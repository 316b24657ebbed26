"""runs.ledger.Ledger.transaction leaves no transaction open whatever point an exception is raised
at: the watcher job's SIGTERM handler raises between any two statements (e2e: a SIGTERM right after
BEGIN left one open and the successor's hand-over failed with "cannot start a transaction within a
transaction")."""

from __future__ import annotations

import pytest

from mbridge_launch.runs import ledger as L


class Interrupted(Exception):
    """What a signal handler raises (watch.watcher.Terminated)."""


class InterruptAfter:
    """The ledger's connection, with an exception raised just after the statement `after` ran."""

    def __init__(self, conn, after: str) -> None:
        self._conn, self._after = conn, after

    def execute(self, sql, *args):
        result = self._conn.execute(sql, *args)
        if sql == self._after:
            raise Interrupted(sql)
        return result

    def __getattr__(self, name):
        return getattr(self._conn, name)


@pytest.mark.parametrize("after", ["BEGIN IMMEDIATE", "SELECT 1"])
def test_an_exception_at_any_point_leaves_no_transaction_open(tmp_path, after):
    with L.Ledger.open(tmp_path / "ledger.db") as ledger:
        real = ledger.conn
        ledger.conn = InterruptAfter(real, after)
        with pytest.raises(Interrupted):
            with ledger.transaction() as conn:
                conn.execute("SELECT 1")
        assert not real.in_transaction
        ledger.conn = real
        with ledger.transaction() as conn:  # the next transaction starts
            conn.execute("SELECT 1")
        assert not real.in_transaction


def test_an_exception_after_commit_rolls_nothing_back(tmp_path):
    with L.Ledger.open(tmp_path / "ledger.db") as ledger:
        real = ledger.conn
        real.execute("CREATE TABLE t(x)")
        ledger.conn = InterruptAfter(real, "COMMIT")
        with pytest.raises(Interrupted):
            with ledger.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (1)")
        ledger.conn = real
        assert not real.in_transaction and real.execute("SELECT count(*) FROM t").fetchone()[0] == 1
