#!/usr/bin/env bash
# Record real scheduler output of one Slurm version into tests/data/slurm/<version>/ (one file per format
# variant), for the parser tests.
#
#   tests/cluster/record-output.sh [--slurm 22.05|24.11|26.05] [--instance K] [--out DIR]
#
# It starts a cluster of its own (instance 9 unless --instance says otherwise) and stops it at the end, so a
# recording never disturbs a cluster that tests use, and job ids are the same on every recording and every
# version (job 1 is up.sh's smoke test). Takes about 2 minutes: the TIMEOUT job waits for slurmctld's 30 s
# time-limit check, and the preemption grace for the same tick. Re-recording changes times: the parser tests
# compare the values that do not change.
#
# Each file holds exactly what one command printed on one stream (.out = stdout, .err = stderr);
# MANIFEST.txt lists the command and its exit status for every file. banner-* files are the "*** JOB ... ***"
# lines slurmstepd wrote into a job's output file. handwritten-* files (tests/data/slurm/) are not made here.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/common.sh
. "$HERE/common.sh"
SLURMGEN_CLUSTER_INSTANCE=${SLURMGEN_CLUSTER_INSTANCE:-9}
parse_cluster_args "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"
DATA=$(cd "$HERE/.." && pwd)/data/slurm/$SLURM_VERSION
case ${1:-} in
--out) DATA=${2:?--out needs a directory} ;;
-h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) die "unknown argument: $1 (try --help)" ;;
esac
SELECT=(--slurm "$SLURM_VERSION" --instance "$INSTANCE")
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_)' || true)

# A fixed directory, so that recorded paths (WorkDir=, StdOut=) are the same on every recording and version:
# one recording at a time.
WORK=/tmp/slurmgen-record
exec {lock}>"$WORK.lock"
flock -w 600 "$lock" || die "another record-output.sh holds $WORK.lock"

"$HERE/up.sh" "${SELECT[@]}" --check && die "a Slurm $SLURM_VERSION cluster of instance $INSTANCE is already up:" \
    "recordings need a fresh one (job ids from 1); pick another --instance"
cleanup() {
    "$HERE/down.sh" "${SELECT[@]}" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
"$HERE/up.sh" "${SELECT[@]}" >/dev/null
SLURM_CONF=$CONF PATH=$(client_path)
export SLURM_CONF PATH

mkdir -p "$DATA"
rm -f "$DATA"/*.out "$DATA"/*.err "$DATA/MANIFEST.txt"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"

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

# banner NAME FILE: the "*** JOB/STEP ... ***" lines slurmstepd wrote into a job's output file.
banner() { rec "banner-$1" grep -a -F '***' "$2"; }

field_of() { scontrol show job -o "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n1 | cut -d= -f2; }
state_of() { field_of "$1" JobState; }

# wait_for ID STATE [SECONDS]: poll every 50 ms.
wait_for() {
    local id=$1 want=$2 i
    for ((i = 0; i < ${3:-20} * 20; i++)); do
        [[ $(state_of "$id") == "$want" ]] && return 0
        sleep 0.05
    done
    die "job $id not $want after ${3:-20} s (is $(state_of "$id"))"
}

# wait_until SECONDS CMD...: poll CMD every 50 ms.
wait_until() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 20; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    die "not within $limit s: $*"
}

submit() { sbatch --parsable -o "$WORK/%j.out" "$@"; }

SQUEUE_FORMAT=$(printf '%s\x1f' %i %A %T %r %M %l %D %N %P)%j # slurmgen/slurm_parse.py SQUEUE_FORMAT

# --- the order of the submissions below fixes the job ids: append new recordings at the end ---

# The TIMEOUT job first: it needs 60-90 s, everything else runs meanwhile.
# `exec`: the batch shell becomes sleep, so SIGTERM ends it as ExitCode=0:15 every time; a shell that waits for
# its child ends either 0:15 or 143:0, depending on which of them the signal reaches first.
# Jobs whose node a test compares are pinned with -w: placement otherwise depends on what else runs.
timeout_job=$(submit --time=1 -w node1 -J timeout --wrap 'exec sleep 300')

# --- sbatch ---
rec sbatch-parsable sbatch --parsable -w node1 -o /dev/null --wrap true
rec sbatch-plain sbatch -w node2 -o /dev/null --wrap true
rec sbatch-test-only sbatch --test-only -o /dev/null --wrap true
rec sbatch-error-gres sbatch --gres=gpu:3 -o /dev/null --wrap true

# --- a running 2-node job; a script path, job name and output path with spaces ---
mkdir -p "$WORK/dir with space"
printf '#!/bin/bash\nsrun sleep 300\n' >"$WORK/dir with space/my job.sh"
running=$(cd "$WORK/dir with space" && sbatch --parsable -N2 --ntasks-per-node=1 -w 'node[2-3]' -J "train lr=0.1 v2" \
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

norequeue=$(submit --no-requeue -w node1 -J norequeue --wrap 'exec sleep 300')
wait_for "$norequeue" RUNNING
rec show-job-o-norequeue scontrol show job -o "$norequeue"
rec requeue-disabled scontrol requeue "$norequeue"

# --- squeue with slurmgen's format while jobs of many kinds exist ---
array=$(submit --array=1-5%2 -J arr --wrap 'sleep 300')
wait_for "${array}_1" RUNNING
rec squeue squeue -h -t all -o "$SQUEUE_FORMAT"
rec squeue-array-job squeue -h -j "$array" -o "$SQUEUE_FORMAT"
rec show-job-o-array scontrol show job -o "$array"
rec show-job-array scontrol show job "$array"
rec show-job-o-array-task scontrol show job -o "${array}_2"
rec show-job-o-array-pending-task scontrol show job -o "${array}_4" # a task still in the pending range
rec show-job-o-all scontrol show job -o
# Slurm's JSON output where the build has it (squeue(1) --json needs the data_parser plugins).
rec squeue-json squeue --json

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
stubborn=$(submit -w node1 -J stubborn --wrap "trap '' TERM; while :; do sleep 0.1; done")
wait_for "$stubborn" RUNNING
scancel "$stubborn"
wait_for "$stubborn" COMPLETING 3
rec show-job-o-completing scontrol show job -o "$stubborn"

# --- requeue: COMPLETING with Restarts=1, then PENDING (BeginTime), then held and special-exit ---
rq=$(submit -w node2 -J rq --open-mode=append --wrap 'sleep 300')
wait_for "$rq" RUNNING
# The next job takes node2's last CPU as soon as rq leaves it, so the requeued rq stays PENDING through the
# recordings below (on a busy machine it could otherwise run again between them, cred_expire+1 s after the
# requeue); it runs again once that job is requeued in turn.
hold=$(submit -w node2 -J rqhold --wrap 'sleep 300')
rec requeue-running scontrol requeue "$rq"
rec show-job-o-requeue-completing scontrol show job -o "$rq"
wait_for "$rq" PENDING 10
rec show-job-o-requeued scontrol show job -o "$rq"
rec requeue-again scontrol requeue "$rq"
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
rec sbatch-test-only-too-large sbatch --parsable --test-only --nodes=4 -o /dev/null --wrap true

# --- scontrol show hostnames: a valid list and malformed ones (what each version makes of them) ---
rec hostnames scontrol show hostnames 'node[1-3],gpu-[01-02]'
rec hostnames-invalid scontrol show hostnames 'node[1-2]-ib' # a suffix after the brackets
rec hostnames-reversed-range scontrol show hostnames 'n[3-1]'
rec hostnames-double-range scontrol show hostnames 'n[1-2-3]'
rec hostnames-letter-range scontrol show hostnames 'n[a-b]'
rec hostnames-unclosed scontrol show hostnames 'n[1-2'
rec hostnames-empty-item scontrol show hostnames 'a,,b'

# --- free the nodes for what follows (the TIMEOUT job keeps one CPU of node1) ---
wait_for "$rq" RUNNING 30 # its second run, for the requeue banner
scancel "$rq" "$hold" "$se" "$running"
for job in "$rq" "$hold" "$se" "$running"; do wait_until 30 bash -c "[[ \$(scontrol show job -o $job) != *JobState=RUNNING* && \$(scontrol show job -o $job) != *JobState=COMPLETING* ]]"; done
banner requeue "$WORK/$rq.out"
banner cancel "$WORK/dir with space/out $running.log"

# --- squeue --format=%i<US>%k (slurmgen's comment query): held jobs with and without comments ---
c1=$(submit -H -J comments --comment "my run slurmgen:20261121-081500-a1b2c3" --wrap true)
c2=$(submit -H -J comments --array=1-3 --comment "slurmgen:20261121-081501-d4e5f6" --wrap true)
c3=$(submit -H -J comments --wrap true)
c4=$(submit -H -J comments --comment "again slurmgen:20261121-081500-a1b2c3" --wrap true)
scancel "$c3"
rec squeue-comments squeue --noheader --states=all --format="$(printf '%%i\x1f%%k')" -j "$c1,$c2,$c3,$c4"
scancel "$c1" "$c2" "$c4"

# --- requeue of a whole array and of one task ---
arr=$(submit --array=0-2 -J arrq --wrap 'sleep 300')
for t in 0 1 2; do wait_for "${arr}_$t" RUNNING; done
rec requeue-array-task scontrol requeue "${arr}_1"
rec show-job-o-array-task-requeued scontrol show job -o "${arr}_1"
rec squeue-array-task-requeued squeue -h -j "$arr" -o "$SQUEUE_FORMAT"
# The whole array while task 1 is between its runs: one message per group of tasks, exit status 1.
rec requeue-array-partly scontrol requeue "$arr"
rec requeue-array-pending scontrol requeue "$arr" # every task pending now
for t in 0 1 2; do wait_for "${arr}_$t" RUNNING 30; done
rec requeue-array scontrol requeue "$arr" # every task running
rec show-job-o-array-requeued scontrol show job -o "$arr"
scancel "$arr"
wait_until 30 bash -c "[[ -z \$(squeue -h -j $arr -t running,completing -o %i) ]]"

# --- a heterogeneous job (two components) ---
printf '#!/bin/bash\nsleep 300\n' >"$WORK/het.sh"
rec sbatch-het sbatch --parsable -J het -o "$WORK/%j.out" -n1 : -n1 "$WORK/het.sh"
het=$(cut -d';' -f1 <"$DATA/sbatch-het.out" 2>/dev/null || true)
if [[ -n $het ]]; then
    wait_until 20 bash -c "[[ \$(squeue -h -j $het -t running -o %i | wc -l) == 2 ]]"
    rec show-job-o-het scontrol show job -o "$het"
    rec squeue-het squeue -h -j "$het" -o "$SQUEUE_FORMAT"
    scancel "$het"
    wait_until 30 bash -c "[[ -z \$(squeue -h -j $het -t running,completing -o %i) ]]"
fi

# --- preemption (partitions from up.sh): a REQUEUE job during its grace time, then requeued by Slurm ---
victim=$(submit -p low-requeue-grace -w node3 -n2 --time=10 -J victim --wrap 'exec sleep 300')
wait_for "$victim" RUNNING
high=$(submit -p high -w node3 -n2 -J preemptor --wrap 'sleep 1')
wait_until 10 bash -c "[[ \$(scontrol show job -o $victim) == *PreemptTime=2* ]]"
rec show-job-o-preempt-grace scontrol show job -o "$victim"
rec show-job-o-preemptor-pending scontrol show job -o "$high"
rec squeue-preempt-grace squeue -h -j "$victim,$high" -o "$SQUEUE_FORMAT"
# Grace expiry is handled on slurmctld's 30 s time-limit check (src/slurmctld/job_mgr.c job_time_limit()).
wait_until 60 bash -c "[[ \$(scontrol show job -o $victim) == *Restarts=1* ]]"
rec show-job-o-preempt-requeued scontrol show job -o "$victim"
wait_for "$high" COMPLETED 30
scancel "$victim"
wait_for "$victim" CANCELLED 30
banner preemption-grace "$WORK/$victim.out"
# ... and a CANCEL job without grace: it ends PREEMPTED.
cvictim=$(submit -p low-cancel -w node3 -n2 --time=10 -J cvictim --wrap 'exec sleep 300')
wait_for "$cvictim" RUNNING
submit -p high -w node3 -n2 -J preemptor --wrap 'sleep 1' >/dev/null
wait_for "$cvictim" PREEMPTED 30
rec show-job-o-preempted scontrol show job -o "$cvictim"
banner preemption "$WORK/$cvictim.out"

# --- the site configuration: what `slurmgen doctor` reads (slurmgen.slurm.site) ---
rec show-config scontrol show config
rec show-partition-o scontrol -o show partition
rec show-partition scontrol show partition
rec show-partition-o-unknown scontrol -o show partition nope
# A client with no controller to ask (no SLURM_CONF, no /etc/slurm/slurm.conf in the client's root, no DNS SRV
# record).
[[ -e $(cluster_root)/etc/slurm/slurm.conf ]] ||
    rec show-config-no-controller env -u SLURM_CONF scontrol show config
"$HERE/preempt-signal.sh" "${SELECT[@]}" on
rec show-config-user-signal scontrol show config
"$HERE/preempt-signal.sh" "${SELECT[@]}" off

# --- the time limit ---
wait_for "$timeout_job" TIMEOUT 120
rec show-job-o-timeout scontrol show job -o "$timeout_job"
banner timeout "$WORK/$timeout_job.out"

printf 'slurm %s\n' "$(scontrol --version | awk '{print $2}')" >"$DATA/VERSION"
log "recorded $(wc -l <"$DATA/MANIFEST.txt") outputs of Slurm $(cat "$DATA/VERSION") into $DATA"
