#!/usr/bin/env bash
# install-packages.sh - install (once, idempotently) the Debian 12 packages the local test cluster
# and the test command need: Slurm 22.05 (slurmctld, slurmd, client), munge, slurmdbd + MariaDB
# (so sacct works), gcc + libslurm-dev (the fake pyxis SPANK plugin), libpmix-dev (srun --mpi=pmix),
# python3-venv.
#
#   tests/cluster/install-packages.sh            install what is missing (root; apt-get update once)
#   tests/cluster/install-packages.sh --check    exit 1 and list what is missing, install nothing
#
# Services are not started by the install: when /usr/sbin/policy-rc.d is absent a temporary one
# denies service starts (Debian's mechanism), so no system-wide munged/mariadb/slurmctld appears;
# the harness starts its own daemons under its own directory.
set -euo pipefail

# libpmix-dev: Slurm's mpi/pmix plugin dlopens libpmix.so (the -dev symlink); without it --mpi=pmix fails
PKGS=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server libslurm-dev gcc libc6-dev libpmix-dev)
log() { printf '[install-packages] %s\n' "$*" >&2; }

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# python3 -m venv needs ensurepip, which Debian ships separately in python3-venv
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi

if [ ${#missing[@]} = 0 ]; then
  exit 0
fi
if [ "${1:-}" = --check ]; then
  echo "missing packages: ${missing[*]}"
  exit 1
fi
command -v apt-get >/dev/null || { log "ERROR: apt-get not found; install by hand: ${missing[*]}"; exit 1; }
[ "$(id -u)" = 0 ] || { log "ERROR: missing packages (${missing[*]}); run as root to install them"; exit 1; }

t0=$SECONDS
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# temporary, written by mbridge-launch tests/cluster/install-packages.sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  made_policy=1
fi
cleanup() { [ "$made_policy" = 1 ] && rm -f "$policy"; return 0; }
trap cleanup EXIT

log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed in $((SECONDS - t0))s"
