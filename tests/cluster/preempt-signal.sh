#!/usr/bin/env bash
# Switch the user signal at preemption on or off for a running test cluster (it is cluster-wide, so it is a
# slurm.conf setting: Slurm has no per-partition form), with the spelling that cluster's Slurm accepts.
#
#   tests/cluster/preempt-signal.sh [--slurm V] [--instance K] on|off   switch, scontrol reconfigure, verify
#   tests/cluster/preempt-signal.sh [--slurm V] [--instance K] status   print on or off
#
# On: a preempted job whose `--signal=[B:]SIG[@T]` names a signal gets SIG when the preemption starts (the
# start of its grace time), as well as or instead of SIGTERM (README "Preemption"). up.sh starts every cluster
# with it off. It changes a shared cluster: tests switch it while holding the cluster's preemption lock
# ($BASE.preempt.lock, tests/conftest.py) and switch it back off afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"

# What `scontrol show config` says now: on when the parameter's value holds the user-signal word.
current() {
    local config
    config=$(slurm timeout 10 scontrol show config) || return 1
    if grep -qE '^(SlurmctldParameters|PreemptParameters) += .*(preempt_send_user_signal|send_user_signal)' \
        <<<"$config"; then
        echo on
    else
        echo off
    fi
}

# After `scontrol reconfigure` the controller answers again within a few seconds; from 23.11 on it re-executes
# itself to apply the new configuration (scontrol(1), "reconfigure"), so its pid may change.
wait_answers() {
    local i
    for ((i = 0; i < 100; i++)); do
        slurm timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' && return 0
        sleep 0.1
    done
    die "slurmctld does not answer after scontrol reconfigure (see $BASE/log/slurmctld.log)"
}

main() {
    parse_cluster_args "$@"
    set -- "${ARGS[@]+"${ARGS[@]}"}"
    local want=${1:-}
    [[ -f $CONF ]] || die "no Slurm $SLURM_VERSION test cluster in $BASE (start it with up.sh)"
    case $want in
    status) current; return ;;
    on | off) ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; return 0 ;;
    *) die "usage: $0 [--slurm V] [--instance K] on|off|status" ;;
    esac
    local file=$BASE/etc/preempt-user-signal.conf i
    # Already so: no reconfigure (it costs seconds, and from 23.11 on it restarts slurmctld).
    [[ $(current) != "$want" ]] || return 0
    if [[ $want == on ]]; then
        user_signal_line >"$file.new"
    else
        echo "# the user signal at preemption is off (preempt-signal.sh)" >"$file.new"
    fi
    mv "$file.new" "$file"
    slurm timeout 30 scontrol reconfigure || die "scontrol reconfigure failed"
    wait_answers
    for ((i = 0; i < 100; i++)); do
        [[ $(current) == "$want" ]] && { log "user signal at preemption: $want (Slurm $SLURM_VERSION)"; return 0; }
        sleep 0.1
    done
    die "scontrol show config does not show the user signal $want after reconfigure"
}

main "$@"
