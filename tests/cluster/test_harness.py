"""The test cluster itself: multi-node jobs, requeue, an idempotent harness. Real Slurm, nothing mocked."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from conftest import UP, SlurmCluster
from slurm_versions import Preemption

from slurmgen.slurm.ids import JobState

pytestmark = pytest.mark.slurm


def write_script(path: Path, body: str, *directives: str) -> Path:
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), body]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_two_nodes_two_tasks_each(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "job.out"
    script = write_script(
        tmp_path / "job.sh",
        """
echo "hostnames $(scontrol show hostnames "$SLURM_JOB_NODELIST" | tr '\\n' ' ')"
echo "resolve $(getent hosts "$SLURMD_NODENAME" | awk '{print $1, $2}')"
srun bash -c 'echo "task $SLURM_PROCID $(hostname) $SLURM_LOCALID $SLURM_NODEID $SLURM_NTASKS"'
""",
        "--nodes=2",
        "--ntasks-per-node=2",
        f"--output={out}",
    )
    job = slurm_cluster.submit(script)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=60)
    assert (info.state, info.exit_code) == (JobState.COMPLETED, 0), out.read_text()

    hosts = slurm_cluster.client.show_hostnames(info.nodes or "")
    assert len(hosts) == 2 and set(hosts) <= set(slurm_cluster.nodes)  # node1/node2 on an idle cluster
    lines = out.read_text().splitlines()
    tasks = sorted(line.split()[1:] for line in lines if line.startswith("task "))
    # block distribution: ranks 0,1 on the first node, 2,3 on the second; each node sees its own hostname
    assert tasks == [
        ["0", hosts[0], "0", "0", "4"],
        ["1", hosts[0], "1", "0", "4"],
        ["2", hosts[1], "0", "1", "4"],
        ["3", hosts[1], "1", "1", "4"],
    ]
    assert f"hostnames {hosts[0]} {hosts[1]} " in lines
    # the batch shell runs on the first node, which resolves its own name from the node's /etc/hosts
    assert f"resolve {slurm_cluster.node_addrs[hosts[0]]} {hosts[0]}" in lines
    assert info.batch_host == hosts[0]


def test_requeue_brings_the_job_back(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "rq.out"
    script = write_script(
        tmp_path / "rq.sh",
        'echo "run restart=${SLURM_RESTART_COUNT-unset}"\n[ -n "$SLURM_RESTART_COUNT" ] || exec sleep 120',
        f"--output={out}",
        "--open-mode=append",  # a requeued run truncates its output otherwise (README gotcha 10)
        "--requeue",
    )
    job = slurm_cluster.submit(script)
    slurm_cluster.wait_for(job, "RUNNING")
    deadline = time.monotonic() + 10
    while "run restart=unset" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, "the first run did not start"
        time.sleep(0.05)

    started = time.monotonic()
    slurm_cluster.client.requeue(job)
    info = slurm_cluster.wait_for(job, "COMPLETED", timeout=60)
    round_trip = time.monotonic() - started

    lines = out.read_text().splitlines()
    assert [line for line in lines if line.startswith("run ")] == ["run restart=unset", "run restart=1"]
    assert f"*** JOB {job} ON" in lines[1] and "DUE TO JOB REQUEUE ***" in lines[1]  # what slurmstepd says
    assert (info.restarts, info.exit_code) == (1, 0)
    assert round_trip < 20, f"requeue round trip {round_trip:.1f} s (cred_expire=5 + sched_interval=1 give ~6 s)"


@pytest.mark.skipif(os.geteuid() != 0, reason="up.sh needs root")
def test_up_is_idempotent_on_a_healthy_cluster(slurm_cluster: SlurmCluster) -> None:
    pid_file = slurm_cluster.base / "run" / "slurmctld.pid"
    before = pid_file.read_text().strip()
    started = time.monotonic()
    select = ["--slurm", slurm_cluster.version]  # never the default: that may be another session's cluster
    result = slurm_cluster.run(["bash", str(UP), *select])
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "already up" in result.stderr
    assert f"source {slurm_cluster.base}/env.sh" in result.stdout
    assert pid_file.read_text().strip() == before  # no daemon was restarted
    assert took < 5
    assert slurm_cluster.run(["bash", str(UP), *select, "--check"]).returncode == 0


@pytest.mark.slurm_versions()
def test_preemption_partitions_preempt_for_real(
    slurm_cluster: SlurmCluster, slurm_preemption: Preemption, tmp_path: Path
) -> None:
    """A high job takes a low-requeue job's node: Slurm requeues the victim; a debug job is never preempted."""
    p = slurm_preemption
    sleeper = write_script(tmp_path / "sleep.sh", "exec sleep 300")
    sbatch = ("-w", "node3", "-n2", "--requeue", f"--output={tmp_path}/%j.out")
    victim = slurm_cluster.submit(sleeper, "-p", p.requeue, *sbatch)
    shielded = slurm_cluster.submit(sleeper, "-p", "debug", "-w", "node2", "-n2", f"--output={tmp_path}/%j.out")
    mine = [victim, shielded]
    try:
        slurm_cluster.wait_for(victim, "RUNNING", timeout=60)
        slurm_cluster.wait_for(shielded, "RUNNING", timeout=60)
        preemptor = slurm_cluster.submit(write_script(tmp_path / "quick.sh", "true"), "-p", p.high, *sbatch)
        blocked = slurm_cluster.submit(sleeper, "-p", p.high, "-w", "node2", "-n2", f"--output={tmp_path}/%j.out")
        mine += [preemptor, blocked]
        requeued = slurm_cluster.wait_for(victim, lambda i: i.restarts == 1, timeout=60)  # Slurm's own requeue
        assert requeued.state in {JobState.COMPLETING, JobState.PENDING, JobState.RUNNING}
        assert slurm_cluster.wait_for(preemptor, "COMPLETED", timeout=60).exit_code == 0
        assert slurm_cluster.wait_for(victim, "RUNNING", timeout=60).restarts == 1  # back once the node is free
        # the debug job keeps its node: the high job that wants it waits
        assert slurm_cluster.client.show_job(shielded).state is JobState.RUNNING  # type: ignore[union-attr]
        assert slurm_cluster.client.show_job(blocked).state is JobState.PENDING  # type: ignore[union-attr]
        p.user_signal(True)
        config = slurm_cluster.run(["scontrol", "show", "config"]).stdout
        key, _, value = p.info.user_signal_parameter.partition("=")
        assert re.search(rf"^{key} += {value}$", config, re.MULTILINE), config
    finally:
        for job in mine:
            slurm_cluster.client.cancel(job)
