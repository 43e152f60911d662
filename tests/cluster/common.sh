# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this file
# Shared by the scripts in tests/cluster: which Slurm, where its cluster lives, its network names, and small
# process helpers. README.md (beside this file) explains every choice; the "gotchas" it numbers are cited here.
#
# A cluster is selected by a Slurm version and an instance number:
#   select_cluster VERSION [INSTANCE]      VERSION: 22.05 | 24.11 | 26.05; INSTANCE: 0 (default) .. 9
# Everything else is derived from them, so clusters of different versions (or a second instance of one, for
# experiments) run side by side without sharing a name, an address or a port:
#
#   version  instance  base                              bridge     namespaces        subnet        ctld port
#   22.05    0         /tmp/slurmgen-cluster             slurmgen0  slurmgen-node1..3 10.200.0.0/24 6817
#   24.11    0         /tmp/slurmgen-cluster-24.11       sg2411     sg2411-node1..3   10.201.0.0/24 6917
#   26.05    0         /tmp/slurmgen-cluster-26.05       sg2605     sg2605-node1..3   10.202.0.0/24 7017
#   V        K>0       <base of V>-kK                    <tag>kK    <tag>kK-node1..3  third octet K  +10*K
#
# 22.05 instance 0 keeps the names the harness always had: other test sessions may be using that cluster.
# SLURMGEN_CLUSTER_BASE replaces the /tmp/slurmgen-cluster prefix of every base (the suffixes stay).

SUPPORTED_VERSIONS=(22.05 24.11 26.05)
DEFAULT_VERSION=22.05
NODES=(node1 node2 node3)
PACKAGES=(munge slurmctld slurmd slurm-client)
ACCOUNTING_PACKAGES=(slurmdbd mariadb-server) # only for a cluster with accounting (SLURMGEN_CLUSTER_ACCOUNTING=1)

# The partitions of every cluster (README.md, "Preemption"). The numbers are here once; up.sh writes them
# into slurm.conf and tests read them back from `up.sh --info`.
GRACE_TIME=10 # seconds: GraceTime of the *-grace partitions
KILL_WAIT=5   # seconds between SIGTERM and SIGKILL

log() { printf '[cluster] %s\n' "$*" >&2; }
die() {
    FAILURE=$*
    printf '[cluster] error: %s\n' "$*" >&2
    exit 1
}

# select_cluster VERSION [INSTANCE]: set every name, path and address of that cluster.
select_cluster() {
    SLURM_VERSION=$1
    INSTANCE=${2:-0}
    [[ $INSTANCE =~ ^[0-9]$ ]] || die "instance must be a digit 0-9, not '$INSTANCE'"
    local index
    case $SLURM_VERSION in
    # SOURCE=host: Debian bookworm's own packages on this machine. SOURCE=chroot: a Debian release that ships
    # this version, unpacked by debootstrap (chroot.sh) and run in the cluster's mount namespace.
    22.05) index=0 SOURCE=host SUITE=bookworm ;;
    24.11) index=1 SOURCE=chroot SUITE=trixie ;;
    # forky (Debian testing) and sid both carry 26.05; testing only gets packages that passed migration.
    26.05) index=2 SOURCE=chroot SUITE=forky ;;
    *) die "unsupported Slurm version '$SLURM_VERSION' (supported: ${SUPPORTED_VERSIONS[*]})" ;;
    esac
    local prefix=${SLURMGEN_CLUSTER_BASE:-/tmp/slurmgen-cluster} tag=sg${SLURM_VERSION/./}
    if [[ $SLURM_VERSION == 22.05 ]]; then
        BASE=$prefix BRIDGE=slurmgen0 NS_PREFIX=slurmgen- VETH_PREFIX=sgveth
    else
        BASE=$prefix-$SLURM_VERSION BRIDGE=$tag NS_PREFIX=$tag- VETH_PREFIX=${tag}v
    fi
    if ((INSTANCE)); then
        # Interface names are at most 15 characters: sg2411k1v3 is 10.
        BASE+=-k$INSTANCE BRIDGE=${tag}k$INSTANCE NS_PREFIX=${tag}k$INSTANCE- VETH_PREFIX=${tag}k${INSTANCE}v
    fi
    NODE_NET=10.$((200 + index)).$INSTANCE
    CTL_ADDR=$NODE_NET.1
    GATEWAY=$NODE_NET.254 # owned by nobody: gives ifcfg a default route without letting packets out (README gotcha 5)
    CTL_PORT=$((6817 + 100 * index + 10 * INSTANCE))
    CONF=$BASE/etc/slurm.conf
    RUN=$BASE/run
    BIN=$BASE/bin # client wrappers of a chroot version (up.sh writes them); empty for the host's Slurm
    ROOT_FILE=$BASE/chroot # the chroot directory a chroot cluster runs from (written by up.sh)
    # Accounting (SLURMGEN_CLUSTER_ACCOUNTING=1, a separate 22.05 instance only; README "Accounting"): MariaDB on
    # a socket of its own (no TCP port), slurmdbd on the controller's address at the port after slurmd's.
    DBD_CONF=$BASE/etc/slurmdbd.conf
    DBD_PORT=$((CTL_PORT + 2))
    DB_DIR=$BASE/db
    DB_SOCKET=$RUN/mysqld.sock
}

# Parse the options every script shares (--slurm VERSION, --instance K) out of "$@"; the rest is left in ARGS.
# Without --slurm: $SLURMGEN_SLURM_VERSION, else 22.05.
parse_cluster_args() {
    local version=${SLURMGEN_SLURM_VERSION:-$DEFAULT_VERSION} instance=${SLURMGEN_CLUSTER_INSTANCE:-0}
    ARGS=()
    while (($#)); do
        case $1 in
        --slurm) version=${2:?--slurm needs a version} && shift ;;
        --slurm=*) version=${1#--slurm=} ;;
        --instance) instance=${2:?--instance needs a digit} && shift ;;
        --instance=*) instance=${1#--instance=} ;;
        *) ARGS+=("$1") ;;
        esac
        shift
    done
    select_cluster "$version" "$instance"
}

# The cluster-wide switch for the user signal at preemption (slurm.conf(5) PreemptParameters): `--signal`'s
# signal goes to the job when it is preempted, at the start of its grace time. 22.05 spells it
# SlurmctldParameters=preempt_send_user_signal and rejects PreemptParameters (added in 23.02).
user_signal_line() {
    case $SLURM_VERSION in
    22.05) echo "SlurmctldParameters=preempt_send_user_signal" ;;
    *) echo "PreemptParameters=send_user_signal" ;;
    esac
}

node_ip() { printf '%s.%d' "$NODE_NET" $((10 + ${1#node})); }

# The chroot a running chroot cluster uses (empty for a host cluster).
cluster_root() { [[ -r $ROOT_FILE ]] && cat "$ROOT_FILE"; }

# A pid from a pid file, or nothing.
pid_from() { [[ -r $1 ]] && tr -dc '0-9' <"$1"; }

# True while PID runs as COMM. A zombie is not alive: PID 1 here reaps orphans late and kill -0 succeeds on
# zombies (README gotcha 14), so read the state letter from /proc/PID/stat instead. COMM-wlm counts too: from
# trixie on, Debian installs the daemons as /usr/sbin/slurmctld-wlm and slurmd-wlm behind update-alternatives
# links, and the process name is the real file's.
alive() {
    local pid=$1 comm=${2:-} stat state name
    [[ -n $pid ]] || return 1
    { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || return 1
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X ]] || return 1
    [[ -z $comm ]] && return 0
    { read -r name <"/proc/$pid/comm"; } 2>/dev/null || return 1
    [[ $name == "$comm" || $name == "$comm-wlm" ]]
}

# Wait (bounded, in tenths of a second) until PID no longer runs.
wait_gone() {
    local pid=$1 tenths=${2:-30} i
    for ((i = 0; i < tenths; i++)); do
        alive "$pid" || return 0
        sleep 0.1
    done
    ! alive "$pid"
}

# Stop PID if it still runs as COMM: TERM, a bounded wait, then KILL.
stop_pid() {
    local pid=$1 comm=$2 tenths=${3:-20}
    alive "$pid" "$comm" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait_gone "$pid" "$tenths" && return 0
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 30 || log "warning: pid $pid ($comm) still there after SIGKILL"
}

# PATH without the client wrappers of any test cluster (a $BASE/bin of a base that up.sh made), then this
# cluster's own client commands first: its wrappers for a chroot version, the host's for 22.05. A caller that
# sourced another version's env.sh must never drive this cluster with that version's sbatch or sinfo
# (mismatched versions are refused: "Incompatible versions of client and server code").
client_path() {
    local out=() p
    local IFS=:
    for p in $PATH; do
        [[ -n $p && ! -e ${p%/bin}/.slurmgen-cluster ]] && out+=("$p")
    done
    if [[ $SOURCE == chroot ]]; then
        printf '%s\n' "$BIN:${out[*]}"
    else
        printf '%s\n' "/usr/bin:/usr/sbin:${out[*]}"
    fi
}

# Run a command with this cluster's Slurm client commands and SLURM_CONF (see client_path).
# `slurm timeout 5 sinfo` works too: env hands the PATH to timeout, which looks sinfo up in it.
slurm() { env "PATH=$(client_path)" "SLURM_CONF=$CONF" "$@"; }
