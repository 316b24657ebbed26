"""Where the tool keeps its own files: the state directory (the ledger) and the cache (preflight's
--on-nodes output). Both follow the XDG base directories unless an MBRIDGE_LAUNCH_* variable says
otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

STATE_ENV = "MBRIDGE_LAUNCH_STATE_DIR"
CACHE_ENV = "MBRIDGE_LAUNCH_CACHE_DIR"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(STATE_ENV):
        return Path(env[STATE_ENV]).expanduser()
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]).expanduser() / "mbridge-launch"
    return Path.home() / ".local" / "state" / "mbridge-launch"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Preflight's own cache (the only place it writes, and only for --on-nodes output)."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]) / "preflight"
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mbridge-launch" / "preflight"
