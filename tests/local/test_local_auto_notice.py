"""preemption.handler auto (the default) with an unmodified program: the batch shell waits for the program to
construct Preemption before it stops the step, and the `run` terminal, `slurmgen history` and `slurmgen status`
say so, not only the batch log, where nobody running locally looks. A whole local run of a program that never
heard of slurmgen."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from runtime.runtime_helpers import without_steering

PY = sys.executable
# Sleeps in run 1 (until the batch shell stops it), ends at once in run 2.
UNMODIFIED = "import os, time; time.sleep(0.1 if os.environ.get('SLURM_RESTART_COUNT', '0') != '0' else 120)"


def slurmgen(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "slurmgen", *args], cwd=where, env=without_steering(), capture_output=True,
                          text=True, timeout=180, check=False)  # fmt: skip


@pytest.mark.slow
def test_autos_wait_for_an_unmodified_program_is_said_on_the_terminal_and_in_history_and_status(
    tmp_path: Path,
) -> None:
    port = 20000 + zlib.crc32(str(tmp_path).encode()) % 9000
    (tmp_path / "job.yaml").write_text(
        f"name: job\ncommand: [{PY}, -c, {json.dumps(UNMODIFIED)}]\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\n"
        f"python: {PY}\ndistributed: {{port: {port}}}\npreemption: {{lead_time: 8}}\n"  # auto waits 8 / 4 = 2 s
    )
    done = slurmgen(tmp_path, "run", "job.yaml", "--preempt-after", "2")
    assert done.returncode == 0, done.stderr
    assert "COMPLETED, exit code 0, 2 runs" in done.stderr, done.stderr
    up_front = ("preemption.handler auto: the program has not constructed slurmgen's Preemption, so the batch shell "
                "waits up to 2 s for it, then stops the step with SIGTERM and requeues; set preemption.handler: "
                "requeue to stop an unmodified program at once")  # fmt: skip
    why = ("preemption.handler auto: the program did not construct Preemption within 2 s of SIGUSR1, so the step "
           "was stopped with SIGTERM and requeued; set preemption.handler: requeue to stop it at once")  # fmt: skip
    lines = done.stderr.splitlines()
    said = [n for n, line in enumerate(lines) if line.endswith(up_front)]
    relayed = [n for n, line in enumerate(lines) if line.endswith(f"run 1: {why}")]
    assert len(said) == 1 and len(relayed) == 1 and said[0] < relayed[0], done.stderr
    assert relayed[0] < next(n for n, line in enumerate(lines) if "run 2 started" in line)  # before run 2 starts
    history = slurmgen(tmp_path, "history", "local-1")
    assert why in history.stdout, history.stdout + history.stderr
    status = slurmgen(tmp_path, "status", "local-1")
    assert f"job 1: run 1: {why}" in status.stdout + status.stderr, status.stdout + status.stderr


@pytest.mark.slow
def test_an_unmodified_program_that_ends_during_autos_wait_completes_in_one_run(tmp_path: Path) -> None:
    """auto waits 15 s (a quarter of the 60 s lead time) after the preemption for an unmodified program to
    construct Preemption; this one ends 0 on its own 6 s after the signal, within the wait. The job completes in
    its one run, not requeued for a second run that has nothing to do; the batch log says the wait as it begins.
    (Before: COMPLETED in 2 runs, and the wait's line on the terminal only.)"""
    port = 20000 + zlib.crc32(str(tmp_path).encode()) % 9000
    program = "import time; time.sleep(10); print('DONE', flush=True)"
    (tmp_path / "job.yaml").write_text(
        f"name: job\ncommand: [{PY}, -c, {json.dumps(program)}]\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\n"
        f"python: {PY}\ndistributed: {{port: {port}}}\npreemption: {{lead_time: 60}}\n"
    )
    done = slurmgen(tmp_path, "run", "job.yaml", "--preempt-after", "4")
    assert done.returncode == 0, done.stderr
    assert "COMPLETED, exit code 0, 1 run in" in done.stderr, done.stderr
    batch = (tmp_path / "logs" / "job-1.log").read_text()
    wait = ("slurmgen: preemption.handler auto: the program has not constructed slurmgen's Preemption, so the batch "
            "shell waits up to 15 s for it")  # fmt: skip
    assert batch.count(wait) == 1, batch
    assert "preempted after the program had finished its work: not requeued" in batch, batch
    assert "requeue issued" not in batch and "DONE" in (tmp_path / "logs" / "job-1" / "rank-0.log").read_text()
