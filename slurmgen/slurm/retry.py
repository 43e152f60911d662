"""The retry of every Slurm call of the stop path, in one place (`retried`): a stop must not turn one lost RPC
into a lost job.

slurmctld can be briefly unreachable or slow: a failover, a restart, an RPC storm ("Socket timed out on send/recv
operation", "Unable to contact slurm controller (connect failure)"; scontrol(1) gives up after MessageTimeout,
slurm.conf(5)). Each such call gets a few tries with growing pauses. What is no fault of the moment (an unknown
job, --no-requeue, a pending job, scontrol not installed) is not retried: another try would answer the same. A
call that still fails after its tries raises as before; the callers turn that into "unknown" (keep the state, say
so) or a marker for the batch shell, never an escape. Standard library only (the in-task runtime uses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from slurmgen.errors import SchedulerError, SchedulerMissing, SlurmgenError

# What SlurmClient says when no controller answers (slurm/client.py _UNREACHABLE): the controller may be back in
# a moment, unlike a client command that is not installed.
_UNREACHABLE_WORDS = "no Slurm controller reachable"


@dataclass(frozen=True)
class Retry:
    """How often and with which pauses (seconds) a stop-path Slurm call is tried; ``sleep`` is injectable."""

    tries: int = 3
    pauses: tuple[float, ...] = (1.0, 3.0)
    sleep: Callable[[float], None] = time.sleep

    def pause(self, attempt: int) -> float:
        """The pause after the failed try number ``attempt`` (0-based): the last pause repeats."""
        return self.pauses[min(attempt, len(self.pauses) - 1)] if self.pauses else 0.0


DEFAULT = Retry()


def transient(error: SlurmgenError) -> bool:
    """Could the same call succeed a moment later? A time-out, an unreachable controller, or a failure Slurm gave
    no known meaning to (slurm/client.py maps the known ones to their own classes, which are final)."""
    if isinstance(error, SchedulerMissing):
        return _UNREACHABLE_WORDS in str(error)
    from slurmgen.slurm.client import SchedulerTimeout

    return type(error) in (SchedulerError, SchedulerTimeout)


T = TypeVar("T")


def retried(call: Callable[[], T], retry: Retry = DEFAULT, *, failed: list[SlurmgenError] | None = None) -> T:
    """``call()``, tried again after a transient failure, up to ``retry.tries`` times; the last error is raised.
    ``failed`` collects the transient errors met on the way (a timed-out requeue may have taken effect)."""
    attempt = 0
    while True:
        try:
            return call()
        except SlurmgenError as error:
            attempt += 1
            if not transient(error) or attempt >= retry.tries:
                raise
            if failed is not None:
                failed.append(error)
            retry.sleep(retry.pause(attempt - 1))
