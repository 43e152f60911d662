"""Bad nodes on the real 3-node Slurm 22.05: the node checks as a real job step, a spare taking a bad node's place
inside the allocation, and without a spare the requeue away from it (ExcNodeList). The health check fails on
node1 only (`SLURMD_NODENAME`, set by slurmd on each node). The same scenarios run locally in
tests/local/test_local_nodes.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SlurmCluster

from slurmgen import run_history
from slurmgen.slurm.hostlist import expand_hostlist

from .cluster_jobs import read_log, submit_own

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

STEPS = 40
BAD = "node1"
CHECK = ["sh", "-c", f'test "$SLURMD_NODENAME" != {BAD} || {{ echo "{BAD} is bad"; exit 1; }}']


def done_weights(tmp: Path, name: str, job: str) -> list[str]:
    return re.findall(rf"DONE {STEPS} (\S+) rank=0", read_log(tmp, name, job, "rank-0.log"))


def test_a_bad_node_is_replaced_by_a_spare_or_the_job_is_requeued_away_from_it(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Three jobs side by side: an uninterrupted reference; 2 nodes + 1 spare whose node1 fails the health check
    (Slurm allocates 3 nodes, the step runs on the other two, one run); and 2 nodes without a spare (requeued
    with node1 in ExcNodeList, the next run on the other nodes). Both end with the reference's final weights."""
    plain = submit_own(slurm_cluster, tmp_path, "plain", steps=STEPS, tasks_per_node=1, recovery="{max_restarts: 0}")
    spared = submit_own(
        slurm_cluster,
        tmp_path,
        "spare",
        steps=STEPS,
        tasks_per_node=1,
        recovery=f"{{spare_nodes: 1, health_check: {CHECK!r}}}",
    )
    away = submit_own(
        slurm_cluster, tmp_path, "away", steps=STEPS, tasks_per_node=1, recovery=f"{{health_check: {CHECK!r}}}"
    )
    # (a) a spare: NumNodes is nodes + spare, the step ran on the two healthy nodes, no requeue.
    info = slurm_cluster.wait_for(spared, lambda i: i.state.is_terminal, timeout=300)
    batch = read_log(tmp_path, "spare", spared, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 0, 0), batch[-3000:]
    assert info.num_nodes == 3 and slurm_cluster.job_info(spared)["NumNodes"] == "3", info
    healthy = [n for n in expand_hostlist(info.nodes or "") if n != BAD]
    assert BAD in expand_hostlist(info.nodes or "") and len(healthy) == 2
    assert f"excluding {BAD}: health check failed (exit 1: {BAD} is bad); the step runs on " \
           f"{', '.join(healthy)} (0 spare nodes left)" in batch, batch[-3000:]  # fmt: skip
    assert re.search(rf"rendezvous at {healthy[0]}:", batch) or healthy[0] in batch, batch[-3000:]
    assert sorted(p.name for p in (tmp_path / "logs" / f"spare-{spared}").glob("node*.log")) == [
        f"{n}.log" for n in healthy
    ]
    events = run_history.read(str(tmp_path / "logs" / f"spare-{spared}"))
    [excluded] = [e for e in events if e["event"] == run_history.NODE_EXCLUDED]
    assert (excluded["node"], excluded["run"], excluded["spare"]) == (BAD, 1, True)
    reference = slurm_cluster.wait_for(plain, lambda i: i.state.is_terminal, timeout=300)
    assert reference.state.name == "COMPLETED"
    expected = done_weights(tmp_path, "plain", plain)
    assert len(expected) == 1 and done_weights(tmp_path, "spare", spared) == expected
    # (b) no spare: requeued once, node1 in ExcNodeList, the next run elsewhere.
    info = slurm_cluster.wait_for(away, lambda i: i.state.is_terminal, timeout=300)
    batch = read_log(tmp_path, "away", away, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), batch[-3000:]
    assert BAD in expand_hostlist(slurm_cluster.job_info(away)["ExcNodeList"])
    assert BAD not in expand_hostlist(info.nodes or ""), info
    assert f"no spare left: requeueing the job away from {BAD}" in batch, batch[-3000:]
    assert f"job {away} will not run on {BAD} again (ExcNodeList)" in batch, batch[-3000:]
    events = run_history.read(str(tmp_path / "logs" / f"away-{away}"))
    assert [(e["node"], e["run"]) for e in events if e["event"] == run_history.NODE_EXCLUDED] == [(BAD, 1)]
    assert [(e["cause"], e["run"]) for e in events if e["event"] == run_history.REQUEUE] == [("bad-node", 1)]
    assert done_weights(tmp_path, "away", away) == expected
