#!/usr/bin/env bash
# Stop slurmgen's test cluster (tests/cluster/up.sh) and remove all it made: jobs, daemons, namespaces, the
# bridge and its base directory. Safe to run twice, and after a failed or partial bring-up.
#
#   tests/cluster/down.sh [--slurm 22.05|24.11|26.05] [--instance K]
#
# Only processes of this cluster are touched: pid files checked against /proc/PID/comm, processes inside our
# namespaces, or daemons whose command line names our files. Never a kill by name. The cached chroot of a
# 24.11/26.05 cluster stays (chroot.sh); its mounts lived in the cluster's own mount namespace and are gone
# with its last process.
set -uo pipefail # no -e: one failed step must not stop the rest of the cleanup
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"
parse_cluster_args "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"

[[ $EUID -eq 0 ]] || die "must run as root"
if [[ ${1:-} != --locked ]]; then # up.sh calls us while it holds the lock
    exec 9>"$BASE.lock"
    flock -w 120 9 || die "another up.sh/down.sh holds $BASE.lock"
fi
alias=$(cat "/sys/class/net/$BRIDGE/ifalias" 2>/dev/null || true)
[[ -z $alias || $alias == "$BASE" ]] ||
    die "the test network $BRIDGE belongs to the cluster with base $alias, not $BASE"

t0=$EPOCHREALTIME

# PIDs of our daemons named COMM: from the pid file, else by a command line that names our base directory
# (covers a base removed by hand while the daemons ran).
our_pids() {
    local comm=$1 pidfile=$2 pid p
    pid=$(pid_from "$pidfile")
    if alive "$pid" "$comm"; then echo "$pid"; fi
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [[ $p == "$pid" ]] && continue
        alive "$p" "$comm" || continue
        tr "\0" "\n" <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$BASE/" && echo "$p"
    done
}

# 1. Cancel jobs while the controller is still up, so their traps run. Wait at most 2 s: what still runs
#    then (a job ignoring SIGTERM waits out KillWait=5) is killed in step 3 anyway.
ctld_pids=$(our_pids slurmctld "$RUN/slurmctld.pid")
munged_pids=$(our_pids munged "$BASE/munge/munged.pid")
if [[ -n $ctld_pids && -n $munged_pids && -f $CONF ]] && slurm sh -c 'command -v squeue' >/dev/null; then
    jobs=$(slurm timeout 5 squeue -h -o %A 2>/dev/null)
    if [[ -n $jobs ]]; then
        # shellcheck disable=SC2086 # one job id per word
        slurm timeout 5 scancel $jobs 2>/dev/null
        for ((i = 0; i < 20; i++)); do
            [[ -z $(slurm timeout 5 squeue -h -o %A 2>/dev/null) ]] && break
            sleep 0.1
        done
    fi
fi

# 2. slurmd, by pid file.
for n in "${NODES[@]}"; do
    for pid in $(our_pids slurmd "$RUN/slurmd-$n.pid"); do stop_pid "$pid" slurmd 10; done
done

# 3. Jobs survive slurmd (README gotcha 15): kill whatever still runs inside our namespaces (slurmstepd, tasks).
for ((round = 0; round < 5; round++)); do
    left=()
    for ns in $(ip netns list 2>/dev/null | awk -v p="^$NS_PREFIX" '$1 ~ p { print $1 }'); do
        mapfile -t -O "${#left[@]}" left < <(ip netns pids "$ns" 2>/dev/null)
    done
    live=()
    for pid in "${left[@]}"; do alive "$pid" && live+=("$pid"); done
    ((${#live[@]})) || break
    kill -KILL "${live[@]}" 2>/dev/null
    for pid in "${live[@]}"; do wait_gone "$pid" 20; done
done

# 3b. A chroot cluster only: client commands started from the host (an srun, say) that still run chrooted in
#     the cluster's mount namespace would keep that namespace alive. Three guards, so that nothing else is
#     ever touched: the cluster has a chroot, munged's mount namespace is not ours, and the process runs in
#     that namespace *with its root in the chroot*. (A host cluster's munged runs in the host's namespace.)
root=$(cluster_root || true)
self_ns=$(readlink /proc/self/ns/mnt 2>/dev/null || true)
if [[ -n $root && -d $root && -n $self_ns ]]; then
    for mpid in $munged_pids; do
        mntns=$(readlink "/proc/$mpid/ns/mnt" 2>/dev/null) || continue
        [[ -n $mntns && $mntns != "$self_ns" ]] || continue
        for p in /proc/[0-9]*; do
            p=${p#/proc/}
            [[ $p == "$mpid" || $p == "$$" ]] && continue
            [[ $(readlink "/proc/$p/ns/mnt" 2>/dev/null) == "$mntns" ]] || continue
            [[ $(readlink "/proc/$p/root" 2>/dev/null) == "$root" ]] || continue
            alive "$p" slurmctld || alive "$p" munged || { kill -KILL "$p" 2>/dev/null && wait_gone "$p" 20; }
        done
    done
fi

# 4. The controller and munged. SIGTERM makes slurmctld save state for ~3 s when nodes are gone (README gotcha 16);
#    the state is deleted below, so give it a second and then SIGKILL.
for pid in $ctld_pids; do stop_pid "$pid" slurmctld 10; done
# 4b. Accounting (a cluster started with SLURMGEN_CLUSTER_ACCOUNTING=1): slurmdbd after the controller that
#     sends it jobs, then MariaDB, whose SIGTERM is a normal shutdown (~1 s), before munged.
for pid in $(our_pids slurmdbd "$RUN/slurmdbd.pid"); do stop_pid "$pid" slurmdbd 20; done
for pid in $(our_pids mariadbd "$RUN/mysqld.pid"); do stop_pid "$pid" mariadbd 50; done
for pid in $munged_pids; do stop_pid "$pid" munged 20; done

# 5. Network: deleting the host end of a veth deletes the pair at once; waiting for the namespace to take
#    its veth down with it takes 1-3 s.
for n in "${NODES[@]}"; do
    ip link del "$VETH_PREFIX${n#node}" 2>/dev/null
done
for ns in $(ip netns list 2>/dev/null | awk -v p="^$NS_PREFIX" '$1 ~ p { print $1 }'); do
    ip netns del "$ns" 2>/dev/null || log "warning: could not delete namespace $ns"
done
ip link del "$BRIDGE" 2>/dev/null
for ((i = 0; i < 50; i++)); do
    ip -o link show 2>/dev/null | grep -qE "^[0-9]+: (${VETH_PREFIX}[0-9]+|$BRIDGE)[@:]" || break
    sleep 0.1
done

# 6. Files. Only a directory up.sh made (it carries the marker), never an arbitrary $SLURMGEN_CLUSTER_BASE.
if [[ -e $BASE ]]; then
    if [[ -e $BASE/.slurmgen-cluster ]]; then
        rm -rf "$BASE"
    else
        log "warning: $BASE has no .slurmgen-cluster marker; not removing it"
    fi
fi
log "down in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }") s"
