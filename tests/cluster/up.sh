#!/usr/bin/env bash
# Bring up slurmgen's 3-node test cluster: Debian's Slurm 22.05 + munge, one network namespace per node.
#
#   tests/cluster/up.sh            start it (or say it is already up); prints how to use it
#   tests/cluster/up.sh --check    exit 0 if a healthy cluster is up, 1 if not; changes nothing
#   tests/cluster/down.sh          stop it and remove everything it made
#
# Everything lives under $SLURMGEN_CLUSTER_BASE (default /tmp/slurmgen-cluster); nothing in /etc is edited.
# The host gets a bridge (slurmgen0, 10.200.0.1) and three namespaces (slurmgen-node1..3, 10.200.0.11-13).
# Why each setting is what it is: shared/notes/local-slurm-cluster.md ("gotcha N" below refers to it).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

# Inherited job variables would leak into srun/sbatch calls made here (slurm-facts 1.6).
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_|PMIX_)' || true)

# --- health ---------------------------------------------------------------------------------------------

# All nodes answer and can take work. Node states from `sinfo %t`; a suffix such as `*` (not responding)
# or `~` means the node is not usable.
nodes_in_states() {
    local pattern=$1 out n
    out=$(timeout 5 env SLURM_CONF="$CONF" sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    for n in "${NODES[@]}"; do
        grep -qE "^$n ($pattern)\$" <<<"$out" || return 1
    done
}

daemons_alive() {
    local n
    alive "$(pid_from "$BASE/munge/munged.pid")" munged || return 1
    alive "$(pid_from "$RUN/slurmctld.pid")" slurmctld || return 1
    for n in "${NODES[@]}"; do
        alive "$(pid_from "$RUN/slurmd-$n.pid")" slurmd || return 1
    done
}

healthy() {
    [[ -f $BASE/env.sh && -f $CONF ]] && daemons_alive && nodes_in_states 'idle|mix|alloc|comp'
}

print_usage() {
    cat <<EOF
Slurm test cluster is up: ${NODES[*]} (base $BASE).
  source $BASE/env.sh        # export SLURM_CONF=$CONF
  sinfo
  srun -N2 --ntasks-per-node=2 hostname
  $HERE/down.sh     # stop it
EOF
}

# --- preconditions --------------------------------------------------------------------------------------

require_tools() {
    [[ $EUID -eq 0 ]] || die "must run as root (network namespaces, mounts, daemons as SlurmUser=root)"
    local t
    for t in ip nsenter unshare mount mknod ss flock timeout; do
        command -v "$t" >/dev/null || die "required command not found: $t"
    done
}

missing_packages() {
    local p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
    done
}

install_packages() {
    local missing updated=0
    mapfile -t missing < <(missing_packages)
    ((${#missing[@]})) || return 0
    command -v apt-get >/dev/null || die "packages missing (${missing[*]}) and no apt-get to install them"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Package postinst scripts must not start daemons from /etc (they would take port 6817). Debian images
    # usually carry a policy-rc.d that forbids it; add one for the duration of the install if this one has none.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
    fi
    # apt-get update only when needed: no candidate in the lists, or a download that fails on stale lists.
    if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -qq && updated=1
    fi
    local install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
    if ! "${install[@]}" >/dev/null; then
        ((updated)) || { apt-get update -qq && "${install[@]}" >/dev/null; } || {
            ((own_policy)) && rm -f "$policy"
            die "apt-get install ${missing[*]} failed"
        }
    fi
    ((own_policy)) && rm -f "$policy"
    return 0
}

# Refuse to touch a cluster started with another base: the network names are fixed, so there is one per host.
# The bridge carries its base as alias; a slurmctld is ours when its command line names our config.
check_owner() {
    local alias holder pid
    alias=$(cat "/sys/class/net/$BRIDGE/ifalias" 2>/dev/null || true)
    [[ -z $alias || $alias == "$BASE" ]] ||
        die "the test network belongs to a cluster with base $alias; stop it with SLURMGEN_CLUSTER_BASE=$alias $HERE/down.sh"
    holder=$(ss -Hltnp "sport = :$CTL_PORT" 2>/dev/null || true)
    [[ -n $holder ]] || return 0
    pid=$(grep -o 'pid=[0-9]*' <<<"$holder" | head -n1 | cut -d= -f2)
    [[ -n $pid ]] && alive "$pid" slurmctld && tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF "$CONF" && return 0
    die "port $CTL_PORT is taken by something that is not this cluster: $holder"
}

# Port 6817 and the 10.200.0.0/24 subnet must be free: what holds them now is not ours (ours was cleaned).
check_free() {
    local holder
    holder=$(ss -Hltnp "sport = :$CTL_PORT" 2>/dev/null || true)
    [[ -z $holder ]] || die "port $CTL_PORT is taken by something that is not this cluster: $holder"
    holder=$(ip -o -4 addr show to "$NODE_NET.0/24" 2>/dev/null || true)
    [[ -z $holder ]] || die "subnet $NODE_NET.0/24 is already in use on this host: $holder"
}

# Anything left from an earlier run (a failed or partial start, or a dead daemon)?
leftovers() {
    [[ -e $BASE ]] || ip link show "$BRIDGE" >/dev/null 2>&1 || ip netns list | grep -q "^$NS_PREFIX"
}

# --- bring-up steps -------------------------------------------------------------------------------------

write_files() {
    mkdir -p "$BASE"/{etc,log,run,dev,spool/ctld} "$BASE/munge"
    touch "$BASE/.slurmgen-cluster" # down.sh removes $BASE only when this marker is there
    # munged refuses a socket directory without execute permission for all.
    chmod 0755 "$BASE" "$BASE/munge"

    # Fake GPUs: gres File= must name character devices (gotcha 6); these are /dev/null's numbers.
    mknod "$BASE/dev/nvidia0" c 1 3
    mknod "$BASE/dev/nvidia1" c 1 3

    local first=${NODES[0]#node} last=${NODES[-1]#node}
    cat >"$CONF" <<EOF
# Generated by tests/cluster/up.sh; see shared/notes/local-slurm-cluster.md
ClusterName=slurmgen
SlurmctldHost=localhost($CTL_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire=5 (the minimum) makes a requeued job eligible after 6 s instead of 121 s (gotcha 12).
AuthInfo=socket=$BASE/munge/munge.socket,cred_expire=5
MailProg=/bin/true
SlurmctldPort=$CTL_PORT
SlurmdPort=6818
StateSaveLocation=$BASE/spool/ctld
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No systemd and no cgroup plugins: plain process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# batch_sched_delay=0 removes a 3 s launch cadence; sched_interval=1 starts requeued jobs within a second.
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
# No sacct here: finished jobs stay visible to scontrol for 10 minutes (gotcha 13).
MinJobAge=600
GresTypes=gpu
# 3 nodes x 2 CPUs on a 2-core machine: config_overrides keeps them from draining (gotcha 8).
SlurmdParameters=config_overrides
NodeName=node[$first-$last] NodeAddr=$NODE_NET.[$((10 + first))-$((10 + last))] CPUs=2 RealMemory=2000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=node[$first-$last] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    echo "NodeName=node[$first-$last] Name=gpu File=$BASE/dev/nvidia[0-1]" >"$BASE/etc/gres.conf"

    # What each node sees as /etc/hosts, nsswitch.conf and resolv.conf (bind-mounted in its mount namespace).
    # hosts: files only, so no lookup waits for a nameserver that cannot answer (gotcha 4).
    {
        echo "127.0.0.1 localhost"
        echo "$CTL_ADDR slurmctl"
        local n
        for n in "${NODES[@]}"; do echo "$(node_ip "$n") $n"; done
    } >"$BASE/etc/hosts"
    local db
    for db in passwd group shadow gshadow hosts networks protocols services ethers rpc netgroup; do
        echo "$db: files"
    done >"$BASE/etc/nsswitch.conf"
    echo "nameserver 127.0.0.1" >"$BASE/etc/resolv.conf"
}

start_munge() {
    mungekey --create --keyfile="$BASE/munge/munge.key"
    munged --key-file="$BASE/munge/munge.key" --socket="$BASE/munge/munge.socket" \
        --pid-file="$BASE/munge/munged.pid" --seed-file="$BASE/munge/munged.seed" \
        --log-file="$BASE/log/munged.log" </dev/null >"$BASE/log/munged.stdout" 2>&1 9>&-
    local i
    for ((i = 0; i < 50; i++)); do
        munge -n -S "$BASE/munge/munge.socket" 2>/dev/null | unmunge -S "$BASE/munge/munge.socket" >/dev/null 2>&1 &&
            return 0
        sleep 0.1
    done
    die "munged did not come up (see $BASE/log/munged.log)"
}

setup_network() {
    ip link add "$BRIDGE" type bridge
    ip addr add "$CTL_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" alias "$BASE"
    ip link set "$BRIDGE" up
    local n ns i
    for n in "${NODES[@]}"; do
        ns=$NS_PREFIX$n i=${n#node}
        ip netns add "$ns"
        ip link add "$VETH_PREFIX$i" type veth peer name eth0 netns "$ns"
        ip link set "$VETH_PREFIX$i" master "$BRIDGE" up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$(node_ip "$n")/24" dev eth0
        ip -n "$ns" link set eth0 up
        # A default route via an address nobody owns: ifcfg.default_interface() needs one (gotcha 5).
        ip -n "$ns" route add default via "$GATEWAY" dev eth0
    done
}

start_slurmd() {
    local n=$1
    # Not `ip netns exec`: it remounts /sys, hides /sys/fs/cgroup and slurmd 22.05 dies (gotcha 3).
    # UTS + mount namespaces give the node its own hostname and /etc files; the host's stay untouched.
    # shellcheck disable=SC2016 # expanded by the inner sh
    nsenter --net="/run/netns/$NS_PREFIX$n" unshare --uts --mount --propagation private \
        sh -c 'hostname "$1" && mount --bind "$2/etc/hosts" /etc/hosts &&
               mount --bind "$2/etc/nsswitch.conf" /etc/nsswitch.conf &&
               { [ ! -e /etc/resolv.conf ] || mount --bind "$2/etc/resolv.conf" /etc/resolv.conf; } &&
               exec slurmd -f "$3" -N "$1"' sh "$n" "$BASE" "$CONF" \
        </dev/null >"$BASE/log/slurmd-$n.stdout" 2>&1 9>&-
}

wait_idle() {
    local i n
    for ((i = 0; i < 300; i++)); do
        nodes_in_states idle && return 0
        alive "$(pid_from "$RUN/slurmctld.pid")" slurmctld || die "slurmctld exited (see $BASE/log/slurmctld.log)"
        for n in "${NODES[@]}"; do
            [[ ! -e $RUN/slurmd-$n.pid ]] || alive "$(pid_from "$RUN/slurmd-$n.pid")" slurmd ||
                die "slurmd on $n exited (see $BASE/log/slurmd-$n.log)"
        done
        sleep 0.1
    done
    die "nodes not idle after 30 s: $(SLURM_CONF=$CONF sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')"
}

smoke_test() {
    local got want
    got=$(timeout 30 env SLURM_CONF="$CONF" srun -N3 --ntasks-per-node=1 hostname 2>&1 | sort | tr '\n' ' ') ||
        die "smoke test srun failed: $got"
    want="${NODES[*]} "
    [[ $got == "$want" ]] || die "smoke test: srun -N3 hostname printed '$got', expected '$want'"
}

# On failure keep the logs beside the base (down.sh removes the base) and clean up everything.
on_exit() {
    local rc=$?
    ((rc != 0 && STARTED)) || return 0
    if [[ -d $BASE/log ]]; then
        rm -rf "$BASE.failed-logs" && cp -r "$BASE/log" "$BASE.failed-logs"
        local f
        for f in "$BASE"/log/*; do
            [[ -s $f ]] && { echo "--- $f (tail)"; tail -n 5 "$f"; } >&2
        done
        log "logs kept in $BASE.failed-logs"
    fi
    log "bring-up failed; cleaning up"
    "$HERE/down.sh" --locked >/dev/null 2>&1 || log "warning: cleanup after the failed bring-up failed too"
}

# --- main -----------------------------------------------------------------------------------------------

main() {
    case ${1:-} in
    --check) healthy; return ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; return 0 ;;
    "") ;;
    *) die "unknown argument: $1 (try --help)" ;;
    esac
    require_tools
    local t0=$EPOCHREALTIME
    # One bring-up or teardown at a time: two test sessions may start together. Daemons are started with
    # fd 9 closed: a daemon that inherits it holds the lock for as long as it runs.
    exec 9>"$BASE.lock"
    flock -w 600 9 || die "another up.sh/down.sh holds $BASE.lock"

    if healthy; then
        log "a healthy cluster is already up; nothing to do"
        print_usage
        return 0
    fi
    check_owner
    if leftovers; then
        log "cleaning up a partial or unhealthy cluster first"
        "$HERE/down.sh" --locked >&2
    fi
    if [[ -e $BASE ]]; then
        die "$BASE exists and is not a cluster made by this script; move it away or set SLURMGEN_CLUSTER_BASE"
    fi
    install_packages
    check_free

    STARTED=1
    write_files
    start_munge
    setup_network
    slurmctld -f "$CONF" </dev/null >"$BASE/log/slurmctld.stdout" 2>&1 9>&-
    local n
    for n in "${NODES[@]}"; do
        start_slurmd "$n" || die "slurmd on $n did not start (see $BASE/log/slurmd-$n.stdout)"
    done
    wait_idle
    smoke_test
    printf '# Generated by tests/cluster/up.sh: source it to use the test cluster.\nexport SLURM_CONF=%s\n' \
        "$CONF" >"$BASE/env.sh"
    rm -rf "$BASE.failed-logs"
    log "up in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }") s"
    print_usage
}

STARTED=0
trap on_exit EXIT
main "$@"
