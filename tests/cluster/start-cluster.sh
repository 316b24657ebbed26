#!/usr/bin/env bash
# start-cluster.sh - a throwaway, real Slurm cluster on ONE Debian 12 machine, with fake GPU nodes,
# for mbridge-launch's end-to-end tests.
#
#   tests/cluster/start-cluster.sh [DIR]     (as root; DIR default: $MBL_SLURM_DIR or /tmp/mbl-slurm)
#
# Installs missing packages (install-packages.sh), writes every config, key, socket, pid file, log
# and database under DIR, starts munged, mariadbd + slurmdbd (so sacct works), slurmctld and one
# slurmd per fake node, and waits until every node is idle. Stop with stop-cluster.sh DIR, which
# stops only what the pid files under DIR name. If a cluster already runs in DIR this prints its
# state and exits 0. DIR/env.sh exports SLURM_CONF; DIR/cluster.json describes the partitions.
#
# Default layout (the tests rely on it):
#   node group h100:  h100-1, h100-2     8 GPUs of GRES type h100 each
#   node group gb200: gb200-1, gb200-2   4 GPUs of GRES type gb200 each (NVL72-style nodes)
#   node group cpu:   cpu-1              no GPUs (where watcher jobs run while training holds the GPU nodes)
#   partitions: h100 (default) and gb200, MaxTime=INFINITE; short on the h100 nodes, MaxTime=00:30:00;
#               cpu on the cpu node
#
# Knobs (environment variables):
#   NODE_GROUPS   "h100:2:8:h100 gb200:2:4:gb200,nvl72"   TYPE:NODES:GPUS_PER_NODE[:FEATURES]
#                 (nodes are named TYPE-1..N; the GRES type is TYPE; types must be distinct;
#                 GPUS_PER_NODE 0: a node without GPUs, no GRES)
#   PARTITIONS    "h100=h100/INFINITE/default gb200=gb200/INFINITE short=h100/00:30:00"
#                 NAME=GROUP[+GROUP...][/MAXTIME[/default]]
#   CPUS_PER_NODE 64 (even)   MEM_PER_NODE_MB 512000
#   CLUSTER_NAME mbl   CTLD_PORT 26817   DBD_PORT 26819   DB_PORT 26306   SLURMD_PORT_BASE 26900
#                 (not Slurm's default ports, so a real local Slurm is left alone)
#   CRED_EXPIRE   10   seconds; also the delay before a requeued job may start again (Slurm: 120)
#   EXTRA_SLURM_CONF ""   lines appended to slurm.conf (e.g. $'EnforcePartLimits=ALL')
#   NO_INSTALL 0   1: never call apt-get      WAIT_TIMEOUT 60   seconds for nodes to become idle
#   RESTART_STALE 0   1: if slurmctld is dead but other daemons of DIR still run, stop them first
#   CONTAINER_IMAGES "mbl/python3"   images the fake pyxis knows (make-image.sh: the host's /usr
#                 and /etc read-only, python3 3.11; nothing of /root, /home, /work, /tmp)
set -euo pipefail

DIR=${1:-${MBL_SLURM_DIR:-/tmp/mbl-slurm}}
NODE_GROUPS=${NODE_GROUPS:-"h100:2:8:h100 gb200:2:4:gb200,nvl72 cpu:1:0:cpu"}
PARTITIONS=${PARTITIONS:-"h100=h100/INFINITE/default gb200=gb200/INFINITE short=h100/00:30:00 cpu=cpu/INFINITE"}
CPUS_PER_NODE=${CPUS_PER_NODE:-64}
MEM_PER_NODE_MB=${MEM_PER_NODE_MB:-512000}
CLUSTER_NAME=${CLUSTER_NAME:-mbl}
CTLD_PORT=${CTLD_PORT:-26817}
DBD_PORT=${DBD_PORT:-26819}
DB_PORT=${DB_PORT:-26306}
SLURMD_PORT_BASE=${SLURMD_PORT_BASE:-26900}
CRED_EXPIRE=${CRED_EXPIRE:-10}
EXTRA_SLURM_CONF=${EXTRA_SLURM_CONF:-}
NO_INSTALL=${NO_INSTALL:-0}
WAIT_TIMEOUT=${WAIT_TIMEOUT:-60}
RESTART_STALE=${RESTART_STALE:-0}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[start-cluster %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
STARTED=0   # 1 once this run starts daemons: from then on a failure stops them again
fail() {
  log "ERROR: $*"
  if [ "$STARTED" = 1 ]; then
    STARTED=0
    log "logs kept in $DIR/log; stopping what this run started"
    "$SCRIPT_DIR/stop-cluster.sh" "$DIR" || true
  fi
  exit 1
}
trap 'ERR_LINE=$LINENO' ERR
trap '[ $? = 0 ] || [ "$STARTED" != 1 ] || fail "command failed (line ${ERR_LINE:-?})"' EXIT
alive() { # alive PIDFILE -> 0 if the pid in it runs (zombies count as dead)
  local p st
  [ -s "$1" ] || return 1
  p=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$p" ] && [ -r "/proc/$p/stat" ] || return 1
  st=$(sed -e 's/^.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}
wait_for() { # wait_for SECONDS DESCRIPTION CMD...
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || fail "timed out after ${t}s waiting for $what"
    sleep 0.2
  done
}

[ "$(id -u)" = 0 ] || die "run as root (slurmd and the fake nodes' namespaces need it)"
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac
[ $((CPUS_PER_NODE % 2)) = 0 ] || die "CPUS_PER_NODE must be even"

# ---------------------------------------------------------------- packages (idempotent)
t_start=$SECONDS
if ! "$SCRIPT_DIR/install-packages.sh" --check >/dev/null; then
  [ "$NO_INSTALL" = 1 ] && die "$("$SCRIPT_DIR/install-packages.sh" --check) (NO_INSTALL=1)"
  "$SCRIPT_DIR/install-packages.sh"
fi
command -v unshare >/dev/null || die "unshare (util-linux) not found"

# ---------------------------------------------------------------- layout
mkdir -p "$DIR"
chmod 755 "$DIR"
ETC=$DIR/etc RUN=$DIR/run LOGD=$DIR/log STATE=$DIR/state DEV=$DIR/dev MUNGE=$DIR/munge DB=$DIR/db
export SLURM_CONF=$ETC/slurm.conf
MARK=(env "MBL_SLURM_DAEMON=$DIR")   # given to the daemons only; slurmstepd inherits it; stop-cluster.sh looks for it

if alive "$RUN/slurmctld.pid"; then
  log "cluster in $DIR already running (slurmctld pid $(cat "$RUN/slurmctld.pid")); stop-cluster.sh $DIR to restart"
  sinfo -o '%P %N %G %T' || true
  exit 0
fi
for f in "$RUN"/*.pid; do
  [ -e "$f" ] || continue
  if alive "$f"; then
    [ "$RESTART_STALE" = 1 ] || die "$(basename "$f" .pid) from an earlier start still runs; run stop-cluster.sh $DIR first"
    log "slurmctld is gone but $(basename "$f" .pid) still runs: stopping the rest first (RESTART_STALE=1)"
    "$SCRIPT_DIR/stop-cluster.sh" "$DIR"
    break
  fi
done
rm -f "$RUN"/*.pid
rm -rf "$STATE" "$LOGD" "$DB/data" "$DIR/cluster.json" "$DIR/env.sh" "$DIR/started-by-pytest"
mkdir -p "$ETC" "$RUN" "$LOGD" "$STATE/ctld" "$DEV" "$DB" "$DIR/spank" "$DIR/nodetmp"
install -d -m 755 "$MUNGE"

# ---------------------------------------------------------------- nodes and partitions
NODES=() GRES_LINES=() NODE_LINES=() PART_LINES=() GPU_TYPES=()
declare -A GROUP_RANGE=() GROUP_NODES=() GROUP_GPUS=() GROUP_FEATS=()
half=$((CPUS_PER_NODE / 2))
max_gpus=0
idx=0
for spec in $NODE_GROUPS; do
  IFS=: read -r gtype count gpus feats <<<"$spec"
  [ -n "$gtype" ] && [ -n "$count" ] && [ -n "$gpus" ] || die "bad NODE_GROUPS entry '$spec' (TYPE:NODES:GPUS[:FEATURES])"
  [ -z "${GROUP_GPUS[$gtype]:-}" ] || die "GPU type $gtype used twice in NODE_GROUPS"
  feats=${feats:-$gtype}
  [ "$gpus" -gt 0 ] && GPU_TYPES+=("$gtype")
  GROUP_GPUS[$gtype]=$gpus
  GROUP_FEATS[$gtype]=$feats
  [ "$gpus" -gt "$max_gpus" ] && max_gpus=$gpus
  range="${gtype}-[1-${count}]"
  [ "$count" = 1 ] && range="${gtype}-1"
  GROUP_RANGE[$gtype]=$range
  names=()
  for i in $(seq 1 "$count"); do
    n="${gtype}-${i}"
    idx=$((idx + 1))
    NODES+=("$n")
    names+=("$n")
    gres="Gres=gpu:${gtype}:${gpus} "
    [ "$gpus" -gt 0 ] || gres=""
    NODE_LINES+=("NodeName=$n NodeAddr=127.0.0.1 NodeHostname=localhost Port=$((SLURMD_PORT_BASE + idx)) CPUs=$CPUS_PER_NODE Boards=1 SocketsPerBoard=2 CoresPerSocket=$half ThreadsPerCore=1 RealMemory=$MEM_PER_NODE_MB ${gres}Features=$feats State=UNKNOWN")
  done
  GROUP_NODES[$gtype]="${names[*]}"
  [ "$gpus" -gt 0 ] || continue
  files="$DEV/nvidia[0-$((gpus - 1))]"
  [ "$gpus" = 1 ] && files="$DEV/nvidia0"
  GRES_LINES+=("NodeName=$range Name=gpu Type=$gtype File=$files")
done
[ ${#NODES[@]} -gt 0 ] || die "NODE_GROUPS is empty"

PART_JSON=()
default_seen=0
for spec in $PARTITIONS; do
  pname=${spec%%=*}
  rest=${spec#*=}
  IFS=/ read -r groups maxtime flag <<<"$rest"
  [ -n "$pname" ] && [ -n "$groups" ] && [ "$pname" != "$spec" ] || die "bad PARTITIONS entry '$spec' (NAME=GROUP[+GROUP]/MAXTIME[/default])"
  maxtime=${maxtime:-INFINITE}
  ranges=() gjson=()
  for g in ${groups//+/ }; do
    [ -n "${GROUP_RANGE[$g]:-}" ] || die "partition $pname: unknown node group '$g' (known: ${!GROUP_GPUS[*]})"
    ranges+=("${GROUP_RANGE[$g]}")
    nodes_json=$(printf '"%s",' ${GROUP_NODES[$g]})
    gjson+=("{\"gpu_type\": \"$g\", \"gpus_per_node\": ${GROUP_GPUS[$g]}, \"features\": \"${GROUP_FEATS[$g]}\", \"nodes\": [${nodes_json%,}]}")
  done
  dflt="" is_default=false
  if [ "$flag" = default ]; then
    [ $default_seen = 0 ] || die "two default partitions in PARTITIONS"
    dflt=" Default=YES" is_default=true default_seen=1
  fi
  PART_LINES+=("PartitionName=$pname Nodes=$(IFS=,; echo "${ranges[*]}")$dflt MaxTime=$maxtime State=UP")
  PART_JSON+=("\"$pname\": {\"default\": $is_default, \"max_time\": \"$maxtime\", \"groups\": [$(IFS=,; echo "${gjson[*]}")]}")
done
[ ${#PART_LINES[@]} -gt 0 ] || die "PARTITIONS is empty"

# ---------------------------------------------------------------- ports must be free
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports=("$CTLD_PORT" "$DBD_PORT" "$DB_PORT")
for i in $(seq 1 ${#NODES[@]}); do ports+=($((SLURMD_PORT_BASE + i))); done
for port in "${ports[@]}"; do
  port_busy "$port" && die "port $port on 127.0.0.1 is in use (another cluster? set CTLD_PORT/DBD_PORT/DB_PORT/SLURMD_PORT_BASE)"
done

# ---------------------------------------------------------------- fake GPU device files
# gres/gpu in 22.05 drops GPUs without File= ("Removing file-less GPU"); a File that is not a
# character device is only logged as an error, so fall back to plain files if mknod is refused.
for i in $(seq 0 $((max_gpus - 1))); do
  f=$DEV/nvidia$i
  if [ ! -c "$f" ]; then
    rm -f "$f"
    mknod -m 666 "$f" c 195 "$i" 2>/dev/null || : >"$f"
  fi
done

# ---------------------------------------------------------------- munge
STARTED=1
if [ ! -s "$MUNGE/munge.key" ]; then
  mungekey --create --keyfile="$MUNGE/munge.key" 2>/dev/null ||
    dd if=/dev/urandom of="$MUNGE/munge.key" bs=1024 count=1 status=none
fi
chmod 600 "$MUNGE/munge.key"
MUNGE_SOCK=$MUNGE/munge.sock
rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
"${MARK[@]}" munged --key-file="$MUNGE/munge.key" --socket="$MUNGE_SOCK" --pid-file="$RUN/munged.pid" \
  --log-file="$LOGD/munged.log" --seed-file="$MUNGE/munged.seed"
wait_for 10 munged sh -c "munge -n -S '$MUNGE_SOCK' | unmunge -S '$MUNGE_SOCK'"

# ---------------------------------------------------------------- configs
tres="gres/gpu"
for t in "${GPU_TYPES[@]}"; do tres+=",gres/gpu:$t"; done

cat >"$ETC/slurm.conf" <<EOF
# generated by mbridge-launch tests/cluster/start-cluster.sh
ClusterName=$CLUSTER_NAME
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT_BASE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK,cred_expire=$CRED_EXPIRE
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$ETC/plugstack.conf
MailProg=/bin/true
# node-local temporary storage: each fake node bind-mounts its own directory here (pmix puts
# per-step directories named only by job/step id under TmpFS; shared, the nodes would collide)
TmpFS=$DIR/nodetmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
# start jobs right after submission; re-scan pending jobs (e.g. requeued ones) every 5 s
SchedulerParameters=batch_sched_delay=0,sched_interval=5,bf_interval=5
KillWait=5
MinJobAge=300
InactiveLimit=0
Waittime=0
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# client->slurmdbd connections take their munge socket from AccountingStoragePass, not AuthInfo
AccountingStoragePass=$MUNGE_SOCK
AccountingStorageTRES=$tres
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGD/jobcomp.txt
$(printf '%s\n' "${NODE_LINES[@]}")
$(printf '%s\n' "${PART_LINES[@]}")
$EXTRA_SLURM_CONF
EOF
printf '%s\n' "${GRES_LINES[@]}" >"$ETC/gres.conf"

# /etc/hosts seen by the fake nodes (bind-mounted in their private mount namespace), so that node
# names resolve inside jobs (MASTER_ADDR); the real /etc/hosts is never touched.
{
  cat /etc/hosts
  echo "# fake Slurm nodes (mbridge-launch tests/cluster/start-cluster.sh)"
  echo "127.0.0.1 ${NODES[*]}"
} >"$ETC/hosts"

# fake pyxis: accepts --container-* on sbatch/srun, exports them to tasks as FAKE_PYXIS_*, and
# runs a step with --container-image in an image of $DIR/images (make-image.sh) where only the
# image and the declared --container-mounts are visible. Built next to the old .so and moved into
# place: a loaded .so must never be overwritten in place (the same two lines update a running
# cluster; new steps load the new file).
cp "$SCRIPT_DIR/fake_pyxis.c" "$DIR/spank/fake_pyxis.c"
gcc -x c -shared -fPIC -O2 -Wall -Wno-format-truncation -o "$DIR/spank/fake_pyxis.so.new" "$DIR/spank/fake_pyxis.c"
mv "$DIR/spank/fake_pyxis.so.new" "$DIR/spank/fake_pyxis.so"
"$SCRIPT_DIR/make-image.sh" "$DIR/images" ${CONTAINER_IMAGES:-mbl/python3}
echo "optional $DIR/spank/fake_pyxis.so images=$DIR/images" >"$ETC/plugstack.conf"

# ---------------------------------------------------------------- accounting: mariadb + slurmdbd
cat >"$ETC/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$LOGD/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
chmod 600 "$ETC/slurmdbd.conf"
mariadb-install-db --no-defaults --datadir="$DB/data" --user=root \
  --auth-root-authentication-method=normal --skip-test-db >"$LOGD/mariadb-install-db.log" 2>&1 ||
  fail "mariadb-install-db failed, see $LOGD/mariadb-install-db.log"
"${MARK[@]}" setsid mariadbd --no-defaults --datadir="$DB/data" --user=root --bind-address=127.0.0.1 \
  --port="$DB_PORT" --socket="$DB/mysqld.sock" --pid-file="$RUN/mariadbd.pid" \
  --log-error="$LOGD/mariadbd.log" --innodb-buffer-pool-size=64M \
  --innodb-lock-wait-timeout=900 --skip-name-resolve </dev/null >/dev/null 2>&1 &
wait_for 60 mariadbd mariadb --no-defaults -S "$DB/mysqld.sock" -uroot -e 'select 1'
mariadb --no-defaults -S "$DB/mysqld.sock" -uroot -e "
  CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
"${MARK[@]}" slurmdbd   # reads slurmdbd.conf next to $SLURM_CONF
wait_for 60 slurmdbd sacctmgr -n show cluster

# ---------------------------------------------------------------- slurmctld + slurmd
USE_UNSHARE=0
unshare --mount --uts --propagation private true 2>/dev/null && USE_UNSHARE=1
[ "$USE_UNSHARE" = 1 ] || log "WARNING: unshare refused; fake nodes share hostname $(hostname) and node names do not resolve"
t_daemons=$SECONDS
"${MARK[@]}" slurmctld -f "$SLURM_CONF"
wait_for 30 slurmctld scontrol ping
for n in "${NODES[@]}"; do
  mkdir -p "$STATE/$n/tmp"
  chmod 1777 "$STATE/$n/tmp"
  # Private UTS + mount namespace: `hostname` prints the node name inside jobs and node names
  # resolve (bind-mounted hosts file) without touching the real /etc/hosts.
  inner="mount --bind '$ETC/hosts' /etc/hosts && mount --bind '$STATE/$n/tmp' '$DIR/nodetmp' && hostname '$n' && exec slurmd -f '$SLURM_CONF' -N '$n'"
  if [ "$USE_UNSHARE" = 1 ]; then
    "${MARK[@]}" unshare --mount --uts --propagation private sh -c "$inner"
  else
    "${MARK[@]}" slurmd -f "$SLURM_CONF" -N "$n"
  fi
done

nodes_idle() { [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" = "${#NODES[@]}" ]; }
end=$((SECONDS + WAIT_TIMEOUT))
until nodes_idle; do
  if [ $SECONDS -ge $end ]; then
    sinfo -N -o '%N %T %E' >&2 || true
    tail -n 5 "$LOGD"/slurmctld.log "$LOGD"/slurmd-*.log >&2 || true
    fail "nodes not idle after ${WAIT_TIMEOUT}s"
  fi
  sleep 0.2
done

# ---------------------------------------------------------------- what tests read
# sacct answers only once slurmctld has registered the cluster with slurmdbd; a test that reads
# accounting right after start-up would otherwise be told "Slurm cannot be asked"
wait_for 60 "sacct (accounting of cluster $CLUSTER_NAME)" sacct -n -X -S now-1minutes -o JobIDRaw
slurm_version=$(sinfo -V | awk '{print $2}')
cat >"$DIR/env.sh" <<EOF
# source this to use the local test cluster (written by start-cluster.sh)
export SLURM_CONF=$SLURM_CONF
export MBL_SLURM_DIR=$DIR
EOF
cat >"$DIR/cluster.json.tmp" <<EOF
{
  "dir": "$DIR",
  "cluster_name": "$CLUSTER_NAME",
  "slurm_version": "$slurm_version",
  "slurm_conf": "$SLURM_CONF",
  "ports": {"slurmctld": $CTLD_PORT, "slurmdbd": $DBD_PORT, "mariadb": $DB_PORT, "slurmd_base": $SLURMD_PORT_BASE},
  "cred_expire": $CRED_EXPIRE,
  "fake_pyxis": true,
  "mpi": ["none", "pmi2", "pmix"],
  "hostnames_private": $([ "$USE_UNSHARE" = 1 ] && echo true || echo false),
  "partitions": {
    $(IFS=$'\n'; printf '%s' "${PART_JSON[*]}" | sed 's/$/,/' | sed '$ s/,$//')
  }
}
EOF
mv "$DIR/cluster.json.tmp" "$DIR/cluster.json"
STARTED=0
log "cluster up: daemons ready in $((SECONDS - t_daemons))s (total $((SECONDS - t_start))s)"

cat <<EOF

Slurm $slurm_version cluster '$CLUSTER_NAME' is up in $DIR
  nodes: ${NODES[*]}
  accounting (sacct): slurmdbd + MariaDB;  fake pyxis: --container-image=mbl/python3 (images in $DIR/images)

Use it:
  source $DIR/env.sh
  sinfo -o '%P %N %G %f %l %T'
  sbatch -p h100 --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 --wrap 'srun hostname'
Logs: $LOGD    Stop: $SCRIPT_DIR/stop-cluster.sh $DIR

EOF
sinfo -o '%P %N %G %f %l %T'
