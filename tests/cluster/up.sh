#!/usr/bin/env bash
# Bring up slurmgen's 3-node test cluster for one Slurm version: munge, slurmctld and one slurmd per node, each
# node in its own network namespace with its own hostname and address, 2 CPUs and 2 fake GPUs.
#
#   tests/cluster/up.sh [--slurm 22.05|24.11|26.05] [--instance K]   start it (or say it is already up)
#   tests/cluster/up.sh [--slurm V] --check    exit 0 if a healthy cluster is up, 1 if not; changes nothing
#   tests/cluster/up.sh [--slurm V] --info     print its names, paths and partitions as KEY=VALUE lines
#   tests/cluster/down.sh [--slurm V]          stop it and remove everything it made
#   SLURMGEN_CLUSTER_ACCOUNTING=1 tests/cluster/up.sh --instance K   a 22.05 instance with slurmdbd and sacct
#
# 22.05 (the default) runs Debian bookworm's packages from the host; 24.11 and 26.05 run from a Debian chroot
# that chroot.sh builds once and caches. Names, subnets and ports differ per version (common.sh), so clusters
# of several versions run at the same time. Nothing in /etc is edited. README.md explains every setting.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"

# Inherited job variables would leak into srun/sbatch calls made here (sbatch(1) INPUT ENVIRONMENT VARIABLES).
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_|PMIX_)' || true)

# --- health ---------------------------------------------------------------------------------------------

# All nodes answer and can take work. Node states from `sinfo %t`; a suffix such as `*` (not responding)
# or `~` means the node is not usable.
nodes_in_states() {
    local pattern=$1 out n
    out=$(slurm timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    for n in "${NODES[@]}"; do
        grep -qE "^$n ($pattern)\$" <<<"$out" || return 1
    done
}

daemons_alive() {
    local n
    alive "$(pid_from "$BASE/munge/munged.pid")" munged || return 1
    if [[ -f $DBD_CONF ]]; then # a cluster with accounting
        alive "$(pid_from "$RUN/mysqld.pid")" mariadbd || return 1
        alive "$(pid_from "$RUN/slurmdbd.pid")" slurmdbd || return 1
    fi
    alive "$(pid_from "$RUN/slurmctld.pid")" slurmctld || return 1
    for n in "${NODES[@]}"; do
        alive "$(pid_from "$RUN/slurmd-$n.pid")" slurmd || return 1
    done
}

# plnd (PLANNED, sinfo(1) NODE STATE CODES): the backfill scheduler holds the node for a pending job, which
# happens whenever several sessions' jobs queue up on the shared cluster; the node is fine.
healthy() {
    [[ -f $BASE/env.sh && -f $CONF ]] && daemons_alive && nodes_in_states 'idle|mix|alloc|comp|plnd'
}

# The running cluster was made by another version of this script when its slurm.conf differs from the one
# this script writes (say, before the preemption partitions existed). It is still used, never restarted from
# here: another test session may be running jobs on it.
outdated() {
    [[ -f $CONF ]] && ! cmp -s "$CONF" <(slurm_conf)
}

print_usage() {
    cat <<EOF
Slurm $SLURM_VERSION test cluster is up: ${NODES[*]} (base $BASE).
  source $BASE/env.sh        # SLURM_CONF=$CONF${BIN_ON_PATH:+, and $BIN first on PATH}
  sinfo
  srun -N2 --ntasks-per-node=2 hostname
  $HERE/down.sh $SELECT     # stop it
EOF
}

# KEY=VALUE lines for tests (tests/conftest.py reads them) and people: what this cluster is called and has.
print_info() {
    local n addrs=()
    for n in "${NODES[@]}"; do addrs+=("$(node_ip "$n")"); done
    cat <<EOF
SLURM_VERSION=$SLURM_VERSION
SOURCE=$SOURCE
SUITE=$SUITE
INSTANCE=$INSTANCE
BASE=$BASE
SLURM_CONF=$CONF
PATH_PREPEND=${BIN_ON_PATH}
NODES=${NODES[*]}
NODE_ADDRS=${addrs[*]}
CTL_ADDR=$CTL_ADDR
CTL_PORT=$CTL_PORT
BRIDGE=$BRIDGE
NAMESPACES=${NODES[*]/#/$NS_PREFIX}
DEFAULT_PARTITION=debug
PREEMPTOR_PARTITION=high
PREEMPTEE_PARTITIONS=low-requeue low-requeue-grace low-cancel low-cancel-grace
GRACE_TIME=$GRACE_TIME
KILL_WAIT=$KILL_WAIT
USER_SIGNAL_PARAMETER=$(user_signal_line)
EOF
}

# --- preconditions --------------------------------------------------------------------------------------

require_tools() {
    [[ $EUID -eq 0 ]] || die "must run as root (network namespaces, mounts, daemons as SlurmUser=root)"
    local t
    for t in ip nsenter unshare mount mknod ss flock timeout findmnt; do
        command -v "$t" >/dev/null || die "required command not found: $t"
    done
}

install_packages() {
    local wanted=("${PACKAGES[@]}")
    if ((ACCOUNTING)); then wanted+=("${ACCOUNTING_PACKAGES[@]}"); fi
    "$HERE/apt-install.sh" "${wanted[@]}" || die "packages missing: ${wanted[*]}"
}

# Refuse to touch a cluster started with another base: the bridge carries its base as alias; a slurmctld is
# ours when its command line names our config.
check_owner() {
    local alias holder pid
    alias=$(cat "/sys/class/net/$BRIDGE/ifalias" 2>/dev/null || true)
    [[ -z $alias || $alias == "$BASE" ]] ||
        die "the test network $BRIDGE belongs to a cluster with base $alias; stop it with SLURMGEN_CLUSTER_BASE=... $HERE/down.sh"
    holder=$(ss -Hltnp "sport = :$CTL_PORT" 2>/dev/null || true)
    [[ -n $holder ]] || return 0
    pid=$(grep -o 'pid=[0-9]*' <<<"$holder" | head -n1 | cut -d= -f2)
    [[ -n $pid ]] && alive "$pid" slurmctld && tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF "$CONF" && return 0
    die "port $CTL_PORT is taken by something that is not this cluster: $holder"
}

# The port and the subnet must be free: what holds them now is not ours (ours was cleaned).
check_free() {
    local holder
    holder=$(ss -Hltnp "sport = :$CTL_PORT" 2>/dev/null || true)
    [[ -z $holder ]] || die "port $CTL_PORT is taken by something that is not this cluster: $holder"
    if ((ACCOUNTING)); then
        holder=$(ss -Hltnp "sport = :$DBD_PORT" 2>/dev/null || true)
        [[ -z $holder ]] || die "port $DBD_PORT (slurmdbd) is taken by something that is not this cluster: $holder"
    fi
    holder=$(ip -o -4 addr show to "$NODE_NET.0/24" 2>/dev/null || true)
    [[ -z $holder ]] || die "subnet $NODE_NET.0/24 is already in use on this host: $holder"
}

# Anything left from an earlier run (a failed or partial start, or a dead daemon)?
leftovers() {
    [[ -e $BASE ]] || ip link show "$BRIDGE" >/dev/null 2>&1 || ip netns list | grep -q "^$NS_PREFIX"
}

# --- the chroot (24.11, 26.05) ----------------------------------------------------------------------------

# Host directories that must have the same path on the nodes as on the host: job scripts and output files
# (/tmp, the work tree), the project's venv and the Python it points to, $HOME. Inside the chroot they are
# bind-mounted at their own paths (cluster-ns.sh); a directory below one already listed comes with it.
# SLURMGEN_CLUSTER_BINDS adds more (colon-separated).
bind_paths() {
    # The container tests' images (image.sh) are read on the nodes at their host paths too.
    local candidates=(/tmp /work /root /home /usr/local "$REPO" "$IMAGE_CACHE") py real prefix p q out=()
    # The interpreter tests run jobs with: the project's venv (sys.executable) or python3 from PATH. A venv
    # links to a base install (pyenv, /usr/local, /opt/...) whose libpython and stdlib jobs need too.
    for py in "$REPO/.venv/bin/python" "$(command -v python3 || true)"; do
        [[ -n $py && -e $py ]] || continue
        real=$(readlink -f "$py")
        prefix=$(dirname "$(dirname "$real")")
        [[ $prefix == /usr ]] || candidates+=("$prefix") # /usr is the chroot's own: never covered from the host
    done
    local IFS=:
    # shellcheck disable=SC2206 # split on colons on purpose
    candidates+=(${SLURMGEN_CLUSTER_BINDS:-})
    unset IFS
    for p in "${candidates[@]}"; do
        [[ -n $p && -d $p && $p == /* ]] || continue
        p=$(readlink -f "$p")
        [[ $p != / && $p != /usr && $p != /etc ]] || continue
        for q in "${out[@]}"; do [[ $p == "$q" || $p == "$q"/* ]] && continue 2; done
        local kept=()
        for q in "${out[@]}"; do [[ $q == "$p"/* ]] || kept+=("$q"); done
        out=("${kept[@]}" "$p")
    done
    (IFS=:; printf '%s\n' "${out[*]}")
}

prepare_chroot() {
    ROOT=$("$HERE/chroot.sh" --slurm "$SLURM_VERSION") || die "no chroot for Slurm $SLURM_VERSION"
    IMAGE_CACHE=${SLURMGEN_IMAGE_CACHE:-/var/cache/slurmgen/images}
    mkdir -p "$IMAGE_CACHE" # bound now, so an image built after the cluster started is seen on the nodes
    BINDS=$(bind_paths)
    local p
    IFS=: read -r -a paths <<<"$BINDS"
    # Mount points for binds the chroot was not built with (a work tree outside /work, say).
    for p in "${paths[@]}"; do mkdir -p "$ROOT$p"; done
}

# One wrapper per client command of the chroot's Slurm (sbatch, srun, scontrol, ...): run on the host, it
# enters the cluster's mount namespace (pinned by munged) and runs the chroot's binary in the caller's working
# directory; run inside the chroot (a job on a node, where $BIN is on the inherited PATH), it is that binary.
write_wrappers() {
    mkdir -p "$BIN"
    cat >"$BIN/.enter" <<EOF
#!/bin/sh
# Generated by tests/cluster/up.sh: run Slurm $SLURM_VERSION's client command \$1 from $ROOT against the
# cluster in $BASE, inside that cluster's mount namespace (the one munged runs in).
name=\$1
shift
pid=\$(cat "$BASE/munge/munged.pid" 2>/dev/null)
if [ -z "\$pid" ] || [ "\$(cat "/proc/\$pid/comm" 2>/dev/null)" != munged ]; then
    echo "\$name: the Slurm $SLURM_VERSION test cluster in $BASE is not running (start it: tests/cluster/up.sh --slurm $SLURM_VERSION)" >&2
    exit 1
fi
# shellcheck disable=SC2016 # expanded by the inner sh
exec nsenter --mount="/proc/\$pid/ns/mnt" -- chroot "$ROOT" /bin/sh -c '
    if ! cd "\$1" 2>/dev/null; then
        case \$2 in
        sbatch | srun | salloc)
            echo "\$2: the working directory \$1 is not visible inside the Slurm chroot (bound: $BINDS); add it to SLURMGEN_CLUSTER_BINDS" >&2
            exit 1 ;;
        esac
        cd /
    fi
    shift
    exec /usr/bin/"\$@"' sh "\$PWD" "\$name" "\$@"
EOF
    chmod 755 "$BIN/.enter"
    local cmd
    for cmd in $(chroot "$ROOT" dpkg-query -L slurm-client | sed -n 's|^/usr/bin/||p'); do
        printf '#!/bin/sh\n# Generated by tests/cluster/up.sh: Slurm %s'"'"'s %s.\n%s\n%s\n' "$SLURM_VERSION" "$cmd" \
            "if [ -e /etc/slurmgen-chroot ]; then exec /usr/bin/$cmd \"\$@\"; fi # on a node, inside the chroot" \
            "exec \"$BIN/.enter\" $cmd \"\$@\"" >"$BIN/$cmd"
        chmod 755 "$BIN/$cmd"
    done
}

# --- configuration --------------------------------------------------------------------------------------

slurm_conf() {
    local first=${NODES[0]#node} last=${NODES[-1]#node}
    local nodes="node[$first-$last]" part
    part="Nodes=$nodes MaxTime=INFINITE State=UP OverSubscribe=NO"
    cat <<EOF
# Generated by tests/cluster/up.sh for Slurm $SLURM_VERSION; tests/cluster/README.md explains each setting.
ClusterName=slurmgen
SlurmctldHost=localhost($CTL_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire=5 (the minimum) makes a requeued job eligible after 6 s instead of 121 s (README gotcha 12).
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
$(accounting_storage_lines)
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# batch_sched_delay=0 removes a 3 s launch cadence; sched_interval=1 starts requeued jobs within a second.
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=$KILL_WAIT
$(min_job_age_lines)
GresTypes=gpu
# 3 nodes x 2 CPUs on a 2-core machine: config_overrides keeps them from draining (README gotcha 8).
SlurmdParameters=config_overrides
NodeName=$nodes NodeAddr=$NODE_NET.[$((10 + first))-$((10 + last))] CPUs=2 RealMemory=2000 Gres=gpu:2 State=UNKNOWN
# Preemption between partitions over the same nodes (slurm.conf(5) PreemptType, PreemptMode, PriorityTier,
# GraceTime; README "Preemption"). A job of a partition with a higher PriorityTier preempts jobs of partitions
# with a lower tier whose PreemptMode is not OFF. debug (the default) and high are never preempted; debug
# shares tier 1 with the low-* partitions, so its jobs neither preempt them nor are preempted by them.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
# The user signal at preemption: on or off, switched at run time by preempt-signal.sh (scontrol reconfigure).
Include $BASE/etc/preempt-user-signal.conf
PartitionName=debug $part Default=YES PriorityTier=1 PreemptMode=OFF
PartitionName=high $part PriorityTier=2 PreemptMode=OFF
PartitionName=low-requeue $part PriorityTier=1 PreemptMode=REQUEUE GraceTime=0
PartitionName=low-requeue-grace $part PriorityTier=1 PreemptMode=REQUEUE GraceTime=$GRACE_TIME
PartitionName=low-cancel $part PriorityTier=1 PreemptMode=CANCEL GraceTime=0
PartitionName=low-cancel-grace $part PriorityTier=1 PreemptMode=CANCEL GraceTime=$GRACE_TIME
EOF
    # Extra lines for a separate instance (--instance K) that a test needs configured differently, e.g.
    # MaxArraySize=4 for the sweep tests; never for the shared instance 0, which other tests rely on.
    if [[ -n ${SLURMGEN_CLUSTER_EXTRA_CONF:-} ]]; then
        ((INSTANCE)) || die "SLURMGEN_CLUSTER_EXTRA_CONF is for a separate instance (--instance K, K > 0)"
        printf '%s\n' "$SLURMGEN_CLUSTER_EXTRA_CONF"
    fi
}

# With accounting (README "Accounting"), slurmctld sends every job to slurmdbd on this cluster's address, where
# the nodes reach it over the bridge too: sacct asks slurmdbd itself (sacct(1)), from a login node as well.
# Connections to slurmdbd authenticate through the munge socket named by AccountingStoragePass, not AuthInfo's
# (slurm.conf(5), AccountingStoragePass); without it sacct and sacctmgr look for /run/munge/munge.socket.2.
accounting_storage_lines() {
    if ((ACCOUNTING)); then
        printf '%s\n' "AccountingStorageType=accounting_storage/slurmdbd" "AccountingStorageHost=$CTL_ADDR" \
            "AccountingStoragePort=$DBD_PORT" "AccountingStoragePass=$BASE/munge/munge.socket"
    else
        echo "AccountingStorageType=accounting_storage/none"
    fi
}

# How long slurmctld keeps a finished job (MinJobAge, slurm.conf(5)). With accounting, 5 s, so that a test sees
# Slurm forget a job and sacct still answer: slurmctld purges old job records once a minute (PURGE_JOB_INTERVAL,
# 60 s, in src/slurmctld/slurmctld.h), so scontrol loses a job 5-65 s after its end.
min_job_age_lines() {
    if ((ACCOUNTING)); then
        printf '%s\n' "# Accounting: sacct keeps finished jobs; scontrol forgets them within 65 s (README \"Accounting\")." \
            "MinJobAge=5"
    else
        printf '%s\n' "# No sacct here: finished jobs stay visible to scontrol for 10 minutes (README gotcha 13)." \
            "MinJobAge=600"
    fi
}

# --- bring-up steps -------------------------------------------------------------------------------------

write_files() {
    mkdir -p "$BASE"/{etc,log,run,dev,spool/ctld} "$BASE/munge"
    touch "$BASE/.slurmgen-cluster" # down.sh removes $BASE only when this marker is there
    # munged refuses a socket directory without execute permission for all.
    chmod 0755 "$BASE" "$BASE/munge"
    [[ $SOURCE == host ]] || printf '%s\n' "$ROOT" >"$ROOT_FILE"

    # Fake GPUs: gres File= must name character devices (README gotcha 6); these are /dev/null's numbers.
    mknod "$BASE/dev/nvidia0" c 1 3
    mknod "$BASE/dev/nvidia1" c 1 3

    slurm_conf >"$CONF"
    # Off; preempt-signal.sh switches it. Never empty: slurmctld warns about an empty included file.
    echo "# the user signal at preemption is off (preempt-signal.sh)" >"$BASE/etc/preempt-user-signal.conf"
    echo "NodeName=node[${NODES[0]#node}-${NODES[-1]#node}] Name=gpu File=$BASE/dev/nvidia[0-1]" >"$BASE/etc/gres.conf"

    # What each node sees as /etc/hosts, nsswitch.conf and resolv.conf (bind-mounted in its mount namespace).
    # hosts: files only, so no lookup waits for a nameserver that cannot answer (README gotcha 4).
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
    ((ACCOUNTING == 0)) || write_accounting_files
}

# --- accounting (SLURMGEN_CLUSTER_ACCOUNTING=1; README "Accounting") -------------------------------------

# MariaDB's own options file, named first (--defaults-file): no option file of the system's MariaDB is read, so
# its datadir, socket and port in /etc/mysql stay out of it (mariadbd(8), "--defaults-file"). No TCP port at all
# (skip-networking): slurmdbd connects through the socket. The InnoDB sizes are small and nothing is synced: the
# database lives as long as the cluster (slurmdbd logs "Database settings not recommended values" for them).
write_accounting_files() {
    mkdir -p "$DB_DIR"
    cat >"$BASE/etc/mariadb.cnf" <<EOF
[mysqld]
datadir=$DB_DIR
socket=$DB_SOCKET
pid-file=$RUN/mysqld.pid
log-error=$BASE/log/mariadb.log
user=root
skip-networking
innodb_buffer_pool_size=32M
innodb_log_file_size=8M
innodb_flush_log_at_trx_commit=0
innodb_doublewrite=0
[client]
socket=$DB_SOCKET
user=root
EOF
    # slurmdbd.conf(5): slurmdbd reads it from the directory of SLURM_CONF; it holds the database credentials, so
    # it must be owned by SlurmUser (root here) with mode 600. The database user is root through MariaDB's
    # unix_socket authentication (slurmdbd runs as root): there is no password to write.
    (
        umask 077
        cat >"$DBD_CONF" <<EOF
# Generated by tests/cluster/up.sh for Slurm $SLURM_VERSION instance $INSTANCE; tests/cluster/README.md, "Accounting".
AuthType=auth/munge
AuthInfo=socket=$BASE/munge/munge.socket
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$BASE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOF
    )
    chmod 600 "$DBD_CONF"
}

# mariadbd does not fork: it runs in its own session, its output in its log. mariadb-install-db makes the system
# tables (~2 s); the root account authenticates by unix_socket (the connecting process's uid).
start_mariadb() {
    local cnf=$BASE/etc/mariadb.cnf deadline=$((SECONDS + 30))
    mariadb-install-db --defaults-file="$cnf" --auth-root-authentication-method=socket --skip-test-db \
        </dev/null >"$BASE/log/mariadb-install.log" 2>&1 9>&- ||
        die "mariadb-install-db failed (see $BASE/log/mariadb-install.log)"
    setsid mariadbd --defaults-file="$cnf" </dev/null >>"$BASE/log/mariadb.stdout" 2>&1 9>&- &
    until mariadb-admin --defaults-file="$cnf" ping >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "MariaDB did not come up in 30 s (see $BASE/log/mariadb.log)"
        sleep 0.1
    done
}

# slurmdbd forks into the background; it creates its tables on first start (~1 s). MYSQL_UNIX_PORT is the socket
# MariaDB's client library uses for host localhost when none is given (MariaDB's "mariadb Environment Variables";
# slurmdbd.conf(5) has no socket option). The cluster is added to the (always fresh) database before slurmctld
# registers; slurmdbd would add it then too, but slurmctld's start waits for that instead (~2.5 s either way).
start_slurmdbd() {
    local pid deadline=$((SECONDS + 30))
    env "SLURM_CONF=$CONF" "MYSQL_UNIX_PORT=$DB_SOCKET" slurmdbd </dev/null >"$BASE/log/slurmdbd.stdout" 2>&1 9>&- ||
        die "slurmdbd did not start (see $BASE/log/slurmdbd.log)"
    until slurm timeout 5 sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "slurmdbd did not answer in 30 s (see $BASE/log/slurmdbd.log)"
        pid=$(pid_from "$RUN/slurmdbd.pid")
        [[ -z $pid ]] || alive "$pid" slurmdbd || die "slurmdbd exited (see $BASE/log/slurmdbd.log)"
        sleep 0.1
    done
    slurm timeout 30 sacctmgr -i add cluster slurmgen >/dev/null || die "sacctmgr add cluster slurmgen failed"
}

start_munge() {
    local socket=$BASE/munge/munge.socket
    local args=(--key-file="$BASE/munge/munge.key" --socket="$socket" --pid-file="$BASE/munge/munged.pid"
        --seed-file="$BASE/munge/munged.seed" --log-file="$BASE/log/munged.log")
    if [[ $SOURCE == host ]]; then
        mungekey --create --keyfile="$BASE/munge/munge.key"
        munged "${args[@]}" </dev/null >"$BASE/log/munged.stdout" 2>&1 9>&-
    else
        # The cluster's mount namespace is born here and pinned by munged (it forks into the background).
        # shellcheck disable=SC2016 # expanded by the inner sh
        unshare --mount --propagation private -- "$HERE/cluster-ns.sh" "$ROOT" "$BINDS" -- \
            chroot "$ROOT" /bin/sh -c 'mungekey --create --keyfile="$1" && shift && exec munged "$@"' \
            sh "$BASE/munge/munge.key" "${args[@]}" </dev/null >"$BASE/log/munged.stdout" 2>&1 9>&-
    fi
    local i
    for ((i = 0; i < 50; i++)); do
        in_cluster munge -n -S "$socket" 2>/dev/null | in_cluster unmunge -S "$socket" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged did not come up (see $BASE/log/munged.log)"
}

# Run a command of this cluster's Slurm/munge installation: the host's, or the chroot's in the cluster's
# mount namespace.
in_cluster() {
    if [[ $SOURCE == host ]]; then
        "$@"
    else
        nsenter --mount="/proc/$(pid_from "$BASE/munge/munged.pid")/ns/mnt" -- chroot "$ROOT" "$@"
    fi
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
        # A default route via an address nobody owns: ifcfg.default_interface() needs one (README gotcha 5).
        ip -n "$ns" route add default via "$GATEWAY" dev eth0
    done
}

start_slurmctld() {
    if [[ $SOURCE == host ]]; then
        slurmctld -f "$CONF" </dev/null >"$BASE/log/slurmctld.stdout" 2>&1 9>&-
    else
        in_cluster slurmctld -f "$CONF" </dev/null >"$BASE/log/slurmctld.stdout" 2>&1 9>&-
    fi
}

start_slurmd() {
    local n=$1
    local enter=(nsenter --net="/run/netns/$NS_PREFIX$n")
    [[ $SOURCE == host ]] || enter+=(--mount="/proc/$(pid_from "$BASE/munge/munged.pid")/ns/mnt")
    # Not `ip netns exec`: it remounts /sys, hides /sys/fs/cgroup and slurmd dies (README gotcha 3).
    # UTS + mount namespaces give the node its own hostname and /etc files; the host's stay untouched.
    # shellcheck disable=SC2016 # expanded by the inner sh
    "${enter[@]}" -- unshare --uts --mount --propagation private \
        sh -c 'hostname "$1" && mount --bind "$2/etc/hosts" "$4/etc/hosts" &&
               mount --bind "$2/etc/nsswitch.conf" "$4/etc/nsswitch.conf" &&
               { [ ! -e "$4/etc/resolv.conf" ] || mount --bind "$2/etc/resolv.conf" "$4/etc/resolv.conf"; } &&
               if [ -n "$4" ]; then exec chroot "$4" slurmd -f "$3" -N "$1"; else exec slurmd -f "$3" -N "$1"; fi' \
        sh "$n" "$BASE" "$CONF" "${ROOT:-}" </dev/null >"$BASE/log/slurmd-$n.stdout" 2>&1 9>&-
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
    die "nodes not idle after 30 s: $(slurm sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')"
}

# One step on every node. A loaded machine can fail a first step that the cluster runs fine the next second (seen
# once in CI: the step's tasks ran and ended, srun did not report them), so three tries, each one's words logged.
smoke_test() {
    local got said want="${NODES[*]} " try
    for try in 1 2 3; do
        if got=$(slurm timeout 30 srun -N3 --ntasks-per-node=1 hostname 2>"$BASE/log/smoke.err" | sort | tr '\n' ' ') &&
            [[ $got == "$want" ]]; then
            return 0
        fi
        said=$(tr '\n' ' ' <"$BASE/log/smoke.err")
        log "smoke test, try $try: srun -N3 hostname printed '$got' (expected '$want'); srun said: $said"
        sleep 1
    done
    die "smoke test: srun -N3 hostname failed 3 times; last: '$got', srun said: $said"
}

write_env() {
    {
        echo "# Generated by tests/cluster/up.sh: source it to use the Slurm $SLURM_VERSION test cluster."
        echo "export SLURM_CONF=$CONF"
        [[ -z $BIN_ON_PATH ]] || echo "export PATH=$BIN_ON_PATH:\$PATH"
    } >"$BASE/env.sh"
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
    # the reason again, last: a caller that keeps the tail of this output sees it after the logs
    log "bring-up failed (${FAILURE:-see the error above}); cleaning up"
    "$HERE/down.sh" --slurm "$SLURM_VERSION" --instance "$INSTANCE" --locked >/dev/null 2>&1 ||
        log "warning: cleanup after the failed bring-up failed too"
}

# --- main -----------------------------------------------------------------------------------------------

main() {
    parse_cluster_args "$@"
    set -- "${ARGS[@]+"${ARGS[@]}"}"
    BIN_ON_PATH=""
    [[ $SOURCE == host ]] || BIN_ON_PATH=$BIN
    SELECT="--slurm $SLURM_VERSION"
    ((INSTANCE == 0)) || SELECT+=" --instance $INSTANCE"
    ACCOUNTING=0
    if [[ -n ${SLURMGEN_CLUSTER_ACCOUNTING:-} && $SLURMGEN_CLUSTER_ACCOUNTING != 0 ]]; then
        ((INSTANCE)) || die "SLURMGEN_CLUSTER_ACCOUNTING is for a separate instance (--instance K, K > 0)"
        [[ $SOURCE == host ]] || die "accounting is built for the host's Slurm (22.05) only"
        ACCOUNTING=1
    fi
    case ${1:-} in
    --check) healthy; return ;;
    --info) print_info; return 0 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; return 0 ;;
    "") ;;
    *) die "unknown argument: $1 (try --help)" ;;
    esac
    require_tools
    local t0=$EPOCHREALTIME
    # One bring-up or teardown at a time: two test sessions may start together. Daemons are started with
    # fd 9 closed: a daemon that inherits it holds the lock for as long as it runs.
    exec 9>"$BASE.lock"
    flock -w 900 9 || die "another up.sh/down.sh holds $BASE.lock"

    if healthy; then
        log "a healthy Slurm $SLURM_VERSION cluster is already up; nothing to do"
        if outdated; then
            log "warning: its slurm.conf is not the one this up.sh writes (an older harness started it); run" \
                "$HERE/down.sh $SELECT, then up.sh, once no test session uses it"
        fi
        print_usage
        return 0
    fi
    check_owner
    # Every daemon runs, yet the cluster does not answer as healthy (a node drained, a client that cannot talk
    # to it): it may be in use by another session, so it is never torn down from here.
    if daemons_alive; then
        die "the Slurm $SLURM_VERSION cluster in $BASE runs but is not healthy ($(slurm timeout 5 sinfo -h -N \
            -o '%N %t %E' 2>&1 | tr '\n' ';')); if no one uses it: $HERE/down.sh $SELECT, then up.sh again"
    fi
    if leftovers; then
        log "cleaning up a partial or unhealthy cluster first"
        "$HERE/down.sh" --slurm "$SLURM_VERSION" --instance "$INSTANCE" --locked >&2
    fi
    if [[ -e $BASE ]]; then
        die "$BASE exists and is not a cluster made by this script; move it away or set SLURMGEN_CLUSTER_BASE"
    fi
    if [[ $SOURCE == host ]]; then
        install_packages
        ROOT=""
    else
        prepare_chroot
    fi
    check_free
    local t1=$EPOCHREALTIME

    STARTED=1
    write_files
    start_munge
    [[ $SOURCE == host ]] || write_wrappers
    setup_network
    if ((ACCOUNTING)); then
        start_mariadb
        start_slurmdbd
    fi
    start_slurmctld
    local n
    for n in "${NODES[@]}"; do
        start_slurmd "$n" || die "slurmd on $n did not start (see $BASE/log/slurmd-$n.stdout)"
    done
    wait_idle
    smoke_test
    write_env
    rm -rf "$BASE.failed-logs"
    log "Slurm $SLURM_VERSION up in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }") s" \
        "($(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t1 }") s after packages/chroot)"
    print_usage
}

STARTED=0
trap on_exit EXIT
main "$@"
