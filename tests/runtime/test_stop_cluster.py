"""The stop path on the real Slurm: a clean stop keeps the state and `slurmgen resume` brings the job
back from it; a preemption signal during a finished program's teardown leaves the job COMPLETED.

The same decisions run locally and as a table in tests/runtime/test_stop_faults.py and tests/test_interruption.py;
these are the one real trial of each. Primary Slurm version only."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from cli_run import slurmgen_argv

from slurmgen import run_history

from .cluster_jobs import job_history, logs, scancel, spec_text, submit, wait_for_text

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def test_a_clean_stop_keeps_the_state_and_resume_brings_the_job_back(slurm_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """USR2 (`slurmgen cancel JOB --signal USR2` sends it to the batch shell) after a periodic save: the ranks
    exit cleanly, the job ends COMPLETED exit 0 as asked, but its run history says "stopped" and its state stays;
    `slurmgen resume JOB` requeues it and run 2 starts from the saved step, completes, and only then the state
    goes. Before: the batch shell took the clean stop for completion and deleted the state."""
    name = "stop-usr2"
    job = submit(slurm_cluster, tmp_path, spec_text(tmp_path, name, steps=900, step_time=0.02))
    wait_for_text(tmp_path, name, job, r"saved state to \S+ \(.*periodic\)", timeout=180)
    scancel(slurm_cluster, "--batch", "--signal=USR2", job)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=120)
    text = logs(tmp_path, name, job)
    assert (info.state_name, info.exit_code, info.restarts) == ("COMPLETED", 0, 0), text[-3000:]
    state = tmp_path / "logs" / "state" / f"{job}.state"
    assert state.exists(), text[-3000:]
    assert f"job {job} stopped before its work was done (clean-exit): its resume state is kept" in text
    end = [e for e in run_history.read(str(tmp_path / "logs" / f"{name}-{job}")) if e["event"] == "run-end"]
    assert [e["ended"] for e in end] == ["stopped"]
    result = slurm_cluster.run(slurmgen_argv("resume", job), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.restarts >= 1 and i.state.is_terminal, timeout=240)
    text = logs(tmp_path, name, job)
    assert info.state_name == "COMPLETED", text[-3000:]
    assert re.search(r"start at step [1-9]\d* on \S+, run 2, last stop: clean-exit", text), text[-3000:]
    assert "final weights" in text and not state.exists()
    assert [(r.run, r.cause, r.requeued_by) for r in job_history(tmp_path, name, job)] == [
        (1, "clean-exit", "resume"),
        (2, None, None),
    ]


# Finishes at once, then tears down slowly (a module global's finalizer, as torch's teardown takes seconds).
FINISHING = """
import sys, time
from slurmgen.runtime import Preemption
pre = Preemption()
for step in range(3):
    if pre.should_stop():
        pre.save_and_exit({"step": step})
print("WORK DONE", flush=True)
class SlowTeardown:
    def __del__(self):
        time.sleep(4)
slow = SlowTeardown()
"""


def test_a_preemption_signal_during_teardown_leaves_the_job_completed(slurm_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """USR1 to every task while the finished program tears down: COMPLETED exit 0, not FAILED 138, no requeue."""
    name = "stop-teardown"
    program = tmp_path / "finishing.py"
    program.write_text(FINISHING)
    text = spec_text(tmp_path, name, steps=1, step_time=0.0, command=[sys.executable, str(program)])
    text = text.replace("nodes: 2\ntasks_per_node: 2\n", "nodes: 1\ntasks_per_node: 1\n")
    job = submit(slurm_cluster, tmp_path, text)
    wait_for_text(tmp_path, name, job, r"WORK DONE", timeout=180)
    scancel(slurm_cluster, "--signal=USR1", job)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=120)
    out = logs(tmp_path, name, job)
    assert (info.state_name, info.exit_code, info.restarts) == ("COMPLETED", 0, 0), out[-3000:]
    assert [
        e["ended"] for e in run_history.read(str(tmp_path / "logs" / f"{name}-{job}")) if e["event"] == "run-end"
    ] == ["completed"]
