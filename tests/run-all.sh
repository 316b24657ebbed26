#!/usr/bin/env bash
# run-all.sh - THE test command: from a fresh Debian 12 machine (as root) to the whole suite.
#
#   bash tests/run-all.sh [PYTEST ARGS...]
#
# 1. installs the Slurm / munge / MariaDB / gcc / libslurm-dev / libpmix-dev / python3-venv
#    packages when missing (tests/cluster/install-packages.sh: apt-get update once, then install),
# 2. creates .venv with `python3 -m venv` when missing and `pip install -e '.[test]'` (skipped when
#    pyproject.toml has not changed since the last install),
# 3. runs `python -m pytest` over the whole suite, slurm and network tests included; the session
#    fixture in tests/conftest.py starts the local Slurm cluster (tests/cluster/start-cluster.sh)
#    when it is not running and stops it at the end if it started it,
# 4. stops the cluster if it is still running here but was not before (pytest killed mid-way).
#
# A cluster that cannot start is a failure here (MBL_REQUIRE_SLURM=1, unless set to 0).
# Pytest's "no tests collected" (exit 5) is a failure. Env: MBL_SLURM_DIR (cluster directory),
# MBL_TEST_TIMEOUT (per-test limit, seconds, default 900), PYTHON (default python3).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python3}
SLURM_DIR=${MBL_SLURM_DIR:-/tmp/mbl-slurm}
export MBL_REQUIRE_SLURM=${MBL_REQUIRE_SLURM:-1}
t_all=$SECONDS
step() { printf '\n== %s\n' "$*"; }
die() { printf '\nrun-all: FAILED: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- 1. system packages
step "system packages"
t=$SECONDS
if tests/cluster/install-packages.sh --check >/dev/null; then
  echo "all present"
else
  tests/cluster/install-packages.sh || die "package installation failed"
fi
t_pkgs=$((SECONDS - t))

# ---------------------------------------------------------------- 2. virtual environment
step "python environment (.venv)"
t=$SECONDS
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv || die "python3 -m venv .venv failed"
fi
stamp=.venv/.mbl-test-install
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && .venv/bin/python -c 'import mbridge_launch, pytest' 2>/dev/null; then
  echo "up to date ($(.venv/bin/python -V))"
else
  piplog=.venv/pip-install.log
  if ! .venv/bin/python -m pip install -e '.[test]' >"$piplog" 2>&1; then
    tail -n 30 "$piplog" >&2
    die "pip install -e '.[test]' failed (full log: $piplog)"
  fi
  echo "$want" >"$stamp"
  echo "installed ($(.venv/bin/python -V))"
fi
t_venv=$((SECONDS - t))

# ---------------------------------------------------------------- 3. the suite
slurm_up() { [ -s "$SLURM_DIR/run/slurmctld.pid" ] && kill -0 "$(cat "$SLURM_DIR/run/slurmctld.pid")" 2>/dev/null; }
was_up=0
slurm_up && was_up=1
step "pytest (whole suite; local Slurm cluster in $SLURM_DIR: $([ $was_up = 1 ] && echo 'already running, reused' || echo 'started by the tests'))"
t=$SECONDS
.venv/bin/python -m pytest -p no:cacheprovider --timeout="${MBL_TEST_TIMEOUT:-900}" "$@"
rc=$?
t_tests=$((SECONDS - t))

# ---------------------------------------------------------------- 4. leftovers
if [ $was_up = 0 ] && slurm_up; then
  step "stopping the cluster left running by an interrupted session"
  tests/cluster/stop-cluster.sh "$SLURM_DIR" || true
fi

case $rc in
  0) verdict="PASSED" ;;
  5) verdict="FAILED: pytest collected no tests (exit 5)" rc=1 ;;
  *) verdict="FAILED: pytest exit $rc" ;;
esac
printf '\nrun-all: %s  (packages %ss, venv %ss, tests %ss, total %ss)\n' \
  "$verdict" "$t_pkgs" "$t_venv" "$t_tests" "$((SECONDS - t_all))"
exit $rc
