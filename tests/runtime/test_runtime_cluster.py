"""The runtime against real Slurm: `scontrol show hostnames` as the hostlist oracle, and a 2-node x 2-task
job whose ranks meet through the runtime.

The hostlist oracle runs on every selected Slurm version. For 22.05 it needs no daemon, only the host's scontrol
and a config file (the running cluster's, or a throwaway one); for 24.11 and 26.05 it uses that version's test
cluster, whose scontrol runs in its chroot. The job runs on the shared ``slurm_cluster`` fixture
(tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slurmgen.slurm.hostlist import HostlistError, expand_hostlist

from .runtime_helpers import ROOT, WORKER

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
    # Inherited job variables would steer sbatch and the tasks (sbatch(1), INPUT ENVIRONMENT VARIABLES); SLURM_CONF
    # picks the cluster.
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
# Where slurmgen is deliberately different from scontrol, per version: (scontrol's answer, ours). A suffix after
# the last bracket is valid since Slurm 23.11 (its hostlist.c), so 22.05 rejects what slurmgen accepts; the
# others are garbage that some scontrol turns into nonsense host names, where slurmgen refuses.
DIVERGES: dict[str, dict[str, tuple[list[str] | None, list[str] | None]]] = {
    "22.05": {
        "node[1-2]-ib": (None, ["node1-ib", "node2-ib"]),  # 22.05: Invalid hostlist; 23.11+: expanded
        "n[1-": (["n]"], None),  # scontrol prints "n]"; we refuse
        "n1-2]": (["n1-2]"], None),  # a literal "]" in a host name; we refuse
        "n[1 - 2]": (["n01", "n02"], None),  # spaces inside brackets; we refuse
    },
    "24.11": {
        "n1-2]": (["n1-2]"], None),
        "n[1 - 2]": (["n01", "n02"], None),
        "n[[1]]": (["n[1]"], None),  # 22.05 rejects it; 23.11+ keeps a literal "[" and "]"; we refuse
    },
    "26.05": {
        "n1-2]": (["n1-2]"], None),
        "n[1 - 2]": (["n01", "n02"], None),
        "n[[1]]": (["n[1]"], None),  # 22.05 rejects it; 23.11+ keeps a literal "[" and "]"; we refuse
    },
}
ALL_DIVERGING = sorted({expr for table in DIVERGES.values() for expr in table})


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
def oracle_env(
    slurm_version: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    if slurm_version != "22.05":  # the chroot's scontrol: only through that version's running cluster
        cluster = request.getfixturevalue("slurm_cluster")
        return dict(cluster.env)
    if shutil.which("scontrol") is None:
        pytest.skip("scontrol is not installed (tests/cluster/up.sh installs slurm-client)")
    conf = cluster_conf()
    if conf is None:
        # `scontrol show hostnames` needs no daemon, only a config file to read.
        path = tmp_path_factory.mktemp("slurm") / "slurm.conf"
        path.write_text("ClusterName=hostlist-oracle\nSlurmctldHost=localhost\n")
        conf = str(path)
    return slurm_env(conf)


@pytest.mark.slurm_versions()
@pytest.mark.parametrize("expr", CORPUS + [expr for expr in ALL_DIVERGING if expr not in CORPUS])
def test_expand_hostlist_agrees_with_scontrol(expr: str, oracle_env: dict[str, str], slurm_version: str) -> None:
    theirs = scontrol_hostnames(expr, oracle_env)
    diverging = DIVERGES[slurm_version]
    if expr in diverging:
        assert (theirs, ours(expr)) == diverging[expr]
    else:
        assert ours(expr) == theirs


# --- a real 2-node x 2-task job, rendered by slurmgen ---------------------------------------------------------


@pytest.mark.torch
def test_rendered_two_nodes_two_tasks_all_reduce(slurm_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from slurmgen.script.render import render
    from slurmgen.spec.load import load_text

    spec = load_text(
        "name: sgt-runtime\n"
        f"command: [{sys.executable}, {WORKER}, init]\n"
        "time: '00:05:00'\nnodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {sys.executable}\nchdir: {ROOT}\noutput: {tmp_path}/logs\n"
        "distributed: {backend: gloo, port: 21000, port_range: 100, barrier_timeout: 60, timeout: 120}\n"
        f"env: {{PYTHONPATH: {ROOT}, PYTHONWARNINGS: ignore}}\n"
        "preemption: false\n",
        "sgt-runtime.yaml",
    ).spec
    script = tmp_path / "job.sbatch"
    script.write_text(render(spec))
    (tmp_path / "logs").mkdir()
    job_id = str(slurm_cluster.submit(script))
    info = slurm_cluster.wait_for(job_id, lambda i: i.state.is_terminal, timeout=150)
    logs = tmp_path / "logs"
    batch = (logs / f"sgt-runtime-{job_id}.log").read_text()
    files = sorted(p.name for p in (logs / f"sgt-runtime-{job_id}").glob("*.log"))
    assert info.state.name == "COMPLETED", batch[-3000:]
    assert files == ["node1.log", "node2.log", "rank-0.log", "rank-1.log", "rank-2.log", "rank-3.log"]
    per_rank = [logs / f"sgt-runtime-{job_id}" / f"rank-{rank}.log" for rank in range(4)]
    ranks = [json.loads(line) for p in per_rank for line in p.read_text().splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3]
    port = 21000 + int(job_id) % 100
    # One start: a restart inside the allocation moves to the next port, and its batch log line says why.
    assert {(r["addr"], r["port"]) for r in ranks} == {("node1", port)}, batch[-3000:]
    assert f"rendezvous at node1:{port}" in batch  # the batch shell's answer agrees with every task
    assert {r["iface"] for r in ranks} == {"eth0"}  # the node namespace's NIC on 10.200.0.0/24, not lo
    assert {(r["gloo"], r["nccl"]) for r in ranks} == {("eth0", "=eth0")}
    assert {r["sum"] for r in ranks} == {10.0}
    assert {r["local_world"] for r in ranks} == {2}
