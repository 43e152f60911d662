#!/usr/bin/env bash
# Record real scheduler output from the running test cluster into tests/data/slurm/ (one file per format
# variant), for tests/test_slurm_parse.py. Needs tests/cluster/up.sh first; takes about 90 s (the TIMEOUT
# job waits for Slurm's 30 s time-limit check). Re-recording changes ids and times: update the tests after.
#
# Each file holds exactly what one command printed on one stream (.out = stdout, .err = stderr);
# MANIFEST.txt lists the command and its exit status for every file. handwritten-* files are not made here.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
DATA=$(cd "$HERE/.." && pwd)/data/slurm
export SLURM_CONF=$CONF
"$HERE/up.sh" --check || die "no healthy cluster: run tests/cluster/up.sh first"
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_)' | grep -v '^SLURM_CONF$' || true)

mkdir -p "$DATA"
rm -f "$DATA"/[!h]*.out "$DATA"/[!h]*.err "$DATA/MANIFEST.txt"
# A fixed directory, so that recorded paths (WorkDir=, StdOut=) are the same on every recording.
WORK=/tmp/slurmgen-record
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
trap 'rm -rf "$WORK"' EXIT

# rec NAME CMD...: run CMD, keep stdout in NAME.out and stderr in NAME.err (when not empty), note the status.
rec() {
    local name=$1 rc=0
    shift
    "$@" >"$DATA/$name.out" 2>"$DATA/$name.err" || rc=$?
    [[ -s $DATA/$name.out ]] || rm -f "$DATA/$name.out"
    [[ -s $DATA/$name.err ]] || rm -f "$DATA/$name.err"
    local cmd="$*"
    printf '%s\trc=%d\t%s\n' "$name" "$rc" "${cmd//$'\x1f'/'\x1f'}" >>"$DATA/MANIFEST.txt"
}

state_of() { scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n1 | cut -d= -f2; }

# wait_for ID STATE [SECONDS]: poll every 50 ms.
wait_for() {
    local id=$1 want=$2 i
    for ((i = 0; i < ${3:-20} * 20; i++)); do
        [[ $(state_of "$id") == "$want" ]] && return 0
        sleep 0.05
    done
    die "job $id not $want after ${3:-20} s (is $(state_of "$id"))"
}

submit() { sbatch --parsable -o "$WORK/%j.out" "$@"; }

# The TIMEOUT job first: it needs 60-90 s, everything else runs meanwhile.
timeout_job=$(submit --time=1 -J timeout --wrap 'sleep 300')

# --- sbatch ---
rec sbatch-parsable sbatch --parsable -o /dev/null --wrap true
rec sbatch-plain sbatch -o /dev/null --wrap true
rec sbatch-test-only sbatch --test-only -o /dev/null --wrap true
rec sbatch-error-gres sbatch --gres=gpu:3 -o /dev/null --wrap true

# --- a running 2-node job; a script path, job name and output path with spaces ---
mkdir -p "$WORK/dir with space"
printf '#!/bin/bash\nsrun sleep 300\n' >"$WORK/dir with space/my job.sh"
running=$(cd "$WORK/dir with space" && sbatch --parsable -N2 --ntasks-per-node=1 -J "train lr=0.1 v2" \
    -o "$WORK/dir with space/out %j.log" --gres=gpu:2 "my job.sh")
wait_for "$running" RUNNING
sleep 1.1 # a non-zero RunTime
rec show-job-o-running scontrol show job -o "$running"
rec show-job-running scontrol show job "$running"

# --- pending behind it (needs all three nodes), held at submit, no-requeue ---
pending=$(submit -N3 --ntasks-per-node=2 -J wide --wrap true)
sleep 0.3
rec show-job-o-pending scontrol show job -o "$pending"
held=$(submit -H -J held --wrap true)
rec show-job-o-held scontrol show job -o "$held"
rec requeue-pending scontrol requeue "$held"
rec requeue-incomplete-pending scontrol requeue Incomplete "$held"

norequeue=$(submit --no-requeue -J norequeue --wrap 'sleep 300')
wait_for "$norequeue" RUNNING
rec show-job-o-norequeue scontrol show job -o "$norequeue"
rec requeue-disabled scontrol requeue "$norequeue"

# --- squeue with slurmgen's format while jobs of many kinds exist ---
array=$(submit --array=1-5%2 -J arr --wrap 'sleep 300')
wait_for "${array}_1" RUNNING
rec squeue squeue -h -t all -o "$(printf '%s\x1f' %i %A %T %r %M %l %D %N %P)%j"
rec squeue-array-job squeue -h -j "$array" -o "$(printf '%s\x1f' %i %A %T %r %M %l %D %N %P)%j"
rec show-job-o-array scontrol show job -o "$array"
rec show-job-array scontrol show job "$array"
rec show-job-o-array-task scontrol show job -o "${array}_2"
rec show-job-o-all scontrol show job -o

# --- finished jobs: completed, failed, cancelled (while pending), cancelled (while running) ---
rec scancel-pending scancel "$pending"
scancel "$array"
completed=$(submit -J ok --wrap true)
failed=$(submit -J bad --wrap 'exit 3')
wait_for "$completed" COMPLETED
wait_for "$failed" FAILED
rec show-job-o-completed scontrol show job -o "$completed"
rec show-job-completed scontrol show job "$completed"
rec show-job-o-failed scontrol show job -o "$failed"
rec show-job-o-cancelled-pending scontrol show job -o "$pending"
scancel "$norequeue"
wait_for "$norequeue" CANCELLED
rec show-job-o-cancelled scontrol show job -o "$norequeue"

# --- completing: a batch shell that ignores SIGTERM stays COMPLETING for KillWait (5 s) ---
stubborn=$(submit -J stubborn --wrap "trap '' TERM; while :; do sleep 0.1; done")
wait_for "$stubborn" RUNNING
scancel "$stubborn"
wait_for "$stubborn" COMPLETING 3
rec show-job-o-completing scontrol show job -o "$stubborn"

# --- requeue: COMPLETING with Restarts=1, then PENDING (BeginTime), then held and special-exit ---
rq=$(submit -J rq --wrap 'sleep 300')
wait_for "$rq" RUNNING
rec requeue-running scontrol requeue "$rq"
rec show-job-o-requeue-completing scontrol show job -o "$rq"
wait_for "$rq" PENDING 5
rec show-job-o-requeued scontrol show job -o "$rq"
rec requeue-again scontrol requeue "$rq"
hold=$(submit -J rqhold --wrap 'sleep 300')
wait_for "$hold" RUNNING
rec requeuehold-running scontrol requeuehold "$hold"
wait_for "$hold" PENDING 5
rec show-job-o-requeue-hold scontrol show job -o "$hold"
rec release-held scontrol release "$hold"
se=$(submit -J special --wrap 'sleep 300')
wait_for "$se" RUNNING
rec requeuehold-special-exit scontrol requeuehold State=SpecialExit "$se"
wait_for "$se" SPECIAL_EXIT 5
rec show-job-o-special-exit scontrol show job -o "$se"

# --- errors ---
rec show-job-invalid scontrol show job -o 99999
rec requeue-invalid scontrol requeue 99999
rec release-invalid scontrol release 99999
rec scancel-invalid scancel 99999
rec scancel-signal-invalid scancel --signal=USR1 99999
rec hostnames scontrol show hostnames 'node[1-3],gpu-[01-02]'
rec hostnames-invalid scontrol show hostnames 'node[1-2]-ib'

# --- the site configuration: what `slurmgen doctor` reads (slurmgen.slurm.site) ---
rec show-config scontrol show config
rec show-partition-o scontrol -o show partition
rec show-partition scontrol show partition
rec show-partition-o-unknown scontrol -o show partition nope
# A client with no controller to ask (no SLURM_CONF, no /etc/slurm/slurm.conf, no DNS SRV record).
[[ -e /etc/slurm/slurm.conf ]] || rec show-config-no-controller env -u SLURM_CONF scontrol show config

# --- the time limit ---
wait_for "$timeout_job" TIMEOUT 120
rec show-job-o-timeout scontrol show job -o "$timeout_job"

scancel "$rq" "$hold" "$se" "$stubborn" "$running" 2>/dev/null || true
log "recorded $(wc -l <"$DATA/MANIFEST.txt") outputs into $DATA"
