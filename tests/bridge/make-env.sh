#!/usr/bin/env bash
# make-env.sh - the Megatron Bridge conformance tier's Python 3.12 environment, built once and cached.
#
#   bash tests/bridge/make-env.sh             # prints progress on stderr, the env's path on the last line
#   bash tests/bridge/make-env.sh --existing  # only the path of an env already built for these pins
#                                             # (exit 3 when there is none; never builds)
#
# Megatron Bridge 0.6.2 installs only on Python 3.12 (Requires-Python >=3.12,<3.13), while the
# project itself runs on 3.10-3.12, so the tier gets its own venv, outside the clone (it is about
# 6 GB: PyPI's torch is the CUDA build) and keyed by what it contains:
#   ${MBL_BRIDGE_CACHE:-$HOME/.cache/mbridge-launch}/bridge-env-<sha256 of requirements-bridge.txt,
#   this script and the interpreter's version and path, first 16 hex digits>
# A key that exists is a finished build: the venv is built under a temporary name and renamed to
# its key only after every install and the import check passed, so an interrupted or failed build
# is never taken as done (its leftovers are removed by the next run). A lock file serialises two
# runs that race for the same key.
#
# Python 3.12 is looked for in: $PYTHON312, `python3.12` on PATH, pyenv's versions
# ($PYENV_ROOT or ~/.pyenv, newest 3.12.x first). Debian 12 ships only 3.11, so on a clean Debian
# 12 machine without pyenv there is none: then the script prints a loud SKIP line and exits with
# status 77 (the automake/meson "skipped" status), which the caller reports as a skipped tier.
# MBL_BRIDGE_SKIP_STATUS overrides that status (0 makes a missing 3.12 a silent success).
#
# The transformer_engine import shim (tests/bridge/shim) is not installed here: the tier's code puts
# it on sys.path when it runs, so that editing the shim does not rebuild 6 GB of packages.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REQS=$HERE/requirements-bridge.txt
CACHE=${MBL_BRIDGE_CACHE:-$HOME/.cache/mbridge-launch}
PIP_VERSION=26.3   # pip inside the env; the venv's bundled pip (23.x on 3.12.1) resolves far slower
SKIP_STATUS=${MBL_BRIDGE_SKIP_STATUS:-77}
t0=$SECONDS
log() { printf 'make-env: %s\n' "$*" >&2; }

is_py312() { "$1" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }

find_python312() {
  local c
  if [ -n "${PYTHON312:-}" ]; then
    is_py312 "$PYTHON312" && { command -v "$PYTHON312"; return 0; }
    log "PYTHON312=$PYTHON312 is not a working Python 3.12 with venv; looking elsewhere"
  fi
  if c=$(command -v python3.12 2>/dev/null) && is_py312 "$c"; then echo "$c"; return 0; fi
  local root=${PYENV_ROOT:-$HOME/.pyenv}
  # newest patch release first (sort -V orders 3.12.10 after 3.12.9)
  for c in $(ls -d "$root"/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV); do
    is_py312 "$c" && { echo "$c"; return 0; }
  done
  return 1
}

if ! PY=$(find_python312); then
  printf '\n%s\n' "################################################################################" >&2
  printf 'SKIP: Megatron Bridge tier: no Python 3.12 found (PYTHON312, python3.12 on PATH, pyenv); %s\n' \
    "megatron-bridge 0.6.2 needs Python >=3.12,<3.13 (exit status $SKIP_STATUS)" >&2
  printf '%s\n' "################################################################################" >&2
  echo "SKIP no-python312"
  exit "$SKIP_STATUS"
fi
PYV=$("$PY" -c 'import sys, platform; print(sys.version.split()[0], platform.machine())')
PY_REAL=$(readlink -f "$PY")

key=$({ cat "$REQS" "${BASH_SOURCE[0]}"; echo "$PYV $PY_REAL"; } | sha256sum | cut -c1-16)
ENV=$CACHE/bridge-env-$key
mkdir -p "$CACHE"

if [ -x "$ENV/bin/python" ]; then
  log "cached: $ENV ($((SECONDS - t0))s)"
  echo "$ENV"
  exit 0
fi
if [ "${1:-}" = "--existing" ]; then
  log "not built yet: $ENV (bash tests/bridge/make-env.sh builds it, about 10 minutes and 7 GB)"
  exit 3
fi

exec 9>"$CACHE/bridge-env-$key.lock"
flock 9   # a concurrent run for the same key waits here, then finds the finished env below
if [ -x "$ENV/bin/python" ]; then
  log "cached (built by a concurrent run): $ENV ($((SECONDS - t0))s)"
  echo "$ENV"
  exit 0
fi
rm -rf "$CACHE/bridge-env-$key".tmp.*   # leftovers of an interrupted build of this key
TMP=$CACHE/bridge-env-$key.tmp.$$
FAILLOG=$CACHE/bridge-env-$key.failed.log
# a failed build leaves only its pip log (for the reader of the failure), never a half env
trap 'cp "$TMP/pip-install.log" "$FAILLOG" 2>/dev/null; rm -rf "$TMP"' EXIT

log "building $ENV with $PY ($PYV); the first build downloads about 3 GB"
"$PY" -m venv "$TMP"
"$TMP/bin/python" -m pip install --quiet --disable-pip-version-check "pip==$PIP_VERSION"
t=$SECONDS
# 1. everything but the two Megatron packages, with normal dependency resolution; every package is
#    pinned, so the resolution can only confirm the pins (checked in 3)
grep -v -- '# --no-deps' "$REQS" >"$TMP/reqs-deps.txt"
"$TMP/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
  -r "$TMP/reqs-deps.txt" >"$TMP/pip-install.log" 2>&1 || { tail -n 30 "$TMP/pip-install.log" >&2; exit 1; }
# 2. the Megatron packages themselves, without their dependency lists (see requirements-bridge.txt)
grep -- '# --no-deps' "$REQS" | sed 's/[[:space:]]*#.*//' >"$TMP/reqs-nodeps.txt"
"$TMP/bin/python" -m pip install --disable-pip-version-check --progress-bar off --no-deps \
  -r "$TMP/reqs-nodeps.txt" >>"$TMP/pip-install.log" 2>&1 || { tail -n 30 "$TMP/pip-install.log" >&2; exit 1; }
t_pip=$((SECONDS - t))
# 3. the env holds exactly the pinned packages: nothing unpinned came in with a dependency
#    (-I: isolated, so that the caller's cwd, e.g. the clone with its egg-info, is not on sys.path)
"$TMP/bin/python" -I - "$REQS" <<'PYEOF'
import re, sys
from importlib import metadata
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
want = {}
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        name, version = line.split("==")
        want[norm(name)] = version
have = {norm(d.metadata["Name"]): d.version for d in metadata.distributions()}
have.pop("pip", None)
bad = sorted(f"{n}: pinned {want.get(n)}, installed {have.get(n)}"
             for n in set(want) | set(have) if want.get(n) != have.get(n))
if bad:
    sys.exit("make-env: the env differs from requirements-bridge.txt:\n  " + "\n  ".join(bad))
PYEOF
# 4. the heavy packages import (megatron.bridge itself needs the shim, which the tier adds at run time)
"$TMP/bin/python" -I -c 'import torch, megatron.core, transformers' \
  || { log "import check failed"; exit 1; }
# the venv was made under $TMP: point its scripts (pip, activate, ...) at the final path
grep -lIr --null -- "$TMP" "$TMP/bin" | xargs -0 -r sed -i "s|$TMP|$ENV|g"
size=$(du -sm "$TMP" | cut -f1)
printf 'python %s (%s)\nbuilt %s in %ss (pip %ss)\nsize %s MB\n' "$PYV" "$PY_REAL" \
  "$(date -u +%FT%TZ)" "$((SECONDS - t0))" "$t_pip" "$size" >"$TMP/BUILD-INFO"
mv -T "$TMP" "$ENV"
trap - EXIT
rm -f "$FAILLOG"
log "built $ENV in $((SECONDS - t0))s (pip ${t_pip}s), ${size} MB"
echo "$ENV"
