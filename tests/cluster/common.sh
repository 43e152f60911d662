# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this file
# Shared by up.sh and down.sh: names, paths and small process helpers for the local 3-node test cluster.
# The facts behind every choice are in shared/notes/local-slurm-cluster.md (the "gotchas" are numbered there).

BASE=${SLURMGEN_CLUSTER_BASE:-/tmp/slurmgen-cluster}
NODES=(node1 node2 node3)
NS_PREFIX=slurmgen-       # network namespaces: slurmgen-node1 .. slurmgen-node3
BRIDGE=slurmgen0          # host-side bridge; slurmctld listens on its address
VETH_PREFIX=sgveth        # host ends of the veth pairs: sgveth1 .. sgveth3 (inner ends are eth0)
CTL_ADDR=10.200.0.1
NODE_NET=10.200.0
GATEWAY=10.200.0.254      # owned by nobody: gives ifcfg a default route without letting packets out (gotcha 5)
CTL_PORT=6817
PACKAGES=(munge slurmctld slurmd slurm-client)

CONF=$BASE/etc/slurm.conf
RUN=$BASE/run

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

node_ip() { printf '%s.%d' "$NODE_NET" $((10 + ${1#node})); }

# A pid from a pid file, or nothing.
pid_from() { [[ -r $1 ]] && tr -dc '0-9' <"$1"; }

# True while PID runs as COMM. A zombie is not alive: PID 1 here reaps orphans late and kill -0 succeeds on
# zombies (gotcha 14), so read the state letter from /proc/PID/stat instead.
alive() {
    local pid=$1 comm=${2:-} stat state name
    [[ -n $pid ]] || return 1
    { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || return 1
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X ]] || return 1
    [[ -z $comm ]] && return 0
    { read -r name <"/proc/$pid/comm"; } 2>/dev/null || return 1
    [[ $name == "$comm" ]]
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

slurm() { SLURM_CONF=$CONF "$@"; }
