"""`catalog sync --python PY`: find the Megatron Bridge installed in another Python (a training
container's, a venv's) and sync from its installed sources.

That Python is asked where the `megatron.bridge` package lies, without importing it (its import
pulls in torch and Megatron Core): `importlib.util.find_spec` imports only the parent `megatron`
namespace package. The folder above `megatron/` is then read like any source tree (an installed
site-packages holds the dist-info METADATA with the version; an editable checkout has
package_info.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mbridge_launch.base.errors import UserError

PROBE_TIMEOUT_S = 120  # a cold container file system can take tens of seconds to start Python

PROBE = """
import importlib.util, json
try:
    spec = importlib.util.find_spec("megatron.bridge")
except (ImportError, ValueError):
    spec = None
locations = list(spec.submodule_search_locations or []) if spec is not None else []
print(json.dumps(locations[0] if locations else None))
"""


def installed_bridge_root(python: str) -> Path:
    """The folder holding `megatron/bridge` in `python`'s installation; one line when that
    Python cannot be run or has no Megatron Bridge."""
    try:
        proc = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError("catalog.sync.no_python", python=python,
                        reason=f"no answer within {PROBE_TIMEOUT_S} s") from None
    except OSError as exc:
        raise UserError("catalog.sync.no_python", python=python, reason=exc.strerror or str(exc)) from None
    lines = proc.stdout.strip().splitlines()
    try:
        package = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except ValueError:
        package = None
    if not isinstance(package, str):
        raise UserError("catalog.sync.no_bridge", python=python)
    return Path(package).parent.parent  # .../megatron/bridge -> the folder holding megatron/
