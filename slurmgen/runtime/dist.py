"""Process-group start and bounded barriers. torch is imported inside the functions, never at module level.

``init_distributed`` builds the TCPStore itself instead of handing ``env://`` to torch, for two reasons:

- every rank checks in at the store within the *barrier* timeout, so a rank that never arrives (or that
  computed another address or port) makes the others fail in seconds with a list of the missing ranks, instead
  of waiting out the process-group timeout inside gloo/NCCL's own rendezvous;
- rank 0's failure to listen is a ``DistNetworkError`` whose text changed between releases (pytorch #191560)
  and which carries no errno attribute in torch 2.13; we confirm EADDRINUSE by binding the port ourselves.

The cost is one ``set``, one ``add`` and one ``wait`` on the store, the same order as torch's own
``wait_for_workers`` that it replaces (see bench/runtime_init.py).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError, SlurmgenWarning
from slurmgen.job_context.context import JobContext
from slurmgen.job_context.values import Malformed
from slurmgen.runtime.c10d_store import open_c10d_store
from slurmgen.runtime.store_barrier import StoreBarrier
from slurmgen.task.prepare import prepare


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


@dataclass(frozen=True)
class _Session:
    """What init_distributed set up in this process, for barrier(), destroy() and the helpers."""

    info: DistInfo
    barrier: StoreBarrier
    barrier_timeout: float
    pg_timeout: float


_session: _Session | None = None


def current_info() -> DistInfo | None:
    """Where this rank sits, once init_distributed() has run in this process."""
    return None if _session is None else _session.info


def _seconds(value: float | timedelta | None, variable: str, given: float | Malformed = 0.0) -> float:
    """The argument, else ``given`` (``variable``'s value in the job context, its default when unset)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if value is not None:
        return float(value)
    if isinstance(given, Malformed):
        raise RuntimeSetupError(f"{variable}={str(given)!r} is not a number of seconds")
    return given


def select_device_index(local_rank: int, device_count: int) -> int:
    """The GPU for a local rank. With one visible GPU per task (``--gpus-per-task=1``) that is GPU 0.

    A local rank beyond the visible GPUs is refused: wrapping it onto another rank's GPU makes NCCL fail later
    with a duplicate-device error far from the cause."""
    if device_count == 1:
        return 0
    if 0 <= local_rank < device_count:
        return local_rank
    raise RuntimeSetupError(
        f"local rank {local_rank} has no GPU of its own: this task sees {device_count} GPUs "
        f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); run one task per GPU "
        "(gpus_per_node = tasks_per_node) or give each task one GPU"
    )


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
    global _session
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        if _session is not None:
            return _session.info
        raise RuntimeSetupError("the default process group was already started outside init_distributed()")
    job = JobContext.from_environ(os.environ)  # the program's one read of its job, for the process group
    prep = prepare(job)
    for text in prep.warnings:
        warnings.warn(text, SlurmgenWarning, stacklevel=2)
    os.environ.update(prep.updates)
    pg_timeout = _seconds(timeout, contract.PG_TIMEOUT, job.pg_timeout)
    wait = _seconds(barrier_timeout, contract.BARRIER_TIMEOUT, job.barrier_timeout)
    cuda = torch.cuda.is_available()
    backend = backend or job.backend or ("nccl" if cuda else "gloo")
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
    store = open_c10d_store(prep, wait, job.elastic_agent_store)
    # Under torchrun the agent's store outlives a worker restart: keep each attempt's keys apart.
    restart = job.elastic_restart_count
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
    _session = _Session(info, barrier, wait, pg_timeout)
    return info


def process_group_timeout(environ: JobContext | None = None) -> float:
    """The process-group timeout in seconds: init_distributed's, else SLURMGEN_TIMEOUT, else the default."""
    if _session is not None:
        return _session.pg_timeout
    job = JobContext.from_environ(os.environ) if environ is None else environ
    return _seconds(None, contract.PG_TIMEOUT, job.pg_timeout)


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
    if _session is None:
        raise RuntimeSetupError("barrier() needs init_distributed() first")
    wait = _session.barrier_timeout if timeout is None else _seconds(timeout, "")
    _session.barrier.wait(wait, reason)


def destroy() -> None:
    """Destroy the default process group (if any) and forget the store."""
    global _session
    started, _session = _session, None
    if started is not None or "torch.distributed" in sys.modules:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["DistInfo", "barrier", "destroy", "init_distributed"]
