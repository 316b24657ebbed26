"""Shared fixtures.

- `slurm_cluster` (session): the local Slurm cluster of tests/cluster, started once per session
  when it is not already running (see tests/slurmcluster.py for the object's API). Tests that use
  it are marked `slurm` automatically; tests marked `slurm` get it started even if they do not ask
  for it. If it cannot start they SKIP with the start log's tail, unless CI=true or
  MBL_REQUIRE_SLURM=1, where that is an error.
- `slurm_env` (function): os.environ patched with the cluster's SLURM_CONF, for code under test
  that calls sbatch/squeue in-process.
- `standin_trainer` (session): absolute Path of tests/standin_trainer.py;
  `standin_entry`: [sys.executable, that path] (a Plan's launch.entry).
- `mbl` (session): the command line in a fresh process, `mbl.run(*args, env=..., cwd=..., input=...,
  timeout=...)` (tests/cli_helpers.py; `run_cli` there is the same as a plain function).
- `shared_dir` (function): a fresh directory every fake node sees, NOT under /tmp (preflight may
  refuse /tmp for checkpoints): <repo>/.state/test-shared/<session>/<test> (or, when the checkout
  itself is on node-local storage such as /tmp, /var/lib/mbridge-launch-tests/...), or under
  $MBL_SHARED_DIR.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

# A suite started in the background by a non-interactive shell (`nohup ... &`) inherits SIGINT
# ignored, and a process that starts with SIGINT ignored keeps it ignored: every test of Ctrl-C
# handling would then fail for the launcher's sake. A Python handler here is reset to the default
# at exec, so the processes the tests start get a working SIGINT too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import cli_helpers
import slurmcluster

REPO = Path(__file__).resolve().parents[1]
# a message key missing from mbridge_launch/messages raises instead of printing the key (in this
# process and in every command the tests start)
os.environ["MBRIDGE_LAUNCH_STRICT_MESSAGES"] = "1"
# Policy files (mbridge_launch/policy): the suite must not read a developer's own user policy
# (~/.config/mbridge-launch/policy.yaml), so the user file is looked for in an empty directory;
# the policy tests set HOME / XDG_CONFIG_HOME / the working directory themselves.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="mbl-test-xdg-")
# Catalogs (base/data_dirs.py): a developer's own synced catalogs (~/.local/share/mbridge-launch/
# catalogs, $MBRIDGE_LAUNCH_CATALOGS) must not change what the suite plans with: an empty data folder
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="mbl-test-xdg-data-")
os.environ.pop("MBRIDGE_LAUNCH_CATALOGS", None)
STANDIN = Path(__file__).resolve().parent / "standin_trainer.py"


def _slurm_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("MBL_REQUIRE_SLURM") == "1"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slurm") is None:
            item.add_marker(pytest.mark.slurm)


_outcome: dict[str, str] = {}


@pytest.fixture(scope="session")
def slurm_cluster():
    directory = slurmcluster.default_dir()
    try:
        cluster, started = slurmcluster.acquire(directory)
    except slurmcluster.StartFailed as exc:
        if _slurm_required():
            pytest.fail(f"{exc}\n(CI=true or MBL_REQUIRE_SLURM=1: a cluster that cannot start is a failure)",
                        pytrace=False)
        pytest.skip(f"local Slurm cluster unavailable: {exc}")
    _outcome["start"] = f"started in {directory}" if started else f"reused the cluster running in {directory}"
    try:
        yield cluster
    finally:
        _outcome["end"] = slurmcluster.release(directory)


@pytest.fixture(autouse=True)
def _each_test_starts_in_the_default_language():
    """`main(["--lang", "zh", ...])` sets the process's language (base/i18n.set_lang), and an
    in-process CLI test would leave it to the next test: every test starts from the default."""
    from mbridge_launch.base.i18n import set_lang

    set_lang(None)
    yield
    set_lang(None)


@pytest.fixture(autouse=True)
def _slurm_marked_tests_get_the_cluster(request):
    if request.node.get_closest_marker("slurm") is not None:
        request.getfixturevalue("slurm_cluster")


@pytest.fixture
def slurm_env(slurm_cluster, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.slurm_conf)
    monkeypatch.setenv("MBL_SLURM_DIR", str(slurm_cluster.dir))
    return slurm_cluster.env


@pytest.fixture(scope="session")
def standin_trainer() -> Path:
    return STANDIN


@pytest.fixture(scope="session")
def standin_entry() -> list[str]:
    return [sys.executable, str(STANDIN)]


def _pid_of(name: str) -> int | None:
    m = re.fullmatch(r"s(\d+)", name)
    return int(m.group(1)) if m else None


# Where the shared directory goes when the checkout itself sits on node-local storage (a clone
# under /tmp, as CI may make): preflight would rightly refuse checkpoints there.
FALLBACK_SHARED_BASE = Path("/var/lib/mbridge-launch-tests/test-shared")


def _shared_base() -> Path:
    if os.environ.get("MBL_SHARED_DIR"):
        return Path(os.environ["MBL_SHARED_DIR"])
    from mbridge_launch.preflight.storage import storage_kind

    in_repo = REPO / ".state" / "test-shared"
    kind, _ = storage_kind(in_repo, env={})
    return FALLBACK_SHARED_BASE if kind == "node_local" else in_repo


@pytest.fixture(scope="session")
def _shared_root() -> Path:
    base = _shared_base()
    base.mkdir(parents=True, exist_ok=True)
    for old in base.iterdir():  # earlier sessions' directories, once their process is gone
        pid = _pid_of(old.name)
        if pid is not None and pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(old, ignore_errors=True)
    root = base / f"s{os.getpid()}"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture
def shared_dir(_shared_root, request) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    d = _shared_root / name
    n = 1
    while d.exists():
        n += 1
        d = _shared_root / f"{name}-{n}"
    d.mkdir(parents=True)
    return d


def pytest_terminal_summary(terminalreporter):
    if _outcome:
        terminalreporter.write_line(
            f"local Slurm cluster: {_outcome.get('start', '?')}; at the end: {_outcome.get('end', '?')}")


@pytest.fixture
def english():
    """Messages in English for in-process checks of message text, whatever the locale."""
    from mbridge_launch.base import i18n

    i18n.set_lang("en")
    yield
    i18n.set_lang(None)


@pytest.fixture(scope="session")
def mbl() -> cli_helpers.Mbl:
    """The command line in a fresh process: `mbl.run(*args, env=, cwd=, input=, timeout=, lang=)`
    returns a result with .rc/.returncode, .stdout, .stderr and .json(); `mbl.popen(...)` starts
    one without waiting (tests/cli_helpers.py says what the environment and defaults are)."""
    return cli_helpers.Mbl()
