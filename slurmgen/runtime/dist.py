"""Process-group start and bounded barriers. torch is imported inside the functions, never at module level.

``init_distributed`` builds the TCPStore itself instead of handing ``env://`` to torch, for two reasons:

- every rank checks in at the store within the *barrier* timeout, so a rank that never arrives (or that
  computed another address or port) makes the others fail in seconds with a list of the missing ranks, instead
  of waiting out the process-group timeout inside gloo/NCCL's own rendezvous (slurm-facts 5.5);
- rank 0's failure to listen is a ``DistNetworkError`` whose text changed between releases (pytorch #191560)
  and which carries no errno attribute in torch 2.13; we confirm EADDRINUSE by binding the port ourselves.

The cost is one ``set``, one ``add`` and one ``wait`` on the store, the same order as torch's own
``wait_for_workers`` that it replaces (see bench/runtime_init.py).
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.runtime.prepare import Prepared, prepare
from slurmgen.runtime.rendezvous import SPEC_PORT_FIELDS
from slurmgen.runtime.store_barrier import BarrierTimeout, StoreBarrier


class SlurmgenWarning(UserWarning):
    """A setup choice that will probably hurt (a variable that selects no interface, async errors off)."""


@dataclass(frozen=True)
class DistInfo:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int | None
    master_addr: str
    master_port: int
    interface: str | None  # the concrete interface Gloo/NCCL use, None when left to the libraries
    backend: str
    device: str  # "cuda:N" or "cpu"
    hostname: str


_STATE: dict[str, Any] = {}  # "info", "barrier", "barrier_timeout", "pg_timeout" once initialised


def _seconds(
    value: float | timedelta | None, variable: str, default: int, environ: Mapping[str, str] | None = None
) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if value is not None:
        return float(value)
    raw = (os.environ if environ is None else environ).get(variable, "").strip()
    try:
        return float(raw) if raw else float(default)
    except ValueError:
        raise RuntimeSetupError(f"{variable}={raw!r} is not a number of seconds") from None


def select_device_index(local_rank: int, device_count: int) -> int:
    """The GPU for a local rank. With one visible GPU per task (``--gpus-per-task=1``) that is GPU 0."""
    return local_rank if local_rank < device_count else local_rank % device_count


def _port_in_use(port: int) -> bool:
    """Bind the port the way TCPStore does (any address, SO_REUSEADDR) and report EADDRINUSE."""
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((address, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return True
    return False


def _wait_for_listener(ip: str, port: int, deadline: float) -> bool:
    """True once something accepts connections on ``ip:port``; False at ``deadline``.

    A TCPStore client that finds no listener backs off with jitter before retrying (0.3-0.7 s measured in
    bench/runtime_init.py), so a rank that starts a moment before rank 0 would lose that much. Polling a
    plain connect every 5 ms costs one extra connection when rank 0 is already up.
    """
    while True:
        try:
            with socket.create_connection((ip, port), timeout=max(min(deadline - time.monotonic(), 1.0), 0.01)):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


def _open_store(prep: Prepared, timeout: float) -> Any:
    import torch.distributed as dist
    from torch._C._distributed_c10d import TCPStore  # typed here; torch.distributed re-exports it implicitly

    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent hosts the store
    server = prep.ranks.rank == 0 and not agent

    def unreachable() -> RuntimeSetupError:
        return RuntimeSetupError(
            f"rank {prep.ranks.rank} could not reach the store at {prep.master.host}:{prep.port.port} "
            f"(hosted by rank 0, {prep.master.source}) within {timeout:g}s from {socket.gethostname()} via interface "
            f"{prep.ifnames.interface or '(default)'}. Likely causes: rank 0 has not started or died; "
            "the ranks disagree on the master address or port; the interface cannot reach the master"
        )

    # Nobody listening within the timeout: say so now. TCPStore's own client would retry after random delays
    # of up to ~10 s past its timeout (torch 2.13: 13.6 s for a 6 s timeout), printing a C++ trace each time.
    if not server and not _wait_for_listener(prep.master_ip, prep.port.port, time.monotonic() + timeout):
        raise unreachable()
    try:
        # No wait_for_workers: the arrival barrier below does that wait, and names who is missing.
        return TCPStore(
            prep.master.host,
            prep.port.port,
            prep.ranks.world_size,
            server,
            timedelta(seconds=timeout),
            wait_for_workers=False,
            multi_tenant=server,
        )
    except dist.DistNetworkError as err:
        if server and (getattr(err, "errno", None) == errno.EADDRINUSE or _port_in_use(prep.port.port)):
            raise RuntimeSetupError(
                f"port {prep.port.port} ({prep.port.source}) is already in use on {socket.gethostname()}; "
                f"another job or process holds it: choose {SPEC_PORT_FIELDS}, or set {contract.MASTER_PORT}"
            ) from None
        if server:
            raise RuntimeSetupError(f"rank 0 could not start the store on port {prep.port.port}: {err}") from None
        raise unreachable() from None


def init_distributed(
    backend: str | None = None,
    timeout: float | timedelta | None = None,
    *,
    barrier_timeout: float | timedelta | None = None,
) -> DistInfo:
    """Set up the environment and start the default process group; returns where this rank sits.

    ``timeout``: the process-group timeout (default SLURMGEN_TIMEOUT). ``barrier_timeout``: how long ranks
    wait for each other at the start and in ``barrier()`` (default SLURMGEN_BARRIER_TIMEOUT). ``backend``:
    default SLURMGEN_BACKEND, else nccl when CUDA is available, else gloo.
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        if "info" in _STATE:
            return _STATE["info"]  # type: ignore[no-any-return]
        raise RuntimeSetupError("the default process group was already started outside init_distributed()")
    prep = prepare(os.environ)
    for text in prep.warnings:
        warnings.warn(text, SlurmgenWarning, stacklevel=2)
    os.environ.update(prep.updates)
    pg_timeout = _seconds(timeout, contract.PG_TIMEOUT, contract.DEFAULT_PG_TIMEOUT)
    wait = _seconds(barrier_timeout, contract.BARRIER_TIMEOUT, contract.DEFAULT_BARRIER_TIMEOUT)
    cuda = torch.cuda.is_available()
    backend = backend or os.environ.get(contract.BACKEND, "").strip() or ("nccl" if cuda else "gloo")
    device = "cpu"
    if cuda:
        index = select_device_index(prep.ranks.local_rank, torch.cuda.device_count())
        torch.cuda.set_device(index)
        device = f"cuda:{index}"
    hostname = socket.gethostname()
    info = DistInfo(
        prep.ranks.rank,
        prep.ranks.local_rank,
        prep.ranks.world_size,
        prep.ranks.local_world_size,
        prep.master.host,
        prep.port.port,
        prep.ifnames.interface,
        backend,
        device,
        hostname,
    )
    started = time.monotonic()
    store = _open_store(prep, wait)
    # Under torchrun the agent's store outlives a worker restart: keep each attempt's keys apart.
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    barrier = StoreBarrier(store, f"slurmgen/{restart}/", info.rank, info.world_size, _describe(info))
    barrier.wait(max(wait - (time.monotonic() - started), 1.0), "start (init_distributed)")
    store.set_timeout(timedelta(seconds=pg_timeout))
    dist.init_process_group(
        backend,
        store=store,
        rank=info.rank,
        world_size=info.world_size,
        timeout=timedelta(seconds=pg_timeout),
    )
    _STATE.update(info=info, barrier=barrier, barrier_timeout=wait, pg_timeout=pg_timeout)
    return info


def process_group_timeout(environ: Mapping[str, str] | None = None) -> float:
    """The process-group timeout in seconds: init_distributed's, else SLURMGEN_TIMEOUT, else the default."""
    if "pg_timeout" in _STATE:
        return float(_STATE["pg_timeout"])
    return _seconds(None, contract.PG_TIMEOUT, contract.DEFAULT_PG_TIMEOUT, environ)


def _describe(info: DistInfo) -> str:
    return (
        f"host {info.hostname}, {contract.MASTER_ADDR}:{contract.MASTER_PORT}="
        f"{info.master_addr}:{info.master_port}, interface {info.interface or '(default)'}"
    )


def barrier(timeout: float | timedelta | None = None, reason: str = "barrier") -> None:
    """Wait for every rank, at most ``timeout`` seconds (default: the barrier timeout of init_distributed).

    On timeout it raises BarrierTimeout naming the missing ranks and the likely causes, instead of hanging for
    the process-group timeout. Process-level only: it synchronises ranks, not CUDA streams.
    """
    if "barrier" not in _STATE:
        raise RuntimeSetupError("barrier() needs init_distributed() first")
    wait = _STATE["barrier_timeout"] if timeout is None else _seconds(timeout, "", 0)
    _STATE["barrier"].wait(wait, reason)


def destroy() -> None:
    """Destroy the default process group (if any) and forget the store."""
    barrier_state = _STATE.get("barrier")
    _STATE.clear()
    if barrier_state is not None or "torch.distributed" in sys.modules:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["BarrierTimeout", "DistInfo", "SlurmgenWarning", "barrier", "destroy", "init_distributed"]
