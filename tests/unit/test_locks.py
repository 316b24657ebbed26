"""One lock helper (base/locks.py) for the watcher and the rollback: only "another process holds
it" reads as held; a file system without flock is reported as what it is."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest

from mbridge_launch.base import locks
from mbridge_launch.base.errors import CheckFailed, UserError
from mbridge_launch.rollback.journal import SaveDirLock
from mbridge_launch.watch.watcher import _exclusive


def test_a_second_lock_is_held_until_the_first_is_released(tmp_path):
    path = tmp_path / "x.lock"
    fd = locks.lock_file(path)
    try:
        with pytest.raises(locks.LockHeld):
            locks.lock_file(path)  # another open file description: flock refuses it
    finally:
        os.close(fd)
    os.close(locks.lock_file(path))


def test_the_watcher_lock_is_held_by_a_second_watcher(tmp_path):
    with _exclusive(tmp_path / "watch-1.lock", "run-a"):
        with pytest.raises(CheckFailed) as err:
            with _exclusive(tmp_path / "watch-1.lock", "run-a"):
                pass
    assert err.value.key == "watch.already_watching"


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP])
def test_a_file_system_without_flock_is_not_reported_as_already_watching(tmp_path, monkeypatch, code):
    def no_locks(fd, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(UserError) as err:
        with _exclusive(tmp_path / "watch-1.lock", "run-a", wait_s=5.0):  # no waiting: it will not get better
            pass
    assert err.value.key == "watch.lock_failed" and not isinstance(err.value, CheckFailed)
    assert os.strerror(code) in err.value.render("en") and str(tmp_path) in err.value.render("en")
    assert os.strerror(code) in err.value.render("zh")
    with pytest.raises(UserError) as err:
        SaveDirLock(tmp_path).acquire()
    assert err.value.key == "rollback.lock_failed"


def test_held_errnos_mean_held(tmp_path, monkeypatch):
    monkeypatch.setattr(fcntl, "flock", lambda fd, op: (_ for _ in ()).throw(OSError(errno.EAGAIN, "busy")))
    with pytest.raises(CheckFailed) as err:
        SaveDirLock(tmp_path).acquire()
    assert err.value.key == "rollback.locked"
