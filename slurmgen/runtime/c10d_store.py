"""The TCPStore every rank meets at, built by hand instead of through ``env://``.

Two reasons (see init_distributed in dist.py): a rank that finds nobody listening fails within the barrier
timeout with a line naming the address, port and interface, instead of TCPStore's own client retrying with
random delays past its timeout; and rank 0's "address in use" is confirmed by binding the port ourselves,
because torch's ``DistNetworkError`` carries no errno and its text changes between releases (pytorch #191560).
"""

from __future__ import annotations

import errno
import socket
import time
from datetime import timedelta
from typing import Any

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.task.prepare import Prepared
from slurmgen.task.rendezvous import SPEC_PORT_FIELDS


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


def open_c10d_store(prep: Prepared, timeout: float, agent: bool) -> Any:
    """The job's TCPStore: hosted by rank 0, unless ``agent`` (torchrun's agent hosts it), else joined."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import TCPStore  # typed here; torch.distributed re-exports it implicitly

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
