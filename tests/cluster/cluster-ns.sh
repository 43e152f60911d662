#!/usr/bin/env bash
# Make the mount namespace of a chroot cluster, then exec a command in it (up.sh starts munged this way; the
# namespace lives as long as munged, and slurmctld, slurmd and the client wrappers enter it with nsenter).
#
#   unshare --mount --propagation private -- tests/cluster/cluster-ns.sh ROOT PATH:PATH... -- COMMAND...
#
# Inside the namespace ROOT is read-only (jobs cannot change the shared, cached chroot), and the host's /proc,
# /sys, /dev and every PATH are mounted at the same path inside ROOT, so a job's script, output files, the
# work tree and the host's Python have the same paths on a node as on the host. /run is a fresh tmpfs.
# Nothing here is visible outside the namespace: it all goes away with its last process.
set -euo pipefail
(($# >= 4)) && [[ $3 == -- ]] || { echo "usage: $0 ROOT PATH:PATH... -- COMMAND..." >&2; exit 2; }
root=$1 binds=$2
shift 3

[[ $(findmnt -n -o PROPAGATION /) == private ]] || { echo "$0: run me under unshare --propagation private" >&2; exit 2; }
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
# A fresh proc instance shows the same processes (same PID namespace); slurmd reads /proc for its tasks.
mount -t proc proc "$root/proc"
# slurmd loads its cgroup plugin even with proctrack/linuxproc and task/none, and dies without
# /sys/fs/cgroup (src/slurmd/slurmd/slurmd.c calls cgroup_g_init()); the host's /sys gives it the real one.
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
# The host's name resolution for what runs on the host side (munged, slurmctld, client commands); each node
# binds its own files over these in its own mount namespace (up.sh start_slurmd).
for f in /etc/hosts /etc/resolv.conf; do
    [[ -e $f ]] && mount --bind "$f" "$root$f"
done
IFS=: read -r -a paths <<<"$binds"
for p in "${paths[@]}"; do
    [[ -n $p && -d $p ]] || continue
    [[ -d $root$p ]] || { echo "$0: no mount point $root$p (chroot.sh or up.sh makes it)" >&2; exit 1; }
    mount --rbind "$p" "$root$p"
done
exec "$@"
