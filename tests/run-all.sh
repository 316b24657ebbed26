#!/usr/bin/env bash
# run-all.sh - THE test command: from a fresh Debian 12 machine (as root) to the whole suite.
#
#   bash tests/run-all.sh [PYTEST ARGS...]
#
# 1. installs the Slurm / munge / MariaDB / gcc / libslurm-dev / libpmix-dev / python3-venv
#    packages when missing (tests/cluster/install-packages.sh: apt-get update once, then install),
# 2. creates .venv with `python3 -m venv` when missing and `pip install -e '.[all,test]'` (every
#    executor's library and the dev tools; skipped when pyproject.toml has not changed since the
#    last install),
# 2b. builds the Megatron Bridge tier's Python 3.12 env when missing (tests/bridge/make-env.sh,
#    cached outside the clone; no Python 3.12 = the tier is skipped, loudly),
# 3. lints: `ruff check` ([tool.ruff]), mypy against its baseline (tests/tooling/mypy_baseline.py:
#    no new errors, and a baseline that only shrinks) and `lint-imports` (the import-linter
#    contracts of [tool.importlinter], tests/tooling/lint-imports.sh); a failing lint fails the run
#    (the tests still run, so one run reports everything),
# 4. runs `python -m pytest` over the whole suite, slurm and network tests included; the session
#    fixture in tests/conftest.py starts the local Slurm cluster (tests/cluster/start-cluster.sh)
#    when it is not running and stops it at the end if it started it,
# 5. stops the cluster if it is still running here but was not before (pytest killed mid-way).
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
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && .venv/bin/python -c 'import mbridge_launch, pytest, nemo_run, submitit' 2>/dev/null; then
  echo "up to date ($(.venv/bin/python -V))"
else
  piplog=.venv/pip-install.log
  if ! .venv/bin/python -m pip install -e '.[all,test]' >"$piplog" 2>&1; then
    tail -n 30 "$piplog" >&2
    die "pip install -e '.[all,test]' failed (full log: $piplog)"
  fi
  echo "$want" >"$stamp"
  echo "installed ($(.venv/bin/python -V))"
fi
t_venv=$((SECONDS - t))

# ---------------------------------------------------------------- 2b. the Megatron Bridge tier's env
# tests/bridge/: the real megatron-bridge 0.6.2 in its own Python 3.12 env, built once outside the
# clone and keyed by its pins (cold: about 10 minutes and 7 GB; cached: a second). No Python 3.12
# (make-env.sh exit 77): the tier is skipped with the reason in a box here and in pytest's summary;
# any other failure fails the run (the rest of the suite still runs, so one run reports everything).
step "Megatron Bridge tier env (tests/bridge/make-env.sh)"
t=$SECONDS
bridge_failed=""
unset MBL_BRIDGE_SKIP
bridge_out=$(bash tests/bridge/make-env.sh)
bridge_rc=$?
case $bridge_rc in
  0) export MBL_BRIDGE_ENV=$(printf '%s\n' "$bridge_out" | tail -n1); echo "env: $MBL_BRIDGE_ENV" ;;
  77) export MBL_BRIDGE_SKIP="no Python 3.12 on this machine (megatron-bridge 0.6.2 needs >=3.12,<3.13); see the SKIP box above"
      unset MBL_BRIDGE_ENV ;;
  *) bridge_failed="Megatron Bridge tier env build failed (exit $bridge_rc; log: ${MBL_BRIDGE_CACHE:-$HOME/.cache/mbridge-launch}/bridge-env-*.failed.log)"
     printf '\nrun-all: %s; the tests run anyway\n' "$bridge_failed" >&2
     export MBL_BRIDGE_SKIP="$bridge_failed"; unset MBL_BRIDGE_ENV ;;
esac
t_bridge=$((SECONDS - t))

# ---------------------------------------------------------------- 3. lint
step "lint (ruff, mypy against its baseline, import-linter)"
t=$SECONDS
lint_failed=()
lint() {  # NAME COMMAND...: run one linter; its output, then one line with its verdict and time
  local name=$1 t0=$SECONDS
  shift
  if "$@"; then
    printf -- '-- %s: passed (%ss)\n' "$name" "$((SECONDS - t0))"
  else
    printf -- '-- %s: FAILED (%ss)\n' "$name" "$((SECONDS - t0))"
    lint_failed+=("$name")
  fi
}
lint_failures() { local name out=""; for name in "${lint_failed[@]}"; do out+="${out:+, }$name"; done; echo "$out"; }
lint "ruff check" .venv/bin/ruff check --no-cache .
lint "mypy baseline" .venv/bin/python tests/tooling/mypy_baseline.py
lint "lint-imports" bash tests/tooling/lint-imports.sh
t_lint=$((SECONDS - t))
if [ ${#lint_failed[@]} -gt 0 ]; then
  printf '\nrun-all: lint FAILED: %s (see above); the tests run anyway\n' "$(lint_failures)" >&2
fi

# ---------------------------------------------------------------- 4. the suite
slurm_up() { [ -s "$SLURM_DIR/run/slurmctld.pid" ] && kill -0 "$(cat "$SLURM_DIR/run/slurmctld.pid")" 2>/dev/null; }
was_up=0
slurm_up && was_up=1
step "pytest (whole suite; local Slurm cluster in $SLURM_DIR: $([ $was_up = 1 ] && echo 'already running, reused' || echo 'started by the tests'))"
t=$SECONDS
.venv/bin/python -m pytest -p no:cacheprovider --timeout="${MBL_TEST_TIMEOUT:-900}" "$@"
rc=$?
t_tests=$((SECONDS - t))

# ---------------------------------------------------------------- 5. leftovers
if [ $was_up = 0 ] && slurm_up; then
  step "stopping the cluster left running by an interrupted session"
  tests/cluster/stop-cluster.sh "$SLURM_DIR" || true
fi

case $rc in
  0) verdict="PASSED" ;;
  5) verdict="FAILED: pytest collected no tests (exit 5)" rc=1 ;;
  *) verdict="FAILED: pytest exit $rc" ;;
esac
if [ -n "$bridge_failed" ]; then
  if [ $rc = 0 ]; then verdict="FAILED: $bridge_failed" rc=1; else verdict="$verdict; $bridge_failed"; fi
fi
if [ ${#lint_failed[@]} -gt 0 ]; then
  lints="lint failed ($(lint_failures))"
  if [ $rc = 0 ]; then verdict="FAILED: $lints" rc=1; else verdict="$verdict; $lints"; fi
fi
printf '\nrun-all: %s  (packages %ss, venv %ss, bridge env %ss, lint %ss, tests %ss, total %ss)\n' \
  "$verdict" "$t_pkgs" "$t_venv" "$t_bridge" "$t_lint" "$t_tests" "$((SECONDS - t_all))"
exit $rc
