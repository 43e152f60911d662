"""One stop reads the world once: rank 0 asks slurmctld for the job's record once (plus the check that its requeue
took effect) and reads the run history once, however many parts of the decision need them.

A real program constructs Preemption and gets a real SIGUSR1; `scontrol` on PATH is the stop tests' wrapper
(tests/runtime/test_stop_faults.py), which logs every call; an audit hook in the program logs every listing of
the run history's directory (run_history.read lists it once per read)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from slurmgen import contract, run_history

from .runtime_helpers import base_env
from .test_stop_faults import env_for, job_of, wrapper

PROGRAM = r"""
import os, sys, time
sys.modules["torch"] = None  # a plain program: the stop's own reads are what is counted
reads = os.environ["READS_LOG"]
history = os.path.join(os.environ["SLURMGEN_LOG_DIR"], "history")
def hook(event, args):
    if event == "os.listdir" and args and os.fspath(args[0]) == history:
        with open(reads, "a") as out:
            out.write("read\n")
sys.addaudithook(hook)
from slurmgen.runtime import Preemption
pre = Preemption()
print("READY", flush=True)
while not pre.should_stop():
    time.sleep(0.02)
with open(reads, "a") as out:
    out.write("stop\n")
pre.save_and_exit()  # nothing to save: the save is not what is counted
"""


def test_rank_0_asks_slurm_once_and_reads_the_history_once_in_a_stop(tmp_path: Path) -> None:
    """A preemption (Slurm shows PreemptTime, the job runs): rank 0 stops and requeues the job. Before: three
    `scontrol show job` and two or three reads of the run history in this one stop."""
    bin_dir = wrapper(tmp_path, fail=0, how="error", only=(), preempt="2026-11-25T10:00:00")
    reads = tmp_path / "reads.log"
    env = base_env(
        **env_for(tmp_path),
        **{contract.SPEC_HASH: "abc123", contract.PREEMPT_HANDLER: "runtime"},
        PATH=f"{bin_dir}:{base_env()['PATH']}",
        READS_LOG=str(reads),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
        proc.send_signal(signal.SIGUSR1)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    # The stop's outcome: the job requeued once, recorded once with its cause.
    assert job_of(bin_dir)["restarts"] == 1
    events = run_history.read(str(tmp_path / "logs"))
    assert [e["cause"] for e in events if e["event"] == run_history.REQUEUE] == [run_history.PREEMPTION]
    # What it cost: one question about the job before the requeue, one to see it took effect; one history read.
    calls = (bin_dir / "calls.log").read_text().splitlines()
    assert [c for c in calls if "show" in c.split()] == [calls[0], calls[-1]] and len(calls) == 3, calls
    assert "requeue" in calls[1].split(), calls
    lines = reads.read_text().splitlines()
    assert lines[lines.index("stop") :].count("read") == 1, lines


END = r"""
import os, sys
reads = os.environ["READS_LOG"]
history = os.path.join(os.environ["SLURMGEN_LOG_DIR"], "history")
def hook(event, args):
    if event == "os.listdir" and args and os.fspath(args[0]) == history:
        with open(reads, "a") as out:
            out.write("read\n")
sys.addaudithook(hook)
from slurmgen.batch.commands import main
sys.exit(main(["end", "0"]))
"""


def test_the_batch_shell_end_asks_slurm_once_and_reads_the_history_once(tmp_path: Path) -> None:
    """The batch shell's `end` of a preempted run that no rank requeued (handler requeue: the batch shell stopped
    the step): one `scontrol show job` for the decision, the requeue, one look that it took effect; one read of
    the run history."""
    logs = str(tmp_path / "logs")
    run_history.append(logs, "batch-shell", run_history.RUN_START, 1, time.time())
    bin_dir = wrapper(tmp_path, fail=0, how="error", only=(), preempt="2026-11-25T10:00:00")
    reads = tmp_path / "reads.log"
    env = base_env(
        **env_for(tmp_path),
        **{contract.SIGNALS: "USR1@1.0", contract.PREEMPT_HANDLER: "requeue"},
        PATH=f"{bin_dir}:{base_env()['PATH']}",
        READS_LOG=str(reads),
    )
    done = subprocess.run([sys.executable, "-c", END], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert job_of(bin_dir)["restarts"] == 1, done.stderr
    calls = (bin_dir / "calls.log").read_text().splitlines()
    assert len(calls) == 3 and "requeue" in calls[1].split(), calls
    assert reads.read_text().splitlines() == ["read"]
    ended = [e for e in run_history.read(logs) if e["event"] == run_history.RUN_END]
    assert [e["ended"] for e in ended] == ["requeued"], json.dumps(ended)
