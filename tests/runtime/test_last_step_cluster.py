"""An ended job shows the step its program really reached on the real test cluster, also when the program was
killed by SIGKILL (the kernel's OOM killer does that), which runs no code of the program's and so records no last
sample: rank 0's supervisor records the step its node mark in /dev/shm held, without the hang watchdog too. What it
checks is slurmgen's own, alike on every version, so it runs once (slurm_versions.ANY)."""

from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster
from slurm_versions import ANY

from .cluster_jobs import PY, read_log

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_versions(ANY)]

KILLED_AT = 240  # 12 s of 0.05 s steps: the last sample before it is the one 8 s after the first step (step ~160)

# Preemption's steps; rank 0's program kills itself with SIGKILL after step KILLED_AT, as the OOM killer would.
PROGRAM = f"""
import os, signal, sys, time
from slurmgen.runtime import Preemption
pre = Preemption()
for step in range(1, 2001):
    time.sleep(0.05)
    print(f"STEP {{step}}", flush=True)
    pre.should_stop(step=step)
    if step == {KILLED_AT} and os.environ["SLURM_PROCID"] == "0":
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_program_killed_on_the_cluster_without_the_watchdog_shows_the_step_its_node_mark_held(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """2 nodes x 1 rank, no recovery (so no hang watchdog): rank 0 dies of SIGKILL at step 240 and srun ends the
    job FAILED. `status` shows step 240 or at most a second's steps before it, from one last sample its supervisor
    recorded from the node mark; on the code before, it showed the sample 8 s after the first step. No node
    directory is left in /dev/shm."""
    (tmp_path / "train.py").write_text(PROGRAM)
    (tmp_path / "job.yaml").write_text(
        f"name: killed\ncommand: {[PY, str(tmp_path / 'train.py')]!r}\ntime: '00:10:00'\nnodes: 2\n"
        f"tasks_per_node: 1\ncpus_per_task: 1\npython: {PY}\noutput: {tmp_path}/logs\nrecovery: false\n"
        "distributed: {backend: gloo, timeout: 60, barrier_timeout: 30}\n"
    )
    done = run_slurmgen("submit", "job.yaml", cwd=tmp_path, env=slurm_cluster.env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr
    job = done.stdout.strip()
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=240)
    assert info.state.name == "FAILED", read_log(tmp_path, "killed", job, "batch")[-3000:]
    printed = [int(n) for n in re.findall(r"^STEP (\d+)$", read_log(tmp_path, "killed", job, "rank-0.log"), re.M)]
    assert max(printed) == KILLED_AT, printed[-5:]

    history = tmp_path / "logs" / f"killed-{job}" / "history" / "rank0.jsonl"
    events = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    [last] = [e for e in events if e.get("last")]
    assert last.get("from_mark") is True and KILLED_AT - 25 <= last["step"] <= KILLED_AT, last
    status = run_slurmgen("status", job, cwd=tmp_path, env=slurm_cluster.env, timeout=60)
    shown = re.search(r"^step: (\d+)", status.stdout, re.M)
    assert shown and int(shown[1]) == last["step"], status.stdout
    assert not re.search(r"\bETA\b|steps/s", status.stdout), status.stdout

    key = zlib.crc32(os.path.abspath(tmp_path / "logs" / f"killed-{job}").encode())
    assert not [d for d in os.listdir("/dev/shm") if d.startswith(f"slurmgen-{os.getuid()}-{key:08x}-")]
