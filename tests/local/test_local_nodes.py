"""Bad nodes on whole local runs (`slurmgen run --bad-node N`): the rendered script's node checks as a real job
step of the fake srun, a spare taking the bad node's place, and without a spare the requeue away from it (fake
scontrol's requeue and ExcNodeList; the next run gets other emulated nodes). The same on the real cluster:
tests/runtime/test_nodes_cluster.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from runtime.runtime_helpers import without_steering

from slurmgen import run_history

pytestmark = [pytest.mark.slow]

PY = sys.executable
SHOW = "import os; print('ON', os.environ['RANK'], os.environ['SLURMD_NODENAME'], os.environ['MASTER_ADDR'])"


def spec(where: Path, recovery: str) -> str:
    port = 20000 + zlib.crc32(str(where).encode()) % 9000  # other local jobs on the machine take the default
    return (f"name: job\ncommand: [{PY}, -c, {json.dumps(SHOW)}]\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 1\n"
            f"python: {PY}\ndistributed: {{port: {port}}}\nrecovery: {recovery}\n")  # fmt: skip


def run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_slurmgen(*args, cwd=where, env=without_steering())


def ranks(where: Path) -> list[tuple[str, str, str]]:
    logs = sorted((where / "logs" / "job-1").glob("rank-*.log"))
    return [m for log in logs for m in re.findall(r"^ON (\d) (\S+) (\S+)$", log.read_text(), re.M)]


def excluded(where: Path) -> list[tuple[int, str, str]]:
    events = run_history.read(str(where / "logs" / "job-1"))
    return [(e["run"], e["node"], e["reason"]) for e in events if e["event"] == run_history.NODE_EXCLUDED]


def test_with_a_spare_the_step_runs_on_the_healthy_nodes_inside_the_allocation(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(spec(tmp_path, "{spare_nodes: 1}"))
    done = run(tmp_path, "run", "job.yaml", "--bad-node", "1")
    assert done.returncode == 0, done.stderr
    assert "COMPLETED, exit code 0, 1 run" in done.stderr, done.stderr
    batch = (tmp_path / "logs" / "job-1.log").read_text()
    assert "nodes 127.0.0.[1-3]" in batch  # nodes + spare_nodes allocated
    assert "excluding 127.0.0.1: health check failed (rehearsal: slurmgen run --bad-node); the step runs on " \
           "127.0.0.2, 127.0.0.3 (0 spare nodes left)" in batch, batch  # fmt: skip
    # Rank discovery and the rendezvous follow the step's nodes, not the allocation's first node.
    assert sorted(ranks(tmp_path)) == [("0", "127.0.0.2", "127.0.0.2"), ("1", "127.0.0.3", "127.0.0.2")]
    assert excluded(tmp_path) == [(1, "127.0.0.1", "health check failed (rehearsal: slurmgen run --bad-node)")]
    history = run(tmp_path, "history", "local-1")
    assert "node excluded (127.0.0.1: health check failed" in history.stdout, history.stdout
    status = run(tmp_path, "status", "local-1")
    assert "job 1: run 1, node excluded (127.0.0.1: health check failed" in status.stderr, status.stderr


def test_without_a_spare_the_job_is_requeued_away_from_the_bad_node(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(spec(tmp_path, '{health_check: "true"}'))
    done = run(tmp_path, "run", "job.yaml", "--bad-node", "2")
    assert done.returncode == 0, done.stderr
    assert "COMPLETED, exit code 0, 2 runs" in done.stderr, done.stderr
    batch = (tmp_path / "logs" / "job-1.log").read_text()
    assert "1 healthy node of 2 needed, no spare left: requeueing the job away from 127.0.0.2" in batch, batch
    assert "requeue issued for job 1 (bad-node; requeue 1 of 5)" in batch
    assert "job 1 will not run on 127.0.0.2 again (ExcNodeList)" in batch
    assert "run 2, started at" in batch and "nodes 127.0.0.1,127.0.0.3" in batch, batch  # elsewhere
    assert sorted(ranks(tmp_path)) == [("0", "127.0.0.1", "127.0.0.1"), ("1", "127.0.0.3", "127.0.0.1")]
    assert [(r, n) for r, n, _ in excluded(tmp_path)] == [(1, "127.0.0.2")]
    history = run(tmp_path, "history", "local-1")
    assert re.search(r"^1 .*bad-node\s+batch shell\s+node excluded \(127\.0\.0\.2", history.stdout, re.M), (
        history.stdout
    )


def test_the_bad_node_rehearsal_refuses_a_node_outside_the_job_or_a_spec_without_checks(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(spec(tmp_path, "{spare_nodes: 1}"))
    outside = run(tmp_path, "run", "job.yaml", "--bad-node", "4")
    assert outside.returncode == 2
    assert "--bad-node 4: the job has nodes 1 to 3 (nodes + recovery.spare_nodes)" in outside.stderr, outside.stderr
    (tmp_path / "job.yaml").write_text(spec(tmp_path, "{max_restarts: 1}"))
    unchecked = run(tmp_path, "run", "job.yaml", "--bad-node", "1")
    assert unchecked.returncode == 2 and "checks no node before the step" in unchecked.stderr, unchecked.stderr
    assert not (tmp_path / "logs").exists()  # nothing started
