#!/usr/bin/env bash
# make-image.sh - the container "images" the fake pyxis (fake_pyxis.c) enters.
#
#   tests/cluster/make-image.sh IMAGES_DIR [IMAGE_NAME...]     (default name: mbl/python3)
#
# An image is IMAGES_DIR/<name>/ where <name> is the --container-image value with every character
# outside [A-Za-z0-9._-] replaced by '_' (mbl/python3 -> mbl_python3):
#   rootfs/    the image's own top level: mount points and the merged-/usr symlinks (bin -> usr/bin)
#   os-binds   host paths bound read-only into the root; they stand for the image's OS (python3
#              3.11 of the host's /usr). Not /root, /home, /work nor /tmp's contents: a path the
#              job needs must come in through --container-mounts, as on a real cluster.
#   hide       files of those paths the image does not have: the Slurm client commands (an NGC
#              image has none; here one would find no slurm.conf and hang in DNS lookups)
# Idempotent (start-cluster.sh runs it on every start; running it on a live cluster is safe).
set -euo pipefail
IMAGES=${1:?usage: make-image.sh IMAGES_DIR [IMAGE_NAME...]}
shift
[ $# -gt 0 ] || set -- mbl/python3
OS_DIRS=(/usr /bin /lib /lib64 /sbin /etc)

make_one() {
  local name dir tmp p
  name=$(printf '%s' "$1" | sed 's/[^A-Za-z0-9._-]/_/g')
  dir=$IMAGES/$name
  tmp=$IMAGES/.tmp-$name-$$
  rm -rf "$tmp"
  mkdir -p "$tmp/rootfs"
  for p in "${OS_DIRS[@]}"; do
    if [ -L "$p" ]; then
      ln -s "$(readlink "$p")" "$tmp/rootfs/${p#/}"   # merged /usr: the image has the same symlink
    elif [ -d "$p" ]; then
      echo "$p" >>"$tmp/os-binds"
    fi
  done
  # an NGC image has no Slurm client: without its slurm.conf one would hang in DNS lookups
  for p in srun sbatch salloc scontrol squeue sacct scancel sinfo sstat; do
    p=$(command -v "$p" 2>/dev/null) || continue
    echo "$(readlink -f "$p")" >>"$tmp/hide"
  done
  # mount points of the image; their contents come from the host at task start (fake_pyxis.c)
  mkdir -p "$tmp/rootfs/opt"
  printf '%s\n' "$1" >"$tmp/rootfs/opt/fake-pyxis-image"
  if [ -d "$dir" ] && diff -r --no-dereference "$tmp" "$dir" >/dev/null 2>&1; then
    rm -rf "$tmp"   # unchanged: leave the image a running task may be using alone
    return
  fi
  rm -rf "$dir.old"
  [ -d "$dir" ] && mv "$dir" "$dir.old"
  mv "$tmp" "$dir"
  rm -rf "$dir.old"
}

mkdir -p "$IMAGES/.root"   # the per-task tmpfs root is mounted here, in the task's namespace only
for image in "$@"; do make_one "$image"; done
