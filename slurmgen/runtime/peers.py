"""The other ranks of this training process, as the resume state and the stop agreement see them: this rank,
the world size, the gloo groups of their own that slurmgen talks over, the timeout those talks take, and the
one way out when a peer is lost.

One `Peers` serves a `Preemption` and its checkpoint store. It makes its groups when first needed (every
rank reaches the same first use, so every rank makes them in the same order, as ``new_group`` requires) and
destroys them once, at exit. It owns two, for one reason: gloo pairs the collectives of a group by their
order in that group, so collectives issued from two threads on one group can pair one rank's stop agreement
with another rank's checkpoint write.

- the side group: the collectives of the calling thread (the stop agreement, Slurm's verdict, the choice of
  the state to resume from);
- the save group: torch.distributed.checkpoint's collectives, which a background save issues from its thread.

Both are gloo whatever the main backend (CPU tensors, and a timeout of their own). A collective on either that
fails means a peer died or stopped answering: `lost` says so in the one peer-loss line and ends the process
with exit_codes.EXIT_PEER_LOST. torch is imported only when a group is made.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from slurmgen import exit_codes
from slurmgen.job_context.context import JobContext
from slurmgen.runtime.dist import process_group_timeout
from slurmgen.runtime.peer_loss import leave, peer_loss_line


def torch_dist() -> Any:
    """torch.distributed when a process group is up, else None (torch is never imported here)."""
    if sys.modules.get("torch") is None:  # a process group needs torch imported already (None: import blocked)
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None

    return dist if dist.is_available() and dist.is_initialized() else None


class Peers:
    """This rank and the others: rank, world, the side and save groups, their timeout, the peer-loss exit."""

    def __init__(
        self,
        job: JobContext,
        *,
        timeout: float | None = None,
        exit: Callable[[int], Any] = os._exit,
    ) -> None:
        self._job = job
        # Read when used, so peers made before init_distributed(timeout=...) still follow it.
        self._timeout = None if timeout is None else float(timeout)
        self._exit = exit
        self._groups: dict[str, Any] = {}

    @property
    def rank(self) -> int:
        dist = torch_dist()
        if dist is not None:
            return int(dist.get_rank())
        return self._job.rank

    @property
    def world(self) -> int:
        dist = torch_dist()
        return int(dist.get_world_size()) if dist is not None else 1

    @property
    def timeout(self) -> float:
        """Seconds a collective among the peers may take: the process group's unless given. A rank that is
        merely slow (a long periodic save on rank 0) must not look lost; a dead one is seen at once anyway (its
        connections close and gloo raises)."""
        return self._timeout if self._timeout is not None else process_group_timeout(self._job)

    def side_group(self) -> Any:
        """The group for the calling thread's collectives; None when this process is alone."""
        return self._group("side")

    def save_group(self) -> Any:
        """The group for checkpoint I/O, whose collectives may run on a background thread; None when alone."""
        return self._group("save")

    def groups_made(self) -> int:
        """How many groups this object has made so far (at most two)."""
        return len(self._groups)

    def _group(self, name: str) -> Any:
        dist = torch_dist()
        if dist is None or dist.get_world_size() == 1:
            return None
        if name not in self._groups:
            try:
                group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.timeout))
            except Exception as exc:
                self.lost(exc, f"while making the {name} group")
            if not self._groups:
                # Left for interpreter shutdown, a group's gloo threads get destroyed while still joinable and
                # the process aborts ("terminate called without an active exception", seen 3 times in 10 exits).
                atexit.register(self.close)
            self._groups[name] = group
        return self._groups[name]

    def close(self) -> None:
        """Destroy the groups, once (at exit; a later use would make them again)."""
        groups, self._groups = list(self._groups.values()), {}
        dist = torch_dist()
        if dist is None:
            return
        for group in groups:
            with contextlib.suppress(Exception):  # at exit, a group that is already gone is fine
                dist.destroy_process_group(group)

    def lost(self, exc: BaseException, during: str) -> NoReturn:
        """A collective among the peers failed `during` something: the one peer-loss line, then the exit."""
        leave(peer_loss_line(self.rank, during, exc, self.timeout), self._exit)
        raise SystemExit(exit_codes.EXIT_PEER_LOST)  # only reached when `exit` was replaced (tests)
