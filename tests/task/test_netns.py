"""Interface detection inside private network namespaces (``unshare -n``): no default route, and two NICs
where the master sits behind the non-default one. The namespaces are anonymous: they vanish with the
processes, so nothing is left behind even if a test is killed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from ranks import Ranks
from runtime.runtime_helpers import WORKER, base_env

from slurmgen import contract


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0


pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(not _can_unshare(), reason="needs root, unshare and ip to make network namespaces"),
]

LO_ONLY = "ip link set lo up"
# sgt0 carries the default route (via a gateway nobody owns); the master's subnet 10.77.2.0/24 is on sgt1.
# veth pairs, because this kernel has no dummy interfaces; both ends stay in the namespace.
TWO_NICS = " && ".join(
    [
        "ip link set lo up",
        "ip link add sgt0 type veth peer name sgt0p",
        "ip link add sgt1 type veth peer name sgt1p",
        "ip addr add 10.77.1.1/24 dev sgt0",
        "ip addr add 10.77.2.1/24 dev sgt1",
        "for i in sgt0 sgt0p sgt1 sgt1p; do ip link set $i up; done",
        "ip route add default via 10.77.1.254 dev sgt0",
    ]
)
PROBE = (
    "import json, ifcfg; from slurmgen.task.prepare import prepare; import os;"
    "from slurmgen.job_context.context import JobContext;"
    "p = prepare(JobContext.from_environ(os.environ));"
    "print(json.dumps({'iface': p.ifnames.interface, 'source': p.ifnames.source, 'updates': p.updates,"
    " 'warnings': p.warnings, 'ifcfg_default': ifcfg.default_interface()}))"
)


def in_netns(setup: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = f'{setup} && exec "$@"'
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", script, "sh", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def probe(setup: str, master: str) -> dict[str, object]:
    done = in_netns(setup, [sys.executable, "-c", PROBE], base_env(MASTER_ADDR=master, MASTER_PORT="20001"))
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_no_default_route_never_crashes() -> None:
    unroutable = probe(LO_ONLY, "10.9.9.9")
    assert unroutable["ifcfg_default"] is None  # what made habitat's ["device"] raise TypeError
    assert unroutable["iface"] is None
    assert "GLOO_SOCKET_IFNAME" not in dict(unroutable["updates"])  # type: ignore[call-overload]
    assert "no interface routes" in str(unroutable["warnings"])
    local = probe(LO_ONLY, "127.0.0.1")
    assert local["iface"] == "lo"


def test_entry_point_without_default_route_runs_the_program() -> None:
    show = "import os; print(os.environ.get('GLOO_SOCKET_IFNAME'), os.environ.get('MASTER_ADDR'))"
    env = base_env(MASTER_ADDR="10.9.9.9", MASTER_PORT="20001")
    done = in_netns(LO_ONLY, [sys.executable, "-m", "slurmgen.task", "--", sys.executable, "-c", show], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "None 10.9.9.9\n"
    assert done.stderr.startswith("slurmgen: warning: no interface routes")


def test_master_behind_the_non_default_interface() -> None:
    behind = probe(TWO_NICS, "10.77.2.5")
    assert dict(behind["ifcfg_default"])["device"] == "sgt0"  # type: ignore[call-overload]
    assert behind["iface"] == "sgt1"  # not the default route's sgt0
    assert behind["source"] == "route to 10.77.2.5"
    updates = dict(behind["updates"])  # type: ignore[call-overload]
    assert (updates["GLOO_SOCKET_IFNAME"], updates["NCCL_SOCKET_IFNAME"]) == ("sgt1", "=sgt1")
    assert probe(TWO_NICS, "10.77.2.1")["iface"] == "sgt1"  # the master's own node: the NIC others reach
    assert probe(TWO_NICS, "192.0.2.7")["iface"] == "sgt0"  # elsewhere: the default route


@pytest.mark.torch
def test_gloo_over_the_detected_non_default_interface(ranks: Ranks) -> None:
    """Two ranks in the namespace, master on sgt1's address: gloo binds sgt1 and the all_reduce works."""
    ranks_cmd = f"SLURM_PROCID=$r SLURM_LOCALID=$r {sys.executable} {WORKER} init &"
    runner = f"{TWO_NICS} && for r in 0 1; do {ranks_cmd} done; wait"
    env = base_env(
        SLURM_JOB_ID="9",
        SLURM_NTASKS="2",
        SLURM_NODEID="0",
        SLURM_STEP_TASKS_PER_NODE="2",
        MASTER_ADDR="10.77.2.1",
        MASTER_PORT="20002",
        **{contract.BARRIER_TIMEOUT: "20", contract.PG_TIMEOUT: "120"},
    )
    ranks.start(["unshare", "-n", "sh", "-c", runner], env)
    (result,) = ranks.results(120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count('"sum": 3.0') == 2
    assert result.stdout.count('"iface": "sgt1"') == 2
    assert result.stdout.count('"gloo": "sgt1"') == 2
