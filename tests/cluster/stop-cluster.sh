#!/usr/bin/env bash
# stop-cluster.sh [DIR] - stop what start-cluster.sh DIR started, and nothing else:
#   1. scancel every job of that cluster and wait (up to 20 s) for them to leave squeue,
#   2. TERM (then KILL after 15 s) the daemons named by DIR/run/*.pid:
#      slurmd-*, slurmctld, slurmdbd, mariadbd, munged,
#   3. KILL leftover slurmstepd/job processes carrying MBL_SLURM_DAEMON=DIR in their environment
#      (the marker start-cluster.sh gives its daemons; their children inherit it).
# Configs, logs and state stay in DIR (start-cluster.sh wipes state on the next start).
set -uo pipefail
DIR=${1:-${MBL_SLURM_DIR:-/tmp/mbl-slurm}}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac
RUN=$DIR/run
export SLURM_CONF=$DIR/etc/slurm.conf

log() { printf '[stop-cluster %(%T)T] %s\n' -1 "$*" >&2; }
pid_alive() { # zombies count as dead
  local st
  [ -r "/proc/$1/stat" ] || return 1
  st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
stop_pidfile() { # stop_pidfile FILE
  local f=$1 p
  [ -s "$f" ] || { rm -f "$f"; return 0; }
  p=$(cat "$f")
  if [ -n "$p" ] && pid_alive "$p"; then
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 1 75); do pid_alive "$p" || break; sleep 0.2; done
    if pid_alive "$p"; then
      log "$(basename "$f" .pid) ($p) ignored TERM, sending KILL"
      kill -KILL "$p" 2>/dev/null
    fi
    log "stopped $(basename "$f" .pid) (pid $p)"
  fi
  rm -f "$f"
}

[ -d "$RUN" ] || { log "nothing to stop in $DIR"; exit 0; }

# 1. jobs
if [ -s "$RUN/slurmctld.pid" ] && pid_alive "$(cat "$RUN/slurmctld.pid")"; then
  jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u)
  if [ -n "$jobs" ]; then
    log "cancelling jobs: $(echo $jobs)"
    scancel $jobs 2>/dev/null
    for _ in $(seq 1 100); do
      [ -z "$(squeue -h -o '%A' 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
fi

# 2. daemons, compute side first
for f in "$RUN"/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
for d in slurmctld slurmdbd mariadbd munged; do stop_pidfile "$RUN/$d.pid"; done

# 3. leftover Slurm/munge/MariaDB processes that inherited the marker (slurmstepd mostly); only
#    those names, so a shell that happens to carry the marker is never hit
for e in /proc/[0-9]*/environ; do
  p=${e#/proc/}; p=${p%/environ}
  [ "$p" = $$ ] && continue
  case "$(cat "/proc/$p/comm" 2>/dev/null)" in slurmstepd | slurmd | slurmctld | slurmdbd | munged | mariadbd) ;; *) continue ;; esac
  if { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qxF "MBL_SLURM_DAEMON=$DIR"; then
    log "killing leftover $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) (pid $p)"
    kill -KILL "$p" 2>/dev/null
  fi
done
rm -f "$DIR/env.sh" "$DIR/started-by-pytest"
log "done"
