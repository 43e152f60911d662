"""Where rank 0's store listens: the master address and port, chosen the same way on every node.

Address: an explicit MASTER_ADDR, else the first host of the *step's* node list (SLURM_STEP_NODELIST, then
SLURM_JOB_NODELIST: concurrent steps in one allocation need their own master, Lightning #17550), resolved up
front so a typo fails in milliseconds instead of a TCPStore timeout (torch's TCPStore client retries an
unresolvable host until its whole timeout; there is no fast DNS failure).

Port: an explicit MASTER_PORT, else ``SLURMGEN_PORT + SLURM_JOB_ID % SLURMGEN_PORT_RANGE``. Array tasks have
unique SLURM_JOB_IDs, so the same rule spreads them. The configured range must stay out of the ephemeral
range: a port the kernel may hand to any outgoing connection gives random EADDRINUSE (NVIDIA/enroot #243).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.job_context.values import Malformed
from slurmgen.slurm.hostlist import expand_hostlist

SPEC_PORT_FIELDS = "distributed.port / distributed.port_range in the job spec"
_LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class MasterHost:
    host: str  # as MASTER_ADDR will carry it (a name or an address)
    source: str  # the variable it came from
    nodes: int  # hosts in the step's node list (1 outside Slurm)
    # Every node of the list is a loopback address literal (127.0.0.1, 127.0.0.2, ...): all "nodes" are this
    # machine, as in `slurmgen run`, so a loopback master is reachable by every rank.
    one_machine: bool = False


@dataclass(frozen=True)
class MasterPort:
    port: int
    source: str


def master_host(ctx: JobContext) -> MasterHost:
    """MASTER_ADDR if set, else the first host of the step's (then the job's) node list, else localhost."""
    nodes = 1
    lists = (("SLURM_STEP_NODELIST", ctx.step_nodes), ("SLURM_JOB_NODELIST", ctx.nodes))
    nodelist_var, nodelist = next(((name, value) for name, value in lists if value), (None, ""))
    hosts: list[str] = []
    if nodelist_var is not None:
        hosts = expand_hostlist(nodelist)
        nodes = max(len(hosts), 1)
    one_machine = bool(hosts) and all(_loopback_literal(h) for h in hosts)
    explicit = ctx.master_addr
    if explicit is not None:
        if not explicit.strip():
            raise RuntimeSetupError(f"{contract.MASTER_ADDR} is set but empty")
        return MasterHost(explicit.strip(), contract.MASTER_ADDR, nodes, one_machine)
    if nodelist_var is None:
        return MasterHost(_LOCALHOST, "default (no Slurm node list)", 1)
    if not hosts:
        raise RuntimeSetupError(f"{nodelist_var}={nodelist!r} names no host")
    return MasterHost(hosts[0], nodelist_var, nodes, one_machine)


def _loopback_literal(host: str) -> bool:
    """An IP address literal on loopback (never a name: names are what /etc/hosts gets wrong)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _port_int(value: int | Malformed, name: str) -> int:
    if isinstance(value, Malformed):
        raise RuntimeSetupError(f"{name}={str(value)!r} is not an integer ({SPEC_PORT_FIELDS})")
    return value


def master_port(ctx: JobContext, ephemeral: tuple[int, int]) -> MasterPort:
    """MASTER_PORT if set, else base + job id % range; refuses a range that reaches into ``ephemeral``."""
    if ctx.master_port:
        raw = ctx.master_port
        if not (raw.isdigit() and raw.isascii() and 0 < int(raw) < 65536):
            raise RuntimeSetupError(f"{contract.MASTER_PORT}={raw!r} is not a port number (1-65535)")
        return MasterPort(int(raw), contract.MASTER_PORT)
    base = _port_int(ctx.port, contract.PORT)
    size = _port_int(ctx.port_range, contract.PORT_RANGE)
    last = base + size - 1
    if size < 1 or base < 1 or last > 65535:
        raise RuntimeSetupError(f"ports {base}..{last} are not valid port numbers ({SPEC_PORT_FIELDS})")
    low, high = ephemeral
    if base <= high and last >= low:
        raise RuntimeSetupError(
            f"ports {base}..{last} overlap this machine's ephemeral range {low}..{high} "
            f"(/proc/sys/net/ipv4/ip_local_port_range), where any outgoing connection may take them; "
            f"choose {SPEC_PORT_FIELDS} outside it"
        )
    job = ctx.job_id.strip()
    if job and not (job.isdigit() and job.isascii()):
        raise RuntimeSetupError(f"SLURM_JOB_ID={job!r} is not a number")
    start = ctx.step_attempt
    port = contract.job_port(base, size, int(job or 0), start)
    shown = f"{contract.PORT} + (SLURM_JOB_ID + {contract.STEP_ATTEMPT}) % {contract.PORT_RANGE}"
    return MasterPort(port, shown if start else f"{contract.PORT} + SLURM_JOB_ID % {contract.PORT_RANGE}")


def parse_port_range(text: str) -> tuple[int, int]:
    """The content of /proc/sys/net/ipv4/ip_local_port_range, e.g. ``"32768\\t60999\\n"``."""
    low, high = (int(part) for part in text.split())
    return low, high


def check_master_ip(master: MasterHost, ip: str, hostname: str) -> None:
    """Refuse a loopback master address when the step spans several nodes.

    The classic Debian ``127.0.1.1 <hostname>`` line in /etc/hosts makes rank 0's node resolve its own name to
    loopback; its interface then becomes ``lo`` and the other nodes can never connect (pytorch #67547).
    Allowed when every node is itself a loopback address literal: then all of them are this machine.
    """
    if master.nodes > 1 and not master.one_machine and ipaddress.ip_address(ip).is_loopback:
        raise RuntimeSetupError(
            f"master address {master.host!r} (from {master.source}) resolves to loopback {ip} on {hostname}, "
            f"but the step spans {master.nodes} nodes; fix /etc/hosts on {hostname} or set "
            f"{contract.MASTER_ADDR} to an address the other nodes can reach"
        )
