"""A barrier on the c10d store that gives up after a timeout and says who is missing.

Each rank writes its own key (with the barrier's reason and where it runs), bumps a counter, and the last one
to arrive sets a ``done`` key that everyone waits for: three store round trips, any backend, no side process
group. ``monitored_barrier`` would do for gloo only, and only rank 0 learns who is missing there; here every
rank can name the missing ranks, and a rank that waits at another barrier (another reason) is shown too.

Keys of barrier N-1 are deleted after barrier N passes: by then every rank has left N-1's wait.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slurmgen.errors import RuntimeSetupError

_LIST_AT_MOST = 16
_CAUSES = (
    "Likely causes: a missing rank exited, crashed or is stuck (see its log); the ranks disagree on "
    "MASTER_ADDR:MASTER_PORT (each rank logs its pair; a rank with another pair waits at another store); "
    "a network interface that cannot reach the others (see the interface above)"
)


class BarrierTimeout(RuntimeSetupError):
    """Ranks did not all arrive in time. ``missing``: the ranks not seen (empty when the store was lost)."""

    def __init__(self, message: str, reason: str, missing: list[int]) -> None:
        super().__init__(message)
        self.reason = reason
        self.missing = missing


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:_LIST_AT_MOST])
    return shown + (f" and {len(ranks) - _LIST_AT_MOST} more" if len(ranks) > _LIST_AT_MOST else "")


class StoreBarrier:
    """Successive barriers among ``world_size`` ranks on one store; every rank must call them in order."""

    def __init__(self, store: Any, prefix: str, rank: int, world_size: int, whoami: str) -> None:
        self.store = store
        self.prefix = prefix
        self.rank = rank
        self.world_size = world_size
        self.whoami = whoami  # host, master address and port, interface of this rank
        self.generation = 0

    def _key(self, generation: int, name: str) -> str:
        return f"{self.prefix}{generation}/{name}"

    def wait(self, timeout: float, reason: str) -> None:
        """Block until all ranks arrive or ``timeout`` seconds pass; raises BarrierTimeout then."""
        import torch.distributed as dist

        generation = self.generation
        self.generation += 1
        try:
            self.store.set(self._key(generation, f"rank{self.rank}"), f"{reason}\t{self.whoami}")
            if self.store.add(self._key(generation, "count"), 1) == self.world_size:
                self.store.set(self._key(generation, "done"), "1")
            self.store.wait([self._key(generation, "done")], timedelta(seconds=timeout))
        except dist.DistError as err:
            raise self._diagnose(generation, timeout, reason, err) from None
        if generation:
            self._forget(generation - 1)

    def _forget(self, generation: int) -> None:
        keys = [f"rank{self.rank}"] + (["count", "done"] if self.rank == 0 else [])
        for name in keys:
            self.store.delete_key(self._key(generation, name))

    def _diagnose(self, generation: int, timeout: float, reason: str, error: Exception) -> BarrierTimeout:
        head = (
            f"barrier {reason!r} timed out after {timeout:g}s on rank {self.rank} of {self.world_size} "
            f"({self.whoami})"
        )
        try:
            missing: list[int] = []
            elsewhere: list[str] = []
            for rank in range(self.world_size):
                key = self._key(generation, f"rank{rank}")
                if not self.store.check([key]):
                    missing.append(rank)
                    continue
                other_reason, _, where = self.store.get(key).decode(errors="replace").partition("\t")
                if other_reason != reason and len(elsewhere) < _LIST_AT_MOST:
                    elsewhere.append(f"rank {rank} is at {other_reason!r} ({where})")
        except Exception:
            return BarrierTimeout(
                f"{head}: lost the connection to the store, which rank 0 hosts: rank 0 probably exited or "
                f"crashed (see its log). {_CAUSES}",
                reason,
                [],
            )
        if not missing:
            # Everyone arrived but the wait still failed: the "done" key was never seen in time.
            return BarrierTimeout(f"{head}: all ranks arrived but the wait failed: {error}", reason, [])
        text = f"{head}: {len(missing)} of {self.world_size} ranks never arrived: {_ranks_text(missing)}"
        if elsewhere:
            text += "; at a different barrier: " + "; ".join(elsewhere)
        return BarrierTimeout(f"{text}. {_CAUSES}", reason, missing)
