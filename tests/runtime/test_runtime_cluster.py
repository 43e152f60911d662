"""The runtime against real Slurm: `scontrol show hostnames` as the hostlist oracle, and a 2-node x 2-task
job whose ranks meet through the runtime.

Kept apart from the other runtime tests so they can be moved onto the shared ``slurm_cluster`` fixture
(tests/conftest.py) later. Until then this module reads the cluster's SLURM_CONF from
$SLURMGEN_CLUSTER_BASE/env.sh (default /tmp/slurmgen-cluster, written by tests/cluster/up.sh).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.runtime.hostlist import HostlistError, expand_hostlist

from .runtime_helpers import HAS_TORCH, ROOT, WORKER

pytestmark = pytest.mark.slurm
BASE = Path(os.environ.get("SLURMGEN_CLUSTER_BASE", "/tmp/slurmgen-cluster"))


def cluster_conf() -> str | None:
    """SLURM_CONF exported by the cluster's env.sh, or None when no cluster is up."""
    env_sh = BASE / "env.sh"
    if not env_sh.is_file():
        return None
    found = re.search(r"^export SLURM_CONF=(\S+)$", env_sh.read_text(), re.MULTILINE)
    return found.group(1) if found and Path(found.group(1)).is_file() else None


def slurm_env(conf: str) -> dict[str, str]:
    # Inherited job variables would steer sbatch and the tasks (slurm-facts 1.6); SLURM_CONF picks the
    # cluster.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env = {k: v for k, v in env.items() if not k.startswith(("SLURMGEN_", "MASTER_", "NCCL_", "GLOO_"))}
    env["SLURM_CONF"] = conf
    return env


# --- expand_hostlist versus scontrol ----------------------------------------------------------------------

CORPUS = [
    "gpu-[01-03,07],cpu[1-2]",
    "node[1-2]-ib[0-1]",
    "rack[1-2]n[001-002]",
    "n[07-09]-gpu[1-2]",
    "a[8-10]",
    "n[01-2]",
    "n[1-02]",
    "host[5-9,1]",
    "a[1,1]",
    "alpha,beta gamma",
    "linux[1,2]",
    "nodeA,nodeB[001,003],nodeC",
    "my-node-1",
    "n[998-1001]",
    "n[009-011]",
    "10.0.0.[1-2]",
    "a,,b",
    "[1-2]",
    "x[0-3]y[5-6]z[7-8]",
    "node1,node1",
    "n[3-1]",
    "n[-1]",
    "n[1-2]x[]",
    "n[1,,2]",
    "n[1:4]",
    "n[1-2-3]",
    "n[[1]]",
    "n[a-b]",
    "x[0-999999999].y[0-9]",
]
# Where slurmgen is deliberately different from scontrol 22.05 (slurm-facts 1.8): a suffix after the last
# bracket is valid since Slurm 23.11; the others are garbage that scontrol turns into nonsense host names.
DIVERGES = {
    "node[1-2]-ib": (None, ["node1-ib", "node2-ib"]),  # 22.05: Invalid hostlist; 23.11+: expanded
    "n[1-": (["n]"], None),  # scontrol prints "n]"; we refuse
    "n1-2]": (["n1-2]"], None),  # a literal "]" in a host name; we refuse
    "n[1 - 2]": (["n01", "n02"], None),  # spaces inside brackets; we refuse
}


def scontrol_hostnames(expr: str, env: dict[str, str]) -> list[str] | None:
    """scontrol's expansion, or None when it rejects the list (it prints "Invalid hostlist" and exits 0)."""
    done = subprocess.run(["scontrol", "show", "hostnames", expr], env=env, capture_output=True, text=True, timeout=30)
    if "Invalid" in done.stderr or "Invalid" in done.stdout or done.returncode != 0:
        return None
    if "Too many" in done.stderr:
        return None
    assert not done.stderr.strip(), done.stderr
    return done.stdout.split()


def ours(expr: str) -> list[str] | None:
    try:
        return expand_hostlist(expr)
    except HostlistError:
        return None


@pytest.fixture(scope="module")
def oracle_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("scontrol") is None:
        pytest.skip("scontrol is not installed (tests/cluster/up.sh installs slurm-client)")
    conf = cluster_conf()
    if conf is None:
        # `scontrol show hostnames` needs no daemon, only a config file to read (slurm-facts 5.2).
        path = tmp_path_factory.mktemp("slurm") / "slurm.conf"
        path.write_text("ClusterName=hostlist-oracle\nSlurmctldHost=localhost\n")
        conf = str(path)
    return slurm_env(conf)


@pytest.mark.parametrize("expr", CORPUS + sorted(DIVERGES))
def test_expand_hostlist_agrees_with_scontrol(expr: str, oracle_env: dict[str, str]) -> None:
    theirs = scontrol_hostnames(expr, oracle_env)
    if expr in DIVERGES:
        assert (theirs, ours(expr)) == DIVERGES[expr]
    else:
        assert ours(expr) == theirs


# --- a real 2-node x 2-task job ---------------------------------------------------------------------------

JOB = """#!/bin/bash
#SBATCH --job-name=sgt-runtime
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --time=3
#SBATCH --output={out}/%j.out
#SBATCH --chdir={root}
set -euo pipefail
export {port_var}=21000 {range_var}=100 {barrier_var}=60 {pg_var}=120 PYTHONWARNINGS=ignore
echo "rendezvous: $({python} -m slurmgen.runtime.launch --rendezvous)"
srun {python} -m slurmgen.runtime.launch -- {python} {worker} init
"""


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_two_nodes_two_tasks_all_reduce(tmp_path: Path) -> None:
    conf = cluster_conf()
    if conf is None or shutil.which("sbatch") is None:
        pytest.skip(f"no test cluster up ({BASE}/env.sh missing): run tests/cluster/up.sh")
    env = slurm_env(conf)
    env["PYTHONPATH"] = str(ROOT)
    script = tmp_path / "job.sh"
    script.write_text(
        JOB.format(
            out=tmp_path,
            root=ROOT,
            python=sys.executable,
            worker=WORKER,
            port_var=contract.PORT,
            range_var=contract.PORT_RANGE,
            barrier_var=contract.BARRIER_TIMEOUT,
            pg_var=contract.PG_TIMEOUT,
        )
    )
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    job_id = submitted.stdout.strip().split(";")[0]
    state = wait_done(job_id, env, timeout=150)
    output = (tmp_path / f"{job_id}.out").read_text()
    assert state == "COMPLETED", output[-4000:]
    ranks = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3]
    port = 21000 + int(job_id) % 100
    assert {(r["addr"], r["port"]) for r in ranks} == {("node1", port)}
    assert f"rendezvous: node1 {port}" in output  # the batch shell's answer agrees with every task
    assert {r["iface"] for r in ranks} == {"eth0"}  # the node namespace's NIC on 10.200.0.0/24, not lo
    assert {(r["gloo"], r["nccl"]) for r in ranks} == {("eth0", "=eth0")}
    assert {r["sum"] for r in ranks} == {10.0}
    assert {r["local_world"] for r in ranks} == {2}


def wait_done(job_id: str, env: dict[str, str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    state = "UNKNOWN"
    while time.monotonic() < deadline:
        shown = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True, timeout=30)
        found = re.search(r"JobState=(\S+)", shown.stdout)
        state = found.group(1) if found else state
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
            return state
        time.sleep(0.2)
    subprocess.run(["scancel", job_id], env=env, capture_output=True, timeout=30)
    pytest.fail(f"job {job_id} not finished after {timeout}s (last state {state})")
