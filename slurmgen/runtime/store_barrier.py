"""A barrier on the c10d store that gives up after a timeout and says who is missing.

Each rank writes its own key (with the barrier's reason and where it runs), bumps a counter, and the last one
to arrive sets a ``done`` key that everyone waits for; a ``get`` of it tells a pass from a verdict. Four store
round trips, any backend, no side process group. ``monitored_barrier`` would do for gloo only, and only rank 0
learns who is missing there.

Rank 0 is the judge: when its timeout expires it writes the verdict (the missing ranks) into ``done`` with a
compare-and-set, which wakes every waiting rank with the same diagnosis at once. The other ranks wait a little
longer than rank 0 so the judge normally speaks first, and still diagnose on their own (the store is alive)
when rank 0 is slow; if rank 0 is gone, they say so.

Keys of barrier N-1 are deleted after barrier N passes: by then every rank has left N-1's wait.

Cost at scale: a barrier that passes is four round trips per rank. Rank 0's verdict surveys every rank's key (two
round trips per rank, once). The other ranks survey on their own only in a small job (up to SURVEY_ALONE ranks):
in a large one, N ranks each surveying N keys when rank 0 is gone or slow would be N^2 requests to one store
process at the moment the job is already failing (2.7 x 10^8 at 16,384 ranks); they read the arrival count and
whether rank 0 arrived instead, two round trips, and point at rank 0's log (bench/store_scale.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slurmgen.errors import RuntimeSetupError

_LIST_AT_MOST = 16
SURVEY_ALONE = 64  # world sizes up to which a rank without rank 0's verdict surveys every rank itself
_GRACE = 2.0  # seconds the other ranks wait beyond rank 0
_PASSED = b"1"
_CAUSES = (
    "Likely causes: a missing rank exited, crashed or is stuck (see its log); the ranks disagree on "
    "MASTER_ADDR:MASTER_PORT (each rank logs its pair; a rank with another pair waits at another store); "
    "a network interface that cannot reach the others (see the interface above)"
)


class BarrierTimeout(RuntimeSetupError, TimeoutError):
    """Ranks did not all arrive in time. ``missing``: the ranks not seen (empty when the store was lost).

    A TimeoutError (and, through RuntimeSetupError, a RuntimeError), so code that catches either sees it."""

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
        done = self._key(generation, "done")
        # Not rank 0: wait a little longer, so rank 0's verdict (with the full picture) normally comes first.
        patience = timeout if self.rank == 0 else timeout + min(_GRACE, 0.1 * timeout)
        try:
            self.store.set(self._key(generation, f"rank{self.rank}"), f"{reason}\t{self.whoami}")
            if self.store.add(self._key(generation, "count"), 1) == self.world_size:
                self.store.compare_set(done, "", _PASSED)
            try:
                self.store.wait([done], timedelta(seconds=patience))
            except dist.DistStoreError:
                if self.rank != 0:
                    raise
                verdict = self._verdict(generation, reason)
                if self.store.compare_set(done, "", verdict) != _PASSED:  # the last rank may just have come
                    self._hold_for_readers(generation, verdict)
                    raise self._timeout(timeout, reason, verdict.decode()) from None
            outcome = self.store.get(done)
        except dist.DistError as err:
            error = self._diagnose(generation, timeout, reason, err)
            self._acknowledge(generation)
            raise error from None
        if outcome != _PASSED:
            self._acknowledge(generation)
            raise self._timeout(timeout, reason, outcome.decode(errors="replace"))
        if generation:
            self._forget(generation - 1)

    def _acknowledge(self, generation: int) -> None:
        """Tell rank 0 this rank has read the verdict (or given up), so its store may go away."""
        try:
            self.store.add(self._key(generation, "read"), 1)
        except Exception:  # best effort: the store may already be gone
            return

    def _hold_for_readers(self, generation: int, verdict: bytes) -> None:
        """Keep rank 0's store up until the ranks that arrived have read the verdict (bounded).

        Without this, rank 0 raises, its process exits, and the woken ranks lose the store before they can
        read why they were woken.
        """
        import time

        missing = verdict.split(b"\n", 1)[0]
        readers = self.world_size - 1 - (missing.count(b",") + 1 if missing else 0)
        deadline = time.monotonic() + 2 * _GRACE
        while readers > 0 and time.monotonic() < deadline:
            if self.store.add(self._key(generation, "read"), 0) >= readers:
                return
            time.sleep(0.01)

    def _verdict(self, generation: int, reason: str) -> bytes:
        missing, elsewhere = self._survey(generation, reason)
        return ",".join(map(str, missing)).encode() + b"\n" + "; ".join(elsewhere).encode()

    def _timeout(self, timeout: float, reason: str, verdict: str) -> BarrierTimeout:
        """The error for a verdict rank 0 wrote (``missing ranks\\nranks at other barriers``)."""
        missing_text, _, elsewhere = verdict.partition("\n")
        missing = [int(r) for r in missing_text.split(",") if r]
        return self._missing(timeout, reason, missing, elsewhere)

    def _missing(self, timeout: float, reason: str, missing: list[int], elsewhere: str) -> BarrierTimeout:
        """The error naming the ranks that never arrived (and those waiting at another barrier)."""
        text = (
            f"{self._head(timeout, reason)}: {len(missing)} of {self.world_size} ranks never arrived: "
            f"{_ranks_text(missing)}"
        )
        if elsewhere:
            text += "; at a different barrier: " + elsewhere
        return BarrierTimeout(f"{text}. {_CAUSES}", reason, missing)

    def _head(self, timeout: float, reason: str) -> str:
        return (
            f"barrier {reason!r} timed out after {round(timeout, 1):g}s on rank {self.rank} of "
            f"{self.world_size} ({self.whoami})"
        )

    def _survey(self, generation: int, reason: str) -> tuple[list[int], list[str]]:
        """Ranks whose key is missing, and ranks that arrived at a barrier with another reason."""
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
        return missing, elsewhere

    def _forget(self, generation: int) -> None:
        keys = [f"rank{self.rank}"] + (["count", "done"] if self.rank == 0 else [])
        for name in keys:
            self.store.delete_key(self._key(generation, name))

    def _diagnose(self, generation: int, timeout: float, reason: str, error: Exception) -> BarrierTimeout:
        """This rank's own diagnosis, when no verdict came from rank 0."""
        head = self._head(timeout, reason)
        try:
            if self.world_size > SURVEY_ALONE:
                return self._count_only(generation, timeout, reason)
            missing, elsewhere = self._survey(generation, reason)
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
        return self._missing(timeout, reason, missing, "; ".join(elsewhere))

    def _count_only(self, generation: int, timeout: float, reason: str) -> BarrierTimeout:
        """A large job's diagnosis without rank 0's verdict: how many arrived, and whether rank 0 did (two round
        trips, not a survey of every rank by every rank)."""
        arrived = int(self.store.add(self._key(generation, "count"), 0))
        judge_came = self.store.check([self._key(generation, "rank0")])
        where = ("rank 0, which names the missing ranks, gave no verdict in time: its log says who they are"
                 if judge_came else "rank 0 never arrived: see its log first")  # fmt: skip
        return BarrierTimeout(
            f"{self._head(timeout, reason)}: {arrived} of {self.world_size} ranks arrived; {where}. {_CAUSES}",
            reason,
            [] if judge_came else [0],
        )
