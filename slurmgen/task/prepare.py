"""Everything a task needs before torch starts, computed from the environment in one pure step.

``prepare(ctx, host)`` (the job context its caller read once) returns what to set (only variables not already set)
and what to warn about; the entry point applies it before ``exec`` and ``init_distributed`` applies it again (a
no-op when the entry point ran), so unmodified ``env://`` scripts and slurmgen-aware ones see the same values.

The machine is reached only through ``Host`` (name resolution, route table, interfaces, ephemeral range), so
tests pass plain values.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.job_context.ranks import Ranks, standard_rank_variables
from slurmgen.task.iface import IfChoice, choose_ifnames, parse_proc_route, route_interface
from slurmgen.task.rendezvous import (
    MasterHost,
    MasterPort,
    check_master_ip,
    master_host,
    master_port,
    parse_port_range,
)

ASYNC_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
ACCELERATE_USE_CPU = "ACCELERATE_USE_CPU"


def resolve_host(host: str) -> str:
    """The address ``host`` resolves to here, IPv4 first (the route lookup is IPv4). Raises OSError."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    for family, _, _, _, sockaddr in infos:
        if family == socket.AF_INET:
            return str(sockaddr[0])
    return str(infos[0][4][0])


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


def ephemeral_range() -> tuple[int, int]:
    try:
        return parse_port_range(_read("/proc/sys/net/ipv4/ip_local_port_range"))
    except (OSError, ValueError):
        return contract.DEFAULT_EPHEMERAL


def route_table() -> str:
    try:
        return _read("/proc/net/route")
    except OSError:
        return ""


def interface_names() -> list[str]:
    return sorted(name for _, name in socket.if_nameindex())


def ifcfg_default_interface() -> str | None:
    """ifcfg's default-route interface, or None (ifcfg gives None without a default route: never index it)."""
    try:
        import ifcfg

        default = ifcfg.default_interface()
    except Exception:  # ifcfg shells out to ip/ifconfig; any failure just means "no fallback"
        return None
    device = default.get("device") if isinstance(default, dict) else None
    return str(device) if device else None


@dataclass(frozen=True)
class Host:
    """The machine, as the preparation sees it. Tests build one from plain values."""

    resolve: Callable[[str], str] = resolve_host
    route_table: Callable[[], str] = route_table
    interfaces: Callable[[], list[str]] = interface_names
    default_interface: Callable[[], str | None] = ifcfg_default_interface
    ephemeral_range: Callable[[], tuple[int, int]] = ephemeral_range
    hostname: Callable[[], str] = socket.gethostname


@dataclass(frozen=True)
class Prepared:
    ranks: Ranks
    master: MasterHost
    master_ip: str
    port: MasterPort
    ifnames: IfChoice
    updates: dict[str, str] = field(default_factory=dict)  # variables to set (unset or empty now)
    warnings: tuple[str, ...] = ()


def resolve_master(ctx: JobContext, host: Host) -> tuple[MasterHost, str, MasterPort]:
    """Master address, its resolved IP and the port; the part ``--rendezvous`` prints."""
    master = master_host(ctx)
    port = master_port(ctx, host.ephemeral_range())
    try:
        ip = host.resolve(master.host)
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise RuntimeSetupError(
            f"master address {master.host!r} (from {master.source}) does not resolve on {host.hostname()}: {reason}"
        ) from None
    check_master_ip(master, ip, host.hostname())
    return master, ip, port


def gpus_given(ctx: JobContext) -> bool:
    """Whether Slurm gave this task GPUs: SLURM_GPUS_ON_NODE (srun(1), OUTPUT ENVIRONMENT VARIABLES) above 0, or
    a device in CUDA_VISIBLE_DEVICES (which Slurm's gres/gpu plugin sets)."""
    if ctx.gpus_on_node > 0:
        return True
    visible = ctx.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return bool(visible) and visible not in ("-1", "NoDevFiles")


def prepare(ctx: JobContext, host: Host | None = None, *, agent: bool = False) -> Prepared:
    """Compute the variables a task needs. ``agent``: this is torchrun's per-node launcher, not a rank."""
    host = host or Host()
    present = ctx.environ  # what is set already: the updates never override it
    ranks = ctx.ranks
    master, ip, port = resolve_master(ctx, host)
    interfaces = host.interfaces()
    detected = route_interface(ip, parse_proc_route(host.route_table()))
    source = f"route to {ip}"
    if detected is None:
        detected, source = host.default_interface(), "default route (ifcfg)"
    ifnames = choose_ifnames(
        ctx.nccl_ifname,
        ctx.gloo_ifname,
        detected,
        source,
        interfaces,
    )
    wanted: dict[str, str | None] = {
        contract.MASTER_ADDR: master.host,
        contract.MASTER_PORT: str(port.port),
        contract.NCCL_SOCKET_IFNAME: ifnames.nccl,
        contract.GLOO_SOCKET_IFNAME: ifnames.gloo,
        # torchelastic's agent sets 1 too: a failed NCCL collective then tears the process down instead of
        # leaving it hung until the time limit (pytorch #97191).
        ASYNC_ERROR_HANDLING: "1",
    }
    if ctx.gpus_per_node == 0 and not gpus_given(ctx):
        # A job without GPUs: neither the spec's gpus_per_node nor Slurm (GPUs asked for in sbatch:, e.g.
        # gpus-per-task) gave this task any; on a GPU job the variable would put accelerate on the CPU. accelerate
        # (and so transformers' Trainer) makes a process group out of RANK, WORLD_SIZE and LOCAL_RANK only on a
        # GPU or when told to use the CPU: without either, every rank trains alone, silently
        # (accelerate/state.py, PartialState._prepare_backend). Its own launcher sets this variable for CPU runs
        # (accelerate/utils/launch.py); Accelerator and TrainingArguments both read it.
        wanted[ACCELERATE_USE_CPU] = "true"
    if ranks.source == "slurm" and not agent:
        wanted.update(standard_rank_variables(ranks))
    warnings = list(ifnames.warnings)
    if present.get(ASYNC_ERROR_HANDLING, "").strip() == "0":
        warnings.append(
            f"{ASYNC_ERROR_HANDLING}=0: a failed or stuck NCCL collective will hang until the "
            "process-group timeout or the time limit instead of raising; unset it or set 1"
        )
    updates = {k: v for k, v in wanted.items() if v is not None and not present.get(k, "").strip()}
    return Prepared(ranks, master, ip, port, ifnames, updates, tuple(warnings))
